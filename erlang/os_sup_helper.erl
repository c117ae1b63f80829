%%%-------------------------------------------------------------------
%%% @doc `os_sup_helper' is the small agent that `os_sup_mcp' injects into
%%% every BEAM node it starts (or loads into a node it attaches to). It
%%% runs as one registered process, `os_sup_helper', and answers requests
%%% sent over Erlang distribution by the sidecar's hidden node.
%%%
%%% It uses kernel and stdlib only, so plain Erlang nodes and releases work
%%% as well as Elixir ones; Elixir is used only when it is loaded.
%%%
%%% The module is split by concern:
%%%
%%% == Boot and life cycle ==
%%% <ul>
%%%   <li>{@link start/0}: apply the sidecar's environment (cookie, the
%%%       user's own `ERL_AFLAGS', readiness mode, control pipe) and start
%%%       the server. Idempotent, never crashes the boot.</li>
%%%   <li>{@link version/0}: protocol version, checked by the sidecar after
%%%       loading the module.</li>
%%% </ul>
%%%
%%% == Protocol ==
%%% The sidecar sends `{Ref, From, Request}' to the registered name and
%%% receives `{Ref, Reply}' (sent with `noconnect', so a vanished sidecar
%%% never blocks the helper). Malformed messages are dropped.
%%% <ul>
%%%   <li>`ping' -> `pong'</li>
%%%   <li>`version' -> `integer()'</li>
%%%   <li>`status' -> `{ok, #{node, os_pid, otp_release, erts_version,
%%%       elixir_version, uptime_ms, process_count, memory_total,
%%%       helper_version, ready, app, init_status}}'</li>
%%%   <li>`{eval, elixir | erlang | auto, Code :: binary(), Opts :: map()}'
%%%       -> `{ok, #{value, output, lang, truncated, duration_us}}' |
%%%       `{error, #{kind, message, stacktrace, output}}'</li>
%%%   <li>`{stop, TimeoutMs}' -> `ok', then `init:stop()' with a hard
%%%       `halt' after `TimeoutMs'.</li>
%%%   <li>`{introspect, Tool :: atom(), Args :: map(), TimeoutMs}' ->
%%%       `{ok, #{text, data}}' | `{error, #{kind, message}}': runs
%%%       `Module:run(Tool, Args#{caller => From})' in a worker under a
%%%       deadline (1..120000 ms, default 5000), where `Module' is
%%%       `os_sup_dev' (recompile), `os_sup_trace' (tracing) or
%%%       `os_sup_introspect' (everything else); kinds added here:
%%%       `timeout', `crashed', `unavailable' (module not loaded),
%%%       `too_large'.</li>
%%%   <li>`{subscribe_logs, Pid}' -> `ok | {error, Reason}': once the
%%%       handler is verified installed, logger events (those kept since
%%%       boot first) go to `Pid' (see `os_sup_logger').</li>
%%%   <li>`detach' -> `ok', then the server and the control watcher
%%%       (registered as `os_sup_helper_control') stop; the node keeps
%%%       running (the sidecar detaches from a node it attached to).</li>
%%%   <li>anything else -> `{error, {unknown_request, Bounded}}'</li>
%%% </ul>
%%%
%%% == Limits ==
%%% Everything is bounded: eval has a timeout (1..60000 ms), a heap limit
%%% and a cap on rendered value and captured output. Processes an eval
%%% spawns inherit its capture IO server as group leader: when the eval
%%% fails, is killed or times out, every process still led by that capture
%%% server is killed (a spawn bomb dies with its eval); when it succeeds,
%%% they are handed to `user' and keep running (a bounded number of sweeps
%%% over `erlang:processes()'). A spawn refused by the process limit
%%% (`system_limit') is an error reply, never a silent drop; status computations
%%% that may block (Mix, application controller) run with a deadline in a
%%% throw-away process; unknown requests are echoed back only when small.
%%%
%%% == Code reload ==
%%% Loading the module twice in a row (`code:load_binary/3') purges the
%%% old code and kills every process still running it. So every process is
%%% spawned with `spawn(?MODULE, F, A)' (never a fun), every loop recurses
%%% through `?MODULE:Loop(...)', and every waiting process waits in
%%% `erlang:hibernate(?MODULE, Loop, Args)': a hibernated process holds no
%%% reference to any module's code, so it survives back-to-back reloads (a
%%% `receive ... after 1000' loop does not: it sits in the old code for up
%%% to a second). Deadlines use `erlang:start_timer/3' for the same reason.
%%% Only an evaluator busy in user code during two reloads can be killed;
%%% its coordinator then replies `{error, #{kind => exit, ...}}'. The
%%% functions in the "internal entry points" export exist only for this.
%%%
%%% The helper never prints: evaluated code writes into a capture IO server,
%%% and nothing else does IO.
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_helper).

%% API
-export([start/0, version/0]).

%% Internal entry points: spawn targets and reload-safe loops. Not an API.
-export([init/1, loop/1,
         control_init/1, control_loop/1, halt_after/2, halt_wait/2,
         introspect_coordinator/5, introspect_wait/1, introspect_run/4,
         status_worker/3, mix_probe/1,
         stop_worker/1, subscribe_worker/3, ready_watch/2, app_watch/1,
         eval_coordinator/5, eval_wait/1, eval_run/5,
         capture_init/2, capture_loop/1]).

-define(SERVER, ?MODULE).
-define(VERSION, 2).
-define(CONTROL, os_sup_helper_control).
%% modules the sidecar ships next to this one (loaded explicitly: embedded mode has no autoload;
%% os_sup_render also bounds eval results)
-define(SIBLINGS, [os_sup_render, os_sup_introspect, os_sup_logger, os_sup_dev, os_sup_trace, os_sup_waits]).
-define(READY_KEY, {?MODULE, ready_mode}).

%% eval limits
-define(DEFAULT_TIMEOUT_MS, 5000).
-define(MAX_TIMEOUT_MS, 60000).
-define(DEFAULT_HEAP_WORDS, 32000000).
-define(DEFAULT_RESULT_BYTES, 65536).
-define(MIN_RESULT_BYTES, 16).
-define(MAX_RESULT_BYTES, 16777216).
%% other limits
-define(MAX_STOP_MS, 600000).
-define(CONTROL_HALT_MS, 1500).
-define(MIX_PROBE_MS, 1500).
-define(READY_WATCH_MS, 600000).
-define(READY_WATCH_POLL_MS, 10).
-define(APP_WATCH_MS, 500).
-define(MAX_ECHO_BYTES, 1024).
-define(MAX_DEPTH, 30).
%% sweeps over erlang:processes() for the processes an eval left behind
-define(SWEEP_ROUNDS, 10).
%% introspection limits
-define(INTROSPECT_DEFAULT_MS, 5000).
-define(INTROSPECT_MAX_MS, 120000).
-define(INTROSPECT_MAX_REPLY, 8388608).

-type ready_mode() :: boot | mix_app.
-type lang() :: elixir | erlang.
-type eval_opts() :: #{timeout_ms := pos_integer(),
                       max_heap_words := non_neg_integer(),
                       max_result_bytes := pos_integer()}.

%%%===================================================================
%%% Public API
%%%===================================================================

%% @doc Apply the sidecar's environment and start the server; idempotent, always `ok'.
-spec start() -> ok.
start() ->
    try
        case whereis(?SERVER) of
            Pid when is_pid(Pid) -> ok;
            undefined -> start_fresh()
        end
    catch
        _:_ -> ok
    end,
    ok.

%% @doc Protocol version of this helper; the sidecar checks it after loading.
-spec version() -> pos_integer().
version() ->
    ?VERSION.

%%%===================================================================
%%% Internal entry points (spawned or reloaded through ?MODULE)
%%%===================================================================

%% @doc Server process entry: registers nothing itself, enters the loop.
-spec init(map()) -> ok.
init(State) ->
    ?MODULE:loop(State).

%% @doc Server loop: answers `{Ref, From, Request}', drops anything else; hibernates when idle.
-spec loop(map()) -> ok.
loop(State) ->
    receive
        {Ref, From, Request} when is_pid(From) ->
            case catch handle(Ref, From, Request) of
                stop -> ok;
                _ -> ?MODULE:loop(State)
            end;
        _Other ->
            ?MODULE:loop(State)
    after 0 ->
            erlang:hibernate(?MODULE, loop, [State])
    end.

%% @doc Control pipe watcher: opens fd `Fd' and stops the node on EOF.
-spec control_init(non_neg_integer()) -> ok.
control_init(Fd) ->
    process_flag(trap_exit, true),
    try open_port({fd, Fd, Fd}, [in, out, binary, eof]) of
        Port -> ?MODULE:control_loop(Port)
    catch
        _:_ -> ok
    end.

%% @doc Control pipe loop: data from the sidecar is ignored; `{announce, Line}' writes a line
%% to it; EOF or port exit stops the node.
-spec control_loop(port()) -> ok.
control_loop(Port) ->
    receive
        {Port, {data, _}} ->
            ?MODULE:control_loop(Port);
        {announce, Line} when is_binary(Line) ->
            _ = (catch port_command(Port, Line)),
            ?MODULE:control_loop(Port);
        {Port, eof} ->
            control_lost();
        {'EXIT', Port, _} ->
            control_lost();
        _Other ->
            ?MODULE:control_loop(Port)
    after 0 ->
            erlang:hibernate(?MODULE, control_loop, [Port])
    end.

%% @doc Hard fallback: `erlang:halt(Status)' (no flush) after `Ms' milliseconds.
-spec halt_after(non_neg_integer(), non_neg_integer()) -> no_return().
halt_after(Ms, Status) ->
    TRef = erlang:start_timer(Ms, self(), halt),
    ?MODULE:halt_wait(TRef, Status).

%% @doc Waits (hibernated, so reload-safe) for the halt timer, then halts.
-spec halt_wait(reference(), non_neg_integer()) -> no_return().
halt_wait(TRef, Status) ->
    receive
        {timeout, TRef, halt} -> erlang:halt(Status, [{flush, false}]);
        _Other -> ?MODULE:halt_wait(TRef, Status)
    after 0 ->
            erlang:hibernate(?MODULE, halt_wait, [TRef, Status])
    end.

%% @doc Announces `ready' on the control socket once the node meets its readiness mode (booted;
%% or the Mix project's applications started), checked here every ?READY_WATCH_POLL_MS until
%% `Until', so the sidecar learns it at once without polling over distribution.
-spec ready_watch(ready_mode(), integer()) -> ok.
ready_watch(Mode, Until) ->
    case readiness(Mode) of
        {true, _} when Mode =:= mix_app ->
            case probe_mix_raw() of
                {ok, Apps, true} ->
                    Names = lists:join(",", [atom_to_binary(A, utf8) || A <- Apps]),
                    announce(iolist_to_binary(["ready ", Names, "\n"])),
                    ?MODULE:app_watch(Apps);
                _ ->
                    announce(<<"ready\n">>)
            end;
        {true, _} ->
            announce(<<"ready\n">>);
        _ ->
            case erlang:monotonic_time(millisecond) < Until of
                true ->
                    receive after ?READY_WATCH_POLL_MS -> ok end,
                    ?MODULE:ready_watch(Mode, Until);
                false ->
                    ok
            end
    end.

%% @doc After `ready': announces `app_exited APPS' once some of the Mix project's applications
%% are no longer started (the VM of `mix run --no-halt' outlives them), then stops watching.
%% A check that cannot answer in time proves nothing and is skipped.
-spec app_watch([atom()]) -> ok.
app_watch(Apps) ->
    receive after ?APP_WATCH_MS -> ok end,
    case catch application:which_applications(?APP_WATCH_MS) of
        Started when is_list(Started) ->
            case Apps -- [A || {A, _, _} <- Started] of
                [] ->
                    ?MODULE:app_watch(Apps);
                Gone ->
                    Names = lists:join(",", [atom_to_binary(A, utf8) || A <- Gone]),
                    announce(iolist_to_binary(["app_exited ", Names, "\n"]))
            end;
        _ ->
            ?MODULE:app_watch(Apps)
    end.

%% @doc Computes the `status' reply and sends it to `From'.
-spec status_worker(term(), pid(), ready_mode()) -> ok.
status_worker(Ref, From, Mode) ->
    reply(From, Ref, {ok, status(Mode)}).

%% @doc Reports the Mix project's app(s) and whether they are all started to `Parent'.
-spec mix_probe(pid()) -> ok.
mix_probe(Parent) ->
    Result =
        try
            Apps = mix_project_apps(),
            Started = [A || {A, _, _} <- application:which_applications(1000)],
            {ok, Apps, Apps =/= [] andalso lists:all(fun(A) -> lists:member(A, Started) end, Apps)}
        catch
            _:_ -> error
        end,
    Parent ! {mix_probe, self(), Result},
    ok.

%% @doc Sends the logger events kept since boot, then the new ones, to `Pid'; replies
%% `{Ref, ok}' once the handler is verified installed, else `{Ref, {error, Reason}}'.
-spec subscribe_worker(term(), pid(), pid()) -> ok.
subscribe_worker(Ref, From, Pid) ->
    Reply = case loaded(os_sup_logger) of
                true ->
                    try os_sup_logger:subscribe(Pid)
                    catch Class:Reason -> {error, {Class, Reason}}
                    end;
                false ->
                    {error, os_sup_logger_not_loaded}
            end,
    reply(From, Ref, bounded_echo(Reply)).

%% @doc Arms the hard halt, then stops the node gracefully.
-spec stop_worker(non_neg_integer()) -> ok.
stop_worker(TimeoutMs) ->
    _ = spawn(?MODULE, halt_after, [TimeoutMs, 0]),
    %% What init:stop/0 does for the user's code (each application's stop callbacks and
    %% supervisor shutdowns, newest first), without kernel's teardown, which spends a fixed
    %% second in user_sup:terminate/2 on OTP 25. halt/1 then flushes stdout/stderr.
    Apps = [A || {A, _, _} <- catch_apps(), A =/= kernel, A =/= stdlib],
    _ = [catch application:stop(A) || A <- Apps],
    erlang:halt(0).

catch_apps() ->
    case catch application:which_applications(5000) of
        L when is_list(L) -> L;
        _ -> []
    end.

%% @doc Runs one eval under a deadline and replies `{Ref, Reply}' to `From'.
-spec eval_coordinator(term(), pid(), elixir | erlang | auto, binary(), map()) -> ok.
eval_coordinator(Ref, From, Lang0, Code, Opts0) ->
    Opts = #{timeout_ms := Timeout, max_heap_words := Heap,
             max_result_bytes := Max} = eval_opts(Opts0),
    Lang = resolve_lang(Lang0),
    Before = erlang:system_info(process_count),
    case try_spawn(fun() -> spawn(?MODULE, capture_init, [self(), Max]) end) of
        {ok, Capture} ->
            SpawnOpts = [monitor | heap_opts(Heap)],
            Args = [self(), Capture, Lang, Code, Max],
            case try_spawn(fun() -> spawn_opt(?MODULE, eval_run, Args, SpawnOpts) end) of
                {ok, {Pid, MRef}} ->
                    TRef = erlang:start_timer(Timeout, self(), eval_timeout),
                    ?MODULE:eval_wait(#{ref => Ref, from => From, pid => Pid, mref => MRef,
                                        timer => TRef, capture => Capture, lang => Lang,
                                        opts => Opts, procs_before => Before});
                {error, Error} ->
                    exit(Capture, kill),
                    reply(From, Ref, Error)
            end;
        {error, Error} ->
            reply(From, Ref, Error)
    end.

