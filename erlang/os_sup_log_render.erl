%%% @doc `os_sup_log_render' turns one `logger' event into the line the
%%% server shows, for the keeper (`os_sup_log_keeper') of
%%% `os_sup_log_handler'.
%%%
%%% Each event becomes one line of at most 4096 bytes (line breaks and
%%% their indentation folded to one space, a longer text cut with
%%% `...(truncated)'), prefixed with the pid and, for events not logged by
%%% OTP itself, `Module.fun/Arity:Line'. It is rendered in the node's
%%% language: when Elixir's Logger is loaded, as it renders events (its
%%% translators, `Logger.Translator' by default: `GenServer Shop.Ledger
%%% terminating ** (RuntimeError) ...'), else (and when a translator
%%% fails) by `logger_formatter'. What a translator skips is `skip'.
%%% Anything but a plain string may run the user's code (an `Inspect'
%%% implementation, a `report_cb'): it is rendered in a throw-away process
%%% bounded in time (`RENDER_MS') and heap (`RENDER_WORDS'); past either, a
%%% one-line placeholder says what was left out. Events logged while
%%% rendering carry the metadata `os_sup_render' (the handler drops them:
%%% they would loop; the tag keeps the name earlier versions' handlers
%%% look for).
%%%
%%% == Internal entry point ==
%%% {@link render_run/4}: the throw-away renderer, spawned with
%%% `spawn_monitor(?MODULE, render_run, Args)' (see Code reload in
%%% `os_sup_helper').
-module(os_sup_log_render).

%% API
-export([language/0, text/4]).
%% Internal entry point: spawn target. Not an API.
-export([render_run/4]).

-define(MAX_BYTES, 4096).
-define(FORMAT, #{single_line => true, template => [msg], max_size => ?MAX_BYTES,
                  depth => 30, chars_limit => ?MAX_BYTES}).
%% bounds of the throw-away process that renders one event (anything but a plain string)
-define(RENDER_MS, 1000).
-define(RENDER_WORDS, 4000000).

-type language() :: erlang | {elixir, #{translators := list(), sasl := boolean(),
                                        truncate := term()}}.
-export_type([language/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Elixir when its Logger is loaded (its handler's translators, or the application's),
%% with whether it shows sasl reports and its `truncate'; else `erlang'.
-spec language() -> language().
language() ->
    try logger:get_handler_config('Elixir.Logger') of
        {ok, #{config := #{translators := Ts} = C}} when is_list(Ts) ->
            {elixir, #{translators => Ts, sasl => maps:get(sasl, C, false) =:= true,
                       truncate => maps:get(truncate, C, ?MAX_BYTES)}};
        _ ->
            env_language()
    catch
        _:_ -> env_language()
    end.

%% Without Logger's handler: Elixir when the `logger' application's environment has its
%% translators, else `erlang'.
env_language() ->
    case application:get_env(logger, translators) of
        {ok, Ts} when is_list(Ts) ->
            {elixir, #{translators => Ts,
                       sasl => application:get_env(logger, handle_sasl_reports,
                                                   false) =:= true,
                       truncate => application:get_env(logger, truncate, ?MAX_BYTES)}};
        _ ->
            erlang
    end.

%% @doc The line of one event (see the module doc), or `skip' when a translator skips it.
-spec text(language(), logger:level(), term(), logger:metadata()) -> binary() | skip.
text(Lang, Level, Msg, Meta) ->
    case rendered(Lang, Level, Msg, Meta) of
        skip -> skip;
        Text -> line([prefix(Lang, Meta), Text])
    end.

%%%===================================================================
%%% Internal entry point (spawned through ?MODULE)
%%%===================================================================

