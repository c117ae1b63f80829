%%% @doc `os_sup_log_keeper' is the keeper of `os_sup_log_handler''s events.
%%% It is one process, registered as `os_sup_logger_keeper' (its name since
%%% the handler's module was `os_sup_logger'), that owns the events the
%%% handler sends, the subscriber and the handler's installation.
%%% <ul>
%%%   <li>While nobody is subscribed it keeps the last 1000 events
%%%       (`MAX_BUFFER'; the oldest go first, those below warning before
%%%       crash reports, and are counted).</li>
%%%   <li>A subscriber is monitored; events go to it with `noconnect' and
%%%       `nosuspend'; one that cannot be sent (busy or lost connection)
%%%       stays buffered, in order, for the next try. When the subscriber
%%%       goes away the keeper buffers again.</li>
%%%   <li>Every 300 ms it checks (ETS reads) that the handler and the
%%%       primary filter (`os_sup_log_handler''s Primary filter) are still
%%%       installed and pointed at it, the filter ahead of Elixir's
%%%       translator, and installs them again when not (every 5 ms for up
%%%       to 3 s once Elixir's Logger stops: Mix 1.15+ restarts it just
%%%       before it starts the project's application, and its translator
%%%       then goes in front of our filter; on nodes we booted, Elixir
%%%       1.15+'s console handler is quieted in the same checks, see
%%%       `os_sup_log_handler''s Console):
%%%       the user may call `logger:remove_handler/1', or reconfigure the
%%%       logger. Installing calls the `logger' server, so it runs in a
%%%       throw-away process with a deadline (3 s): the keeper never
%%%       blocks. `subscribe' answers `ok' only once the handler is seen
%%%       in place, else `{error, Reason}'.</li>
%%%   <li>Lost events (buffer overflow, overload) are reported to the
%%%       subscriber as one `warning' event with the count.</li>
%%% </ul>
%%%
%%% Every event is counted as it arrives, by `os_sup_log_stats' (restarts,
%%% give-ups) and `os_sup_log_volume' (lines a second by level and by
%%% emitter, and what the handler and the buffer dropped).
%%%
%%% Each event is rendered (`os_sup_log_render') into
%%% `{os_sup_log, #{level, text, eval}}'; `eval' is true when the logging
%%% process runs an `eval' of the server (metadata `os_sup_eval'); the line
%%% naming what died first in a cascade also has `first_to_die => true'. Each
%%% is shown once: Elixir's Logger hides OTP's `sasl' reports unless
%%% `handle_sasl_reports'; their progress reports (below error) are hidden
%%% here likewise, their error reports kept (the crash of a process that
%%% is not a GenServer, a supervisor giving up). A crash is told by its
%%% first report: a crash report, or a supervisor's `child_terminated'
%%% report, about a process whose crash was reported in the last
%%% `CRASH_MS' is dropped. The reports of a cascade (a supervisor killed,
%%% and its children's reports that they ended with it) are followed by a
%%% line naming what died first (`os_sup_log_cascade').
%%%
%%% == API (for `os_sup_log_handler') ==
%%% <ul>
%%%   <li>{@link ensure/0}: the registered keeper, started if needed.</li>
%%%   <li>{@link running/0}: the registered keeper, if any.</li>
%%%   <li>{@link request/3}: ask the keeper (`installed', `{subscribe,
%%%       Pid}', `status', `stop') under a timeout.</li>
%%% </ul>
%%%
%%% == Internal entry points ==
%%% {@link init/1} and {@link loop/1} (the keeper), {@link install_run/2}
%%% (an installer).
%%%
%%% == Boot ==
%%% On a node we boot the keeper starts before the helper's other modules
%%% are loaded (`os_sup_helper' loads the `os_sup_log' ones first and the
%%% rest by absolute path off the boot path: none loads on demand). So its
%%% installing, the console's quieting and the fast checks call only OTP
%%% and `os_sup_log' modules: a call to another of ours fails there, and a
%%% failing step keeps the previous state (the `quiet_console' request
%%% was lost that way, and the console stayed loud).
%%%
%%% == Code reload ==
%%% Like `os_sup_helper': the keeper and its installers are spawned with
%%% `spawn(?MODULE, F, A)', the keeper recurses through `?MODULE:loop/1',
%%% waits hibernated and wakes on `erlang:start_timer/3' timers. A keeper
%%% of an earlier version (which ran in `os_sup_logger', the handler's
%%% module then, which this version leaves loaded) comes here through
%%% `os_sup_logger:keeper_loop/1'; its state is completed
%%% (`upgraded'), and events already rendered by a handler of the previous
%%% version are accepted.
-module(os_sup_log_keeper).