%% @doc Coordinator wait: result, evaluator death or deadline; replies and cleans up.
-spec eval_wait(map()) -> ok.
eval_wait(#{ref := Ref, from := From, pid := Pid, mref := MRef, timer := TRef} = W) ->
    receive
        {eval_result, Pid, Result} ->
            erlang:demonitor(MRef, [flush]),
            _ = erlang:cancel_timer(TRef),
            eval_done(Ref, From, W, eval_finish(Result, W));
        {'DOWN', MRef, process, Pid, Reason} ->
            _ = erlang:cancel_timer(TRef),
            eval_done(Ref, From, W, eval_died(Reason, W));
        {timeout, TRef, eval_timeout} ->
            eval_done(Ref, From, W, eval_timeout(W))
    after 0 ->
            erlang:hibernate(?MODULE, eval_wait, [W])
    end.

%% @doc Evaluator process: evaluates `Code' with `Capture' as group leader and reports to `Coord'.
-spec eval_run(pid(), pid(), lang(), binary(), pos_integer()) -> ok.
eval_run(Coord, Capture, Lang, Code, Max) ->
    group_leader(Capture, self()),
    %% Marks what this eval logs, so the sidecar can tell it from the application's own events.
    _ = (catch logger:update_process_metadata(#{os_sup_eval => true})),
    T0 = erlang:monotonic_time(microsecond),
    Result =
        try eval(Lang, Code) of
            {ok, Value} ->
                Duration = erlang:monotonic_time(microsecond) - T0,
                {Rendered, Trunc} = bound(render_value(Lang, Value), Max),
                {ok, Rendered, Trunc, Duration};
            {error, Kind, Message} ->
                {error, Kind, bound_bin(Message, Max), <<>>}
        catch
            Class:Reason:Stack0 ->
                Stack = trim_stack(Stack0),
                {Kind, Message, Trace} = describe_exception(Lang, Class, Reason, Stack),
                {error, Kind, bound_bin(Message, Max), bound_bin(Trace, Max)}
        end,
    Coord ! {eval_result, self(), Result},
    ok.

%% @doc Runs one introspection tool in a worker under a deadline; replies `{Ref, Reply}' to `From'.
-spec introspect_coordinator(term(), pid(), atom(), map(), pos_integer()) -> ok.
introspect_coordinator(Ref, From, Tool, Args, Timeout) ->
    Module = tool_module(Tool),
    case loaded(Module) of
        false ->
            reply(From, Ref, {error, #{kind => unavailable,
                                       message => format("~ts is not loaded on this node (the "
                                                         "sidecar loads it with the helper)",
                                                         [Module])}});
        true ->
            %% `caller' lets stateful tools (tracing) watch the sidecar that asked.
            WorkerArgs = [self(), Module, Tool, Args#{caller => From}],
            {Pid, MRef} = spawn_opt(?MODULE, introspect_run, WorkerArgs,
                                    [monitor | heap_opts(?DEFAULT_HEAP_WORDS)]),
            TRef = erlang:start_timer(Timeout, self(), introspect_timeout),
            ?MODULE:introspect_wait(#{ref => Ref, from => From, tool => Tool, pid => Pid,
                                      mref => MRef, timer => TRef, timeout => Timeout})
    end.

%% @doc Introspection coordinator wait: result, worker death or deadline (hibernated).
-spec introspect_wait(map()) -> ok.
introspect_wait(#{ref := Ref, from := From, tool := Tool, pid := Pid, mref := MRef,
                  timer := TRef, timeout := Timeout} = W) ->
    receive
        {introspect_result, Pid, Result} ->
            erlang:demonitor(MRef, [flush]),
            _ = erlang:cancel_timer(TRef),
            reply(From, Ref, introspect_checked(Result));
        {'DOWN', MRef, process, Pid, Reason} ->
            _ = erlang:cancel_timer(TRef),
            Msg = case Reason of
                      killed -> format("introspection ~tp was killed (heap limit of ~b words "
                                       "or a code reload)", [Tool, ?DEFAULT_HEAP_WORDS]);
                      _ -> bound_bin(format("introspection ~tp crashed: ~tP",
                                            [Tool, Reason, ?MAX_DEPTH]), ?MAX_ECHO_BYTES)
                  end,
            reply(From, Ref, {error, #{kind => crashed, message => Msg}});
        {timeout, TRef, introspect_timeout} ->
            exit(Pid, kill),
            erlang:demonitor(MRef, [flush]),
            Msg = format("introspection ~tp timed out after ~b ms; the worker was killed "
                         "(raise the timeout or narrow the request)", [Tool, Timeout]),
            reply(From, Ref, {error, #{kind => timeout, message => Msg}})
    after 0 ->
            erlang:hibernate(?MODULE, introspect_wait, [W])
    end.

%% @doc Introspection worker: runs the tool and reports to `Coord'.
-spec introspect_run(pid(), module(), atom(), map()) -> ok.
introspect_run(Coord, Module, Tool, Args) ->
    Result = try Module:run(Tool, Args)
             catch Class:Reason ->
                     {error, #{kind => crashed,
                               message => bound_bin(format("~tp:~tP", [Class, Reason, ?MAX_DEPTH]),
                                                    ?MAX_ECHO_BYTES)}}
             end,
    Coord ! {introspect_result, self(), Result},
    ok.

%% @doc Capture IO server entry: collects at most `Max' bytes of output for `Owner'.
-spec capture_init(pid(), pos_integer()) -> ok.
capture_init(Owner, Max) ->
    MRef = erlang:monitor(process, Owner),
    ?MODULE:capture_loop(#{owner => Owner, mref => MRef, max => Max,
                           acc => [], kept => 0, total => 0}).

