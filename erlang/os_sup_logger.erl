%%%-------------------------------------------------------------------
%%% @doc `os_sup_logger' forwards the node's OTP `logger' events to the
%%% `os_sup_mcp' sidecar, so that an agent can read what the node logged
%%% (crash and supervisor reports included) from the node's first moments
%%% until after it died.
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link start/0}: start the keeper and install the handler; from
%%%       then on events are kept until a subscriber comes, and the node's
%%%       console no longer echoes them (see Console). The helper calls
%%%       it at boot on the nodes the sidecar starts, before the application
%%%       starts; on a node it attaches to, the first subscription starts
%%%       the keeper (nothing is kept there for nobody, and its console is
%%%       left as it is). Idempotent.</li>
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
%%% A standard `logger' handler, id `os_sup_mcp'. `log/2' runs in the
%%% process that logs, so it does little: it sends the event (level,
%%% message, a few metadata keys) to the local keeper, as it is when it
%%% is small (`MAX_WORDS' heap words), else cut to about that size first
%%% (lists, tuples and maps keep their first `MAX_ITEMS' elements, each
%%% with a fair share of the budget, so a huge state cannot crowd out the
%%% crash reason). It only sends to the local keeper (never blocks); when
%%% 5000 events (`MAX_QUEUED') already wait in the keeper's mailbox it
%%% drops the event and counts it. It never logs and never fails. Events
%%% logged while the keeper renders one (metadata `os_sup_render') are
%%% dropped: they would loop.
%%%
%%% == Rendering (in the keeper) ==
%%% Each event becomes `{os_sup_log, #{level, text, eval}}': one line of
%%% at most 4096 bytes (line breaks and their indentation folded to one
%%% space, a longer text cut with `...(truncated)'), prefixed with the
%%% pid and, for events not logged by OTP itself, `Module.fun/Arity:Line'.
%%% `eval' is true when the logging process runs an `eval' of the
%%% sidecar (metadata `os_sup_eval').
%%% <ul>
%%%   <li>In the node's language: when Elixir's Logger is loaded, as it
%%%       renders events (its translators, `Logger.Translator' by default:
%%%       `GenServer Shop.Ledger terminating ** (RuntimeError) ...'), else
%%%       (and when a translator fails) by `logger_formatter'. Anything but
%%%       a plain string may run the user's code (an `Inspect'
%%%       implementation, a `report_cb'): it is rendered in a throw-away
%%%       process bounded in time (`RENDER_MS') and heap (`RENDER_WORDS');
%%%       past either, a one-line placeholder says what was left out.</li>
%%%   <li>Once: Elixir's Logger hides OTP's `sasl' reports unless
%%%       `handle_sasl_reports'; their progress reports (below error) are
%%%       hidden here likewise, their error reports kept (the crash of a
%%%       process that is not a GenServer, a supervisor giving up). A crash
%%%       is told by its first report: a crash report, or a supervisor's
%%%       `child_terminated' report, about a process whose crash was
%%%       reported in the last `CRASH_MS' is dropped. What a translator
%%%       skips is dropped, as Elixir's Logger does.</li>
%%% </ul>
%%%
%%% == Console ==
%%% Every event reaches the sidecar through the handler, so on the nodes
%%% it boots ({@link start/0}) the node's own console echo of the same
%%% events is quieted (else `logs' shows each crash twice): Elixir's
%%% Logger starts without its console backend (`backends' set to `[]'
%%% before the application loads, unless a `-config' file of the node sets
%%% it; a Mix project's `config :logger, backends: ...' is applied later
%%% by Mix and wins), and OTP's `default' handler, when it writes to
%%% standard_io or standard_error, gets level `none' once our handler is
%%% in place. What the program prints still goes to stdout. Attached nodes
%%% are left as they are.
%%%
%%% == Code reload ==
%%% Like `os_sup_helper': processes are spawned with `spawn(M, F, A)', the
%%% keeper recurses through `?MODULE:keeper_loop/1', waits hibernated and
%%% wakes on `erlang:start_timer/3' timers. The keeper also accepts events
%%% already rendered by a handler of the previous version.
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_logger).

%% API
-export([start/0, subscribe/1, stop/0, status/0]).
%% logger handler callback
-export([log/2, filter_config/1]).
%% Internal entry points: spawn targets and the reload-safe loop. Not an API.
-export([keeper_init/1, keeper_loop/1, install_run/2, render_run/4]).

-define(HANDLER, os_sup_mcp).
-define(KEEPER, os_sup_logger_keeper).
-define(MAX_BYTES, 4096).
-define(FORMAT, #{single_line => true, template => [msg], max_size => ?MAX_BYTES,
                  depth => 30, chars_limit => ?MAX_BYTES}).
%% an event bigger than this (heap words) is cut in the handler before it is sent
-define(MAX_WORDS, 16384).
%% elements kept per list, tuple or map of an event that is cut
-define(MAX_ITEMS, 64).
%% metadata the keeper uses
-define(META_KEYS, [pid, mfa, line, file, domain, report_cb, error_logger, logger_formatter,
                    time, os_sup_eval]).
%% bounds of the throw-away process that renders one event (anything but a plain string)
-define(RENDER_MS, 1000).
-define(RENDER_WORDS, 4000000).
%% a crash report or supervisor report this soon after a crash was reported repeats it
-define(CRASH_MS, 5000).
-define(MAX_CRASHED, 256).
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
-type language() :: erlang | {elixir, map()}.

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Starts the keeper (if needed), waits up to ?START_MS for the handler, then quiets the
%% node's console echo of logger events (see Console). Called at boot on the nodes the sidecar
%% starts; never raises.
-spec start() -> ok | {error, term()}.
start() ->
    try
        _ = (catch quiet_elixir_console()),
        case ensure_keeper() of
            {ok, Keeper} ->
                case request(Keeper, installed, ?START_MS) of
                    ok ->
                        _ = (catch quiet_default_handler()),
                        ok;
                    Error ->
                        Error
                end;
            Error ->
                Error
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

%% @doc Hands one event (cut when it is big) to the keeper; never fails, never blocks.
-spec log(logger:log_event(), logger:handler_config()) -> ok.
log(#{meta := #{os_sup_render := true}}, _Config) ->
    ok;
log(#{level := Level, msg := Msg, meta := Meta},
    #{config := #{keeper := Keeper, counters := Counters}}) ->
    try
        case counters:get(Counters, ?QUEUED) < ?MAX_QUEUED of
            true ->
                {Msg1, Meta1} = fit({Msg, maps:with(?META_KEYS, Meta)}),
                counters:add(Counters, ?QUEUED, 1),
                _ = erlang:send(Keeper, {os_sup_event, Level, Msg1, Meta1},
                                [noconnect, nosuspend]),
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
          installer => undefined, waiters => [], crashed => #{},
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

%% @doc Renderer: renders one event and exits with `{os_sup_rendered, Text | skip}' (an exit,
%% not an error: nothing is logged). Bounded in heap; the keeper bounds it in time.
-spec render_run(language(), logger:level(), term(), map()) -> no_return().
render_run(Lang, Level, Msg, Meta) ->
    _ = process_flag(max_heap_size, #{size => ?RENDER_WORDS, kill => true,
                                      error_logger => false}),
    _ = (catch logger:update_process_metadata(#{os_sup_render => true})),
    Result = try render(Lang, Level, Msg, Meta)
             catch _:_ -> erlang_text(Level, Msg, Meta)
             end,
    exit({os_sup_rendered, Result}).

%%%===================================================================
%%% Private: keeper
%%%===================================================================

guarded(Step, S) ->
    try keeper_handle(Step, upgraded(S))
    catch _:_ -> S
    end.

%% The state of a keeper started by the previous version of this module, completed.
upgraded(#{crashed := _} = S) -> S;
upgraded(S) -> S#{crashed => #{}}.

keeper_handle({os_sup_event, Level, Msg, Meta}, #{counters := C} = S) ->
    counters:sub(C, ?QUEUED, 1),
    case event(Level, Msg, Meta, S) of
        {keep, Event, S1} -> flush(enqueue(Event, S1));
        {drop, S1} -> S1
    end;
keeper_handle({os_sup_log, _} = Event, #{counters := C} = S) ->
    %% Rendered by a handler of the previous version of this module.
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
    flush(prune_crashed(S1#{overload_seen := Overload, lost := Lost + (Overload - Seen)})).

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
%%% Private: console
%%%===================================================================

%% Elixir's Logger (application `logger', which OTP does not have: its logger is in kernel)
%% starts without its console backend, unless the node's `-config' files say otherwise. Set
%% persistently before the application loads, so its `.app' defaults do not override it; a
%% later `Application.put_env' (Mix loading the project's config) or a `-logger backends'
%% argument still wins. Left alone once the application is loaded.
quiet_elixir_console() ->
    case code:where_is_file("logger.app") =/= non_existing
        andalso not lists:keymember(logger, 1, application:loaded_applications())
        andalso not configured(logger, backends) of
        true -> application:set_env(logger, backends, [], [{persistent, true}]);
        false -> ok
    end.

%% OTP's `default' handler writing to the node's stdout or stderr (what the sidecar reads):
%% level `none'. A handler writing to a file is the user's log, left alone.
quiet_default_handler() ->
    case logger:get_handler_config(default) of
        {ok, #{module := logger_std_h, level := Level, config := #{type := Type}}}
          when (Type =:= standard_io orelse Type =:= standard_error), Level =/= none ->
            logger:set_handler_config(default, level, none);
        _ ->
            ok
    end.

%% True when a `-config' file of the node (or one it includes) sets `App''s `Key'.
configured(App, Key) ->
    Files = case init:get_argument(config) of
                {ok, Args} -> lists:append(Args);
                error -> []
            end,
    lists:any(fun(File) -> configured(App, Key, File, 1) end, Files).

configured(App, Key, File, Depth) ->
    Path = case filename:extension(File) of
               ".config" -> File;
               _ -> File ++ ".config"
           end,
    case file:consult(Path) of
        {ok, [Terms]} when is_list(Terms) ->
            lists:any(fun({A, Env}) when A =:= App, is_list(Env) -> lists:keymember(Key, 1, Env);
                         (Included) when is_list(Included), Depth > 0 ->
                              io_lib:printable_unicode_list(Included)
                                  andalso configured(App, Key, Included, Depth - 1);
                         (_) -> false
                      end, Terms);
        _ ->
            false
    end.

%%%===================================================================
%%% Private: events
%%%===================================================================

%% What becomes of one event: kept as a rendered line, or dropped (hidden, or a repeat).
event(Level, Msg, Meta, S) ->
    Lang = language(),
    case shown(Lang, Level, Meta) andalso not repeat(Msg, Meta, S) of
        false ->
            {drop, S};
        true ->
            case rendered(Lang, Level, Msg, Meta) of
                skip ->
                    {drop, S};
                Text ->
                    Line = line([prefix(Lang, Meta), Text]),
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

%% The first report of a crash: its process is remembered for ?CRASH_MS.
crashed({report, #{label := Label}}, #{pid := Pid}, #{crashed := Crashed} = S)
  when is_pid(Pid) ->
    case first_report(Label) of
        true ->
            Crashed1 = case map_size(Crashed) >= ?MAX_CRASHED of
                           true -> #{};
                           false -> Crashed
                       end,
            S#{crashed := Crashed1#{Pid => now_ms() + ?CRASH_MS}};
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
        #{Pid := Until} -> now_ms() =< Until;
        _ -> false
    end.

prune_crashed(#{crashed := Crashed} = S) when map_size(Crashed) =:= 0 ->
    S;
prune_crashed(#{crashed := Crashed} = S) ->
    Now = now_ms(),
    S#{crashed := maps:filter(fun(_Pid, Until) -> Until >= Now end, Crashed)}.

%%%===================================================================
%%% Private: rendering
%%%===================================================================

%% Elixir when its Logger is loaded: its handler's translators, or the application's.
language() ->
    case catch logger:get_handler_config('Elixir.Logger') of
        {ok, #{config := #{translators := Ts} = C}} when is_list(Ts) ->
            {elixir, #{translators => Ts, sasl => maps:get(sasl, C, false) =:= true,
                       truncate => maps:get(truncate, C, ?MAX_BYTES)}};
        _ ->
            case application:get_env(logger, translators) of
                {ok, Ts} when is_list(Ts) ->
                    {elixir, #{translators => Ts,
                               sasl => application:get_env(logger, handle_sasl_reports,
                                                           false) =:= true,
                               truncate => application:get_env(logger, truncate,
                                                               ?MAX_BYTES)}};
                _ ->
                    erlang
            end
    end.

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

%%%===================================================================
%%% Private: cutting an event to size (in the handler)
%%%===================================================================

%% `Term' itself when it is small (?MAX_WORDS), else cut to about that size. Costs at most
%% about ?MAX_WORDS steps whatever the size of `Term'.
fit(Term) ->
    case words_left(Term, ?MAX_WORDS) of
        Left when Left >= 0 -> Term;
        _ -> element(1, cut_term(Term, ?MAX_WORDS))
    end.

%% Budget minus the heap words `Term' takes, stopping as soon as it is negative.
words_left(_Term, Budget) when Budget < 0 ->
    Budget;
words_left([H | T], Budget) ->
    words_left(T, words_left(H, Budget - 2));
words_left(T, Budget) when is_tuple(T) ->
    elements_left(T, tuple_size(T), Budget - 1 - tuple_size(T));
words_left(T, Budget) when is_map(T) ->
    pairs_left(maps:next(maps:iterator(T)), Budget - 3 - 2 * map_size(T));
words_left(T, Budget) when is_binary(T) ->
    Budget - binary_words(T);
words_left(T, Budget) when is_function(T) ->
    case erlang:fun_info(T, env) of
        {env, Env} -> words_left(Env, Budget - 6);
        _ -> Budget - 6
    end;
words_left(_Term, Budget) ->
    Budget - 3.

elements_left(_T, 0, Budget) ->
    Budget;
elements_left(_T, _I, Budget) when Budget < 0 ->
    Budget;
elements_left(T, I, Budget) ->
    elements_left(T, I - 1, words_left(element(I, T), Budget)).

pairs_left(none, Budget) ->
    Budget;
pairs_left(_Iter, Budget) when Budget < 0 ->
    Budget;
pairs_left({K, V, Iter}, Budget) ->
    pairs_left(maps:next(Iter), words_left(V, words_left(K, Budget))).

%% A binary over 64 bytes is shared, not copied.
binary_words(Bin) when byte_size(Bin) =< 64 -> 3 + byte_size(Bin) div 8;
binary_words(_Bin) -> 6.

%% `{Cut, BudgetLeft}': lists, tuples and maps keep their first ?MAX_ITEMS elements (then
%% '...'), each element gets a fair share of what is left; what does not fit becomes '...'.
cut_term(_Term, Budget) when Budget =< 0 ->
    {'...', Budget};
cut_term(T, Budget) when is_list(T) ->
    {Items, Tail} = take(T, ?MAX_ITEMS, []),
    {Cut, Left} = cut_items(Items, length(Items), Budget - 1, []),
    case Tail of
        [] ->
            {Cut, Left};
        [_ | _] ->
            {Cut ++ ['...'], Left};
        Improper ->
            {CutTail, Left1} = cut_term(Improper, Left),
            {lists:foldr(fun(E, Acc) -> [E | Acc] end, CutTail, Cut), Left1}
    end;
cut_term(T, Budget) when is_tuple(T) ->
    N = min(tuple_size(T), ?MAX_ITEMS),
    Items = [element(I, T) || I <- lists:seq(1, N)],
    {Cut, Left} = cut_items(Items, N, Budget - 1 - N, []),
    case tuple_size(T) > N of
        true -> {list_to_tuple(Cut ++ ['...']), Left};
        false -> {list_to_tuple(Cut), Left}
    end;
cut_term(T, Budget) when is_map(T) ->
    Pairs = take_pairs(maps:next(maps:iterator(T)), ?MAX_ITEMS, []),
    Flat = lists:append([[K, V] || {K, V} <- Pairs]),
    {Cut, Left} = cut_items(Flat, length(Flat), Budget - 3, []),
    Map = maps:from_list(pairs(Cut)),
    case map_size(T) > length(Pairs) of
        true -> {Map#{'...' => '...'}, Left};
        false -> {Map, Left}
    end;
cut_term(T, Budget) when is_function(T) ->
    case words_left(T, Budget) of
        Left when Left >= 0 -> {T, Left};
        _ -> {'...', Budget - 1}
    end;
cut_term(T, Budget) when is_binary(T) ->
    {T, Budget - binary_words(T)};
cut_term(T, Budget) ->
    {T, Budget - 3}.

cut_items([], _N, Budget, Acc) ->
    {lists:reverse(Acc), Budget};
cut_items([Item | Rest], N, Budget, Acc) ->
    Share = max(1, Budget div N),
    {Cut, Left} = cut_term(Item, Share),
    cut_items(Rest, N - 1, Budget - Share + Left, [Cut | Acc]).

take(Tail, 0, Acc) -> {lists:reverse(Acc), Tail};
take([H | T], N, Acc) -> take(T, N - 1, [H | Acc]);
take(Tail, _N, Acc) -> {lists:reverse(Acc), Tail}.

take_pairs(none, _N, Acc) -> lists:reverse(Acc);
take_pairs(_Iter, 0, Acc) -> lists:reverse(Acc);
take_pairs({K, V, Iter}, N, Acc) -> take_pairs(maps:next(Iter), N - 1, [{K, V} | Acc]).

pairs([K, V | Rest]) -> [{K, V} | pairs(Rest)];
pairs(_) -> [].
