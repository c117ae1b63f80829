%%% @doc `os_sup_dev_watch' watches the node while `os_sup_dev''s
%%% `recompile' loads the new code, and says whether the application
%%% survived it.
%%%
%%% Around the load, the started applications are compared and a
%%% temporary `logger' primary filter (id `os_sup_dev_watch', this module)
%%% collects supervisor reports, crash reports and application exits for
%%% `watch_ms' (default 500 ms, longer once something crashed, to see
%%% whether a supervisor gives up). An application that stopped, a
%%% supervisor that gave up or a process that crashed makes the result an
%%% error that says so, with the log lines.
%%%
%%% A primary filter, not a handler: Elixir's Logger (1.15 and later)
%%% turns reports into text and hides OTP's supervisor reports in a
%%% primary filter of its own (`logger_translator'), before any handler.
%%% Primary filters run newest first, so ours, added just before the load,
%%% sees each event as it was logged; it changes nothing (`ignore').
%%%
%%% Runs in the recompile's worker process (the filter in the processes
%%% that log); starts no process.
-module(os_sup_dev_watch).

%% API
-import(os_sup_lib_time, [now_ms/0]).

-export([start/0, stop/2, verdict/5]).
%% logger primary filter, and handler callback
-export([filter/2, log/2]).

%% once a process crashed, watch at least this long after the first crash (os_sup_dev keeps
%% this much of the deadline for the watch)
-define(CRASH_WATCH_MS, 1500).
%% once a supervisor gave up, wait this long for its application's exit
-define(EXIT_WATCH_MS, 300).
%% logger events kept from the watch
-define(MAX_EVENTS, 200).
-define(MAX_LOG_LINES, 30).
-define(LINE_BYTES, 1024).
%% the filter's id, and the tag of what it sends
-define(WATCH_HANDLER, os_sup_dev_watch).

-type watch() :: #{apps := [atom()] | unknown, counter := counters:counters_ref(),
                   installed := boolean(), loaded_at := integer()}.
-type event() :: #{kind := app_exit | gave_up | crash | other, who := binary(),
                   why := binary(), line := binary(), child => binary()}.
-export_type([watch/0, event/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Notes the started applications and installs the filter, sending to the caller.
-spec start() -> watch().
start() ->
    Counter = counters:new(1, []),
    _ = try logger:remove_primary_filter(?WATCH_HANDLER) catch _:_ -> ok end,
    Installed = try logger:add_primary_filter(
                      ?WATCH_HANDLER, {fun ?MODULE:filter/2,
                                       #{watcher => self(), counter => Counter}}) =:= ok
                catch _:_ -> false
                end,
    #{apps => started_apps(), counter => Counter, installed => Installed,
      loaded_at => now_ms()}.

%% @doc Collects the filter's events for the watch window (`watch_ms', longer once something
%% crashed, never past `deadline' less 200 ms), removes the handler, and compares the started
%% applications: `{Events, Lost, StoppedApps, WatchMs}'.
-spec stop(watch(), #{watch_ms := non_neg_integer(), deadline := integer(), _ => _}) ->
          {[event()], non_neg_integer(), [atom()], non_neg_integer()}.
stop(#{apps := Apps0, counter := Counter, installed := Installed}, Opts) ->
    #{watch_ms := WatchMs, deadline := Deadline} = Opts,
    Start = now_ms(),
    Limit = Deadline - 200,
    Events = collect_events(min(Start + WatchMs, Limit), Limit, false, []),
    _ = Installed andalso try logger:remove_primary_filter(?WATCH_HANDLER) catch _:_ -> ok end,
    Late = flush_events([]),
    All = Events ++ Late,
    Apps1 = started_apps(),
    Stopped = case {Apps0, Apps1} of
                  {L0, L1} when is_list(L0), is_list(L1) -> [A || A <- L0, not lists:member(A, L1)];
                  _ -> []
              end,
    Lost = max(0, counters:get(Counter, 1) - ?MAX_EVENTS),
    {All, Lost, Stopped, now_ms() - Start}.

%% @doc An error when an application stopped, a supervisor gave up, a process crashed or a
%% module could not be loaded; otherwise the compile's status. Adds `applications_stopped',
%% `crashes' and `log' (the first lines, and how many more were lost) to `Data'.
-spec verdict(map(), [event()], non_neg_integer(), [atom()], [{module(), binary()}]) -> map().
verdict(Data, Events, Lost, Stopped, NotLoaded) ->
    Exits = [E || #{kind := app_exit} = E <- Events],
    GaveUp = [E || #{kind := gave_up} = E <- Events],
    Crashes = dedup([E || #{kind := crash} = E <- Events]),
    StoppedNames = lists:usort([app_name(A) || A <- Stopped]
                               ++ [W || #{who := W} <- Exits]),
    Problem =
        case {StoppedNames, GaveUp, Crashes, NotLoaded} of
            {[_ | _], _, _, _} ->
                [io_lib:format("application `~ts` exited during recompile: ~ts",
                               [App, exit_reason(App, Exits, GaveUp, Crashes)])
                 || App <- StoppedNames];
            {[], [_ | _], _, _} ->
                [io_lib:format("supervisor `~ts` gave up during recompile: ~ts",
                               [Sup, gave_up_reason(G, Crashes)])
                 || #{who := Sup} = G <- GaveUp];
            {[], [], [_ | _], _} ->
                [io_lib:format("~b process(es) crashed after the reload: ~ts",
                               [length(Crashes),
                                lists:join("; ", [[W, ": ", Y] || #{who := W, why := Y}
                                                                      <- lists:sublist(Crashes, 5)])])];
            {[], [], [], [_ | _]} ->
                [io_lib:format("~b module(s) could not be loaded: ~ts",
                               [length(NotLoaded),
                                lists:join(", ", [name(M) || {M, _} <- NotLoaded])])];
            _ ->
                []
        end,
    Lines = [L || #{line := L} <- lists:sublist(Events, ?MAX_LOG_LINES)]
        ++ [iolist_to_binary(io_lib:format("...(~b more log events)", [Lost]))
            || Lost > 0],
    Data1 = Data#{applications_stopped => StoppedNames,
                  crashes => [iolist_to_binary([W, ": ", Y]) || #{who := W, why := Y} <- Crashes],
                  log => Lines},
    case Problem of
        [] ->
            Data1;
        _ ->
            Data1#{status => error, error => iolist_to_binary(lists:join("; ", Problem))}
    end.

%%%===================================================================
%%% logger primary filter and handler callback
%%%===================================================================

%% @doc The primary filter: events from `notice' up go to the watcher (see log/2); the event
%% goes on unchanged. Never fails, never blocks.
-spec filter(logger:log_event(), map()) -> ignore.
filter(#{level := Level} = Event, Config) ->
    _ = try logger:compare_levels(Level, notice) =/= lt andalso log(Event, #{config => Config})
        catch _:_ -> ok
        end,
    ignore;
filter(_Event, _Config) ->
    ignore.

%% @doc `logger' handler: sends a summary of each supervisor report, crash report and
%% application exit (at most ?MAX_EVENTS) to the recompile that installed it; never fails.
-spec log(logger:log_event(), logger:handler_config()) -> ok.
log(#{meta := Meta} = Event, #{config := #{watcher := Pid, counter := Counter}}) ->
    try
        case maps:get(os_sup_eval, Meta, false) =/= true andalso summary(Event) of
            false ->
                ok;
            Summary ->
                counters:add(Counter, 1, 1),
                case counters:get(Counter, 1) =< ?MAX_EVENTS of
                    true ->
                        Line = line(Event),
                        _ = erlang:send(Pid, {?WATCH_HANDLER, Summary#{line => Line}},
                                        [noconnect, nosuspend]),
                        ok;
                    false ->
                        ok
                end
        end
    catch
        _:_ -> ok
    end;
log(_Event, _Config) ->
    ok.

%%%===================================================================
%%% Private: collecting
%%%===================================================================

%% Waits until `Until'; a crash pushes it to ?CRASH_WATCH_MS after the crash, a supervisor
%% giving up shortens it to ?EXIT_WATCH_MS after that (its application's exit comes next),
%% an application exit ends it; never beyond `Limit'.
collect_events(Until, Limit, GaveUp, Acc) ->
    receive
        {?WATCH_HANDLER, Event} ->
            Now = now_ms(),
            {Until1, GaveUp1} =
                case maps:get(kind, Event) of
                    app_exit -> {Now, GaveUp};
                    gave_up -> {min(Until, Now + ?EXIT_WATCH_MS), true};
                    crash when not GaveUp -> {max(Until, Now + ?CRASH_WATCH_MS), GaveUp};
                    _ -> {Until, GaveUp}
                end,
            collect_events(min(Until1, Limit), Limit, GaveUp1, [Event | Acc])
    after max(0, Until - now_ms()) ->
            lists:reverse(Acc)
    end.

flush_events(Acc) ->
    receive
        {?WATCH_HANDLER, Event} -> flush_events([Event | Acc])
    after 0 ->
            lists:reverse(Acc)
    end.

started_apps() ->
    try [A || {A, _, _} <- application:which_applications(2000)]
    catch _:_ -> unknown
    end.

%%%===================================================================
%%% Private: summaries of events
%%%===================================================================

%% A summary of the events the watch cares about, or false.
summary(#{msg := {report, #{label := {supervisor, Context}, report := Report}}})
  when is_list(Report) ->
    Offender = proplists:get_value(offender, Report, []),
    Who = child_name(Offender),
    Reason = proplists:get_value(reason, Report),
    Sup = sup_name(proplists:get_value(supervisor, Report)),
    case Context of
        shutdown -> #{kind => gave_up, who => Sup, child => Who, why => why(Reason)};
        child_terminated -> #{kind => crash, who => Who, why => why(Reason)};
        start_error -> #{kind => crash, who => Who, why => why(Reason)};
        _ -> #{kind => other, who => Sup, why => why(Reason)}
    end;
summary(#{msg := {report, #{label := {application_controller, exit}, report := Report}}})
  when is_list(Report) ->
    #{kind => app_exit, who => app_name(proplists:get_value(application, Report)),
      why => why(proplists:get_value(exited, Report))};
summary(#{msg := {report, #{label := {proc_lib, crash}, report := [Info | _]}}})
  when is_list(Info) ->
    Who = case proplists:get_value(registered_name, Info, []) of
              [] -> os_sup_lib_render:pid(proplists:get_value(pid, Info), elixir);
              Name -> name(Name)
          end,
    Why = case proplists:get_value(error_info, Info) of
              {_Class, Reason, Stack} -> why({Reason, Stack});
              Other -> why(Other)
          end,
    #{kind => crash, who => Who, why => Why};
summary(#{level := Level, meta := #{error_logger := #{emulator := true}},
          msg := {_Format, [Pid, Reason | _]}})
  when Level =:= error; Level =:= critical; Level =:= alert; Level =:= emergency ->
    #{kind => crash, who => os_sup_lib_render:pid(Pid, elixir), why => why(Reason)};
summary(_) ->
    false.

child_name(Offender) when is_list(Offender) ->
    case proplists:get_value(id, Offender) of
        undefined -> os_sup_lib_render:pid(proplists:get_value(pid, Offender), elixir);
        Id -> name(Id)
    end;
child_name(_) ->
    <<"?">>.

sup_name({local, Name}) -> name(Name);
sup_name({global, Name}) -> name(Name);
sup_name(Pid) when is_pid(Pid) -> os_sup_lib_render:pid(Pid, elixir);
sup_name(Other) -> name(Other).

%% A short reason: `undef Shop.Ledger.start_link/1', `** (RuntimeError) boom in M.f/2'.
why({undef, [{M, F, A, _} | _]}) ->
    <<"undef ", (os_sup_lib_render:mfa({M, F, A}, elixir))/binary>>;
why({#{'__exception__' := true, '__struct__' := Struct} = E, Stack}) when is_list(Stack) ->
    Message = try 'Elixir.Exception':message(E) of
                  B when is_binary(B) -> B
              catch _:_ -> os_sup_lib_render:term(E, elixir, 300)
              end,
    os_sup_lib_render:bound(iolist_to_binary(["** (", name(Struct), ") ", Message, where(Stack)]),
                        ?LINE_BYTES);
why({Reason, [{_, _, _, _} | _] = Stack}) ->
    os_sup_lib_render:bound(iolist_to_binary([os_sup_lib_render:term(Reason, elixir, 300),
                                          where(Stack)]), ?LINE_BYTES);
why({shutdown, Reason}) ->
    why(Reason);
why(Reason) when is_atom(Reason) ->
    atom_to_binary(Reason);
why(Reason) ->
    os_sup_lib_render:term(Reason, elixir, 300).

where([{M, F, A, _} | _]) -> [" in ", os_sup_lib_render:mfa({M, F, A}, elixir)];
where(_) -> [].

line(#{meta := Meta} = Event) ->
    Where = case Meta of
                #{pid := Pid} when is_pid(Pid) -> [pid_to_list(Pid), " "];
                _ -> []
            end,
    Text = logger_formatter:format(Event, #{single_line => true, template => [msg],
                                            max_size => ?LINE_BYTES, depth => 20,
                                            chars_limit => ?LINE_BYTES}),
    os_sup_lib_render:bound(os_sup_lib_render:to_bin([Where, Text]), ?LINE_BYTES).

%%%===================================================================
%%% Private: the verdict
%%%===================================================================

exit_reason(App, Exits, GaveUp, Crashes) ->
    case GaveUp of
        [G | _] ->
            gave_up_reason(G, Crashes);
        [] ->
            case [W || #{who := A, why := W} <- Exits, A =:= App] ++ crash_detail(Crashes) of
                [] -> <<"stopped">>;
                Parts -> lists:join(" ", Parts)
            end
    end.

gave_up_reason(#{why := Why} = G, Crashes) ->
    Child = maps:get(child, G, undefined),
    Detail = case [C || #{who := W} = C <- Crashes, W =:= Child] of
                 [#{why := CW} | _] -> [" (", Child, ": ", CW, ")"];
                 [] -> crash_detail(Crashes)
             end,
    iolist_to_binary([Why | Detail]).

crash_detail([#{who := W, why := Y} | _]) -> [iolist_to_binary([" (", W, ": ", Y, ")"])];
crash_detail([]) -> [].

%% The first crash of each process.
dedup(Crashes) ->
    lists:reverse(
      lists:foldl(fun(#{who := W} = C, Acc) ->
                          case lists:any(fun(#{who := X}) -> X =:= W end, Acc) of
                              true -> Acc;
                              false -> [C | Acc]
                          end
                  end, [], Crashes)).

name(M) ->
    os_sup_lib_render:name(M, elixir).

app_name(A) when is_atom(A) -> atom_to_binary(A);
app_name(Other) -> os_sup_lib_render:term(Other, elixir, 256).
