%%% @doc `os_sup_helper' is the small agent that `os_sup_mcp' injects into
%%% every BEAM node it starts (or loads into a node it attaches to). It
%%% runs as one registered process, `os_sup_helper', and answers requests
%%% sent over Erlang distribution by the server's hidden node.
%%%
%%% It uses kernel and stdlib only, so plain Erlang nodes and releases work
%%% as well as Elixir ones; Elixir is used only when it is loaded.
%%%
%%% The helper is split one concern per module, named by group
%%% (`os_sup_<group>_<part>'); this one only boots, serves the protocol and
%%% dispatches a tool by the table of `os_sup_helper_tools'. The others are
%%% loaded explicitly (`SIBLINGS': embedded mode has no autoload),
%%% by absolute path from this module's directory (a Mix project may prune
%%% the code path): those the server needs at boot, the others once the node
%%% is ready. The server ships them compiled by several OTP releases and
%%% `os_sup_boot' loads the set made for the node's; a module the node
%%% refuses anyway is said at `ready' and by every tool (`refused/0').
%%%
%%% == Boot and life cycle ==
%%% <ul>
%%%   <li>{@link start/0}: apply the server's environment (cookie, the
%%%       user's own `ERL_AFLAGS', readiness mode, control pipe) and start
%%%       the server. Idempotent, never crashes the boot.</li>
%%%   <li>{@link version/0}: protocol version, checked by the server after
%%%       loading the module.</li>
%%% </ul>
%%%
%%% == Protocol ==
%%% The server sends `{Ref, From, Request}' to the registered name and
%%% receives `{Ref, Reply}' (sent with `noconnect', so a vanished server
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
%%%   <li>`{tool, Tool :: atom(), Args :: map(), TimeoutMs}' ->
%%%       `{ok, #{text, data}}' | `{error, #{kind, message}}': runs
%%%       `Module:Function(Args#{caller => From})', `{Module, Function}'
%%%       the tool's entry in `os_sup_helper_tools:table/0',
%%%       in a worker under one guard: a deadline (1..120000 ms, default
%%%       5000), a heap limit, a reply cap, and `os_sup_lib_reply:guarded/2'
%%%       (a `fail/3' becomes its error reply, a crash an `internal' one);
%%%       kinds added here: `unknown_tool', `timeout', `crashed',
%%%       `unavailable' (module not loaded), `too_large'.</li>
%%%   <li>`{subscribe_logs, Pid}' -> `ok | {error, Reason}': once the
%%%       handler is verified installed, logger events (those kept since
%%%       boot first) go to `Pid' (see `os_sup_log_handler').</li>
%%%   <li>`detach' -> `ok', then the server and the control watcher
%%%       (registered as `os_sup_helper_control') stop; the node keeps
%%%       running (the server detaches from a node it attached to).</li>
%%%   <li>anything else -> `{error, {unknown_request, Bounded}}'</li>
%%% </ul>
%%%
%%% == Limits ==
%%% Everything is bounded: eval (see `os_sup_eval') has a timeout, a heap
%%% limit and caps on value and output; a tool's worker has a
%%% deadline, a heap limit and a reply cap; a spawn refused by the process
%%% limit (`system_limit') is an error reply, never a silent drop; status
%%% computations that may block run with a deadline in a throw-away process
%%% (`os_sup_helper_status'); unknown requests are echoed back only when small.
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
-module(os_sup_helper).

-import(os_sup_lib_args, [clamp/3]).
-import(os_sup_lib_reply, [reply/3]).
-import(os_sup_lib_text, [cut_bin/2, fmt/2]).

%% API
-export([start/0, version/0, announce/1, untraced/0, readiness_mode/0, refused/0]).

%% Internal entry points: spawn targets and reload-safe loops. Not an API.
-export([init/1, loop/1,
         control_init/1, control_loop/1, halt_after/2, halt_wait/2,
         tool_coordinator/5, tool_wait/1, tool_run/4,
         stop_worker/1, subscribe_worker/3,
         boot_server/0, load_rest/0]).

-define(SERVER, ?MODULE).
%% Runs E for its effect: whatever it raises is dropped (the helper never crashes its node).
-define(IGNORE(E), try E catch _:_ -> ok end).
-define(VERSION, 3).
-define(CONTROL, os_sup_helper_control).
%% Modules the server ships next to this one. Those the server needs to come up and to answer
%% status and eval are loaded when it starts; the others once the node is ready, off the
%% boot's path (the code server loads the application's modules meanwhile), or at the first
%% tool call if that comes sooner.
-define(BOOT_SIBLINGS, [os_sup_helper_status, os_sup_helper_ready, os_sup_helper_own,
                        os_sup_helper_tools, os_sup_code_loads,
                        os_sup_eval, os_sup_lib_reply, os_sup_lib_args, os_sup_lib_proc,
                        os_sup_lib_label, os_sup_lib_call, os_sup_lib_render, os_sup_lib_text,
                        os_sup_lib_time, os_sup_lib_rank]).
-define(SIBLINGS, [os_sup_helper_status, os_sup_helper_ready, os_sup_helper_own, os_sup_eval,
                   os_sup_helper_tools,
                   os_sup_lib_reply, os_sup_lib_args, os_sup_lib_proc, os_sup_lib_label,
                   os_sup_lib_call, os_sup_lib_render, os_sup_lib_text, os_sup_lib_time,
                   os_sup_lib_rank,
                   os_sup_proc_top, os_sup_proc_info, os_sup_proc_mailbox, os_sup_proc_origin,
                   os_sup_proc_profile, os_sup_proc_state, os_sup_proc_queue,
                   os_sup_proc_tree, os_sup_proc_otp,
                   os_sup_proc_groups, os_sup_proc_scan, os_sup_proc_listing,
                   os_sup_node_applications, os_sup_node_system_info, os_sup_node_ets,
                   os_sup_node_vitals, os_sup_node_timers, os_sup_node_history,
                   os_sup_diagnose, os_sup_diagnose_code, os_sup_diagnose_cpu,
                   os_sup_diagnose_holders, os_sup_diagnose_makers, os_sup_diagnose_leaks,
                   os_sup_diagnose_crashes, os_sup_diagnose_crowd, os_sup_diagnose_logs,
                   os_sup_diagnose_boot, os_sup_diagnose_mailbox, os_sup_diagnose_work,
                   os_sup_diagnose_budget, os_sup_diagnose_deadlock, os_sup_diagnose_ets,
                   os_sup_diagnose_stalls, os_sup_diagnose_queue, os_sup_diagnose_rows,
                   os_sup_diagnose_focus, os_sup_diagnose_retry, os_sup_code_loads,
                   os_sup_waits, os_sup_waits_of, os_sup_waits_render,
                   os_sup_trace, os_sup_trace_read, os_sup_trace_session, os_sup_trace_tracer,
                   os_sup_trace_sysmon,
                   os_sup_log_handler, os_sup_log_keeper, os_sup_log_render, os_sup_log_stats,
                   os_sup_log_volume, os_sup_log_cascade,
                   os_sup_code, os_sup_code_beam, os_sup_code_xref, os_sup_code_find,
                   os_sup_code_text, os_sup_code_msgs,
                   os_sup_dev, os_sup_dev_compile, os_sup_dev_load, os_sup_dev_watch,
                   os_sup_cluster, os_sup_cluster_facts,
                   os_sup_node_ports]).
-define(READY_KEY, {?MODULE, ready_mode}).
-define(LOADED_KEY, {?MODULE, siblings_loaded}).
-define(REFUSED_KEY, {?MODULE, refused}).
-define(DIR_KEY, {?MODULE, dir}).

-define(WORKER_HEAP_WORDS, 32000000).
%% other limits
-define(MAX_STOP_MS, 600000).
-define(CONTROL_HALT_MS, 1500).
-define(READY_WATCH_MS, 600000).
-define(MAX_ECHO_BYTES, 1024).
-define(MAX_DEPTH, 30).
%% a tool's limits
-define(TOOL_DEFAULT_MS, 5000).
-define(TOOL_MAX_MS, 120000).
-define(TOOL_MAX_REPLY, 8388608).

%%%===================================================================
%%% Public API
%%%===================================================================

%% @doc Apply the server's environment and start the server; idempotent, always `ok'.
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

%% @doc Protocol version of this helper; the server checks it after loading.
-spec version() -> pos_integer().
version() ->
    ?VERSION.

%% @doc What this node's readiness is: `mix_app' (a Mix project's applications started: every
%% start that runs Mix and starts the project) or `boot' (booted).
-spec readiness_mode() -> boot | mix_app.
readiness_mode() ->
    persistent_term:get(?READY_KEY, boot).

%% @doc Writes `Line' on the control socket (a node this server booted); nothing otherwise.
-spec announce(binary()) -> ok.
announce(Line) ->
    case whereis(?CONTROL) of
        Ctl when is_pid(Ctl) -> Ctl ! {announce, Line}, ok;
        undefined -> ok
    end.

%%%===================================================================
%%% Internal entry points (spawned or reloaded through ?MODULE)
%%%===================================================================

%% @doc Server process entry: registers nothing itself, enters the loop.
-spec init(map()) -> ok.
init(State) ->
    os_sup_helper_own:init(),
    ?MODULE:loop(State).

%% @doc Server loop: answers `{Ref, From, Request}', drops anything else; hibernates when idle.
-spec loop(map()) -> ok.
loop(State) ->
    receive
        {Ref, From, Request} when is_pid(From) ->
            case ignored(fun() -> handle(Ref, From, Request) end) of
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

%% @doc Control pipe loop: data from the server is ignored; `{announce, Line}' writes a line
%% to it; EOF or port exit stops the node.
-spec control_loop(port()) -> ok.
control_loop(Port) ->
    receive
        {Port, {data, _}} ->
            ?MODULE:control_loop(Port);
        {announce, Line} when is_binary(Line) ->
            _ = ?IGNORE(port_command(Port, Line)),
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

%% @doc Sends the logger events kept since boot, then the new ones, to `Pid'; replies
%% `{Ref, ok}' once the handler is verified installed, else `{Ref, {error, Reason}}'.
-spec subscribe_worker(term(), pid(), pid()) -> ok.
subscribe_worker(Ref, From, Pid) ->
    Reply = case loaded(os_sup_log_handler) of
                true ->
                    try os_sup_log_handler:subscribe(Pid)
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
    _ = [?IGNORE(application:stop(A)) || A <- Apps],
    erlang:halt(0).

catch_apps() ->
    case ignored(fun() -> application:which_applications(5000) end) of
        L when is_list(L) -> L;
        _ -> []
    end.

%% @doc Runs one tool in a worker under a deadline; replies `{Ref, Reply}' to `From'.
-spec tool_coordinator(term(), pid(), atom(), map(), pos_integer()) -> ok.
tool_coordinator(Ref, From, Tool, Args, Timeout) ->
    untraced(),
    case maps:find(Tool, os_sup_helper_tools:table()) of
        error ->
            Known = lists:join(<<", ">>, [atom_to_binary(T, utf8)
                                          || T <- lists:sort(maps:keys(os_sup_helper_tools:table()))]),
            reply(From, Ref, {error, #{kind => unknown_tool,
                                       message => fmt("unknown tool ~tp; known: ~ts",
                                                      [Tool, Known])}});
        {ok, MF} ->
            tool_start(Ref, From, Tool, MF, Args, Timeout)
    end.

tool_start(Ref, From, Tool, {Module, Function}, Args, Timeout) ->
    %% A module missing anywhere fails a tool with the one sentence that says why, not each
    %% tool with its own `undef'.
    case siblings_loaded() andalso loaded(Module) of
        false ->
            reply(From, Ref, {error, #{kind => unavailable, message => not_loaded(Module)}});
        true ->
            %% `caller' lets stateful tools (tracing) watch the server that asked.
            WorkerArgs = [self(), Tool, {Module, Function}, Args#{caller => From}],
            {Pid, MRef} = spawn_opt(?MODULE, tool_run, WorkerArgs,
                                    [monitor | [{max_heap_size, #{size => ?WORKER_HEAP_WORDS, kill => true,
                                                          error_logger => false}}]]),
            TRef = erlang:start_timer(Timeout, self(), tool_timeout),
            ?MODULE:tool_wait(#{ref => Ref, from => From, tool => Tool, pid => Pid,
                                mref => MRef, timer => TRef, timeout => Timeout})
    end.

%% @doc A tool's coordinator waits: result, worker death or deadline (hibernated).
-spec tool_wait(map()) -> ok.
tool_wait(#{ref := Ref, from := From, tool := Tool, pid := Pid, mref := MRef,
            timer := TRef, timeout := Timeout} = W) ->
    receive
        {tool_result, Pid, Result} ->
            erlang:demonitor(MRef, [flush]),
            _ = erlang:cancel_timer(TRef),
            reply(From, Ref, tool_checked(Result));
        {'DOWN', MRef, process, Pid, Reason} ->
            _ = erlang:cancel_timer(TRef),
            Msg = case Reason of
                      killed -> fmt("introspection ~tp was killed (heap limit of ~b words "
                                    "or a code reload)", [Tool, ?WORKER_HEAP_WORDS]);
                      _ -> cut_bin(fmt("introspection ~tp crashed: ~tP",
                                       [Tool, Reason, ?MAX_DEPTH]), ?MAX_ECHO_BYTES)
                  end,
            reply(From, Ref, {error, #{kind => crashed, message => Msg}});
        {timeout, TRef, tool_timeout} ->
            exit(Pid, kill),
            erlang:demonitor(MRef, [flush]),
            Msg = fmt("introspection ~tp timed out after ~b ms; the worker was killed "
                      "(raise the timeout or narrow the request)", [Tool, Timeout]),
            reply(From, Ref, {error, #{kind => timeout, message => Msg}})
    after 0 ->
            erlang:hibernate(?MODULE, tool_wait, [W])
    end.

%% @doc A tool's worker: runs the tool under `os_sup_lib_reply:guarded/2' and reports to `Coord'.
-spec tool_run(pid(), atom(), {module(), atom()}, map()) -> ok.
tool_run(Coord, Tool, {Module, Function}, Args) ->
    untraced(),
    Run = fun() -> Module:Function(Args) end,
    %% Tools that watch the node over a window count no atoms of theirs: the application's
    %% made meanwhile would be taken for ours.
    Counted = case lists:member(Tool, [diagnose, vitals, waits, processes, system_monitor]) of
                  true -> Run;
                  false -> fun() -> os_sup_helper_own:counting_own_atoms(Run) end
              end,
    Result = os_sup_lib_reply:guarded(atom_to_binary(Tool, utf8), Counted),
    Coord ! {tool_result, self(), Result},
    ok.

%% @doc Takes the calling helper process out of a trace of every process (a trace session's,
%% the user's `dbg'): the helper's own work is not the node's, and would spend the trace's
%% events on itself.
-spec untraced() -> ok.
untraced() ->
    case erlang:trace_info(self(), flags) of
        {flags, []} -> ok;
        _ -> _ = ?IGNORE(erlang:trace(self(), false, [all])), ok
    end.

%% @doc Loads the sibling modules (no autoload in embedded mode), then registers the server and
%% announces it.
-spec boot_server() -> ok.
boot_server() ->
    _ = [loaded(M) || M <- ?BOOT_SIBLINGS],
    %% Who loads code from memory is seen from the boot on (the application's start may).
    _ = ?IGNORE(os_sup_code_loads:watch()),
    %% A member of a cluster the server started connects to its peers, unless the whole
    %% cluster is starting: then the server introduces the members once all are up.
    _ = case getenv("OS_SUP_CLUSTER") of
            false -> ok;
            Peers -> os_sup_cluster:start(Peers, getenv("OS_SUP_CLUSTER_INTRODUCED") =/= "1")
        end,
    Mode = persistent_term:get(?READY_KEY, boot),
    Pid = spawn_detached(init, [#{ready_mode => Mode}]),
    try register(?SERVER, Pid) of
        true -> announce_up()
    catch
        error:badarg -> exit(Pid, kill), ok
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
            _ = ?IGNORE(erlang:set_cookie(node(), list_to_atom(C))),
            unsetenv("OS_SUP_COOKIE")
    end,
    %% 2. restore the user's ERL_AFLAGS so BEAMs the child starts are clean
    case UserAflags of
        false when Injected -> unsetenv("ERL_AFLAGS");
        false -> ok;
        V ->
            _ = ?IGNORE(os:putenv("ERL_AFLAGS", V)),
            unsetenv("OS_SUP_USER_ERL_AFLAGS")
    end,
    %% 3. readiness mode (kept in a persistent term so a restarted server keeps it)
    case Ready of
        false -> ok;
        R ->
            _ = ?IGNORE(persistent_term:put(?READY_KEY, ready_mode(R))),
            unsetenv("OS_SUP_READY")
    end,
    %% 4. control pipe
    case ControlFd of
        false -> ok;
        FdStr ->
            unsetenv("OS_SUP_CONTROL_FD"),
            case ignored(fun() -> list_to_integer(string:trim(FdStr)) end) of
                Fd when is_integer(Fd), Fd >= 0 ->
                    Ctl = spawn_detached(control_init, [Fd]),
                    _ = ?IGNORE(register(?CONTROL, Ctl)),
                    ok;
                _ -> ok
            end
    end,
    case Injected of
        true ->
            %% A node we boot: its log events are kept from here on (the logger's modules
            %% first), then the other modules and the server are set up off the boot path, so
            %% the boot (Mix) goes on meanwhile; the server waits for `up'.
            _ = [loaded(M) || M <- ?SIBLINGS, lists:prefix("os_sup_log", atom_to_list(M))],
            _ = ?IGNORE(os_sup_log_handler:start()),
            Boot = fun() -> spawn_detached(boot_server, []) end,
            %% A cluster member's application starts once it is connected to its peers.
            _ = case getenv("OS_SUP_CLUSTER") =/= false andalso loaded(os_sup_cluster) of
                    true -> ?IGNORE(os_sup_cluster:hold_boot(Boot));
                    false -> Boot()
                end,
            ok;
        false ->
            %% Loaded over distribution (attach, or a helper started again): the caller asks
            %% for the server as soon as this returns.
            boot_server()
    end.

%% Tells the server, over the control socket, that the helper answers and under which node
%% name: it connects only then (never polling a node that would reject the handshake) and
%% knows at once when the command started a node under another name, or none.
announce_up() ->
    announce(iolist_to_binary(["up ", atom_to_binary(node(), utf8), "\n"])),
    Mode = persistent_term:get(?READY_KEY, boot),
    Until = erlang:monotonic_time(millisecond) + ?READY_WATCH_MS,
    _ = spawn(os_sup_helper_ready, watch, [Mode, Until]),
    ok.

%% Spawn without a link, with the node's `user' as group leader (an attach
%% over rpc would otherwise leave a remote caller as group leader).
spawn_detached(F, A) ->
    Pid = spawn(?MODULE, F, A),
    case whereis(user) of
        User when is_pid(User) -> _ = ?IGNORE(group_leader(User, Pid));
        _ -> ok
    end,
    Pid.

%% `auto' (every start but one by `path'): the Mix project's applications when the command runs
%% Mix (`mix phx.server', `iex -S mix', `elixir -S mix run', a script that ends in one of them:
%% the VM's plain arguments name the `mix' script) and starts the project; otherwise booted.
ready_mode("mix_app") -> mix_app;
ready_mode("auto") ->
    Plain = try init:get_plain_arguments() catch _:_ -> [] end,
    RunsMix = lists:any(fun(A) -> filename:basename(A) =:= "mix" end, Plain),
    case RunsMix andalso not lists:member("--no-start", Plain) of
        true -> mix_app;
        false -> boot
    end;
ready_mode(_) -> boot.

getenv(Name) ->
    case ignored(fun() -> os:getenv(Name) end) of
        V when is_list(V) -> V;
        _ -> false
    end.

unsetenv(Name) ->
    _ = ?IGNORE(os:unsetenv(Name)),
    ok.

control_lost() ->
    _ = spawn(?MODULE, halt_after, [?CONTROL_HALT_MS, 1]),
    _ = ?IGNORE(init:stop()),
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
    try loaded(os_sup_helper_status) andalso spawn(os_sup_helper_status, status_worker, [Ref, From, Mode]) of
        false -> reply(From, Ref, {error, #{kind => unavailable,
                                            message => not_loaded(os_sup_helper_status)}});
        _ -> ok
    catch
        _:_ ->
            reply(From, Ref, {error, #{kind => system_limit,
                                       message => <<"the node is at its process limit "
                                                    "(system_limit)">>}})
    end;
handle(Ref, From, {eval, Lang, Code, Opts})
  when (Lang =:= elixir orelse Lang =:= erlang orelse Lang =:= auto),
       is_binary(Code), is_map(Opts) ->
    case loaded(os_sup_eval) of
        true -> os_sup_eval:start(Ref, From, Lang, Code, Opts);
        false -> reply(From, Ref, {error, #{kind => unavailable, message => not_loaded(os_sup_eval),
                                            stacktrace => <<>>, output => <<>>}})
    end;
handle(Ref, From, {stop, TimeoutMs}) when is_integer(TimeoutMs), TimeoutMs >= 0 ->
    reply(From, Ref, ok),
    _ = spawn(?MODULE, stop_worker, [min(TimeoutMs, ?MAX_STOP_MS)]),
    ok;
handle(Ref, From, {tool, Tool, Args, TimeoutMs}) when is_atom(Tool), is_map(Args) ->
    Timeout = case TimeoutMs of
                  T when is_integer(T) -> clamp(T, 1, ?TOOL_MAX_MS);
                  _ -> ?TOOL_DEFAULT_MS
              end,
    _ = spawn(?MODULE, tool_coordinator, [Ref, From, Tool, Args, Timeout]),
    ok;
handle(Ref, From, {subscribe_logs, Pid}) when is_pid(Pid) ->
    %% Loading the module and calling the logger server may wait during boot: not in the loop.
    _ = spawn(?MODULE, subscribe_worker, [Ref, From, Pid]),
    ok;
handle(Ref, From, detach) ->
    _ = ?IGNORE(os_sup_log_handler:stop()),
    _ = ?IGNORE(os_sup_trace_sysmon:stop()),
    _ = ?IGNORE(os_sup_node_history:stop()),
    _ = ?IGNORE(os_sup_code_loads:stop()),
    reply(From, Ref, ok),
    case whereis(?CONTROL) of
        Ctl when is_pid(Ctl) -> exit(Ctl, kill);
        _ -> ok
    end,
    _ = ?IGNORE(unregister(?SERVER)),
    stop;
handle(Ref, From, Request) ->
    reply(From, Ref, {error, {unknown_request, bounded_echo(Request)}}).

%% True when `Module' is loaded, loading it if needed from the directory this module was
%% loaded from (by absolute path: a Mix project may prune the code path of directories it does
%% not own, as Elixir 1.18 does), else (loaded over distribution) from the code path. A module
%% the node refuses is remembered, for `not_loaded/1' to say why.
loaded(Module) ->
    case code:is_loaded(Module) of
        {file, _} -> true;
        false -> load(Module)
    end.

load(Module) ->
    Result = try
                 case own_dir() of
                     none -> code:load_file(Module);
                     Dir -> code:load_abs(filename:join(Dir, atom_to_list(Module)))
                 end
             catch
                 Class:Reason -> {error, {Class, Reason}}
             end,
    case Result of
        {module, Module} ->
            true;
        {error, Why} ->
            Refused = persistent_term:get(?REFUSED_KEY, []),
            _ = lists:keymember(Module, 1, Refused) orelse
                persistent_term:put(?REFUSED_KEY, lists:sublist([{Module, Why} | Refused], 20)),
            false
    end.

%% The directory of this module's .beam, when it was loaded from one (remembered: asked once).
own_dir() ->
    case persistent_term:get(?DIR_KEY, undefined) of
        undefined ->
            Dir = case code:which(?MODULE) of
                      File when is_list(File) ->
                          case filelib:is_regular(File) of
                              true -> filename:dirname(File);
                              false -> none
                          end;
                      _ -> none
                  end,
            persistent_term:put(?DIR_KEY, Dir),
            Dir;
        Dir ->
            Dir
    end.

%% @doc What the node refused to load of the helper, in one sentence; `none' when it loaded
%% everything it was asked to.
-spec refused() -> binary() | none.
refused() ->
    case persistent_term:get(?REFUSED_KEY, []) of
        [] -> none;
        Refused ->
            Names = lists:join(<<", ">>, [atom_to_binary(M, utf8) || {M, _} <- lists:reverse(Refused)]),
            {_, Why} = hd(Refused),
            fmt("the helper is incomplete on this node: OTP ~ts refused ~ts (~ts); the tools "
                "that need them cannot run here. This os_sup_mcp does not support this "
                "release: see its README for the tested range",
                [erlang:system_info(otp_release), Names, refusal(Why)])
    end.

refusal(badfile) -> <<"badfile: its .beam was compiled for a release this node cannot load">>;
refusal(nofile) -> <<"nofile: its .beam is gone from the server's directory">>;
refusal(Why) -> cut_bin(fmt("~tP", [Why, 8]), 200).

not_loaded(Module) ->
    case refused() of
        none -> fmt("~ts is not loaded on this node (the server loads it with the helper)", [Module]);
        Sentence -> Sentence
    end.

%% @doc Loads the helper's modules not loaded at boot, once the node is ready (called by
%% `os_sup_helper_ready' before it says `ready', off the boot's path: the code server loads
%% the application's modules meanwhile). A tool call needs them, and a module the node refuses
%% is said when `start' answers rather than at some later call. ~60 ms of CPU; loaded, they
%% outlive their files. Returns `refused/0'.
-spec load_rest() -> binary() | none.
load_rest() ->
    _ = siblings_loaded(),
    refused().

%% True when a tool call can count on the helper's modules: once all are loaded (then
%% remembered, so it pays a lookup). The first tool call loads them all at once, in
%% interactive mode too: the atoms their loading makes are counted as the helper's
%% (`os_sup_helper_own'), which a module loaded later by the code server at its first call
%% would not be, and the node's history would show the helper's loading as the node's.
siblings_loaded() ->
    persistent_term:get(?LOADED_KEY, false) orelse all_siblings_loaded().

%% Loads every sibling module it can; true when all are.
all_siblings_loaded() ->
    All = os_sup_helper_own:counting_own_atoms(
            fun() -> lists:foldl(fun(M, All) -> loaded(M) andalso All end, true, ?SIBLINGS) end),
    _ = All andalso persistent_term:put(?LOADED_KEY, true),
    All.

%% Never crash on an oversized reply: the server's connection would block on it.
tool_checked(Result) ->
    case erlang:external_size(Result) =< ?TOOL_MAX_REPLY of
        true -> Result;
        false -> {error, #{kind => too_large,
                           message => fmt("the reply exceeded ~b bytes; narrow the request "
                                          "(limit, depth, max_children)",
                                          [?TOOL_MAX_REPLY])}}
    end.

bounded_echo(Term) ->
    case erlang:external_size(Term) =< ?MAX_ECHO_BYTES of
        true -> Term;
        false -> cut_bin(fmt("~tP", [Term, 8]), ?MAX_ECHO_BYTES div 4)
    end.

%% Fun()'s value, or `error' when it raises.
ignored(Fun) ->
    try Fun() catch _:_ -> error end.