%% API
-export([ensure/0, running/0, request/3]).
%% Internal entry points: spawn targets and the reload-safe loop. Not an API.
-export([init/1, loop/1, install_run/2, uninstall/0]).

-define(KEEPER, os_sup_logger_keeper).
%% the handler: its id and its module (os_sup_log_handler's HANDLER)
-define(HANDLER, os_sup_mcp).
-define(HANDLER_MODULE, os_sup_log_handler).
%% counters shared with the handler (os_sup_log_handler's QUEUED and OVERLOAD)
-define(QUEUED, 1).
-define(OVERLOAD, 2).
%% a crash report or supervisor report this soon after a crash was reported repeats it
-define(CRASH_MS, 5000).
-define(MAX_CRASHED, 256).
%% events kept while nobody is subscribed (or while they cannot be sent)
-define(MAX_BUFFER, 1000).
%% when the buffer is full, how many of its oldest events are looked at for one below warning
-define(SPARE_SCAN, 64).
%% how often the keeper checks its handler and retries sending
-define(CHECK_MS, 300).
%% after Elixir's Logger stopped (Mix restarts it just before it starts the project's
%% application): how often, and for how long at most, the keeper checks its filter
-define(FAST_CHECK_MS, 5).
-define(FAST_FOR_MS, 3000).
-define(ELIXIR_LOGGER_SUP, 'Elixir.Logger.Supervisor').
%% the installer's deadline
-define(INSTALL_MS, 3000).
%% requests waiting for the handler to be installed
-define(MAX_WAITERS, 64).

-type state() :: map().

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The registered keeper, started (unlinked, led by `user') if needed.
-spec ensure() -> {ok, pid()} | {error, keeper_not_started}.
ensure() ->
    case whereis(?KEEPER) of
        Pid when is_pid(Pid) ->
            {ok, Pid};
        undefined ->
            Pid = spawn(?MODULE, init, [counters:new(2, [write_concurrency])]),
            case whereis(user) of
                User when is_pid(User) -> _ = try group_leader(User, Pid) catch _:_ -> false end;
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

%% @doc The registered keeper, or `undefined'.
-spec running() -> pid() | undefined.
running() ->
    whereis(?KEEPER).

%% @doc Sends `Request' to `Keeper' and waits up to `Timeout' ms for its reply; `{error,
%% timeout}' or `{error, {keeper_exited, Reason}}' otherwise.
-spec request(pid(), term(), timeout()) -> term().
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

%%%===================================================================
%%% Internal entry points (spawned or reloaded through ?MODULE)
%%%===================================================================

%% @doc Keeper entry: arms the check timer and starts installing the handler.
-spec init(counters:counters_ref()) -> ok.
init(Counters) ->
    S = #{counters => Counters, subscriber => undefined,
          buffer => queue:new(), buffered => 0, lost => 0, overload_seen => 0,
          installer => undefined, waiters => [], crashed => #{},
          logger_mon => undefined, fast_until => undefined, quiet => false,
          quieter => undefined, cascade => undefined,
          timer => erlang:start_timer(?CHECK_MS, self(), check)},
    ?MODULE:loop(guarded(install, S)).

%% @doc Keeper loop: events, requests, installer results, monitors, the check timer; exits
%% only on `stop'. A failing step keeps the previous state.
-spec loop(state()) -> ok.
loop(#{timer := TRef} = S) ->
    receive
        {timeout, TRef, check} ->
            S1 = S#{timer := erlang:start_timer(?CHECK_MS, self(), check)},
            ?MODULE:loop(guarded(check, S1));
        Msg ->
            case guarded(Msg, S) of
                {stop, From, Tag} ->
                    _ = try keeper_stop(S) catch _:_ -> ok end,
                    reply(From, Tag, ok);
                S1 ->
                    ?MODULE:loop(S1)
            end
    after 0 ->
            erlang:hibernate(?MODULE, loop, [S])
    end.

%% @doc Installer: (re)installs the handler and the primary filter (in front of the others;
%% see os_sup_log_handler's Primary filter) for `Keeper' and reports `{installed, self(), R}'.
%% A handler of this module already there is updated, not removed and added again: logger_server
%% applies a removal after the handler's `removing_handler' ran, writing the handler list it
%% read when the removal arrived, so a handler added meanwhile (Elixir's Logger adds its
%% console, `default', when it starts, which is when our filter needs moving) stays configured
%% but is no longer called: the project's console went silent (1 run in ~40 on OTP 29).
-spec install_run(pid(), map()) -> ok.
install_run(Keeper, Config) ->
    Result = try
                 Handler = case logger:get_handler_config(?HANDLER) of
                               {ok, #{module := ?HANDLER_MODULE}} ->
                                   logger:update_handler_config(?HANDLER, Config);
                               {ok, _OtherModule} ->
                                   _ = logger:remove_handler(?HANDLER),
                                   logger:add_handler(?HANDLER, ?HANDLER_MODULE, Config);
                               _ ->
                                   logger:add_handler(?HANDLER, ?HANDLER_MODULE, Config)
                           end,
                 case Handler of
                     ok ->
                         _ = logger:remove_primary_filter(?HANDLER),
                         logger:add_primary_filter(
                           ?HANDLER, {fun ?HANDLER_MODULE:filter/2, maps:get(config, Config)});
                     Error ->
                         Error
                 end
             catch
                 Class:Reason -> {error, {Class, Reason}}
             end,
    Keeper ! {installed, self(), Result},
    ok.

%% @doc Removes the primary filter and the handler (run in a throw-away process).
-spec uninstall() -> ok.
uninstall() ->
    _ = try logger:remove_primary_filter(?HANDLER) catch _:_ -> ok end,
    _ = try logger:remove_handler(?HANDLER) catch _:_ -> ok end,
    ok.

%%%===================================================================
%%% Private: keeper
%%%===================================================================

guarded(Step, S) ->
    try keeper_handle(Step, upgraded(S))
    catch _:_ -> S
    end.

%% The state of a keeper started by an earlier version (of os_sup_logger), completed.
upgraded(#{crashed := _, logger_mon := _, fast_until := _, quiet := _, quieter := _,
           cascade := _} = S) ->
    S;
upgraded(S) ->
    maps:merge(#{crashed => #{}, logger_mon => undefined, fast_until => undefined,
                 quiet => false, quieter => undefined, cascade => undefined}, S).

keeper_handle({os_sup_event, Level, Msg, Meta}, #{counters := C} = S) ->
    counters:sub(C, ?QUEUED, 1),
    _ = application_started(Msg) andalso try os_sup_helper_ready:app_started() catch _:_ -> ok end,
    os_sup_log_stats:record(Level, Msg, Meta),
    os_sup_log_volume:count(Level, Msg, Meta),
    case event(Level, Msg, Meta, S) of
        {keep, Event, S1} ->
            os_sup_log_stats:shown(Level),
            flush(enqueue(Event, cascade(Msg, Meta, S1)));
        {drop, S1} -> cascade(Msg, Meta, S1)
    end;
keeper_handle({os_sup_log, _} = Event, #{counters := C} = S) ->
    %% Rendered by a handler of an earlier version (os_sup_logger).
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
keeper_handle({'DOWN', MRef, process, _, _}, #{logger_mon := MRef} = S) ->
    %% Elixir's Logger stopped: when it starts again its translator goes in front of our
    %% filter (and since 1.15 it adds its console handler again); put ours back in front
    %% (and quiet that console) within ?FAST_CHECK_MS, not ?CHECK_MS.
    fast(S#{logger_mon := undefined});
keeper_handle(fast_check, #{fast_until := Until} = S) when is_integer(Until) ->
    %% Read before this check, so that the check sees all that Logger's start set up.
    Back = logger_back(S),
    S1 = watch_logger(quiet(reinstall_if_needed(S))),
    case erlang:monotonic_time(millisecond) < Until andalso not Back of
        true ->
            erlang:send_after(?FAST_CHECK_MS, self(), fast_check),
            S1;
        false ->
            S1#{fast_until := undefined}
    end;
keeper_handle(check, S) ->
    check(S);
keeper_handle(cascade_check, S) ->
    cascade_check(S);
keeper_handle(install, S) ->
    install(S);
keeper_handle(_Other, S) ->
    S.

%% The application controller's report that an application started: the node's readiness
%% may have changed (`os_sup_helper_ready' waits for it rather than polling).
application_started({report, #{label := {application_controller, progress}}}) -> true;
application_started(_Msg) -> false.

keeper_request(installed, From, Tag, S) ->
    when_installed({start, From, Tag}, S);
keeper_request({subscribe, Pid}, From, Tag, S) when is_pid(Pid) ->
    when_installed({subscribe, Pid, From, Tag}, S);
keeper_request(quiet_console, From, Tag, S) ->
    %% A node we booted, on Elixir 1.15+: quiet Logger's console at each of its starts.
    reply(From, Tag, ok),
    fast(quiet(S#{quiet := true}));
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
                 case erlang:monotonic_time(millisecond) - Started > ?INSTALL_MS of
                     true ->
                         exit(Pid, kill),
                         erlang:demonitor(MRef, [flush]),
                         installed({error, timeout}, S#{installer := undefined});
                     false ->
                         S
                 end;
             undefined ->
                 reinstall_if_needed(S)
         end,
    Overload = counters:get(C, ?OVERLOAD),
    os_sup_log_volume:keeper_counters(C),
    S2 = watch_logger(quiet(S1)),
    flush(prune_crashed(S2#{overload_seen := Overload, lost := Lost + (Overload - Seen)})).

reinstall_if_needed(#{installer := undefined} = S) ->
    case handler_ok() of
        true -> S;
        false -> install(S)
    end;
reinstall_if_needed(S) ->
    S.

%% Checks every ?FAST_CHECK_MS for the next ?FAST_FOR_MS, or until Logger is back (one chain of
%% checks at a time).
fast(#{fast_until := undefined} = S) ->
    erlang:send_after(?FAST_CHECK_MS, self(), fast_check),
    S#{fast_until := erlang:monotonic_time(millisecond) + ?FAST_FOR_MS};
fast(S) ->
    S#{fast_until := erlang:monotonic_time(millisecond) + ?FAST_FOR_MS}.

%% With `quiet': Logger's console handler (OTP's `default' writing to stdout or stderr), when
%% it logs, is quieted by a throw-away process (os_sup_log_handler:quiet_console/0; one at a time),
%% unless the configuration asks for a console.
quiet(#{quiet := true, quieter := Quieter} = S) ->
    Running = is_pid(Quieter) andalso is_process_alive(Quieter),
    case not Running andalso loud_default_handler()
        andalso not ?HANDLER_MODULE:loud_console() of
        true -> S#{quieter := spawn(?HANDLER_MODULE, quiet_console, [])};
        false -> S
    end;
quiet(S) ->
    S.

loud_default_handler() ->
    try logger:get_handler_config(default) of
        {ok, #{module := logger_std_h, level := Level, config := #{type := Type}}} ->
            Level =/= none andalso (Type =:= standard_io orelse Type =:= standard_error);
        _ ->
            false
    catch
        _:_ -> false
    end.

%% True once Elixir's Logger runs again (watched) and its application has started: its start
%% has put its filters and handlers in place, and the checks can slow down. Polling for
%% ?FAST_FOR_MS after every restart of Logger would cost a booting node ~60 ms of CPU.
logger_back(#{logger_mon := undefined}) ->
    false;
logger_back(_S) ->
    try application:which_applications(?FAST_CHECK_MS * 20) of
        Started when is_list(Started) -> lists:keymember(logger, 1, Started);
        _ -> false
    catch
        _:_ -> false
    end.

%% Monitors Elixir's Logger (its supervisor) when it runs, to notice when it stops.
watch_logger(#{logger_mon := undefined} = S) ->
    case whereis(?ELIXIR_LOGGER_SUP) of
        Pid when is_pid(Pid) -> S#{logger_mon := erlang:monitor(process, Pid)};
        _ -> S
    end;
watch_logger(S) ->
    S.

%% Starts an installer unless one runs.
install(#{installer := undefined, counters := C} = S) ->
    Config = #{level => all, config => #{keeper => self(), counters => C}},
    {Pid, MRef} = spawn_monitor(?MODULE, install_run, [self(), Config]),
    S#{installer := {Pid, MRef, erlang:monotonic_time(millisecond)}};
install(S) ->
    S.

%% True when our handler and our primary filter are installed and point at this keeper, the
%% filter ahead of Elixir's translator (ETS reads, no call).
handler_ok() ->
    Self = self(),
    try logger:get_handler_config(?HANDLER) of
        {ok, #{module := ?HANDLER_MODULE, config := #{keeper := Self}}} ->
            try logger:get_primary_config() of
                #{filters := Filters} -> filter_first(Filters, Self);
                _ -> false
            catch
                _:_ -> false
            end;
        _ ->
            false
    catch
        _:_ -> false
    end.

filter_first([{?HANDLER, {_Fun, #{keeper := Self}}} | _], Self) -> true;
filter_first([{logger_translator, _} | _], _Self) -> false;
filter_first([_ | Filters], Self) -> filter_first(Filters, Self);
filter_first(_, _Self) -> false.

%% Keeps the newest ?MAX_BUFFER events; the oldest below warning (among the oldest
%% ?SPARE_SCAN) goes first, a crash report only to others like it. Each is counted as lost.
enqueue(Event, #{buffer := Q, buffered := N, lost := Lost} = S) when N >= ?MAX_BUFFER ->
    os_sup_log_volume:dropped(1),
    {Front, Back} = queue:split(min(?SPARE_SCAN, N), Q),
    Q1 = case lists:splitwith(fun serious/1, queue:to_list(Front)) of
             {Kept, [_Chatter | Rest]} -> queue:join(queue:from_list(Kept ++ Rest), Back);
             {_AllSerious, []} -> queue:drop(Q)
         end,
    enqueue(Event, S#{buffer := Q1, buffered := N - 1, lost := Lost + 1});
enqueue(Event, #{buffer := Q, buffered := N} = S) ->
    S#{buffer := queue:in(Event, Q), buffered := N + 1}.

%% A warning or worse.
serious({os_sup_log, #{level := Level}}) ->
    try logger:compare_levels(Level, warning) =/= lt catch _:_ -> true end;
serious(_Event) ->
    false.

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
                           "server, or the node logged faster than they could be forwarded)",
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
    uninstall(),
    ok.

%%%===================================================================
%%% Private: events
%%%===================================================================

%% What becomes of one event: kept as a rendered line, or dropped (hidden, or a repeat).
event(Level, Msg, Meta, S) ->
    Lang = os_sup_log_render:language(),
    case shown(Lang, Level, Meta) andalso not repeat(Msg, Meta, S) of
        false ->
            {drop, S};
        true ->
            case os_sup_log_render:text(Lang, Level, Msg, Meta) of
                skip ->
                    {drop, S};
                Line ->
                    Event = {os_sup_log, #{level => Level, text => Line,
                                           eval => maps:get(os_sup_eval, Meta, false) =:= true}},
                    {keep, Event, crashed(Msg, Meta, S)}
            end
    end.

%% Elixir's Logger hides OTP's sasl reports unless `handle_sasl_reports': its progress reports
%% (below error) are hidden here too.
shown({elixir, #{sasl := false}}, Level, #{domain := Domain}) ->
    not (sasl_domain(Domain) andalso logger:compare_levels(Level, error) =:= lt);
shown(_Lang, _Level, _Meta) ->
    true.

sasl_domain([otp, sasl | _]) -> true;
sasl_domain([supervisor_report | _]) -> true;
sasl_domain(_) -> false.

%% A report of a cascade (a process's end took others with it) is noted; the first arms the
%% check for its end.
cascade(Msg, Meta, #{cascade := Cascade} = S) ->
    case os_sup_log_cascade:note(Msg, Meta, Cascade) of
        {opened, Cascade1} ->
            erlang:send_after(0, self(), cascade_check),
            S#{cascade := Cascade1};
        {same, Cascade1} ->
            S#{cascade := Cascade1}
    end.

%% Once a cascade has ended, the line naming what died first follows its reports.
cascade_check(#{cascade := undefined} = S) ->
    S;
cascade_check(#{cascade := Cascade} = S) ->
    case os_sup_log_cascade:close(Cascade, erlang:monotonic_time(millisecond)) of
        {line, Text, Closed} ->
            %% Marked: the server decides on the mark, never on the line's text.
            flush(enqueue({os_sup_log, #{level => error, text => Text, eval => false,
                                         first_to_die => true}},
                          S#{cascade := Closed}));
        {wait, Ms} ->
            erlang:send_after(Ms, self(), cascade_check),
            S
    end.

%% The first report of a crash: its process is remembered for ?CRASH_MS.
crashed({report, #{label := Label}}, #{pid := Pid}, #{crashed := Crashed} = S)
  when is_pid(Pid) ->
    case first_report(Label) of
        true ->
            Crashed1 = case map_size(Crashed) >= ?MAX_CRASHED of
                           true -> #{};
                           false -> Crashed
                       end,
            S#{crashed := Crashed1#{Pid => erlang:monotonic_time(millisecond) + ?CRASH_MS}};
        false ->
            S
    end;
crashed(_Msg, _Meta, S) ->
    S.

first_report({gen_server, terminate}) -> true;
first_report({gen_statem, terminate}) -> true;
first_report({proc_lib, crash}) -> true;
first_report({'Elixir.Task.Supervisor', terminating}) -> true;
first_report(_) -> false.

%% A crash report, or a supervisor's report of a child's end, about a crash already reported.
repeat({report, #{label := {proc_lib, crash}}}, #{pid := Pid}, S) ->
    reported(Pid, S);
repeat({report, #{label := {supervisor, child_terminated}, report := Report}}, _Meta, S)
  when is_list(Report) ->
    case lists:keyfind(offender, 1, Report) of
        {offender, Offender} when is_list(Offender) ->
            case lists:keyfind(pid, 1, Offender) of
                {pid, Pid} -> reported(Pid, S);
                false -> false
            end;
        _ ->
            false
    end;
repeat(_Msg, _Meta, _S) ->
    false.

reported(Pid, #{crashed := Crashed}) ->
    case Crashed of
        #{Pid := Until} -> erlang:monotonic_time(millisecond) =< Until;
        _ -> false
    end.

prune_crashed(#{crashed := Crashed} = S) when map_size(Crashed) =:= 0 ->
    S;
prune_crashed(#{crashed := Crashed} = S) ->
    Now = erlang:monotonic_time(millisecond),
    S#{crashed := maps:filter(fun(_Pid, Until) -> Until >= Now end, Crashed)}.

%%%===================================================================
%%% Private
%%%===================================================================

reply(From, Tag, Reply) ->
    _ = try erlang:send(From, {Tag, Reply}, [noconnect]) catch _:_ -> ok end,
    ok.