%% @doc Renderer: renders one event and exits with `{os_sup_rendered, Text | skip}' (an exit,
%% not an error: nothing is logged). Bounded in heap; the keeper bounds it in time.
-spec render_run(language(), logger:level(), term(), map()) -> no_return().
render_run(Lang, Level, Msg, Meta) ->
    _ = process_flag(max_heap_size, #{size => ?RENDER_WORDS, kill => true,
                                      error_logger => false}),
    _ = try logger:update_process_metadata(#{os_sup_render => true}) catch _:_ -> ok end,
    Result = try render(Lang, Level, Msg, Meta)
             catch _:_ -> erlang_text(Level, Msg, Meta)
             end,
    exit({os_sup_rendered, Result}).

%%%===================================================================
%%% Private: rendering
%%%===================================================================

%% Text (or `skip'): a string as it is; anything else, which may run the user's code (an
%% `Inspect' implementation, a `report_cb'), in a renderer bounded in time and heap.
rendered(_Lang, _Level, {string, String}, _Meta) ->
    String;
rendered(Lang, Level, Msg, Meta) ->
    {Pid, MRef} = spawn_monitor(?MODULE, render_run, [Lang, Level, Msg, Meta]),
    receive
        {'DOWN', MRef, process, Pid, {os_sup_rendered, Result}} ->
            Result;
        {'DOWN', MRef, process, Pid, Reason} ->
            unrendered(Msg, io_lib:format("its rendering failed (~0tP)", [Reason, 5]))
    after ?RENDER_MS ->
            exit(Pid, kill),
            erlang:demonitor(MRef, [flush]),
            unrendered(Msg, io_lib:format("it took over ~b ms to render", [?RENDER_MS]))
    end.

unrendered(Msg, Why) ->
    What = case Msg of
               {report, #{label := Label}} -> io_lib:format("report ~0tP", [Label, 6]);
               {report, _} -> "report";
               _ -> "message"
           end,
    ["os_sup_mcp: a logger ", What, " left out: ", Why].

render({elixir, Ctx}, Level, Msg, Meta) ->
    try elixir_text(Ctx, Level, Msg, Meta)
    catch _:_ -> erlang_text(Level, Msg, Meta)
    end;
render(erlang, Level, Msg, Meta) ->
    erlang_text(Level, Msg, Meta).

%% As Elixir 1.14's `Logger.Handler' translates an event: each translator in turn
%% (`{ok, Text}', `{ok, Text, Meta}', `skip', or `none' for the next), then its fallback.
elixir_text(#{translators := Translators} = Ctx, Level, Msg, Meta) ->
    MinLevel = elixir_level(maps:get(level, logger:get_primary_config(), notice)),
    {Kind, Data} = case Msg of
                       {report, #{label := L, report := R} = Report} when map_size(Report) =:= 2 ->
                           {report, {L, R}};
                       {report, #{label := {error_logger, _}, format := F, args := A}} ->
                           {format, {F, A}};
                       {report, R} ->
                           {report, {logger, R}};
                       {F, A} ->
                           {format, {F, A}}
                   end,
    case translate(Translators, MinLevel, elixir_level(Level), Kind, Data) of
        {ok, Text} -> Text;
        skip -> skip;
        none -> elixir_fallback(Msg, Meta, Ctx)
    end.

translate([{M, F} | Rest], MinLevel, Level, Kind, Data) ->
    case M:F(MinLevel, Level, Kind, Data) of
        {ok, Text, _Meta} -> {ok, Text};
        {ok, Text} -> {ok, Text};
        skip -> skip;
        none -> translate(Rest, MinLevel, Level, Kind, Data)
    end;
translate([], _MinLevel, _Level, _Kind, _Data) ->
    none.

elixir_fallback({report, Report}, #{report_cb := Cb} = Meta, Ctx) when is_function(Cb, 1) ->
    elixir_fallback(Cb(Report), maps:remove(report_cb, Meta), Ctx);
elixir_fallback({report, Report}, #{report_cb := Cb}, _Ctx) when is_function(Cb, 2) ->
    Cb(Report, #{depth => 30, chars_limit => ?MAX_BYTES, single_line => false});
elixir_fallback({report, Report}, _Meta, _Ctx) when is_map(Report) ->
    elixir_inspect(maps:to_list(Report));
elixir_fallback({report, Report}, _Meta, _Ctx) ->
    elixir_inspect(Report);
elixir_fallback({Format, Args}, _Meta, #{truncate := Truncate}) ->
    io_lib:build_text('Elixir.Logger.Utils':scan_inspect(Format, Args, Truncate)).

elixir_inspect(Term) ->
    Opts = application:get_env(logger, translator_inspect_opts, []),
    'Elixir.Kernel':inspect(Term, Opts).

elixir_level(Level) when Level =:= emergency; Level =:= alert; Level =:= critical;
                         Level =:= error; Level =:= none ->
    error;
elixir_level(warning) -> warn;
elixir_level(notice) -> info;
elixir_level(info) -> info;
elixir_level(_) -> debug.

erlang_text(Level, Msg, Meta) ->
    try logger_formatter:format(#{level => Level, msg => Msg, meta => Meta}, ?FORMAT)
    catch _:_ -> io_lib:format("~tP", [Msg, 30])
    end.

prefix(Lang, Meta) ->
    Pid = case Meta of
              #{pid := P} when is_pid(P), Lang =:= erlang -> [pid_to_list(P), " "];
              #{pid := P} when is_pid(P) -> ["#PID", pid_to_list(P), " "];
              _ -> []
          end,
    Where = case Meta of
                #{domain := [otp | _]} -> []; % OTP's own reports: where in OTP is noise
                #{mfa := {M, F, A}, line := L} -> [mfa(Lang, M, F, A), io_lib:format(":~b ", [L])];
                #{mfa := {M, F, A}} -> [mfa(Lang, M, F, A), " "];
                _ -> []
            end,
    [Pid, Where].

mfa(erlang, M, F, A) ->
    io_lib:format("~ts:~ts/~b", [M, F, A]);
mfa(_Elixir, M, F, A) ->
    Module = case atom_to_list(M) of
                 "Elixir." ++ Rest -> Rest;
                 Name -> [$: | Name]
             end,
    io_lib:format("~ts.~ts/~b", [Module, F, A]).

%%%===================================================================
%%% Private: one line
%%%===================================================================

%% One line: cut first (the rendering is bounded, but a little more than ?MAX_BYTES), newlines
%% and their indentation folded to one space, then cut at ?MAX_BYTES with a marker.
line(Chardata) ->
    Bin = case unicode:characters_to_binary(Chardata) of
              B when is_binary(B) -> B;
              _ -> iolist_to_binary(io_lib:format("~tp", [Chardata]))
          end,
    Folded = fold(cut(Bin, 2 * ?MAX_BYTES)),
    bounded(Folded).

%% Line breaks and the white space around them become one space (linear in the size).
fold(Bin) ->
    Parts = binary:split(Bin, [<<"\r\n">>, <<"\n">>, <<"\r">>], [global]),
    Trimmed = [trim(P) || P <- Parts],
    iolist_to_binary(lists:join(<<" ">>, [P || P <- Trimmed, P =/= <<>>])).

trim(Bin) ->
    trim_trailing(trim_leading(Bin)).

trim_leading(<<C, Rest/binary>>) when C =:= $\s; C =:= $\t -> trim_leading(Rest);
trim_leading(Bin) -> Bin.

trim_trailing(<<>>) -> <<>>;
trim_trailing(Bin) ->
    case binary:last(Bin) of
        C when C =:= $\s; C =:= $\t -> trim_trailing(binary:part(Bin, 0, byte_size(Bin) - 1));
        _ -> Bin
    end.

bounded(Text) when byte_size(Text) =< ?MAX_BYTES ->
    Text;
bounded(Text) ->
    <<(cut(Text, ?MAX_BYTES))/binary, "...(truncated)">>.

%% The first `Max' bytes of `Bin', without a UTF-8 sequence cut in two at the end.
cut(Bin, Max) when byte_size(Bin) =< Max ->
    Bin;
cut(Bin, Max) ->
    utf8_cut(Bin, Max).

utf8_cut(Bin, I) when I > 0 ->
    case binary:at(Bin, I) of
        B when B band 16#C0 =:= 16#80 -> utf8_cut(Bin, I - 1);   % inside a sequence
        _ -> binary:part(Bin, 0, I)
    end;
utf8_cut(_Bin, _) ->
    <<>>.