%% @doc Capture IO server loop (io protocol; input requests get `eof').
-spec capture_loop(map()) -> ok.
capture_loop(#{mref := MRef} = S) ->
    receive
        {io_request, From, ReplyAs, Req} when is_pid(From) ->
            {Reply, S1} = io_request(Req, S),
            From ! {io_reply, ReplyAs, Reply},
            ?MODULE:capture_loop(S1);
        {get_output, From, Tag} when is_pid(From) ->
            From ! {output, Tag, captured(S)},
            ?MODULE:capture_loop(S);
        {'DOWN', MRef, process, _, _} ->
            ok;
        _Other ->
            ?MODULE:capture_loop(S)
    after 0 ->
            erlang:hibernate(?MODULE, capture_loop, [S])
    end.

%%%===================================================================
%%% Private: boot
%%%===================================================================

start_fresh() ->
    Cookie = getenv("OS_SUP_COOKIE"),
    UserAflags = getenv("OS_SUP_USER_ERL_AFLAGS"),
    Ready = getenv("OS_SUP_READY"),
    ControlFd = getenv("OS_SUP_CONTROL_FD"),
    Injected = Cookie =/= false orelse ControlFd =/= false,
    %% 1. cookie
    case Cookie of
        false -> ok;
        C ->
            _ = (catch erlang:set_cookie(node(), list_to_atom(C))),
            unsetenv("OS_SUP_COOKIE")
    end,
    %% 2. restore the user's ERL_AFLAGS so BEAMs the child starts are clean
    case UserAflags of
        false when Injected -> unsetenv("ERL_AFLAGS");
        false -> ok;
        V ->
            _ = (catch os:putenv("ERL_AFLAGS", V)),
            unsetenv("OS_SUP_USER_ERL_AFLAGS")
    end,
    %% 3. readiness mode (kept in a persistent term so a restarted server keeps it)
    case Ready of
        false -> ok;
        R ->
            _ = (catch persistent_term:put(?READY_KEY, ready_mode(R))),
            unsetenv("OS_SUP_READY")
    end,
    %% 4. control pipe
    case ControlFd of
        false -> ok;
        FdStr ->
            unsetenv("OS_SUP_CONTROL_FD"),
            case catch list_to_integer(string:trim(FdStr)) of
                Fd when is_integer(Fd), Fd >= 0 ->
                    Ctl = spawn_detached(control_init, [Fd]),
                    _ = (catch register(?CONTROL, Ctl)),
                    ok;
                _ -> ok
            end
    end,
    %% 5. sibling modules (no autoload in embedded mode)
    _ = siblings_loaded(),
    _ = Injected andalso (catch os_sup_logger:start()), % a node we boot: keep its log events
    %% 6. server
    Mode = persistent_term:get(?READY_KEY, boot),
    Pid = spawn_detached(init, [#{ready_mode => Mode}]),
    try register(?SERVER, Pid) of
        true -> announce_up()
    catch
        error:badarg -> exit(Pid, kill), ok
    end.

%% Tells the sidecar, over the control socket, that the helper answers and under which node
%% name: it connects only then (never polling a node that would reject the handshake) and
%% knows at once when the command started a node under another name, or none.
announce_up() ->
    announce(iolist_to_binary(["up ", atom_to_binary(node(), utf8), "\n"])),
    Mode = persistent_term:get(?READY_KEY, boot),
    Until = erlang:monotonic_time(millisecond) + ?READY_WATCH_MS,
    _ = spawn(?MODULE, ready_watch, [Mode, Until]),
    ok.

announce(Line) ->
    case whereis(?CONTROL) of
        Ctl when is_pid(Ctl) -> Ctl ! {announce, Line}, ok;
        undefined -> ok
    end.

%% Spawn without a link, with the node's `user' as group leader (an attach
%% over rpc would otherwise leave a remote caller as group leader).
spawn_detached(F, A) ->
    Pid = spawn(?MODULE, F, A),
    case whereis(user) of
        User when is_pid(User) -> _ = (catch group_leader(User, Pid));
        _ -> ok
    end,
    Pid.

