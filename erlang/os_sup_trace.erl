%%%-------------------------------------------------------------------
%%% @doc `os_sup_trace' traces function calls and messages, and watches
%%% the system monitor, inside the node, for an AI agent. It is what
%%% `recon_trace' is to a person at a shell: every trace needs a count,
%%% dangerous patterns are refused, and the limits are enforced on the node
%%% by the tracer itself, so a trace that floods stops within milliseconds
%%% even when nobody is reading. Kernel and stdlib only (no `dbg', no
%%% `recon'); Elixir is used for rendering when it is loaded.
%%%
%%% The helper runs {@link run/2} in a throw-away worker under a deadline
%%% (request `{introspect, Tool, Args, TimeoutMs}', with `caller' set to
%%% the sidecar's pid). The worker only checks arguments and talks to the
%%% long-lived processes below, so it returns quickly.
%%%
%%% == Call and message tracing ==
%%% <ul>
%%%   <li>`trace': call tracing of one module (or one function, or one
%%%       arity), local calls included, on every process or one process.
%%%       Each call is paired with its return or exception (`exception_trace'
%%%       in the match spec; per process, a stack of the calls still out, so
%%%       recursion and nesting pair correctly) and read back as one record:
%%%       arguments, result or exception, `duration_us'. `returns => false'
%%%       traces calls only (for receive loops and tail-recursive functions,
%%%       whose stack a return trace grows by one frame a call).</li>
%%%   <li>`trace_messages': `send' and `receive' of one process.</li>
%%%   <li>`trace_results': the events of a session so far (by sequence
%%%       number, so a reader can page with `since').</li>
%%%   <li>`trace_stop': stop a session now (idempotent).</li>
%%%   <li>`traces': every session kept, running or finished.</li>
%%% </ul>
%%%
%%% == System monitor ==
%%% <ul>
%%%   <li>`system_monitor': turn `erlang:system_monitor/2' on (long GC,
%%%       long schedule, large heap, busy ports), read what it caught, or
%%%       turn it off.</li>
%%% </ul>
%%%
%%% == Processes ==
%%% <ul>
%%%   <li>The session manager, registered as `os_sup_trace', started on
%%%       demand. It owns at most one running session (OTP 25 has one
%%%       tracer per traced process and no trace sessions) and keeps the
%%%       last 8 finished ones (at most 40 000 events in all) for reading.
%%%       It owns each session's event table (an ETS `ordered_set' keyed by
%%%       sequence number) so events survive the tracer. It stops a session
%%%       on `trace_stop', when the duration passes and when the caller (the
%%%       sidecar) goes down; its mailbox never holds trace messages, so it
%%%       acts at once even when the tracer is flooded.</li>
%%%   <li>One tracer per session (the `{tracer, Pid}' of the trace flags).
%%%       It stores each call (or message) as it arrives (bounded: 1 KB a
%%%       line) into the table, fills in a call's result, exception and
%%%       duration when its return arrives, and counts: at `max_events'
%%%       counted events (calls for `trace'; sends and receives for
%%%       `trace_messages'; returns never count), when `rate' of them arrive
%%%       within one second, when more than 100 000 trace messages wait in its
%%%       queue, when the duration passes or when the caller goes down, it
%%%       removes every trace pattern and flag it set and exits (its queue
%%%       goes with it). At `max_events' the call patterns are removed first
%%%       (no new call is traced) and the returns of the counted calls still
%%%       running are awaited for at most 1 s; calls that have not returned
%%%       by then are shown as such.</li>
%%%   <li>The system monitor process, registered as `os_sup_trace_sysmon':
%%%       keeps the last 500 events in a table, stores at most 50 a second
%%%       (the rest are counted as dropped), and turns the system monitor
%%%       off when the caller that turned it on goes down (the events stay
%%%       readable).</li>
%%% </ul>
%%% All three are spawned with `spawn(?MODULE, F, A)', loop through
%%% `?MODULE:Loop' and hibernate when their mailbox is empty (their heaps
%%% are small: events live in ETS), so they survive code reloads (see
%%% `os_sup_helper'). If a tracer dies anyway, the manager removes its
%%% patterns and flags; if the manager dies, the tracer does.
%%%
%%% == Foreign tracers ==
%%% A trace never steals tracing from another tool: when `dbg' runs, when
%%% new processes get a tracer, or when any process (or the one target
%%% process) already has a live tracer that is not ours, `trace' and
%%% `trace_messages' fail with kind `busy'; so does `system_monitor' when
%%% another process is the system monitor.
%%%
%%% == Arguments ==
%%% A map with atom keys, text as binaries (see `os_sup_introspect' for
%%% pid and name spellings), plus `format => elixir | erlang | auto'.
%%% Errors come back as `{error, #{kind, message}}' with kinds `bad_args',
%%% `not_found', `dangerous', `busy', `unavailable' and `internal'.
%%% Times in text are UTC `HH:MM:SS.micro'.
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_trace).

%% API
%% Reply conventions shared with the introspection tools.
-import(os_sup_introspect, [error_reply/2, fail/3]).

-export([run/2, tools/0]).

%% Internal entry points: spawn targets and reload-safe loops. Not an API.
-export([manager_init/2, manager_loop/1,
         tracer_init/1, tracer_loop/1,
         sysmon_init/2, sysmon_loop/1,
         disarm/1]).

-define(MANAGER, os_sup_trace).
-define(SYSMON, os_sup_trace_sysmon).
-define(ID_KEY, {?MODULE, session_ids}).

%% session limits
-define(MAX_EVENTS, 10000).
-define(DEFAULT_DURATION_MS, 10000).
-define(MAX_DURATION_MS, 60000).
-define(MAX_RATE, 1000000).
-define(KEEP_FINISHED, 8).
-define(KEEP_FINISHED_EVENTS, 40000).
-define(LINE_BYTES, 1024).
-define(CALL_BYTES, 600).
-define(RESULT_BYTES, 320).
-define(MAX_INDENT, 8).
-define(DRAIN_MS, 1000).
-define(MAX_QUEUE, 100000).
-define(QUEUE_CHECK_EVERY, 256).
-define(TRACER_HEAP_WORDS, 8000000).
-define(SCAN_MAX_PROCESSES, 500000).
%% reading
-define(DEFAULT_LIMIT, 100).
-define(MAX_LIMIT, 1000).
-define(TEXT_BYTES, 65536).
-define(CALL_MS, 3000).
%% system monitor
-define(SYSMON_KEEP, 500).
-define(SYSMON_RATE, 50).

-define(DANGEROUS,
        [erlang, erts_internal, lists, io, io_lib, gen, gen_server, gen_statem, gen_event,
         proc_lib, supervisor, ets, maps, timer, code, code_server, logger, unicode, binary,
         string, prim_file, file, init,
         'Elixir.Kernel', 'Elixir.Enum', 'Elixir.GenServer', 'Elixir.Map', 'Elixir.List',
         'Elixir.String', 'Elixir.Process', 'Elixir.IO', 'Elixir.Logger', 'Elixir.Inspect',
         'Elixir.Inspect.Algebra', 'Elixir.Keyword']).

-type reply() :: {ok, #{text := binary(), data := term()}}
               | {error, #{kind := atom(), message := binary()}}.
-type args() :: #{atom() => term()}.
-export_type([reply/0, args/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Runs tool `Tool' (see {@link tools/0}) with `Args'; never raises, returns quickly.
%% <ul>
%%   <li>`trace': `module' (required), `function' (`name' or `name/arity'),
%%       `arity', `returns' (default true: pair calls with their returns and
%%       exceptions; `exceptions => true' also turns it on), `pid' (default
%%       every process), `max_events' (required, 1..10000 calls),
%%       `duration_ms' (10000, 1..60000), `rate' (calls a second), `force'
%%       (needed for every function of a hot module) -> `#{session, ...}'.</li>
%%   <li>`trace_messages': `pid' (required), `max_events', `duration_ms',
%%       `rate' -> `#{session, ...}'.</li>
%%   <li>`trace_results': `session' (default the running or latest one), `since'
%%       (sequence number, 1; pass back `next_seq' to page), `limit'
%%       (100, 1..1000) -> `#{session, state, stop_reason, stop_detail, count,
%%       unit, next_seq, ...}' with `calls' (each with `call', `status',
%%       `result' or `exception', `duration_us') for `trace' and `events'
%%       for `trace_messages'.</li>
%%   <li>`trace_stop': `session' (default the running one).</li>
%%   <li>`traces': no arguments -> `#{sessions}', newest first.</li>
%%   <li>`system_monitor': `long_gc_ms', `long_schedule_ms',
%%       `large_heap_words', `busy_port', `busy_dist_port', `off', `limit'
%%       (100, 1..500) -> `#{active, settings, events, dropped}'.</li>
%% </ul>
-spec run(atom(), args()) -> reply().
run(Tool, Args) when is_atom(Tool), is_map(Args) ->
    case lists:member(Tool, tools()) of
        true -> guarded(fun() -> dispatch(Tool, Args) end);
        false ->
            error_reply(unknown_tool,
                        fmt("unknown tracing tool ~tp; known: ~ts",
                            [Tool, lists:join(<<", ">>, [atom_to_binary(T, utf8)
                                                        || T <- tools()])]))
    end;
run(_Tool, _Args) ->
    error_reply(bad_args, <<"run/2 expects a tool name (atom) and an argument map">>).

%% @doc The tool names {@link run/2} accepts.
-spec tools() -> [atom()].
tools() ->
    [trace, trace_messages, trace_results, trace_stop, traces, system_monitor].

%%%===================================================================
%%% Internal entry points: session manager
%%%===================================================================

%% @doc Session manager entry: registers as `os_sup_trace' (or exits if taken) and loops.
-spec manager_init(pid(), reference()) -> ok.
manager_init(Parent, Ref) ->
    case catch register(?MANAGER, self()) of
        true ->
            Parent ! {Ref, started},
            ?MODULE:manager_loop(#{sessions => #{}, finished => [], active => undefined});
        _ ->
            Parent ! {Ref, exists},
            ok
    end.

%% @doc Session manager loop: requests, tracer reports, timers, monitors; hibernates when idle.
-spec manager_loop(map()) -> ok.
manager_loop(S) ->
    receive
        {?MODULE, Ref, From, Request} when is_pid(From) ->
            {Reply, S1} = try manager_handle(Request, S)
                          catch C:R ->
                                  {{error, internal,
                                    fmt("trace manager failed: ~tp:~tP", [C, R, 10])}, S}
                          end,
            From ! {Ref, Reply},
            ?MODULE:manager_loop(S1);
        Other ->
            S1 = try manager_info(Other, S) catch _:_ -> S end,
            ?MODULE:manager_loop(S1)
    after 0 ->
            erlang:hibernate(?MODULE, manager_loop, [S])
    end.

%%%===================================================================
%%% Internal entry points: tracer
%%%===================================================================

%% @doc Tracer entry: watches the manager and the caller, arms the duration timer, loops.
-spec tracer_init(map()) -> ok.
tracer_init(#{manager := Manager, caller := Caller, duration_ms := Duration} = Spec) ->
    MMon = erlang:monitor(process, Manager),
    CMon = case is_pid(Caller) of
               true -> erlang:monitor(process, Caller);
               false -> undefined
           end,
    TRef = erlang:start_timer(Duration, self(), duration),
    ?MODULE:tracer_loop(Spec#{mmon => MMon, cmon => CMon, timer => TRef, seq => 0,
                              counted => 0, pending => 0, stacks => #{}, seen => 0,
                              draining => false,
                              names => names(), names_at => now_ms(),
                              win_start => now_ms(), win_count => 0}).

%% @doc Tracer loop: formats and counts trace messages, stops itself at a limit.
-spec tracer_loop(map()) -> ok.
tracer_loop(#{mmon := MMon, cmon := CMon, timer := TRef} = S) ->
    receive
        Msg when element(1, Msg) =:= trace_ts ->
            case tracer_event(Msg, S) of
                {stop, Reason, Detail, S1} -> tracer_stop(Reason, Detail, S1);
                S1 -> ?MODULE:tracer_loop(S1)
            end;
        {timeout, TRef, duration} ->
            tracer_stop(duration, duration_detail(S), S);
        {timeout, _, drained} ->
            tracer_stop(max_events, max_events_detail(S), S);
        {'DOWN', CMon, process, _, Why} ->
            tracer_stop(caller_down, caller_down_detail(Why), S);
        {'DOWN', MMon, process, _, _} ->
            tracer_stop(error, <<"error (the trace manager went down)">>, S);
        _Other ->
            ?MODULE:tracer_loop(S)
    after 0 ->
            erlang:hibernate(?MODULE, tracer_loop, [S])
    end.

%% @doc Removes every trace pattern and flag a session set; idempotent, never raises.
-spec disarm(map()) -> ok.
disarm(#{patterns := Patterns, target := Target, flags := Flags}) ->
    _ = [catch erlang:trace_pattern(P, false, [local]) || P <- Patterns],
    _ = [catch erlang:trace_pattern(P, false, [global]) || P <- Patterns],
    _ = (catch erlang:trace(Target, false, Flags)),
    ok;
disarm(_) ->
    ok.

%%%===================================================================
%%% Internal entry points: system monitor
%%%===================================================================

%% @doc System monitor process entry: registers as `os_sup_trace_sysmon' (or exits) and loops.
-spec sysmon_init(pid(), reference()) -> ok.
sysmon_init(Parent, Ref) ->
    case catch register(?SYSMON, self()) of
        true ->
            Tab = ets:new(?SYSMON, [ordered_set, protected]),
            Parent ! {Ref, started},
            ?MODULE:sysmon_loop(#{tab => Tab, seq => 0, active => false, settings => #{},
                                  caller => undefined, cmon => undefined, dropped => 0,
                                  win_start => now_ms(), win_count => 0, fmt => erlang});
        _ ->
            Parent ! {Ref, exists},
            ok
    end.

%% @doc System monitor loop: stores monitor events (rate-limited), answers requests.
-spec sysmon_loop(map()) -> ok.
sysmon_loop(#{cmon := CMon} = S) ->
    receive
        {monitor, Who, Kind, Info} ->
            S1 = try sysmon_event(Who, Kind, Info, S) catch _:_ -> S end,
            ?MODULE:sysmon_loop(S1);
        {?MODULE, Ref, From, Request} when is_pid(From) ->
            {Reply, S1} = try sysmon_handle(Request, S)
                          catch C:R ->
                                  {{error, internal,
                                    fmt("system monitor failed: ~tp:~tP", [C, R, 10])}, S}
                          end,
            From ! {Ref, Reply},
            ?MODULE:sysmon_loop(S1);
        {'DOWN', CMon, process, _, _} ->
            ?MODULE:sysmon_loop(sysmon_off(S));
        _Other ->
            ?MODULE:sysmon_loop(S)
    after 0 ->
            erlang:hibernate(?MODULE, sysmon_loop, [S])
    end.

%%%===================================================================
%%% Private: tool plumbing
%%%===================================================================

dispatch(trace, Args) -> trace_tool(Args);
dispatch(trace_messages, Args) -> messages_tool(Args);
dispatch(trace_results, Args) -> results_tool(Args);
dispatch(trace_stop, Args) -> stop_tool(Args);
dispatch(traces, Args) -> traces_tool(Args);
dispatch(system_monitor, Args) -> sysmon_tool(Args).

guarded(Fun) ->
    os_sup_introspect:guarded(<<"tracing">>, Fun).

ok_reply(Lines, Data) ->
    os_sup_introspect:ok_reply(Lines, Data, ?TEXT_BYTES).

%% Arguments
arg_int(Key, Args, Default, Lo, Hi) ->
    case maps:get(Key, Args, undefined) of
        V when V =:= undefined; V =:= nil; V =:= null -> Default;
        V when is_integer(V), V >= Lo, V =< Hi -> V;
        V when is_integer(V) -> fail(bad_args, "~ts must be in ~b..~b, got ~b", [Key, Lo, Hi, V]);
        V when is_binary(V) ->
            case catch binary_to_integer(string:trim(V)) of
                I when is_integer(I) -> arg_int(Key, Args#{Key => I}, Default, Lo, Hi);
                _ -> fail(bad_args, "~ts must be an integer, got ~tp", [Key, V])
            end;
        V -> fail(bad_args, "~ts must be an integer, got ~tP", [Key, V, 5])
    end.

arg_text(Key, Args) ->
    case maps:get(Key, Args, undefined) of
        V when V =:= undefined; V =:= nil; V =:= null; V =:= <<>> -> undefined;
        V when is_binary(V) -> string:trim(V);
        V when is_atom(V) -> atom_to_binary(V, utf8);
        V when is_pid(V) -> V;
        V when is_list(V) ->
            case catch unicode:characters_to_binary(V) of
                B when is_binary(B) -> string:trim(B);
                _ -> fail(bad_args, "~ts must be text", [Key])
            end;
        V -> fail(bad_args, "~ts must be text, got ~tP", [Key, V, 5])
    end.

arg_bool(Key, Args) ->
    arg_bool(Key, Args, false).

arg_bool(Key, Args, Default) ->
    case maps:get(Key, Args, Default) of
        B when is_boolean(B) -> B;
        V when V =:= undefined; V =:= nil; V =:= null -> Default;
        <<"true">> -> true;
        <<"false">> -> false;
        V -> fail(bad_args, "~ts must be true or false, got ~tP", [Key, V, 5])
    end.

fmt_arg(Args) ->
    os_sup_render:format(maps:get(format, Args, auto)).

caller_arg(Args) ->
    case maps:get(caller, Args, undefined) of
        Pid when is_pid(Pid) -> Pid;
        _ -> undefined
    end.

%% Common limits of `trace' and `trace_messages'.
limits(Args) ->
    case maps:get(max_events, Args, undefined) of
        V when V =:= undefined; V =:= nil; V =:= null ->
            fail(bad_args, "max_events is required (1..~b): a trace stops by itself after that "
                 "many events", [?MAX_EVENTS]);
        _ -> ok
    end,
    #{max_events => arg_int(max_events, Args, undefined, 1, ?MAX_EVENTS),
      duration_ms => arg_int(duration_ms, Args, ?DEFAULT_DURATION_MS, 1, ?MAX_DURATION_MS),
      rate => arg_int(rate, Args, undefined, 1, ?MAX_RATE)}.

%%%===================================================================
%%% Private: trace and trace_messages (run in the worker)
%%%===================================================================

trace_tool(Args) ->
    Fmt = fmt_arg(Args),
    Force = arg_bool(force, Args),
    FunText = arg_text(function, Args),
    ArityArg = arg_int(arity, Args, undefined, 0, 255),
    case FunText =:= undefined andalso ArityArg =/= undefined of
        true -> fail(bad_args, "arity needs a function (e.g. function \"duplicate\" with arity "
                     "2, or function \"duplicate/2\")", []);
        false -> ok
    end,
    Mod = resolve_module(arg_text(module, Args), Force),
    {Fun, Arity0} = resolve_function(Mod, FunText),
    Arity = case ArityArg of
                undefined -> Arity0;
                A when Arity0 =:= '_'; Arity0 =:= A -> A;
                A -> fail(bad_args, "arity ~b contradicts function ~ts", [A, FunText])
            end,
    check_dangerous(Mod, Fun, Force),
    check_function(Mod, Fun, Arity, Fmt),
    %% exception_trace = return_trace + exception_from: every call is paired.
    Paired = arg_bool(returns, Args, true) orelse arg_bool(exceptions, Args),
    Target = target(arg_text(pid, Args)),
    Limits = limits(Args),
    MatchSpec = case Paired of
                    true -> [{'_', [], [{exception_trace}]}];
                    false -> true
                end,
    Pattern = {Mod, Fun, Arity},
    Desc = iolist_to_binary([pattern_text(Pattern, Fmt),
                             [<<" (calls only, no returns)">> || not Paired],
                             <<" on ">>, target_text(Target, Fmt)]),
    check_foreign(Target),
    Spec = Limits#{type => calls, module => Mod, function => Fun, arity => Arity,
                   paired => Paired, patterns => [Pattern], match_spec => MatchSpec,
                   target => Target, flags => [call, timestamp],
                   fmt => Fmt, caller => caller_arg(Args), description => Desc},
    start_session(Spec).

messages_tool(Args) ->
    Fmt = fmt_arg(Args),
    Pid = case arg_text(pid, Args) of
              undefined -> fail(bad_args, "pid is required: a pid (<0.123.0>) or a registered "
                                "name (DemoApp.Counter)", []);
              Text -> resolve_pid(Text)
          end,
    case Pid =:= whereis(?MANAGER) orelse Pid =:= whereis(?SYSMON) of
        true -> fail(bad_args, "the trace manager cannot trace itself", []);
        false -> ok
    end,
    Limits = limits(Args),
    Desc = iolist_to_binary([<<"messages of ">>, target_text(Pid, Fmt)]),
    check_foreign(Pid),
    Spec = Limits#{type => messages, patterns => [], target => Pid,
                   flags => [send, 'receive', timestamp], paired => false,
                   fmt => Fmt, caller => caller_arg(Args), description => Desc},
    start_session(Spec).

start_session(Spec) ->
    case manager_call({start, Spec}) of
        {ok, Info} ->
            #{session := Id, max_events := Max, duration_ms := Dur, rate := Rate,
              unit := Unit} = Info,
            Line = fmt("trace ~ts started: ~ts~ts; stops after ~ts, ~b ms~ts; read it with "
                       "trace_results, stop it with trace_stop",
                       [Id, maps:get(description, Spec),
                        case maps:get(paired, Spec) of
                            true -> <<", each call paired with its return or exception">>;
                            false -> <<>>
                        end, count_text(Max, Unit), Dur,
                        case Rate of
                            undefined -> <<>>;
                            _ -> fmt(" or more than ~b ~ts a second", [Rate, Unit])
                        end]),
            ok_reply([Line], maps:without([table], Info));
        {error, Kind, Msg} ->
            error_reply(Kind, Msg)
    end.

%% Module argument -> loaded module atom (no atom is created).
resolve_module(undefined, _Force) ->
    fail(bad_args, "module is required (DemoApp.Counter, :ets or lists)", []);
resolve_module(Text, Force) ->
    case Text of
        <<"_">> when not Force ->
            fail(dangerous, "tracing every module (module _) is refused; name one module, "
                 "or pass force=true if you really mean it", []);
        <<"_">> ->
            '_';
        _ ->
            Candidates = os_sup_introspect:name_atoms(Text),
            case [M || M <- Candidates, code:ensure_loaded(M) =:= {module, M}] of
                [Mod | _] ->
                    Mod;
                [] ->
                    fail(not_found, "module ~ts is not loaded and cannot be loaded on this node "
                         "(check the spelling: DemoApp.Counter for Elixir, lists for Erlang)",
                         [Text])
            end
    end.

%% Refuses every function of a hot module (one named function is fine: the on-node limits
%% bound it, as in recon_trace), and any part of this helper (the tracer itself runs it).
check_dangerous(_Mod, _Fun, true) ->
    ok;
check_dangerous('_', _Fun, false) ->
    ok;
check_dangerous(Mod, Fun, false) ->
    Name = os_sup_render:name(Mod, auto_fmt()),
    case binary:match(atom_to_binary(Mod, utf8), <<"os_sup_">>) =:= {0, 7} of
        true ->
            fail(dangerous, "tracing ~ts is refused: it is part of this helper, which runs the "
                 "tracing itself; pass force=true with a small max_events if you really mean "
                 "it", [Name]);
        false -> ok
    end,
    case Fun =:= '_' andalso lists:member(Mod, ?DANGEROUS) of
        true ->
            fail(dangerous, "tracing every function of ~ts is refused: it is called all the "
                 "time by the runtime and tracing all of it can overload the node; name one "
                 "function (e.g. function \"name/arity\"), which the limits keep safe, or pass "
                 "force=true with a small max_events", [Name]);
        false ->
            ok
    end.

%% function argument -> {FunAtom | '_', Arity | '_'} ("name" or "name/arity").
resolve_function(_Mod, undefined) ->
    {'_', '_'};
resolve_function(Mod, Text) ->
    {Name, Arity} = case string:split(Text, <<"/">>, trailing) of
                        [N, A] ->
                            case catch binary_to_integer(A) of
                                I when is_integer(I), I >= 0, I =< 255 -> {N, I};
                                _ -> {Text, '_'}
                            end;
                        _ -> {Text, '_'}
                    end,
    Bare = case Name of
               <<":", R/binary>> -> R;
               _ -> Name
           end,
    try binary_to_existing_atom(Bare, utf8) of
        F -> {F, Arity}
    catch
        _:_ -> fail(not_found, "~ts has no function ~ts", [os_sup_render:name(Mod, auto_fmt()),
                                                           Text])
    end.

check_function('_', _, _, _) ->
    ok;
check_function(_Mod, '_', _, _) ->
    ok;
check_function(Mod, Fun, Arity, Fmt) ->
    Funs = case catch erlang:get_module_info(Mod, functions) of
               L when is_list(L) -> L;
               _ -> []
           end,
    case [A || {F, A} <- Funs, F =:= Fun, Arity =:= '_' orelse A =:= Arity] of
        [_ | _] -> ok;
        [] ->
            Known = lists:usort([A || {F, A} <- Funs, F =:= Fun]),
            fail(not_found, "~ts does not define ~ts~ts", [os_sup_render:name(Mod, Fmt),
                                                        pattern_text({Mod, Fun, Arity}, Fmt),
                                                        case Known of
                                                            [] -> <<>>;
                                                            _ -> fmt(" (arities: ~w)", [Known])
                                                        end])
    end.

target(undefined) -> all;
target(Text) -> resolve_pid(Text).

resolve_pid(Text) ->
    case os_sup_introspect:pid_arg(Text) of
        {ok, Pid} -> Pid;
        {error, #{kind := Kind, message := Msg}} -> throw({tool_error, Kind, Msg})
    end.

pattern_text({'_', _, _}, _Fmt) ->
    <<"every module">>;
pattern_text({M, '_', _}, Fmt) ->
    Sep = case Fmt of elixir -> <<".">>; _ -> <<":">> end,
    <<(os_sup_render:name(M, Fmt))/binary, Sep/binary, "*">>;
pattern_text({M, F, '_'}, Fmt) ->
    Text = os_sup_render:mfa({M, F, 0}, Fmt),
    <<(binary:part(Text, 0, byte_size(Text) - 2))/binary, "/*">>;
pattern_text(MFA, Fmt) ->
    os_sup_render:mfa(MFA, Fmt).

target_text(all, _Fmt) -> <<"all processes">>;
target_text(Pid, Fmt) ->
    case reg_name(Pid) of
        undefined -> os_sup_render:pid(Pid, Fmt);
        Name -> fmt("~ts (~ts)", [os_sup_render:pid(Pid, Fmt), os_sup_render:name(Name, Fmt)])
    end.

auto_fmt() ->
    os_sup_render:format(auto).

%% Refuses (kind busy) when another tool traces on this node; never takes over its tracer.
check_foreign(Target) ->
    case whereis(dbg) of
        D when is_pid(D) ->
            fail(busy, "dbg is running on this node (~ts) and may be tracing; stop it with "
                 "dbg:stop() first", [pid_to_list(D)]);
        _ -> ok
    end,
    Ours = ours(),
    [case catch erlang:trace_info(Which, tracer) of
         {tracer, T} when T =/= [] ->
             case live_foreign(T, Ours) of
                 true -> fail(busy, "another tracer (~tP) traces every new process on this node; "
                              "stop that tool (dbg, recon_trace, redbug) first", [T, 5]);
                 false -> ok
             end;
         _ -> ok
     end || Which <- [new_processes, new_ports]],
    Pids = case Target of
               all -> lists:sublist(erlang:processes(), ?SCAN_MAX_PROCESSES);
               Pid -> [Pid]
           end,
    scan_tracers(Pids, Ours).

scan_tracers([], _Ours) ->
    ok;
scan_tracers([P | Rest], Ours) ->
    case catch erlang:trace_info(P, tracer) of
        {tracer, T} when T =/= [] ->
            case live_foreign(T, Ours) of
                true ->
                    fail(busy, "process ~ts is already traced by ~tP; this node has one tracer "
                         "per process, so stop that trace (dbg, recon_trace, redbug) first",
                         [pid_to_list(P), T, 5]);
                false ->
                    scan_tracers(Rest, Ours)
            end;
        _ ->
            scan_tracers(Rest, Ours)
    end.

ours() ->
    case manager_call(list) of
        {ok, #{tracers := Tracers}} -> Tracers;
        _ -> []
    end.

live_foreign(T, Ours) when is_pid(T) ->
    not lists:member(T, Ours) andalso
        (node(T) =/= node() orelse is_process_alive(T));
live_foreign(T, _Ours) when is_port(T) ->
    erlang:port_info(T) =/= undefined;
live_foreign(_, _) ->
    true.

%%%===================================================================
%%% Private: trace_results, trace_stop, traces (run in the worker)
%%%===================================================================

results_tool(Args) ->
    Id0 = session_arg(Args),
    Since = arg_int(since, Args, 1, 0, 1 bsl 40),
    Limit = arg_int(limit, Args, ?DEFAULT_LIMIT, 1, ?MAX_LIMIT),
    Info = case manager_call({info, Id0}) of
               {ok, I} -> I;
               {error, Kind, Msg} -> throw({tool_error, Kind, Msg})
           end,
    #{table := Tab, session := Id, type := Type, state := State, unit := Unit} = Info,
    {Events, Tally} = try {read_events(Tab, Since, Limit), tally(Type, Tab)}
                      catch _:_ -> fail(not_found, "session ~ts was just discarded (only the "
                                        "last ~b finished sessions are kept)",
                                        [Id, ?KEEP_FINISHED])
                      end,
    Next = case Events of
               [] -> max(Since, 1);
               _ -> maps:get(seq, lists:last(Events)) + 1
           end,
    Count = maps:get(count, Info),
    More = case Events of
               [] -> 0;
               _ -> max(0, last_seq(Tab) - Next + 1)
           end,
    Shown = [shown(E, State) || E <- Events],
    Header = fmt("trace ~ts (~ts): ~ts; ~ts~ts~ts",
                 [Id, maps:get(pattern, Info), state_text(Info), count_text(Count, Unit),
                  tally_text(Tally, State),
                  case Since > 1 of
                      true -> fmt(", showing from seq ~b", [Since]);
                      false -> <<>>
                  end]),
    Lines = [maps:get(line, E) || E <- Shown],
    Tail = case More of
               0 -> [];
               _ -> [fmt("... ~b more; call again with since=~b", [More, Next])]
           end,
    Key = case Type of
              calls -> calls;
              messages -> events
          end,
    Data = maps:without([table], maps:merge(Info, Tally)),
    ok_reply([Header | Lines] ++ Tail,
             Data#{Key => [maps:without([line], E) || E <- Shown], next_seq => Next}).

%% `running (stops at ...)' or `stopped: <the one stop reason>'.
state_text(#{state := running, max_events := Max, unit := Unit, duration_ms := Dur,
             rate := Rate}) ->
    RateText = case Rate of
                   undefined -> <<>>;
                   _ -> fmt(" or over ~b ~ts a second", [Rate, Unit])
               end,
    fmt("running (stops at ~ts, after ~b ms~ts)", [count_text(Max, Unit), Dur, RateText]);
state_text(#{state := State, stop_detail := Detail}) ->
    fmt("~ts: ~ts", [State, Detail]).

%% How the calls of a session ended so far (nothing for message sessions).
tally(calls, Tab) ->
    ets:foldl(fun({_, #{status := St}}, #{returned := R, raised := X, not_returned := N} = T) ->
                      case St of
                          returned -> T#{returned => R + 1};
                          raised -> T#{raised => X + 1};
                          running -> T#{not_returned => N + 1};
                          _ -> T
                      end;
                 (_, T) -> T
              end, #{returned => 0, raised => 0, not_returned => 0}, Tab);
tally(messages, _Tab) ->
    #{}.

tally_text(#{returned := R, raised := X, not_returned := N}, State) ->
    Parts = [fmt("~b returned", [R]) || R > 0]
        ++ [fmt("~b raised", [X]) || X > 0]
        ++ [case State of
                running -> fmt("~b still running", [N]);
                _ -> fmt("~b had not returned when the trace stopped", [N])
            end || N > 0],
    case Parts of
        [] -> <<>>;
        _ -> iolist_to_binary([": ", lists:join(<<", ">>, Parts)])
    end;
tally_text(_, _State) ->
    <<>>.

%% A stored event as read: a call gets its text and line from its outcome so far.
shown(#{kind := call, status := Status0, call := Call, time := Time, pid := Pid,
        name := Name, depth := Depth} = E, State) ->
    Status = case {Status0, State} of
                 {running, running} -> running;
                 {running, _} -> unfinished;
                 _ -> Status0
             end,
    Outcome = case Status of
                  returned -> [" -> ", maps:get(result, E), duration_text(E)];
                  raised -> [" raised ", maps:get(exception, E), duration_text(E)];
                  running -> <<" ... (running, no return yet)">>;
                  unfinished -> <<" ... (had not returned when the trace stopped)">>;
                  called -> <<>>
              end,
    Text = os_sup_render:bound(iolist_to_binary([Call, Outcome]), ?LINE_BYTES),
    Indent = binary:copy(<<"  ">>, min(Depth, ?MAX_INDENT)),
    Line = os_sup_render:bound(iolist_to_binary([Time, " ", Pid,
                                                 case Name of
                                                     undefined -> [];
                                                     _ -> [" (", Name, ")"]
                                                 end, " ", Indent, Text]), ?LINE_BYTES),
    E#{status => Status, text => Text, line => Line};
shown(E, _State) ->
    E.

duration_text(#{duration_us := Us}) when is_integer(Us) ->
    [" (", duration(Us), ")"];
duration_text(_) ->
    [].

%% 12 µs, 3.4 ms, 1.25 s.
duration(Us) when Us < 1000 ->
    <<(integer_to_binary(Us))/binary, " µs"/utf8>>;
duration(Us) when Us < 1000000 ->
    fmt("~.1f ms", [Us / 1000]);
duration(Us) ->
    fmt("~.2f s", [Us / 1000000]).

stop_tool(Args) ->
    Id = case arg_text(session, Args) of
             undefined -> active;
             Text -> Text
         end,
    case manager_call({stop, Id}) of
        {ok, #{session := S, count := Count, stop_detail := Detail, unit := Unit} = Info} ->
            Line = case maps:get(already, Info, false) of
                       true -> fmt("trace ~ts had already stopped: ~ts; ~ts",
                                   [S, Detail, count_text(Count, Unit)]);
                       false -> fmt("trace ~ts stopped: ~ts; ~ts; every pattern and flag is "
                                    "removed", [S, Detail, count_text(Count, Unit)])
                   end,
            ok_reply([Line], maps:without([table, already], Info));
        {error, Kind, Msg} ->
            error_reply(Kind, Msg)
    end.

traces_tool(_Args) ->
    case manager_call(list) of
        {ok, #{sessions := Sessions}} ->
            Lines = case Sessions of
                        [] -> [<<"no trace sessions (start one with trace or trace_messages)">>];
                        _ -> [fmt("~ts ~ts: ~ts; ~ts", [Id, P, state_text(I), count_text(C, U)])
                              || #{session := Id, pattern := P, count := C, unit := U} = I
                                     <- Sessions]
                    end,
            ok_reply(Lines, #{sessions => [maps:without([table], I) || I <- Sessions]});
        {error, Kind, Msg} ->
            error_reply(Kind, Msg)
    end.

session_arg(Args) ->
    case arg_text(session, Args) of
        undefined -> latest;
        Id when is_binary(Id) -> Id;
        _ -> fail(bad_args, "session must be text like t1", [])
    end.

read_events(Tab, Since, Limit) ->
    First = case ets:member(Tab, Since) of
                true -> Since;
                false -> ets:next(Tab, Since)
            end,
    read_events(Tab, First, Limit, []).

read_events(_Tab, Key, Limit, Acc) when not is_integer(Key); Limit =< 0 ->
    lists:reverse(Acc);
read_events(Tab, Key, Limit, Acc) ->
    case ets:lookup(Tab, Key) of
        [{Key, E}] -> read_events(Tab, ets:next(Tab, Key), Limit - 1, [E | Acc]);
        [] -> read_events(Tab, ets:next(Tab, Key), Limit, Acc)
    end.

last_seq(Tab) ->
    case ets:last(Tab) of
        K when is_integer(K) -> K;
        _ -> 0
    end.

%%%===================================================================
%%% Private: talking to the manager and the system monitor process
%%%===================================================================

manager_call(Request) ->
    call(ensure_started(?MANAGER, manager_init), Request).

call(Pid, Request) when is_pid(Pid) ->
    MRef = erlang:monitor(process, Pid),
    Ref = make_ref(),
    Pid ! {?MODULE, Ref, self(), Request},
    receive
        {Ref, Reply} ->
            erlang:demonitor(MRef, [flush]),
            Reply;
        {'DOWN', MRef, process, Pid, Why} ->
            {error, unavailable, fmt("the tracing process exited (~tP); try again", [Why, 5])}
    after ?CALL_MS ->
            erlang:demonitor(MRef, [flush]),
            {error, unavailable, fmt("the tracing process did not answer within ~b ms",
                                     [?CALL_MS])}
    end;
call(Error, _Request) ->
    Error.

%% The registered process `Name', started with `?MODULE:Init(Parent, Ref)' if needed.
ensure_started(Name, Init) ->
    case whereis(Name) of
        Pid when is_pid(Pid) -> Pid;
        undefined ->
            Ref = make_ref(),
            {Pid, MRef} = spawn_monitor(?MODULE, Init, [self(), Ref]),
            receive
                {Ref, _Started} ->
                    erlang:demonitor(MRef, [flush]),
                    case whereis(Name) of
                        P when is_pid(P) -> P;
                        undefined -> ensure_started(Name, Init)
                    end;
                {'DOWN', MRef, process, Pid, Why} ->
                    {error, internal, fmt("~ts did not start: ~tP", [Name, Why, 5])}
            after ?CALL_MS ->
                    exit(Pid, kill),
                    {error, internal, fmt("~ts did not start in time", [Name])}
            end
    end.

%%%===================================================================
%%% Private: session manager
%%%===================================================================

manager_handle({start, _Spec}, #{active := Active} = S) when Active =/= undefined ->
    #{Active := #{description := Desc}} = maps:get(sessions, S),
    {{error, busy, fmt("trace ~ts is running (~ts); this node has one tracer, so stop it with "
                       "trace_stop first or wait for it to end", [Active, Desc])}, S};
manager_handle({start, Spec}, S) ->
    Id = <<"t", (integer_to_binary(next_id()))/binary>>,
    Tab = ets:new(os_sup_trace_events, [ordered_set, public]),
    Session0 = Spec#{id => Id, table => Tab, manager => self()},
    Tracer = spawn_opt(?MODULE, tracer_init, [Session0],
                       [{message_queue_data, off_heap}, {priority, normal},
                        {max_heap_size, #{size => ?TRACER_HEAP_WORDS, kill => true,
                                          error_logger => false}}]),
    TMon = erlang:monitor(process, Tracer),
    case arm(Session0, Tracer) of
        ok ->
            Caller = maps:get(caller, Spec),
            CMon = case is_pid(Caller) of
                       true -> erlang:monitor(process, Caller);
                       false -> undefined
                   end,
            TRef = erlang:start_timer(maps:get(duration_ms, Spec), self(), {duration, Id}),
            Session = Session0#{tracer => Tracer, tmon => TMon, cmon => CMon, timer => TRef,
                                state => running, stop_reason => undefined,
                                stop_detail => undefined, started_at => os:system_time(microsecond),
                                stopped_at => undefined},
            S1 = S#{active => Id,
                    sessions => maps:put(Id, Session, maps:get(sessions, S))},
            {{ok, summary(Session)}, S1};
        {error, Kind, Msg} ->
            disarm(Session0),
            erlang:demonitor(TMon, [flush]),
            exit(Tracer, kill),
            ets:delete(Tab),
            {{error, Kind, Msg}, S}
    end;
manager_handle({info, latest}, #{active := undefined, finished := []} = S) ->
    {{error, not_found, <<"no trace session yet (start one with trace or trace_messages)">>}, S};
manager_handle({info, latest}, #{active := undefined, finished := [Id | _]} = S) ->
    manager_handle({info, Id}, S);
manager_handle({info, latest}, #{active := Id} = S) ->
    manager_handle({info, Id}, S);
manager_handle({info, Id}, S) ->
    case find(Id, S) of
        {ok, Session} -> {{ok, summary(Session)}, S};
        error -> {unknown_session(Id, S), S}
    end;
manager_handle({stop, active}, #{active := undefined} = S) ->
    {{error, not_found, <<"no trace is running (traces lists the sessions kept)">>}, S};
manager_handle({stop, active}, #{active := Id} = S) ->
    manager_handle({stop, Id}, S);
manager_handle({stop, Id}, S) ->
    case find(Id, S) of
        {ok, #{state := running}} ->
            S1 = stop_session(Id, stopped, <<"manual (trace_stop)">>, S),
            {ok, Session} = find(Id, S1),
            {{ok, summary(Session)}, S1};
        {ok, Session} ->
            {{ok, (summary(Session))#{already => true}}, S};
        error ->
            {unknown_session(Id, S), S}
    end;
manager_handle(list, #{sessions := Sessions, active := Active} = S) ->
    Ordered = lists:sort(fun(#{started_at := A}, #{started_at := B}) -> A >= B end,
                         maps:values(Sessions)),
    Tracers = [T || #{state := running, tracer := T} <- Ordered],
    {{ok, #{sessions => [summary(X) || X <- Ordered], active => Active, tracers => Tracers}},
     S};
manager_handle(_Other, S) ->
    {{error, bad_args, <<"unknown trace manager request">>}, S}.

manager_info({trace_stopped, Tracer, Id, Reason, Detail}, S) ->
    case find(Id, S) of
        {ok, #{state := running, tracer := Tracer}} -> stop_session(Id, Reason, Detail, S);
        _ -> S
    end;
manager_info({timeout, _TRef, {duration, Id}}, S) ->
    case find(Id, S) of
        {ok, #{state := running} = Session} ->
            stop_session(Id, duration, duration_detail(Session), S);
        _ -> S
    end;
manager_info({'DOWN', MRef, process, _Pid, Why}, #{active := Id} = S) when Id =/= undefined ->
    case find(Id, S) of
        {ok, #{tmon := MRef}} ->
            stop_session(Id, error, fmt("error (the tracer exited: ~tP)", [Why, 5]), S);
        {ok, #{cmon := MRef}} ->
            stop_session(Id, caller_down, caller_down_detail(Why), S);
        _ -> S
    end;
manager_info(_Other, S) ->
    S.

%% Disarms a running session, ends its tracer, and files it with the finished ones.
stop_session(Id, Reason, Detail, #{sessions := Sessions, finished := Finished} = S) ->
    #{Id := Session} = Sessions,
    disarm(Session),
    #{tracer := Tracer, tmon := TMon, cmon := CMon, timer := TRef} = Session,
    erlang:demonitor(TMon, [flush]),
    case CMon of
        undefined -> ok;
        _ -> erlang:demonitor(CMon, [flush])
    end,
    _ = erlang:cancel_timer(TRef),
    exit(Tracer, kill),
    Done = Session#{state => stopped, stop_reason => Reason, stop_detail => Detail,
                    stopped_at => os:system_time(microsecond)},
    Active = case maps:get(active, S) of
                 Id -> undefined;
                 Other -> Other
             end,
    evict(S#{sessions => Sessions#{Id => Done}, finished => [Id | Finished -- [Id]],
             active => Active}).

%% Keeps the newest finished sessions within ?KEEP_FINISHED and ?KEEP_FINISHED_EVENTS.
evict(#{sessions := Sessions, finished := Finished} = S) ->
    {Keep, Drop, _} =
        lists:foldl(fun(Id, {K, D, Events}) ->
                            #{Id := #{table := Tab}} = Sessions,
                            Size = case ets:info(Tab, size) of N when is_integer(N) -> N; _ -> 0 end,
                            case length(K) < ?KEEP_FINISHED
                                andalso (K =:= [] orelse Events + Size =< ?KEEP_FINISHED_EVENTS) of
                                true -> {[Id | K], D, Events + Size};
                                false -> {K, [Id | D], Events}
                            end
                    end, {[], [], 0}, Finished),
    _ = [catch ets:delete(maps:get(table, maps:get(Id, Sessions))) || Id <- Drop],
    S#{sessions => maps:without(Drop, Sessions), finished => lists:reverse(Keep)}.

%% Session numbers unique for the node's life (a restarted manager does not reuse `t1'):
%% an atomics counter kept in a persistent term that is written once.
next_id() ->
    Ref = case persistent_term:get(?ID_KEY, undefined) of
              undefined ->
                  R = atomics:new(1, [{signed, false}]),
                  persistent_term:put(?ID_KEY, R),
                  R;
              R -> R
          end,
    atomics:add_get(Ref, 1, 1).

find(Id, #{sessions := Sessions}) ->
    maps:find(Id, Sessions).

unknown_session(Id, #{sessions := Sessions}) ->
    Known = lists:sort(maps:keys(Sessions)),
    {error, not_found, fmt("no trace session ~ts (kept: ~ts)",
                           [Id, case Known of
                                    [] -> <<"none">>;
                                    _ -> lists:join(<<", ">>, Known)
                                end])}.

summary(#{id := Id, type := Type, description := Desc, table := Tab, state := State,
          stop_reason := Reason, stop_detail := Detail, started_at := Started,
          stopped_at := Stopped, max_events := Max, duration_ms := Dur, rate := Rate}) ->
    Count = case catch ets:info(Tab, size) of N when is_integer(N) -> N; _ -> 0 end,
    End = case Stopped of undefined -> os:system_time(microsecond); _ -> Stopped end,
    #{session => Id, type => Type, pattern => Desc, state => State, stop_reason => Reason,
      stop_detail => Detail, count => Count, unit => unit(Type), started_at => clock(Started),
      elapsed_ms => (End - Started) div 1000, max_events => Max, duration_ms => Dur,
      rate => Rate, table => Tab}.

%% What max_events counts: calls for `trace', sends and receives for `trace_messages'.
unit(calls) -> <<"calls">>;
unit(_) -> <<"events">>.

%% `1 call', `12 calls'.
count_text(1, Unit) ->
    <<"1 ", (binary:part(Unit, 0, byte_size(Unit) - 1))/binary>>;
count_text(N, Unit) ->
    fmt("~b ~ts", [N, Unit]).

%% The one stop reason of a session, as text starting with the reason's name.
max_events_detail(#{max_events := Max, type := Type}) ->
    fmt("max_events (~ts) reached", [count_text(Max, unit(Type))]).

duration_detail(#{duration_ms := Dur}) ->
    fmt("duration (~b ms) passed", [Dur]).

caller_down_detail(Why) ->
    fmt("caller_down (the MCP server that started it went away: ~tP)", [Why, 5]).

%% Sets the session's patterns and flags with `Tracer' as the tracer.
arm(#{type := Type, target := Target, flags := Flags} = Spec, Tracer) ->
    try
        case Type of
            calls ->
                [Pattern] = maps:get(patterns, Spec),
                case erlang:trace_pattern(Pattern, maps:get(match_spec, Spec), [local]) of
                    0 -> throw({arm, not_found, <<"no function matches the pattern">>});
                    _ -> ok
                end;
            messages ->
                ok
        end,
        case erlang:trace(Target, true, [{tracer, Tracer} | Flags]) of
            0 when Target =/= all ->
                throw({arm, busy, <<"the process could not be traced">>});
            _ -> ok
        end,
        %% never trace the tracing machinery itself (it calls stdlib and os_sup_render)
        case Target of
            all ->
                _ = [catch erlang:trace(P, false, Flags)
                     || P <- [Tracer, self(), whereis(?SYSMON)], is_pid(P)],
                ok;
            _ -> ok
        end,
        ok
    catch
        throw:{arm, Kind, Msg} -> {error, Kind, Msg};
        error:badarg -> {error, not_found, <<"the process to trace exited">>};
        C:R -> {error, internal, fmt("setting the trace failed: ~tp:~tP", [C, R, 8])}
    end.

%%%===================================================================
%%% Private: tracer
%%%===================================================================

tracer_stop(Reason, Detail, #{manager := Manager, id := Id} = S) ->
    disarm(S),
    Manager ! {trace_stopped, self(), Id, Reason, Detail},
    ok.

tracer_event(Msg, #{seen := Seen} = S0) ->
    S = S0#{seen => Seen + 1},
    case Seen rem ?QUEUE_CHECK_EVERY of
        0 ->
            case erlang:process_info(self(), message_queue_len) of
                {message_queue_len, Q} when Q > ?MAX_QUEUE ->
                    {stop, rate, fmt("rate (the tracer fell behind: ~b trace messages queued; "
                                     "trace something narrower or set a lower rate)", [Q]), S};
                _ -> classify(Msg, S)
            end;
        _ -> classify(Msg, S)
    end.

classify({trace_ts, Pid, call, {M, F, Args} = MFArgs, TS}, S) when is_list(Args) ->
    case matches(M, F, length(Args), S) of
        true -> call_event(Pid, MFArgs, TS, S);
        false -> S
    end;
classify({trace_ts, Pid, return_from, {M, F, A} = MFA, Result, TS}, S) ->
    case matches(M, F, A, S) of
        true -> finished(Pid, MFA, {returned, Result}, TS, S);
        false -> S
    end;
classify({trace_ts, Pid, exception_from, {M, F, A} = MFA, {Class, Value}, TS}, S) ->
    case matches(M, F, A, S) of
        true -> finished(Pid, MFA, {raised, Class, Value}, TS, S);
        false -> S
    end;
classify({trace_ts, Pid, send, Msg, To, TS}, #{type := messages, target := Pid} = S) ->
    message_event(Pid, send, {Msg, To}, TS, S);
classify({trace_ts, Pid, send_to_non_existing_process, Msg, To, TS},
         #{type := messages, target := Pid} = S) ->
    message_event(Pid, send, {Msg, To, dead}, TS, S);
classify({trace_ts, Pid, 'receive', Msg, TS}, #{type := messages, target := Pid} = S) ->
    message_event(Pid, 'receive', Msg, TS, S);
classify(_Other, S) ->
    S.

matches(M, F, A, #{type := calls, module := Mod, function := Fun, arity := Arity}) ->
    (Mod =:= '_' orelse Mod =:= M) andalso (Fun =:= '_' orelse Fun =:= F)
        andalso (Arity =:= '_' orelse Arity =:= A);
matches(_, _, _, _) ->
    false.

%% Whether one more counted event (a call, send or receive) may be recorded: `skip' once
%% max_events is reached (calls still queued are only tracked, so their returns pair up),
%% a stop when the rate is exceeded.
admit(#{draining := true} = S) ->
    {skip, S};
admit(S0) ->
    case rate_ok(S0) of
        {false, #{rate := Rate, type := Type} = S1} ->
            {stop, rate, fmt("rate (more than ~b ~ts in one second)", [Rate, unit(Type)]), S1};
        {true, #{counted := C} = S1} ->
            {ok, S1#{counted => C + 1}}
    end.

message_event(Pid, Kind, Event, TS, S0) ->
    case admit(S0) of
        {ok, S1} -> at_limit(store(Pid, Kind, Event, TS, S1));
        {skip, S1} -> S1;
        Stop -> Stop
    end.

%% A call: recorded (status running until its return or exception arrives) and pushed on
%% its process's stack of calls still out; past the limit only pushed.
call_event(Pid, MFArgs, TS, S0) ->
    case admit(S0) of
        {ok, S1} ->
            {Seq, S2} = store_call(Pid, MFArgs, TS, S1),
            at_limit(push(Pid, Seq, MFArgs, TS, S2));
        {skip, S1} ->
            push(Pid, skip, MFArgs, TS, S1);
        Stop ->
            Stop
    end.

rate_ok(#{rate := undefined} = S) ->
    {true, S};
rate_ok(#{rate := Rate, win_start := Start, win_count := N} = S) ->
    Now = now_ms(),
    case Now - Start >= 1000 of
        true -> {true, S#{win_start => Now, win_count => 1}};
        false when N + 1 > Rate -> {false, S};
        false -> {true, S#{win_count => N + 1}}
    end.

at_limit(#{counted := C, max_events := Max} = S) when C >= Max ->
    limit_reached(S);
at_limit(S) ->
    S.

%% At max_events: stop now, or (paired calls still out) remove the call patterns so no new
%% call is traced, and wait up to ?DRAIN_MS for the pending returns.
limit_reached(#{type := calls, paired := true, pending := P} = S) when P > 0 ->
    _ = [catch erlang:trace_pattern(Pat, false, [local]) || Pat <- maps:get(patterns, S)],
    _ = erlang:start_timer(?DRAIN_MS, self(), drained),
    S#{draining => true};
limit_reached(S) ->
    {stop, max_events, max_events_detail(S), S}.

drained(#{draining := true, pending := 0} = S) ->
    {stop, max_events, max_events_detail(S), S};
drained(S) ->
    S.

%% Per process, the calls still out, innermost first: {Seq | skip, MFA, CallUs, Depth}.
push(Pid, Seq, {M, F, Args}, TS, #{paired := true, stacks := Stacks, pending := P} = S) ->
    Stack = maps:get(Pid, Stacks, []),
    Frame = {Seq, {M, F, length(Args)}, ts_us(TS), depth(Stack)},
    S#{stacks => Stacks#{Pid => [Frame | Stack]},
       pending => case Seq of
                      skip -> P;
                      _ -> P + 1
                  end};
push(_Pid, _Seq, _MFArgs, _TS, S) ->
    S.

%% How many calls of the process are still out (its nesting level).
depth([]) -> 0;
depth([{_, _, _, D} | _]) -> D + 1.

%% A return or exception: pairs with the innermost call of that function still out in that
%% process (the top of its stack, unless a frame was lost), and completes its record.
finished(Pid, MFA, Outcome, TS, #{stacks := Stacks, pending := P} = S) ->
    case take(MFA, maps:get(Pid, Stacks, []), []) of
        none ->
            S;
        {{Seq, _, CallUs, _}, Rest} ->
            S1 = S#{stacks => case Rest of
                                  [] -> maps:remove(Pid, Stacks);
                                  _ -> Stacks#{Pid => Rest}
                              end},
            case Seq of
                skip ->
                    S1;
                _ ->
                    complete(Seq, Outcome, ts_us(TS) - CallUs, S1),
                    drained(S1#{pending => max(0, P - 1)})
            end
    end.

take(_MFA, [], _Above) ->
    none;
take(MFA, [{_, MFA, _, _} = Frame | Rest], Above) ->
    {Frame, lists:reverse(Above, Rest)};
take(MFA, [Other | Rest], Above) ->
    take(MFA, Rest, [Other | Above]).

store_call(Pid, {M, F, Args} = MFArgs, TS, #{table := Tab, seq := Seq0, fmt := Fmt,
                                              stacks := Stacks, paired := Paired} = S) ->
    Seq = Seq0 + 1,
    Us = ts_us(TS),
    S1 = names_fresh(Pid, S),
    ets:insert(Tab, {Seq, #{seq => Seq, time => clock(Us), time_us => Us,
                            pid => os_sup_render:pid(Pid, Fmt),
                            name => registered_name(Pid, S1), kind => call,
                            mfa => os_sup_render:mfa({M, F, length(Args)}, Fmt),
                            depth => depth(maps:get(Pid, Stacks, [])),
                            call => os_sup_render:call(MFArgs, Fmt, ?CALL_BYTES),
                            status => case Paired of
                                          true -> running;
                                          false -> called
                                      end,
                            result => undefined, exception => undefined,
                            duration_us => undefined}}),
    {Seq, S1#{seq => Seq}}.

complete(Seq, Outcome, DurUs, #{table := Tab, fmt := Fmt}) ->
    case ets:lookup(Tab, Seq) of
        [{Seq, Call}] ->
            Done = case Outcome of
                       {returned, Result} ->
                           Call#{status => returned,
                                 result => os_sup_render:term(Result, Fmt, ?RESULT_BYTES)};
                       {raised, Class, Value} ->
                           Call#{status => raised,
                                 exception => <<(atom_to_binary(Class, utf8))/binary, ": ",
                                                (os_sup_render:term(Value, Fmt,
                                                                    ?RESULT_BYTES))/binary>>}
                   end,
            ets:insert(Tab, {Seq, Done#{duration_us => max(0, DurUs)}});
        [] ->
            true
    end.

registered_name(Pid, #{names := Names, fmt := Fmt}) ->
    case Names of
        #{Pid := N} -> os_sup_render:name(N, Fmt);
        _ -> undefined
    end.

%% A send or receive, stored with its line.
store(Pid, Kind, Event, TS, #{table := Tab, seq := Seq0, fmt := Fmt} = S) ->
    Seq = Seq0 + 1,
    Us = ts_us(TS),
    PidBin = os_sup_render:pid(Pid, Fmt),
    S1 = names_fresh(Pid, S),
    Names = maps:get(names, S1),
    Name = registered_name(Pid, S1),
    Time = clock(Us),
    Text = event_text(Kind, Event, Names, Fmt),
    Line = os_sup_render:bound(iolist_to_binary([Time, " ", PidBin,
                                                 case Name of
                                                     undefined -> [];
                                                     _ -> [" (", Name, ")"]
                                                 end, " ", Text]), ?LINE_BYTES),
    ets:insert(Tab, {Seq, #{seq => Seq, time => Time, time_us => Us, pid => PidBin,
                            name => Name, kind => Kind, text => Text, line => Line}}),
    S1#{seq => Seq}.

%% Registered names by pid, from `registered()' and `whereis/1' (no signal to any process:
%% `process_info' on a busy traced process would make the tracer wait behind its own queue);
%% refreshed at most once a second, when an unknown pid shows up.
names_fresh(Pid, #{names := Names} = S) when is_map_key(Pid, Names) ->
    S;
names_fresh(_Pid, #{names_at := At} = S) ->
    Now = now_ms(),
    case Now - At >= 1000 of
        true -> S#{names => names(), names_at => Now};
        false -> S
    end.

names() ->
    maps:from_list([{P, N} || N <- lists:sublist(registered(), 10000),
                              P <- [whereis(N)], is_pid(P)]).

event_text(send, {Msg, To}, Names, Fmt) ->
    <<">> ", (os_sup_render:term(Msg, Fmt, ?LINE_BYTES - 200))/binary, " to ",
      (dest_text(To, Names, Fmt))/binary>>;
event_text(send, {Msg, To, dead}, Names, Fmt) ->
    <<">> ", (os_sup_render:term(Msg, Fmt, ?LINE_BYTES - 220))/binary, " to ",
      (dest_text(To, Names, Fmt))/binary, " (no such process)">>;
event_text('receive', Msg, _Names, Fmt) ->
    <<"<< ", (os_sup_render:term(Msg, Fmt, ?LINE_BYTES - 100))/binary>>.

dest_text(To, Names, Fmt) when is_pid(To) ->
    case Names of
        #{To := N} ->
            <<(os_sup_render:pid(To, Fmt))/binary, " (", (os_sup_render:name(N, Fmt))/binary, ")">>;
        _ -> os_sup_render:pid(To, Fmt)
    end;
dest_text(To, _Names, Fmt) when is_atom(To) ->
    os_sup_render:name(To, Fmt);
dest_text(To, _Names, Fmt) ->
    os_sup_render:term(To, Fmt, 200).

%%%===================================================================
%%% Private: system monitor
%%%===================================================================

sysmon_tool(Args) ->
    Fmt = fmt_arg(Args),
    Limit = arg_int(limit, Args, ?DEFAULT_LIMIT, 1, ?SYSMON_KEEP),
    Off = arg_bool(off, Args),
    Settings0 = #{long_gc_ms => arg_int(long_gc_ms, Args, undefined, 1, 3600000),
                  long_schedule_ms => arg_int(long_schedule_ms, Args, undefined, 1, 3600000),
                  large_heap_words => arg_int(large_heap_words, Args, undefined, 1000, 1 bsl 50),
                  busy_port => arg_bool(busy_port, Args),
                  busy_dist_port => arg_bool(busy_dist_port, Args)},
    Settings = maps:filter(fun(_, V) -> V =/= undefined andalso V =/= false end, Settings0),
    Reply = case {Off, maps:size(Settings)} of
                {true, _} ->
                    case whereis(?SYSMON) of
                        undefined -> {ok, idle_status()};
                        Pid -> call(Pid, {off, Limit})
                    end;
                {false, 0} ->
                    case whereis(?SYSMON) of
                        undefined -> {ok, idle_status()};
                        Pid -> call(Pid, {status, Limit})
                    end;
                {false, _} ->
                    Opts = sysmon_opts(Settings),
                    call(ensure_started(?SYSMON, sysmon_init),
                         {configure, Opts, Settings, caller_arg(Args), Fmt, Limit})
            end,
    case Reply of
        {ok, #{active := Active, settings := Set, events := Events, dropped := Dropped} = Data} ->
            Head = fmt("system_monitor ~ts~ts; ~b events kept, ~b dropped (over ~b/s)",
                       [case Active of true -> <<"on">>; false -> <<"off">> end,
                        settings_text(Set), maps:get(total, Data, length(Events)), Dropped,
                        ?SYSMON_RATE]),
            Lines = [Head | [maps:get(text, E) || E <- Events]],
            ok_reply(Lines, Data);
        {error, Kind, Msg} ->
            error_reply(Kind, Msg)
    end.

idle_status() ->
    #{active => false, settings => #{}, events => [], dropped => 0, total => 0,
      owner => current_monitor()}.

current_monitor() ->
    case erlang:system_monitor() of
        {Pid, _} when is_pid(Pid) -> list_to_binary(pid_to_list(Pid));
        _ -> undefined
    end.

settings_text(Set) when map_size(Set) =:= 0 ->
    <<>>;
settings_text(Set) ->
    <<" (", (iolist_to_binary(lists:join(<<", ">>,
                                         [fmt("~ts=~tp", [K, V])
                                          || {K, V} <- lists:sort(maps:to_list(Set))])))/binary,
      ")">>.

sysmon_opts(Settings) ->
    lists:append([[{long_gc, V} || {long_gc_ms, V} <- maps:to_list(Settings)],
                  [{long_schedule, V} || {long_schedule_ms, V} <- maps:to_list(Settings)],
                  [{large_heap, V} || {large_heap_words, V} <- maps:to_list(Settings)],
                  [busy_port || maps:get(busy_port, Settings, false)],
                  [busy_dist_port || maps:get(busy_dist_port, Settings, false)]]).

sysmon_handle({configure, Opts, Settings, Caller, Fmt, Limit}, S) ->
    Me = self(),
    case erlang:system_monitor() of
        {Other, _} when Other =/= Me ->
            {{error, busy, fmt("another process (~ts) is the system monitor of this node; "
                               "it would be replaced, so stop that tool first",
                               [pid_to_list(Other)])}, S};
        _ ->
            _ = erlang:system_monitor(Me, Opts),
            S1 = demonitor_caller(S),
            CMon = case is_pid(Caller) of
                       true -> erlang:monitor(process, Caller);
                       false -> undefined
                   end,
            S2 = S1#{active => true, settings => Settings, caller => Caller, cmon => CMon,
                     fmt => Fmt},
            {{ok, sysmon_status(Limit, S2)}, S2}
    end;
sysmon_handle({off, Limit}, S) ->
    S1 = sysmon_off(S),
    {{ok, sysmon_status(Limit, S1)}, S1};
sysmon_handle({status, Limit}, S) ->
    {{ok, sysmon_status(Limit, S)}, S};
sysmon_handle(_Other, S) ->
    {{error, bad_args, <<"unknown system monitor request">>}, S}.

sysmon_off(#{active := Active} = S) ->
    Me = self(),
    _ = case Active andalso erlang:system_monitor() of
            {Me, _} -> erlang:system_monitor(undefined);
            _ -> ok
        end,
    (demonitor_caller(S))#{active => false}.

demonitor_caller(#{cmon := undefined} = S) ->
    S;
demonitor_caller(#{cmon := CMon} = S) ->
    erlang:demonitor(CMon, [flush]),
    S#{cmon => undefined, caller => undefined}.

sysmon_status(Limit, #{tab := Tab, active := Active, settings := Set, dropped := Dropped}) ->
    Events = last_n(Tab, Limit),
    #{active => Active, settings => Set, events => Events, dropped => Dropped,
      total => ets:info(Tab, size), owner => current_monitor()}.

last_n(Tab, N) ->
    last_n(Tab, ets:last(Tab), N, []).

last_n(_Tab, '$end_of_table', _N, Acc) -> Acc;
last_n(_Tab, _Key, 0, Acc) -> Acc;
last_n(Tab, Key, N, Acc) ->
    [{_, E}] = ets:lookup(Tab, Key),
    last_n(Tab, ets:prev(Tab, Key), N - 1, [E | Acc]).

sysmon_event(Who, Kind, Info, #{active := true, tab := Tab, seq := Seq0, fmt := Fmt} = S) ->
    Now = now_ms(),
    S1 = case Now - maps:get(win_start, S) >= 1000 of
             true -> S#{win_start => Now, win_count => 0};
             false -> S
         end,
    case maps:get(win_count, S1) >= ?SYSMON_RATE of
        true ->
            S1#{dropped => maps:get(dropped, S1) + 1};
        false ->
            Seq = Seq0 + 1,
            Us = os:system_time(microsecond),
            Time = clock(Us),
            {WhoBin, Name, Current} = who(Who, Fmt),
            InfoBin = os_sup_render:bound(info_text(Info, Fmt), 400),
            Text = iolist_to_binary([Time, " ", atom_to_binary(Kind, utf8), " ", WhoBin,
                                     case Name of undefined -> []; _ -> [" (", Name, ")"] end,
                                     case Current of undefined -> []; _ -> [" in ", Current] end,
                                     " ", InfoBin]),
            ets:insert(Tab, {Seq, #{seq => Seq, time => Time, time_us => Us, kind => Kind,
                                    pid => WhoBin, name => Name, current => Current,
                                    info => InfoBin, text => Text}}),
            _ = ets:delete(Tab, Seq - ?SYSMON_KEEP),
            S1#{seq => Seq, win_count => maps:get(win_count, S1) + 1}
    end;
sysmon_event(_Who, _Kind, _Info, S) ->
    S.

who(Pid, Fmt) when is_pid(Pid) ->
    Items = case catch erlang:process_info(Pid, [registered_name, current_function]) of
                L when is_list(L) -> L;
                _ -> []
            end,
    Name = case lists:keyfind(registered_name, 1, Items) of
               {_, N} when is_atom(N), N =/= [] -> os_sup_render:name(N, Fmt);
               _ -> undefined
           end,
    Current = case lists:keyfind(current_function, 1, Items) of
                  {_, {_, _, _} = MFA} -> os_sup_render:mfa(MFA, Fmt);
                  _ -> undefined
              end,
    {os_sup_render:pid(Pid, Fmt), Name, Current};
who(Other, Fmt) ->
    {os_sup_render:term(Other, Fmt, 100), undefined, undefined}.

info_text(Info, Fmt) when is_list(Info) ->
    iolist_to_binary(lists:join(<<" ">>, [case I of
                                               {K, V} when is_atom(K) ->
                                                   fmt("~ts=~ts", [K, os_sup_render:term(V, Fmt, 120)]);
                                               _ -> os_sup_render:term(I, Fmt, 120)
                                           end || I <- Info]));
info_text(Port, Fmt) ->
    os_sup_render:term(Port, Fmt, 200).

%%%===================================================================
%%% Private: small helpers
%%%===================================================================

reg_name(Pid) when is_pid(Pid) ->
    case node(Pid) =:= node() andalso catch erlang:process_info(Pid, registered_name) of
        {registered_name, N} when is_atom(N) -> N;
        _ -> undefined
    end;
reg_name(_) ->
    undefined.

now_ms() ->
    erlang:monotonic_time(millisecond).

ts_us({Mega, Sec, Micro}) ->
    (Mega * 1000000 + Sec) * 1000000 + Micro;
ts_us(_) ->
    os:system_time(microsecond).

%% UTC HH:MM:SS.micro of a system time in microseconds.
clock(Us) when is_integer(Us) ->
    {_, {H, M, Sec}} = calendar:system_time_to_universal_time(Us div 1000000, second),
    fmt("~2..0b:~2..0b:~2..0b.~6..0b", [H, M, Sec, Us rem 1000000]);
clock(_) ->
    undefined.

fmt(Fmt, Args) ->
    case unicode:characters_to_binary(io_lib:format(Fmt, Args)) of
        Bin when is_binary(Bin) -> Bin;
        _ -> iolist_to_binary(io_lib:format("~tP", [Args, 10]))
    end.
