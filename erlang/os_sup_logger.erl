%%%-------------------------------------------------------------------
%%% @doc `os_sup_logger' forwards the node's OTP `logger' events to the
%%% `os_sup_mcp' sidecar, so that an agent can read what the node logged
%%% (crash reports and supervisor reports included) even after it died.
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link subscribe/1}: install (or re-point) the handler at a pid.</li>
%%%   <li>{@link unsubscribe/0}: remove the handler.</li>
%%% </ul>
%%%
%%% == Handler ==
%%% A standard `logger' handler (`log/2' runs in the process that logs).
%%% Each event becomes `{os_sup_log, #{level, text, eval}}': one line of at
%%% most ?MAX_BYTES bytes, formatted by `logger_formatter' (single line,
%%% bounded depth), prefixed with the pid and `Module:Function/Arity:Line'
%%% when known. `eval' is true when the logging process runs an `eval' of
%%% the sidecar (metadata `os_sup_eval'). Sending uses `noconnect' and
%%% `nosuspend': a slow or vanished sidecar drops events, it never blocks
%%% the logging process. The handler never logs.
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_logger).

%% API
-export([subscribe/1, unsubscribe/0]).
%% logger handler callbacks
-export([log/2]).

-define(HANDLER, os_sup_mcp).
-define(MAX_BYTES, 4096).
-define(FORMAT, #{single_line => true, template => [msg], max_size => ?MAX_BYTES,
                  depth => 30, chars_limit => ?MAX_BYTES}).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Forward every logger event to `Pid' (replacing an earlier subscriber).
-spec subscribe(pid()) -> ok | {error, term()}.
subscribe(Pid) when is_pid(Pid) ->
    Config = #{subscriber => Pid},
    case lists:member(?HANDLER, logger:get_handler_ids()) of
        true ->
            logger:update_handler_config(?HANDLER, config, Config);
        false ->
            logger:add_handler(?HANDLER, ?MODULE, #{level => all, config => Config})
    end.

%% @doc Stop forwarding.
-spec unsubscribe() -> ok.
unsubscribe() ->
    _ = logger:remove_handler(?HANDLER),
    ok.

%%%===================================================================
%%% logger handler callback
%%%===================================================================

%% @doc Formats one event and sends it to the subscriber; never fails, never blocks.
-spec log(logger:log_event(), logger:handler_config()) -> ok.
log(#{level := Level, meta := Meta} = Event, #{config := #{subscriber := Pid}}) ->
    try
        Text = iolist_to_binary([prefix(Meta), logger_formatter:format(Event, ?FORMAT)]),
        Message = {os_sup_log, #{level => Level,
                                 text => bounded(Text),
                                 eval => maps:get(os_sup_eval, Meta, false) =:= true}},
        _ = erlang:send(Pid, Message, [noconnect, nosuspend]),
        ok
    catch
        _:_ -> ok
    end;
log(_Event, _Config) ->
    ok.

%%%===================================================================
%%% Private
%%%===================================================================

prefix(Meta) ->
    Pid = case Meta of
              #{pid := P} when is_pid(P) -> [pid_to_list(P), " "];
              _ -> []
          end,
    Where = case Meta of
                #{mfa := {M, F, A}, line := L} -> io_lib:format("~ts:~ts/~b:~b ", [mod(M), F, A, L]);
                #{mfa := {M, F, A}} -> io_lib:format("~ts:~ts/~b ", [mod(M), F, A]);
                _ -> []
            end,
    [Pid, Where].

mod(M) ->
    case atom_to_list(M) of
        "Elixir." ++ Rest -> Rest;
        Name -> Name
    end.

bounded(Text) when byte_size(Text) =< ?MAX_BYTES ->
    Text;
bounded(Text) ->
    <<(binary:part(Text, 0, ?MAX_BYTES))/binary, "...(truncated)">>.