ready_mode("mix_app") -> mix_app;
ready_mode(_) -> boot.

getenv(Name) ->
    case catch os:getenv(Name) of
        V when is_list(V) -> V;
        _ -> false
    end.

unsetenv(Name) ->
    _ = (catch os:unsetenv(Name)),
    ok.

control_lost() ->
    _ = spawn(?MODULE, halt_after, [?CONTROL_HALT_MS, 1]),
    _ = (catch init:stop()),
    ok.

%%%===================================================================
%%% Private: requests
%%%===================================================================

handle(Ref, From, ping) ->
    reply(From, Ref, pong);
handle(Ref, From, version) ->
    reply(From, Ref, ?VERSION);
handle(Ref, From, status) ->
    Mode = persistent_term:get(?READY_KEY, boot),
    case try_spawn(fun() -> spawn(?MODULE, status_worker, [Ref, From, Mode]) end) of
        {ok, _} -> ok;
        {error, _} ->
            reply(From, Ref, {error, #{kind => system_limit,
                                       message => <<"the node is at its process limit "
                                                    "(system_limit)">>}})
    end;
handle(Ref, From, {eval, Lang, Code, Opts})
  when (Lang =:= elixir orelse Lang =:= erlang orelse Lang =:= auto),
       is_binary(Code), is_map(Opts) ->
    case try_spawn(fun() -> spawn(?MODULE, eval_coordinator, [Ref, From, Lang, Code, Opts]) end) of
        {ok, _} -> ok;
        {error, Error} -> reply(From, Ref, Error)
    end;
