%%%-------------------------------------------------------------------
%%% @doc `os_sup_logger' forwards the node's OTP `logger' events to the
%%% `os_sup_mcp' sidecar, so that an agent can read what the node logged
%%% (crash and supervisor reports included) from the node's first moments
%%% until after it died.
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link start/0}: start the keeper and install the handler; from
%%%       then on events are kept until a subscriber comes. The helper calls
%%%       it at boot on the nodes the sidecar starts, before the application
%%%       starts; on a node it attaches to, the first subscription starts
%%%       the keeper (nothing is kept there for nobody). Idempotent.</li>
%%%   <li>{@link subscribe/1}: send the events kept so far, then every new
%%%       one, to a pid (replacing an earlier subscriber); `ok' only once
%%%       the handler is verified installed.</li>
%%%   <li>{@link stop/0}: remove the handler and stop the keeper, leaving
%%%       the node's logger as it was (the sidecar's `detach').</li>
%%%   <li>{@link status/0}: the keeper's state, for tests and diagnosis.</li>
%%% </ul>
%%%
%%% == Keeper ==
%%% One process, registered as `os_sup_logger_keeper', owns everything:
%%% <ul>
%%%   <li>While nobody is subscribed it keeps the last 1000 events
%%%       (`MAX_BUFFER'; the oldest go first, and are counted).</li>
%%%   <li>A subscriber is monitored; events go to it with `noconnect' and
%%%       `nosuspend'; one that cannot be sent (busy or lost connection)
%%%       stays buffered, in order, for the next try. When the subscriber
%%%       goes away the keeper buffers again.</li>
%%%   <li>Every 300 ms it checks (an ETS read) that the handler is
%%%       still installed and pointed at it, and installs it again when not:
%%%       the user may call `logger:remove_handler/1', or reconfigure the
%%%       logger. Installing calls the `logger' server, so it runs in a
%%%       throw-away process with a deadline (3 s): the keeper never
%%%       blocks. `subscribe' answers `ok' only once the handler is seen
%%%       in place, else `{error, Reason}'.</li>
%%%   <li>Lost events (buffer overflow, overload) are reported to the
%%%       subscriber as one `warning' event with the count.</li>
%%% </ul>
%%%
%%% == Handler ==
%%% A standard `logger' handler, id `os_sup_mcp' (`log/2' runs in the
%%% process that logs). Each event becomes `{os_sup_log, #{level, text,
%%% eval}}': one line of at most 4096 bytes, formatted by
%%% `logger_formatter' (single line, bounded depth), prefixed with the pid
%%% and `Module:Function/Arity:Line' when known. `eval' is true when the
%%% logging process runs an `eval' of the sidecar (metadata
%%% `os_sup_eval'). The handler only sends to the local keeper (never
%%% blocks); when 5000 events (`MAX_QUEUED') already wait in the keeper's
%%% mailbox it drops the event and counts it. It never logs and never
%%% fails.
%%%
%%% == Code reload ==
%%% Like `os_sup_helper': processes are spawned with `spawn(M, F, A)', the
%%% keeper recurses through `?MODULE:keeper_loop/1', waits hibernated and
%%% wakes on `erlang:start_timer/3' timers.
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_logger).

%% API
-export([start/0, subscribe/1, stop/0, status/0]).
%% logger handler callback
-export([log/2, filter_config/1]).
%% Internal entry points: spawn targets and the reload-safe loop. Not an API.
-export([keeper_init/1, keeper_loop/1, install_run/2]).

-define(HANDLER, os_sup_mcp).
-define(KEEPER, os_sup_logger_keeper).
-define(MAX_BYTES, 4096).
-define(FORMAT, #{single_line => true, template => [msg], max_size => ?MAX_BYTES,
                  depth => 30, chars_limit => ?MAX_BYTES}).
%% events kept while nobody is subscribed (or while they cannot be sent)
-define(MAX_BUFFER, 1000).
%% events waiting in the keeper's mailbox before the handler drops new ones
-define(MAX_QUEUED, 5000).
%% how often the keeper checks its handler and retries sending
-define(CHECK_MS, 300).
%% deadlines
-define(START_MS, 1000).
-define(SUBSCRIBE_MS, 4000).
-define(INSTALL_MS, 3000).
-define(STOP_MS, 2000).
%% requests waiting for the handler to be installed
-define(MAX_WAITERS, 64).
%% counters shared by the handler and the keeper
-define(QUEUED, 1).
-define(OVERLOAD, 2).

