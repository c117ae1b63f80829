%%% @doc `os_sup_diagnose_logs' is the health report's reading of the node's
%%% log: its volume (a resource: lines a second, by level and by the
%%% function that writes them, and what the logging drops) and its errors.
%%% The counts are `os_sup_log_volume''s and `os_sup_log_stats''s (ETS
%%% reads; nothing here calls a process).
%%%
%%% == Findings ==
%%% <ul>
%%%   <li>{@link flood/3}, kind `log_flood': the application logs at least
%%%       100 lines a second (or 20 warnings and errors a second) both over
%%%       the window and in the whole second before the call (a burst that
%%%       ended, such as the boot's, is not one; its rates are over the
%%%       seconds it has lasted, up to 10); or lines are dropped: the
%%%       server's handler dropped some in the window because its keeper was
%%%       5000 behind, or one of the node's handlers is in `drop' mode. The
%%%       line names the emitters that write the most (the function, file:line
%%%       and level from each event's metadata, its rate, the process that
%%%       logs there, and the start of one of its messages), the handlers'
%%%       backlog and the drops; next, the `source' of the top emitter. The
%%%       server's own work (lines logged by its evals, metadata
%%%       `os_sup_eval') is not counted.</li>
%%%   <li>{@link errors/2}, kind `errors': error-level log events of the last
%%%       5 minutes.</li>
%%% </ul>
%%% A flood's finding names the handlers' processes (`keys', `handlers'): the
%%% server folds findings about them (a long mailbox, callers blocked on one
%%% in `sync' mode) into it, their cause.
%%% {@link sample/0} is read at both ends of the window; {@link figures/2} and
%%% {@link figures_text/1} put the log's volume on the figures line, so a
%%% healthy answer shows it was looked at.
-module(os_sup_diagnose_logs).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([sample/0, flood/3, errors/2, figures/2, figures_text/1]).

%% a flood: lines a second of the application, of all levels or of warnings and worse
-define(LINES_PER_S, 100).
-define(LOUD_PER_S, 20).
%% the whole seconds before the call read (emitters are kept that long)
-define(HISTORY_S, 10).
%% emitters named, and the least share of the lines for one to be named
-define(SHOWN, 3).
-define(SHARE, 0.05).
%% a handler with this many events queued is behind
-define(HANDLER_QUEUE, 1000).
-define(SAMPLE_BYTES, 80).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The log's totals now (`os_sup_log_volume:sample/0'), read at both ends of the window.
-spec sample() -> map().
sample() ->
    os_sup_log_volume:sample().

%% @doc The `log_flood' finding, if the node logs too much or drops lines: `[]' or one
%% finding (see the module doc). `V0' and `V1' are {@link sample/0} at the window's ends.
-spec flood(map(), map(), map()) -> [map()].
flood(V0, V1, #{fmt := Fmt} = Ctx) ->
    Secs = max(1, maps:get(at_ms, V1) - maps:get(at_ms, V0)) / 1000,
    Window = (app(V1) - app(V0)) / Secs,
    LoudWindow = (loud(maps:get(levels, V1)) - loud(maps:get(levels, V0))) / Secs,
    PerSecond = maps:get(per_second, os_sup_log_volume:recent(?HISTORY_S)),
    %% How long it has gone on: the whole seconds before the call, newest first, as loud.
    Streak = length(lists:takewhile(fun({All, _}) -> All >= ?LINES_PER_S end, PerSecond)),
    LoudStreak = length(lists:takewhile(fun({_, L}) -> L >= ?LOUD_PER_S end, PerSecond)),
    Loud = (Window >= ?LINES_PER_S andalso Streak > 0)
        orelse (LoudWindow >= ?LOUD_PER_S andalso LoudStreak > 0),
    Dropped = maps:get(handler_dropped, V1) - maps:get(handler_dropped, V0),
    Lost = maps:get(buffer_dropped, V1) - maps:get(buffer_dropped, V0),
    Handlers = [H || #{level := L} = H <- os_sup_log_volume:handlers(), L =/= none],
    Choked = [H || #{mode := M, queue := Q} = H <- Handlers,
                   M =:= drop orelse (is_integer(Q) andalso Q >= ?HANDLER_QUEUE)],
    case Loud orelse Dropped > 0 orelse Choked =/= [] of
        false ->
            [];
        true ->
            %% Rates over the seconds it has been loud (the last one at least).
            Recent = os_sup_log_volume:recent(max(1, max(Streak, LoudStreak))),
            N = max(1, maps:get(seconds, Recent)),
            Emitters = shown(maps:get(emitters, Recent)),
            Rate = lists:sum([A || {A, _} <- maps:get(per_second, Recent)]) / N,
            Head = case Loud of
                       true -> "log flood: ";
                       false -> "logs dropped: "
                   end,
            Line = {[Head, fmt("~b lines/s (~ts) over the last ~b s, ~b/s in the window",
                               [round(Rate), levels_text(maps:get(levels, Recent), N), N,
                                round(Window)])],
                    [emitters_text(Emitters, N, Fmt),
                     handlers_text(Handlers, Fmt),
                     drops_text(Dropped, Lost, maps:get(queued, V1))]},
            {Next, Pid, Frame} = next(Emitters, Fmt),
            Found = os_sup_diagnose:finding(log_flood, Line, Next, Pid, Frame, Ctx),
            %% The handlers' processes: findings about them (a long mailbox, callers blocked
            %% on one) are this flood's consequences.
            [Found#{facts := #{lines_per_s => round(Rate), lines_per_s_window => round(Window),
                               errors_per_s => maps:get(error, maps:get(levels, Recent)) / N,
                               dropped => Dropped + Lost},
                    keys := #{handlers => [P || #{pid := P} <- os_sup_log_volume:handlers(),
                                                is_pid(P)]}}]
    end.