handle(Ref, From, {stop, TimeoutMs}) when is_integer(TimeoutMs), TimeoutMs >= 0 ->
    reply(From, Ref, ok),
    _ = spawn(?MODULE, stop_worker, [min(TimeoutMs, ?MAX_STOP_MS)]),
    ok;
handle(Ref, From, {introspect, Tool, Args, TimeoutMs}) when is_atom(Tool), is_map(Args) ->
    Timeout = case TimeoutMs of
                  T when is_integer(T) -> clamp(T, 1, ?INTROSPECT_MAX_MS);
                  _ -> ?INTROSPECT_DEFAULT_MS
              end,
    _ = spawn(?MODULE, introspect_coordinator, [Ref, From, Tool, Args, Timeout]),
    ok;
handle(Ref, From, {subscribe_logs, Pid}) when is_pid(Pid) ->
    %% Loading the module and calling the logger server may wait during boot: not in the loop.
    _ = spawn(?MODULE, subscribe_worker, [Ref, From, Pid]),
    ok;
handle(Ref, From, detach) ->
    _ = (catch os_sup_logger:stop()),
    reply(From, Ref, ok),
    case whereis(?CONTROL) of
        Ctl when is_pid(Ctl) -> exit(Ctl, kill);
        _ -> ok
    end,
    _ = (catch unregister(?SERVER)),
    stop;
handle(Ref, From, Request) ->
    reply(From, Ref, {error, {unknown_request, bounded_echo(Request)}}).

%% Which module runs a tool of the `introspect' request.
tool_module(recompile) -> os_sup_dev;
tool_module(Tool) when Tool =:= trace; Tool =:= trace_messages; Tool =:= trace_results;
                       Tool =:= trace_stop; Tool =:= traces; Tool =:= system_monitor ->
    os_sup_trace;
tool_module(_) -> os_sup_introspect.

%% True when `Module' is loaded (loading it from the code path if needed).
loaded(Module) ->
    case code:is_loaded(Module) of
        {file, _} -> true;
        false -> element(1, catch code:load_file(Module)) =:= module
    end.

%% Loads every sibling module it can (embedded releases do not load on demand).
siblings_loaded() ->
    lists:foldl(fun(M, All) -> loaded(M) andalso All end, true, ?SIBLINGS).

%% Never crash on an oversized reply: the sidecar's connection would block on it.
introspect_checked(Result) ->
    case erlang:external_size(Result) =< ?INTROSPECT_MAX_REPLY of
        true -> Result;
        false -> {error, #{kind => too_large,
                           message => format("the reply exceeded ~b bytes; narrow the request "
                                             "(limit, depth, max_children)",
                                             [?INTROSPECT_MAX_REPLY])}}
    end.

%% Never block on a sidecar that went away: do not auto-connect.
reply(From, Ref, Reply) ->
    _ = (catch erlang:send(From, {Ref, Reply}, [noconnect])),
    ok.

bounded_echo(Term) ->
    case erlang:external_size(Term) =< ?MAX_ECHO_BYTES of
        true -> Term;
        false -> bound_bin(format("~tP", [Term, 8]), ?MAX_ECHO_BYTES div 4)
    end.

%%%===================================================================
%%% Private: status
%%%===================================================================

status(Mode) ->
    {Ready, App} = readiness(Mode),
    #{node => node(),
      os_pid => safe(fun() -> list_to_binary(os:getpid()) end, <<>>),
      otp_release => safe(fun() -> list_to_binary(erlang:system_info(otp_release)) end, <<>>),
      erts_version => safe(fun() -> list_to_binary(erlang:system_info(version)) end, <<>>),
      elixir_version => elixir_version(),
      uptime_ms => safe(fun() -> element(1, erlang:statistics(wall_clock)) end, 0),
      process_count => erlang:system_info(process_count),
      memory_total => safe(fun() -> erlang:memory(total) end, 0),
      helper_version => ?VERSION,
      ready => Ready,
      app => App,
      init_status => init_status()}.