-type keeper_state() :: map().

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Starts the keeper (if needed) and waits up to ?START_MS for the handler; never raises.
-spec start() -> ok | {error, term()}.
start() ->
    try
        case ensure_keeper() of
            {ok, Keeper} -> request(Keeper, installed, ?START_MS);
            Error -> Error
        end
    catch
        Class:Reason -> {error, {Class, Reason}}
    end.

%% @doc Sends the events kept so far, then every new one, to `Pid'; `ok' once the handler is
%% verified installed.
-spec subscribe(pid()) -> ok | {error, term()}.
subscribe(Pid) when is_pid(Pid) ->
    case ensure_keeper() of
        {ok, Keeper} -> request(Keeper, {subscribe, Pid}, ?SUBSCRIBE_MS);
        Error -> Error
    end.

%% @doc Removes the handler and stops the keeper (bounded: ?STOP_MS each); always `ok'.
-spec stop() -> ok.
stop() ->
    case whereis(?KEEPER) of
        Keeper when is_pid(Keeper) ->
            case request(Keeper, stop, ?STOP_MS) of
                ok -> ok;
                _ ->
                    exit(Keeper, kill),
                    remove_handler()
            end;
        undefined ->
            remove_handler()
    end,
    ok.

%% @doc The keeper's state: subscriber, events buffered and lost, whether the handler is on.
-spec status() -> {ok, map()} | {error, term()}.
status() ->
    case whereis(?KEEPER) of
        Keeper when is_pid(Keeper) ->
            case request(Keeper, status, ?START_MS) of
                Status when is_map(Status) -> {ok, Status};
                Error -> Error
            end;
        undefined ->
            {error, not_started}
    end.

%%%===================================================================
%%% logger handler callback
%%%===================================================================

%% @doc Formats one event and hands it to the keeper; never fails, never blocks.
-spec log(logger:log_event(), logger:handler_config()) -> ok.
log(#{level := Level, meta := Meta} = Event,
    #{config := #{keeper := Keeper, counters := Counters}}) ->
    try
        case counters:get(Counters, ?QUEUED) < ?MAX_QUEUED of
            true ->
                Text = iolist_to_binary([prefix(Meta),
                                         logger_formatter:format(Event, ?FORMAT)]),
                Message = {os_sup_log, #{level => Level,
                                         text => bounded(Text),
                                         eval => maps:get(os_sup_eval, Meta, false) =:= true}},
                counters:add(Counters, ?QUEUED, 1),
                _ = erlang:send(Keeper, Message, [noconnect, nosuspend]),
                ok;
            false ->
                counters:add(Counters, ?OVERLOAD, 1)
        end
    catch
        _:_ -> ok
    end;
log(_Event, _Config) ->
    ok.

%% @doc What `logger:get_handler_config/1' shows of the handler: all of it (the keeper checks
%% it every ?CHECK_MS; without this callback each check would raise `undef' inside logger).
-spec filter_config(logger:handler_config()) -> logger:handler_config().
filter_config(Config) ->
    Config.

%%%===================================================================
%%% Internal entry points (spawned or reloaded through ?MODULE)
%%%===================================================================

%% @doc Keeper entry: arms the check timer and starts installing the handler.
-spec keeper_init(counters:counters_ref()) -> ok.
keeper_init(Counters) ->
    S = #{counters => Counters, subscriber => undefined,
          buffer => queue:new(), buffered => 0, lost => 0, overload_seen => 0,
          installer => undefined, waiters => [],
          timer => erlang:start_timer(?CHECK_MS, self(), check)},
    ?MODULE:keeper_loop(guarded(install, S)).

%% @doc Keeper loop: events, requests, installer results, monitors, the check timer; exits
%% only on `stop'. A failing step keeps the previous state.
-spec keeper_loop(keeper_state()) -> ok.
keeper_loop(#{timer := TRef} = S) ->
    receive
        {timeout, TRef, check} ->
            S1 = S#{timer := erlang:start_timer(?CHECK_MS, self(), check)},
            ?MODULE:keeper_loop(guarded(check, S1));
        Msg ->
            case guarded(Msg, S) of
                {stop, From, Tag} ->
                    _ = (catch keeper_stop(S)),
                    reply(From, Tag, ok);
                S1 ->
                    ?MODULE:keeper_loop(S1)
            end
    after 0 ->
            erlang:hibernate(?MODULE, keeper_loop, [S])
    end.

%% @doc Installer: (re)installs the handler for `Keeper' and reports `{installed, self(), R}'.
-spec install_run(pid(), map()) -> ok.
install_run(Keeper, Config) ->
    Result = try
                 case logger:get_handler_config(?HANDLER) of
                     {ok, _Stale} -> _ = logger:remove_handler(?HANDLER);
                     _ -> ok
                 end,
                 logger:add_handler(?HANDLER, ?MODULE, Config)
             catch
                 Class:Reason -> {error, {Class, Reason}}
             end,
    Keeper ! {installed, self(), Result},
    ok.

%%%===================================================================
%%% Private: keeper
%%%===================================================================

guarded(Step, S) ->
    try keeper_handle(Step, S)
    catch _:_ -> S
    end.

keeper_handle({os_sup_log, _} = Event, #{counters := C} = S) ->
    counters:sub(C, ?QUEUED, 1),
    flush(enqueue(Event, S));
keeper_handle({request, From, Tag, Request}, S) when is_pid(From) ->
    keeper_request(Request, From, Tag, S);
keeper_handle({installed, Pid, Result}, #{installer := {Pid, MRef, _}} = S) ->
    erlang:demonitor(MRef, [flush]),
    installed(Result, S#{installer := undefined});
keeper_handle({'DOWN', MRef, process, Pid, Reason}, #{installer := {Pid, MRef, _}} = S) ->
    installed({error, {installer_exited, Reason}}, S#{installer := undefined});
keeper_handle({'DOWN', MRef, process, _, _}, #{subscriber := {_, MRef}} = S) ->
    S#{subscriber := undefined};
keeper_handle(check, S) ->
    check(S);
keeper_handle(install, S) ->
    install(S);
keeper_handle(_Other, S) ->
    S.

keeper_request(installed, From, Tag, S) ->
    when_installed({start, From, Tag}, S);
keeper_request({subscribe, Pid}, From, Tag, S) when is_pid(Pid) ->
    when_installed({subscribe, Pid, From, Tag}, S);
keeper_request(status, From, Tag, S) ->
    reply(From, Tag, keeper_status(S)),
    S;
keeper_request(stop, From, Tag, _S) ->
    {stop, From, Tag};
keeper_request(_Unknown, From, Tag, S) ->
    reply(From, Tag, {error, unknown_request}),
    S.

%% Answers a waiter now if the handler is in place, else once the installer reports.
when_installed(Waiter, #{waiters := Waiters} = S) ->
    case handler_ok() of
        true -> answer(Waiter, ok, S);
        false when length(Waiters) >= ?MAX_WAITERS -> answer(Waiter, {error, busy}, S);
        false -> install(S#{waiters := [Waiter | Waiters]})
    end.

installed(Result, #{waiters := Waiters} = S) ->
    Reply = case handler_ok() of
                true -> ok;
                false when Result =:= ok -> {error, handler_not_installed};
                false -> {error, Result}
            end,
    lists:foldr(fun(W, Acc) -> answer(W, Reply, Acc) end, S#{waiters := []}, Waiters).

answer({start, From, Tag}, Reply, S) ->
    reply(From, Tag, Reply),
    S;
answer({subscribe, Pid, From, Tag}, ok, S) ->
    reply(From, Tag, ok),
    flush(subscriber(Pid, S));
answer({subscribe, _Pid, From, Tag}, Error, S) ->
    reply(From, Tag, Error),
    S.

subscriber(Pid, #{subscriber := {Pid, _}} = S) ->
    S;
subscriber(Pid, #{subscriber := Old} = S) ->
    case Old of
        {_, OldRef} -> erlang:demonitor(OldRef, [flush]);
        undefined -> ok
    end,
    S#{subscriber := {Pid, erlang:monitor(process, Pid)}}.

%% Periodic: the handler is in place (else reinstall), a stuck installer is killed, what
%% could not be sent is retried, overload drops are noted.
check(#{installer := Installer, counters := C, overload_seen := Seen, lost := Lost} = S) ->
    S1 = case Installer of
             {Pid, MRef, Started} ->
                 case now_ms() - Started > ?INSTALL_MS of
                     true ->
                         exit(Pid, kill),
                         erlang:demonitor(MRef, [flush]),
                         installed({error, timeout}, S#{installer := undefined});
                     false ->
                         S
                 end;
             undefined ->
                 case handler_ok() of
                     true -> S;
                     false -> install(S)
                 end
         end,
    Overload = counters:get(C, ?OVERLOAD),
    flush(S1#{overload_seen := Overload, lost := Lost + (Overload - Seen)}).

%% Starts an installer unless one runs.
install(#{installer := undefined, counters := C} = S) ->
    Config = #{level => all, config => #{keeper => self(), counters => C}},
    {Pid, MRef} = spawn_monitor(?MODULE, install_run, [self(), Config]),
    S#{installer := {Pid, MRef, now_ms()}};
install(S) ->
    S.

%% True when our handler is installed and points at this keeper (an ETS read, no call).
handler_ok() ->
    Self = self(),
    case catch logger:get_handler_config(?HANDLER) of
        {ok, #{module := ?MODULE, config := #{keeper := Self}}} -> true;
        _ -> false
    end.

%% Keeps the newest ?MAX_BUFFER events; the oldest are counted as lost.
enqueue(Event, #{buffer := Q, buffered := N, lost := Lost} = S) when N >= ?MAX_BUFFER ->
    enqueue(Event, S#{buffer := queue:drop(Q), buffered := N - 1, lost := Lost + 1});
enqueue(Event, #{buffer := Q, buffered := N} = S) ->
    S#{buffer := queue:in(Event, Q), buffered := N + 1}.

%% Sends what is buffered to the subscriber, in order, until a send fails (kept for later).
flush(#{subscriber := undefined} = S) ->
    S;
flush(#{subscriber := {Pid, _}, lost := Lost} = S) when Lost > 0 ->
    case send(Pid, lost_event(Lost)) of
        ok -> flush(S#{lost := 0});
        _ -> S
    end;
flush(#{subscriber := {Pid, _}, buffer := Q, buffered := N} = S) ->
    case queue:peek(Q) of
        empty ->
            S;
        {value, Event} ->
            case send(Pid, Event) of
                ok -> flush(S#{buffer := queue:drop(Q), buffered := N - 1});
                _ -> S
            end
    end.

send(Pid, Message) ->
    try erlang:send(Pid, Message, [noconnect, nosuspend])
    catch _:_ -> error
    end.

lost_event(N) ->
    Text = iolist_to_binary(
             io_lib:format("os_sup_mcp: ~b logger event(s) lost (more than ~b waited for the "
                           "sidecar, or the node logged faster than they could be forwarded)",
                           [N, ?MAX_BUFFER])),
    {os_sup_log, #{level => warning, text => Text, eval => false}}.

keeper_status(#{subscriber := Sub, buffered := N, lost := Lost, counters := C,
                installer := Installer}) ->
    #{subscriber => case Sub of {Pid, _} -> Pid; undefined -> undefined end,
      buffered => N,
      lost => Lost,
      overload_dropped => counters:get(C, ?OVERLOAD),
      handler => handler_ok(),
      installing => Installer =/= undefined}.

%% Stop: no installer may add the handler back after it is removed.
keeper_stop(#{installer := Installer, waiters := Waiters} = S) ->
    case Installer of
        {Pid, MRef, _} ->
            exit(Pid, kill),
            receive {'DOWN', MRef, process, Pid, _} -> ok after 500 -> ok end;
        undefined ->
            ok
    end,
    _ = [answer(W, {error, stopped}, S) || W <- Waiters],
    _ = (catch logger:remove_handler(?HANDLER)),
    ok.

%%%===================================================================
%%% Private: requests to the keeper
%%%===================================================================

%% The registered keeper, started (unlinked, led by `user') if needed.
ensure_keeper() ->
    case whereis(?KEEPER) of
        Pid when is_pid(Pid) ->
            {ok, Pid};
        undefined ->
            Pid = spawn(?MODULE, keeper_init, [counters:new(2, [write_concurrency])]),
            case whereis(user) of
                User when is_pid(User) -> _ = (catch group_leader(User, Pid));
                _ -> ok
            end,
            try register(?KEEPER, Pid) of
                true -> {ok, Pid}
            catch
                error:badarg ->
                    %% Another caller started one first: use it.
                    exit(Pid, kill),
                    case whereis(?KEEPER) of
                        Other when is_pid(Other) -> {ok, Other};
                        undefined -> {error, keeper_not_started}
                    end
            end
    end.

request(Keeper, Request, Timeout) ->
    MRef = erlang:monitor(process, Keeper),
    Keeper ! {request, self(), MRef, Request},
    receive
        {MRef, Reply} ->
            erlang:demonitor(MRef, [flush]),
            Reply;
        {'DOWN', MRef, process, _, Reason} ->
            {error, {keeper_exited, Reason}}
    after Timeout ->
            erlang:demonitor(MRef, [flush]),
            {error, timeout}
    end.

reply(From, Tag, Reply) ->
    _ = (catch erlang:send(From, {Tag, Reply}, [noconnect])),
    ok.

%% Without a keeper: remove the handler in a throw-away process, waiting at most ?STOP_MS.
remove_handler() ->
    {Pid, MRef} = spawn_monitor(logger, remove_handler, [?HANDLER]),
    receive
        {'DOWN', MRef, process, Pid, _} -> ok
    after ?STOP_MS ->
            erlang:demonitor(MRef, [flush]),
            ok
    end.

now_ms() ->
    erlang:monotonic_time(millisecond).

%%%===================================================================
%%% Private: formatting
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