%% @doc The `errors' finding: error-level events of the last 5 minutes, not only those inside
%% the window (a request that failed two seconds before the call is news). `Log' is
%% `os_sup_log_stats:summary/1'.
-spec errors(map(), map()) -> [map()].
errors(#{errors := Total, errors_last_5m := Recent, last_error_age_ms := Age}, Ctx)
  when Recent > 0 ->
    Found = os_sup_diagnose:finding(
              errors, fmt("errors: ~b error-level log events in the last 5 min (the last ~ts ago), "
                          "~b since start", [Recent, age(Age), Total]),
              {logs, [{<<"min_level">>, <<"error">>}, {<<"tail">>, 10}]}, undefined, undefined, Ctx),
    [Found#{facts := #{errors_5m => Recent, errors => Total}}];
errors(_, _) ->
    [].

%% @doc The log's figures over the window: the application's lines a second (`log_lines_per_s'),
%% by level (those above zero), and the lines dropped (`log_dropped'); `log_lines_per_s' is
%% undefined when the lines were not counted (no log keeper on the node).
-spec figures(map(), map()) -> map().
figures(#{counted := false}, _V1) ->
    #{log_lines_per_s => undefined};
figures(_V0, #{counted := false}) ->
    #{log_lines_per_s => undefined};
figures(V0, V1) ->
    Secs = max(1, maps:get(at_ms, V1) - maps:get(at_ms, V0)) / 1000,
    #{levels := L0} = V0,
    #{levels := L1} = V1,
    #{log_lines_per_s => rate(app(V1) - app(V0), Secs),
      log_levels_per_s => maps:from_list([{K, rate(maps:get(K, L1) - maps:get(K, L0), Secs)}
                                          || K <- maps:keys(L1),
                                             maps:get(K, L1) > maps:get(K, L0)]),
      log_dropped => maps:get(handler_dropped, V1) - maps:get(handler_dropped, V0)
          + maps:get(buffer_dropped, V1) - maps:get(buffer_dropped, V0)}.

%% @doc The figures line's part: `logs 352.0 lines/s (warning 350.0)'.
-spec figures_text(map()) -> binary().
figures_text(#{log_lines_per_s := Rate} = F) when is_number(Rate) ->
    Levels = [fmt("~ts ~ts", [K, float_text(V)])
              || {K, V} <- lists:reverse(lists:keysort(2, maps:to_list(
                                                             maps:get(log_levels_per_s, F, #{}))))],
    Dropped = case maps:get(log_dropped, F, 0) of
                  0 -> [];
                  D -> [fmt("~b dropped", [D])]
              end,
    iolist_to_binary([fmt("logs ~ts lines/s", [float_text(Rate)]),
                      case Levels ++ Dropped of
                          [] -> [];
                          Parts -> [" (", lists:join(", ", Parts), ")"]
                      end]);
figures_text(_) ->
    <<"logs ? lines/s (not counted: no log keeper)">>.

%%%===================================================================
%%% Private
%%%===================================================================

%% The application's lines (not the server's evals).
app(#{total := T, eval := E}) -> T - E.

loud(#{error := E, warning := W}) -> E + W.

rate(N, Secs) -> round(N * 10 / Secs) / 10.

float_text(F) -> fmt("~.1f", [float(F)]).

levels_text(Levels, N) ->
    case [fmt("~ts ~b/s", [K, round(V / N)])
          || K <- [error, warning, notice, info, debug], V <- [maps:get(K, Levels)], V > 0] of
        [] -> <<"none">>;
        Parts -> lists:join(", ", Parts)
    end.

%% The emitters worth naming: the top ones with at least ?SHARE of the lines.
shown([]) -> [];
shown(Emitters) ->
    Total = lists:sum([C || #{count := C} <- Emitters]),
    [E || #{count := C} = E <- lists:sublist(Emitters, ?SHOWN), C >= ?SHARE * Total].

emitters_text([], _N, _Fmt) ->
    [];
emitters_text([First | Rest], N, Fmt) ->
    ["; from ", emitter_text(First, N, Fmt), sample_text(First),
     [["; ", emitter_text(E, N, Fmt)] || E <- Rest]].

%% `Ailments.Flood.warn_stale/2 lib/ailments/flood.ex:24 (warning, 350/s, by Ailments.Flood)'.
emitter_text(#{key := Key, count := C, level := Level, pid := Pid}, N, Fmt) ->
    Where = case Key of
                {M, F, A, File, Line} ->
                    [os_sup_lib_render:mfa({M, F, A}, Fmt), file_text(File, Line)];
                unknown -> <<"lines with no function in their metadata">>;
                other -> <<"(other functions)">>
            end,
    By = case local(Pid) of
             true -> [", by ", os_sup_lib_label:label(Pid, Fmt)];
             false -> []
         end,
    [Where, fmt(" (~ts, ~b/s", [Level, round(C / N)]), By, ")"].

file_text(File, Line) when is_binary(File) ->
    {ok, Cwd} = file:get_cwd(),
    Rel = os_sup_code_beam:relative(File, Cwd),
    case Line of
        L when is_integer(L) -> [" ", Rel, ":", integer_to_binary(L)];
        _ -> [" ", Rel]
    end;
file_text(_File, _Line) ->
    [].

sample_text(#{sample := S}) when is_binary(S), byte_size(S) > ?SAMPLE_BYTES ->
    [": \"", os_sup_lib_render:utf8_trim(binary:part(S, 0, ?SAMPLE_BYTES)), <<"…\""/utf8>>];
sample_text(#{sample := S}) when is_binary(S), S =/= <<>> ->
    [": \"", S, "\""];
sample_text(_) ->
    [].

handlers_text(Handlers, Fmt) ->
    case [[os_sup_lib_render:name(Id, Fmt), mode_text(M), queue_text(Q)]
          || #{id := Id, mode := M, queue := Q} <- Handlers,
             M =:= sync orelse M =:= drop orelse (is_integer(Q) andalso Q >= ?HANDLER_QUEUE)] of
        [] -> [];
        Parts -> ["; the logger's handlers: ", lists:join(", ", Parts)]
    end.

mode_text(drop) -> <<" drops (drop mode)">>;
mode_text(sync) -> <<" makes loggers wait (sync mode)">>;
mode_text(_) -> <<>>.

queue_text(Q) when is_integer(Q), Q > 0 -> fmt(", ~b queued", [Q]);
queue_text(_) -> <<>>.

%% What the server's keeper dropped in the window: lines it never read (it was behind: the rates
%% above are of the lines it read) and lines it read but could not pass on.
drops_text(0, 0, _Queued) ->
    [];
drops_text(Dropped, Lost, Queued) ->
    [case Dropped of
         0 -> [];
         _ -> fmt("; ~b more lines were dropped unread in the window: the server's log keeper "
                  "is behind (~b queued), so the rates above are of what it read", [Dropped, Queued])
     end,
     case Lost of
         0 -> [];
         _ -> fmt("; the server's log keeper dropped ~b lines it kept for the server", [Lost])
     end].

%% The next call, the holder and the frame: the source of the top emitter whose events name its
%% function, else the lines themselves.
next(Emitters, Fmt) ->
    case [E || #{key := {_, _, _, _, _}} = E <- Emitters] of
        [#{key := {M, F, A, _, _}, pid := Pid} | _] ->
            {{source, [{<<"target">>, os_sup_lib_render:mfa({M, F, A}, Fmt)}]}, local_pid(Pid),
             #{mfa => {M, F, A}}};
        [] ->
            next_logs(Emitters)
    end.

next_logs([#{level := Level, pid := Pid} | _]) ->
    {{logs, [{<<"min_level">>, atom_to_binary(Level, utf8)}, {<<"tail">>, 20}]}, local_pid(Pid),
     case local(Pid) of
         true -> os_sup_proc_groups:app_frame(Pid);
         false -> undefined
     end};
next_logs([]) ->
    {{logs, [{<<"tail">>, 20}]}, undefined, undefined}.

local(Pid) ->
    is_pid(Pid) andalso node(Pid) =:= node() andalso is_process_alive(Pid).

local_pid(Pid) ->
    case local(Pid) of
        true -> Pid;
        false -> undefined
    end.

age(Ms) when is_integer(Ms), Ms < 1000 -> <<"<1 s">>;
age(Ms) when is_integer(Ms), Ms < 120000 -> fmt("~b s", [Ms div 1000]);
age(Ms) when is_integer(Ms) -> fmt("~b min", [Ms div 60000]);
age(_) -> <<"?">>.