init_status() ->
    safe(fun() -> element(1, init:get_status()) end, undefined).

elixir_version() ->
    case code:is_loaded('Elixir.System') of
        {file, _} ->
            safe(fun() -> iolist_to_binary('Elixir.System':version()) end, undefined);
        false ->
            undefined
    end.

readiness(boot) ->
    {init_status() =:= started, undefined};
readiness(mix_app) ->
    case code:is_loaded('Elixir.Mix.Project') of
        {file, _} -> probe_mix();
        false -> {false, undefined}
    end.

%% Mix calls go through agents and the application controller may be busy
%% during boot: ask in a throw-away process with a deadline.
probe_mix() ->
    case probe_mix_raw() of
        {ok, [App], Ready} -> {Ready, App};
        {ok, _, Ready} -> {Ready, undefined};
        error -> {false, undefined}
    end.

%% `{ok, ProjectApps, AllStarted} | error' (also on a timeout).
probe_mix_raw() ->
    case try_spawn(fun() -> spawn_monitor(?MODULE, mix_probe, [self()]) end) of
        {ok, {Pid, MRef}} -> probe_mix_wait(Pid, MRef);
        {error, _} -> error
    end.

probe_mix_wait(Pid, MRef) ->
    receive
        {mix_probe, Pid, Result} ->
            erlang:demonitor(MRef, [flush]),
            Result;
        {'DOWN', MRef, process, Pid, _} ->
            error
    after ?MIX_PROBE_MS ->
            exit(Pid, kill),
            erlang:demonitor(MRef, [flush]),
            error
    end.

%% The project's app, or the apps of an umbrella; [] when not known yet.
mix_project_apps() ->
    Config = 'Elixir.Mix.Project':config(),
    case proplists:get_value(app, Config) of
        App when is_atom(App), App =/= nil, App =/= undefined ->
            [App];
        _ ->
            case 'Elixir.Mix.Project':apps_paths() of
                Paths when is_map(Paths) -> lists:sort(maps:keys(Paths));
                _ -> []
            end
    end.

%%%===================================================================
%%% Private: eval
%%%===================================================================

-spec eval_opts(map()) -> eval_opts().
eval_opts(Opts) ->
    #{timeout_ms => clamp(opt(timeout_ms, Opts, ?DEFAULT_TIMEOUT_MS), 1, ?MAX_TIMEOUT_MS),
      max_heap_words => max(0, opt(max_heap_words, Opts, ?DEFAULT_HEAP_WORDS)),
      max_result_bytes => clamp(opt(max_result_bytes, Opts, ?DEFAULT_RESULT_BYTES),
                                ?MIN_RESULT_BYTES, ?MAX_RESULT_BYTES)}.

opt(Key, Opts, Default) ->
    case maps:get(Key, Opts, Default) of
        V when is_integer(V) -> V;
        _ -> Default
    end.

clamp(V, Lo, Hi) -> max(Lo, min(Hi, V)).

heap_opts(0) -> [];
heap_opts(Words) ->
    [{max_heap_size, #{size => Words, kill => true, error_logger => false}}].

resolve_lang(auto) ->
    case code:ensure_loaded('Elixir.Code') of
        {module, _} -> elixir;
        _ -> erlang
    end;
resolve_lang(Lang) ->
    Lang.

eval_finish({ok, Value, Trunc, Duration}, #{opts := #{max_result_bytes := Max}} = W) ->
    {Output, OutTrunc} = collect_output(W, Max),
    {ok, #{value => Value, output => Output, lang => maps:get(lang, W),
           truncated => Trunc orelse OutTrunc, duration_us => Duration}};
eval_finish({error, Kind, Message, Trace}, #{opts := #{max_result_bytes := Max}} = W) ->
    {Output, _} = collect_output(W, Max),
    eval_error(Kind, Message, Trace, Output).

eval_died(killed, #{opts := #{max_heap_words := Heap, max_result_bytes := Max}} = W) ->
    {Output, _} = collect_output(W, Max),
    Msg = case Heap of
              0 -> <<"the evaluating process was killed">>;
              _ -> format("the evaluating process was killed; most likely it exceeded the "
                          "heap limit of ~b words (~b MB): raise max_heap_words or return "
                          "less data (otherwise another process or a code purge killed it)",
                          [Heap, Heap * erlang:system_info(wordsize) div 1048576])
          end,
    eval_error(killed, Msg, <<>>, Output);
eval_died(Reason, #{opts := #{max_result_bytes := Max}} = W) ->
    {Output, _} = collect_output(W, Max),
    Msg = bound_bin(format("the evaluating process exited: ~tP", [Reason, ?MAX_DEPTH]), Max),
    eval_error(exit, Msg, <<>>, Output).

eval_timeout(#{pid := Pid, mref := MRef, opts := #{timeout_ms := T, max_result_bytes := Max}} = W) ->
    exit(Pid, kill),
    erlang:demonitor(MRef, [flush]),
    {Output, _} = collect_output(W, Max),
    Msg = format("eval timed out after ~b ms; the evaluating process was killed", [T]),
    eval_error(timeout, Msg, <<>>, Output).

%% Processes the eval spawned (led by its capture server) die with a failed eval and are
%% handed to `user' after a successful one; then the capture server goes.
eval_done(Ref, From, #{capture := Capture, pid := Pid, procs_before := Before}, Reply0) ->
    Reply = case Reply0 of
                {ok, _} ->
                    %% Only an eval that left processes behind needs the sweep: it costs a
                    %% pass over every process, which most evals would pay for nothing.
                    %% (Not counted: the capture server, and the evaluator if still exiting.)
                    Evaluator = case is_process_alive(Pid) of true -> 1; false -> 0 end,
                    case erlang:system_info(process_count) - Evaluator > Before + 1 of
                        true -> _ = sweep(Capture, Pid, repoint);
                        false -> ok
                    end,
                    Reply0;
                {error, #{message := Msg} = E} ->
                    case sweep(Capture, Pid, kill) of
                        0 -> Reply0;
                        N -> {error, E#{message := <<Msg/binary, (format(
                                 " (~b process(es) spawned by the eval were killed)",
                                 [N]))/binary>>}}
                    end;
                _ ->
                    _ = sweep(Capture, Pid, kill),
                    Reply0
            end,
    exit(Capture, kill),
    reply(From, Ref, Reply).

%% Kills (or re-points to `user') every process whose group leader is `Capture', in at most
%% ?SWEEP_ROUNDS passes (a process may spawn again before a kill reaches it); returns how many
%% distinct processes other than the evaluator `Eval' were handled.
sweep(Capture, Eval, Action) ->
    User = case whereis(user) of
               U when is_pid(U) -> U;
               _ -> undefined
           end,
    sweep(Capture, Eval, Action, User, ?SWEEP_ROUNDS, #{}).

sweep(_Capture, Eval, _Action, _User, 0, Seen) ->
    map_size(maps:remove(Eval, Seen));
sweep(Capture, Eval, Action, User, Rounds, Seen) ->
    Self = self(),
    Found = [P || P <- erlang:processes(), P =/= Self, P =/= Capture,
                  led_by(P, Capture)],
    New = [P || P <- Found, not maps:is_key(P, Seen)],
    lists:foreach(fun(P) -> sweep_one(Action, P, User) end, Found),
    Seen1 = lists:foldl(fun(P, Acc) -> Acc#{P => true} end, Seen, New),
    case {Found, New} of
        {[], _} -> map_size(maps:remove(Eval, Seen1));
        {_, []} when Action =:= repoint -> map_size(maps:remove(Eval, Seen1));
        {_, []} -> erlang:yield(), sweep(Capture, Eval, Action, User, Rounds - 1, Seen1);
        _ -> sweep(Capture, Eval, Action, User, Rounds - 1, Seen1)
    end.

led_by(P, Capture) ->
    case erlang:process_info(P, group_leader) of
        {group_leader, Capture} -> true;
        _ -> false
    end.

sweep_one(kill, P, _User) ->
    exit(P, kill);
sweep_one(repoint, P, User) when is_pid(User) ->
    _ = (catch group_leader(User, P)),
    ok;
sweep_one(repoint, P, _NoUser) ->
    %% no `user' to hand them to: leave them led by a dead capture server (IO fails)
    _ = P,
    ok.

%% A spawn refused by the process limit (or anything else) becomes an eval error reply.
try_spawn(Spawn) ->
    try Spawn() of
        Result -> {ok, Result}
    catch
        error:system_limit ->
            {error, eval_error(system_limit,
                               <<"the node is at its process limit (system_limit): the eval "
                                 "could not be started; free processes or raise +P">>,
                               <<>>, <<>>)};
        Class:Reason ->
            {error, eval_error(Class, bound_bin(format("could not start the eval: ~tP",
                                                      [Reason, ?MAX_DEPTH]), ?MAX_ECHO_BYTES),
                               <<>>, <<>>)}
    end.

eval_error(Kind, Message, Trace, Output) ->
    {error, #{kind => Kind, message => Message, stacktrace => Trace, output => Output}}.

collect_output(#{capture := Capture}, Max) ->
    Tag = make_ref(),
    MRef = erlang:monitor(process, Capture),
    Capture ! {get_output, self(), Tag},
    receive
        {output, Tag, {Bin, Total}} ->
            erlang:demonitor(MRef, [flush]),
            case Total > Max of
                true -> {mark(os_sup_render:utf8_trim(Bin), Total), true};
                false -> {Bin, false}
            end;
        {'DOWN', MRef, process, Capture, _} ->
            {<<>>, false}
    after 1000 ->
            erlang:demonitor(MRef, [flush]),
            {<<>>, false}
    end.

eval(elixir, Code) ->
    case code:ensure_loaded('Elixir.Code') of
        {module, _} -> eval_elixir(Code);
        _ -> {error, error, <<"Elixir is not available on this node; use lang erlang">>}
    end;
eval(erlang, Code) ->
    eval_erlang(Code).

eval_elixir(Code) ->
    {Value, _Binding} = 'Elixir.Code':eval_string(Code, [], [{file, <<"eval">>}]),
    {ok, Value}.

eval_erlang(Code) ->
    case unicode:characters_to_list(Code) of
        Chars when is_list(Chars) ->
            case erl_scan:string(Chars, {1, 1}) of
                {ok, Tokens, EndLoc} ->
                    eval_exprs(split_dots(Tokens, EndLoc), erl_eval:new_bindings(), undefined);
                {error, {Loc, Mod, Desc}, _} ->
                    {error, syntax, error_info(Loc, Mod, Desc)}
            end;
        _ ->
            {error, syntax, <<"eval: the code is not valid UTF-8">>}
    end.

%% Several dot-terminated expression sequences run in order, like the shell.
eval_exprs([], _Bindings, Value) ->
    {ok, Value};
eval_exprs([Tokens | Rest], Bindings, _) ->
    case erl_parse:parse_exprs(Tokens) of
        {ok, Exprs} ->
            {value, Value, Bindings1} = erl_eval:exprs(Exprs, Bindings),
            eval_exprs(Rest, Bindings1, Value);
        {error, {Loc, Mod, Desc}} ->
            {error, syntax, error_info(Loc, Mod, Desc)}
    end.

split_dots(Tokens, EndLoc) ->
    split_dots(Tokens, EndLoc, [], []).

split_dots([], _EndLoc, [], Acc) ->
    lists:reverse(Acc);
split_dots([], EndLoc, Cur, Acc) ->
    lists:reverse([lists:reverse([{dot, EndLoc} | Cur]) | Acc]);
split_dots([{dot, _} = Dot | Rest], EndLoc, Cur, Acc) ->
    split_dots(Rest, EndLoc, [], [lists:reverse([Dot | Cur]) | Acc]);
split_dots([T | Rest], EndLoc, Cur, Acc) ->
    split_dots(Rest, EndLoc, [T | Cur], Acc).

error_info(Loc, Mod, Desc) ->
    Where = case Loc of
                {L, C} -> format("eval:~b:~b: ", [L, C]);
                L when is_integer(L) -> format("eval:~b: ", [L]);
                _ -> <<"eval: ">>
            end,
    What = safe(fun() -> format("~ts", [Mod:format_error(Desc)]) end,
                format("~tP", [Desc, ?MAX_DEPTH])),
    <<Where/binary, What/binary>>.

render_value(elixir, Value) ->
    safe(fun() ->
                 'Elixir.Kernel':inspect(Value, [{pretty, true}, {limit, 100},
                                                 {printable_limit, 4096}, {width, 98}])
         end,
         format("~tP", [Value, 60]));
render_value(erlang, Value) ->
    format("~tP", [Value, 60]).

%% Drop the evaluator's own frames (the oldest ones), like the shell does.
trim_stack(Stack) when is_list(Stack) ->
    lists:reverse(lists:dropwhile(fun internal_frame/1, lists:reverse(Stack)));
trim_stack(Stack) ->
    Stack.

internal_frame({M, _, _, _}) ->
    lists:member(M, [?MODULE, erl_eval, elixir, 'Elixir.Code', 'Elixir.Module.ParallelChecker']);
internal_frame(_) ->
    false.

%% -> {Kind, Message, Stacktrace}
describe_exception(elixir, Class, Reason, Stack) ->
    Kind = exception_kind(Class, Reason),
    Message = safe(fun() -> elixir_message(Class, Reason, Stack) end,
                   format("~tP", [Reason, ?MAX_DEPTH])),
    Trace = case Stack of
                [] -> <<>>;
                _ -> safe(fun() -> iolist_to_binary('Elixir.Exception':format_stacktrace(Stack)) end,
                          format("~tP", [Stack, ?MAX_DEPTH]))
            end,
    {Kind, Message, Trace};
describe_exception(erlang, Class, Reason, Stack) ->
    Message = safe(fun() ->
                           Trim = fun(_, _, _) -> true end,
                           unicode:characters_to_binary(
                             erl_error:format_exception(Class, Reason, Stack,
                                                        #{stack_trim_fun => Trim}))
                   end,
                   format("~tP", [Reason, ?MAX_DEPTH])),
    Trace = case Stack of
                [] -> <<>>;
                _ -> format("~tP", [Stack, ?MAX_DEPTH])
            end,
    {Class, Message, Trace}.

exception_kind(error, #{'__struct__' := S}) when S =:= 'Elixir.SyntaxError';
                                                 S =:= 'Elixir.TokenMissingError';
                                                 S =:= 'Elixir.MismatchedDelimiterError' ->
    syntax;
exception_kind(error, #{'__struct__' := 'Elixir.CompileError'}) ->
    compile;
exception_kind(Class, _) ->
    Class.

elixir_message(error, Reason, Stack) ->
    Exception = 'Elixir.Exception':normalize(error, Reason, Stack),
    iolist_to_binary('Elixir.Exception':message(Exception));
elixir_message(Class, Reason, Stack) ->
    iolist_to_binary('Elixir.Exception':format_banner(Class, Reason, Stack)).

%%%===================================================================
%%% Private: capture IO server
%%%===================================================================

io_request({put_chars, Enc, Chars}, S) ->
    put_chars(fun() -> to_utf8(Enc, Chars) end, S);
io_request({put_chars, Enc, M, F, A}, S) ->
    put_chars(fun() -> to_utf8(Enc, apply(M, F, A)) end, S);
io_request({put_chars, Chars}, S) ->
    put_chars(fun() -> to_utf8(latin1, Chars) end, S);
io_request({put_chars, M, F, A}, S) ->
    put_chars(fun() -> to_utf8(latin1, apply(M, F, A)) end, S);
io_request({requests, Reqs}, S) when is_list(Reqs) ->
    io_requests(Reqs, {ok, S});
io_request({get_chars, _, _}, S) -> {eof, S};
io_request({get_chars, _, _, _}, S) -> {eof, S};
io_request({get_line, _}, S) -> {eof, S};
io_request({get_line, _, _}, S) -> {eof, S};
io_request({get_until, _, _, _}, S) -> {eof, S};
io_request({get_until, _, _, _, _, _}, S) -> {eof, S};
io_request(getopts, S) -> {[{binary, true}, {encoding, unicode}], S};
io_request(_, S) -> {{error, enotsup}, S}.

io_requests([], {Reply, S}) ->
    {Reply, S};
io_requests([Req | Rest], {ok, S}) ->
    io_requests(Rest, io_request(Req, S));
io_requests(_, {Reply, S}) ->
    {Reply, S}.

put_chars(Convert, #{max := Max, acc := Acc, kept := Kept, total := Total} = S) ->
    try Convert() of
        Bin when is_binary(Bin) ->
            Size = byte_size(Bin),
            Keep = min(Size, max(0, Max - Kept)),
            Acc1 = case Keep of
                       0 -> Acc;
                       _ -> [binary:part(Bin, 0, Keep) | Acc]
                   end,
            {ok, S#{acc := Acc1, kept := Kept + Keep, total := Total + Size}}
    catch
        _:_ -> {{error, {error, put_chars}}, S}
    end.

to_utf8(Enc, Chars) when Enc =:= unicode; Enc =:= utf8 ->
    checked(unicode:characters_to_binary(Chars));
to_utf8(_, Chars) ->
    checked(unicode:characters_to_binary(Chars, latin1, utf8)).

checked(Bin) when is_binary(Bin) -> Bin.

captured(#{acc := Acc, total := Total}) ->
    {iolist_to_binary(lists:reverse(Acc)), Total}.

%%%===================================================================
%%% Private: bounds and formatting
%%%===================================================================

%% Cut `Bin' to at most `Max' bytes (on a UTF-8 boundary) and mark the cut.
bound(Bin, Max) when byte_size(Bin) =< Max ->
    {Bin, false};
bound(Bin, Max) ->
    {mark(os_sup_render:utf8_trim(binary:part(Bin, 0, Max)), byte_size(Bin)), true}.

bound_bin(Bin, Max) ->
    element(1, bound(Bin, Max)).

mark(Bin, Total) ->
    Marker = format("... (truncated: ~b bytes total)", [Total]),
    <<Bin/binary, Marker/binary>>.


format(Fmt, Args) ->
    case unicode:characters_to_binary(io_lib:format(Fmt, Args)) of
        Bin when is_binary(Bin) -> Bin;
        _ -> list_to_binary(io_lib:format("~p", [Args]))
    end.

safe(Fun, Default) ->
    try Fun() of
        Value -> Value
    catch
        _:_ -> Default
    end.
