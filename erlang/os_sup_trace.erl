%%% @doc `os_sup_trace' traces function calls and messages, and watches
%%% the system monitor, inside the node, for an AI agent. It is what
%%% `recon_trace' is to a person at a shell: every trace needs a count,
%%% dangerous patterns are refused, and the limits are enforced on the node
%%% by the tracer itself, so a trace that floods stops within milliseconds
%%% even when nobody is reading. Kernel and stdlib only (no `dbg', no
%%% `recon'); Elixir is used for rendering when it is loaded.
%%%
%%% The helper runs {@link trace/1} and {@link trace_messages/1} in a
%%% throw-away worker under a deadline (its tool table, request
%%% `{tool, Tool, Args, TimeoutMs}', with `caller' set to the
%%% server's pid). The worker only checks arguments and talks to the
%%% long-lived processes below, so it returns quickly.
%%%
%%% This module checks the arguments of `trace' and `trace_messages' and
%%% starts sessions; `os_sup_trace_read' answers `trace_results',
%%% `trace_stop' and `traces'; `os_sup_trace_sysmon' answers `system_monitor'.
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
%%%   <li>The session manager (module `os_sup_trace_session'), registered
%%%       as `os_sup_trace', started on demand. It owns at most one running session (OTP 25 has one
%%%       tracer per traced process and no trace sessions) and keeps the
%%%       last 8 finished ones (at most 40 000 events in all) for reading.
%%%       It owns each session's event table (an ETS `ordered_set' keyed by
%%%       sequence number) so events survive the tracer. It stops a session
%%%       on `trace_stop', when the duration passes and when the caller (the
%%%       server) goes down; its mailbox never holds trace messages, so it
%%%       acts at once even when the tracer is flooded.</li>
%%%   <li>One tracer per session (module `os_sup_trace_tracer'; the `{tracer, Pid}' of the trace flags).
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
%%%   <li>The system monitor process (module `os_sup_trace_sysmon'), registered
%%%       as `os_sup_trace_sysmon': the node's one owner of the system
%%%       monitor, which watches pauses all the time for `diagnose'; a tool
%%%       session keeps the last 500 of its events in a table, stores at most
%%%       50 a second (the rest are counted as dropped), and puts the baseline
%%%       back when the caller that started it goes down (the events stay
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
%%% A map with atom keys, text as binaries (see `os_sup_lib_proc' for
%%% pid and name spellings), plus `format => elixir | erlang | auto'.
%%% Errors come back as `{error, #{kind, message}}' with kinds `bad_args',
%%% `not_found', `dangerous', `busy', `unavailable' and `internal'.
%%% Times in text are UTC `HH:MM:SS.micro'.
-module(os_sup_trace).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [fmt_arg/1, arg_range/5, arg_text_only/2, arg_bool/2, arg_bool/3, caller_arg/1]).
-import(os_sup_lib_reply, [ok_reply/3, error_reply/2, fail/3]).
-import(os_sup_lib_text, [fmt/2]).

-export([trace/1, trace_messages/1]).

-define(MANAGER, os_sup_trace).
-define(SYSMON, os_sup_trace_sysmon).

%% session limits
-define(MAX_EVENTS, ?TRACE_MAX_EVENTS_MAX).
-define(DEFAULT_DURATION_MS, 10000).
-define(MAX_DURATION_MS, ?TRACE_DURATION_MS_MAX).
-define(MAX_RATE, ?TRACE_RATE_MAX).
-define(SCAN_MAX_PROCESSES, 500000).
%% reading
-define(TEXT_BYTES, 65536).
%% system monitor

-define(DANGEROUS,
        [erlang, erts_internal, lists, io, io_lib, gen, gen_server, gen_statem, gen_event,
         proc_lib, supervisor, ets, maps, timer, code, code_server, logger, unicode, binary,
         string, prim_file, file, init,
         'Elixir.Kernel', 'Elixir.Enum', 'Elixir.GenServer', 'Elixir.Map', 'Elixir.List',
         'Elixir.String', 'Elixir.Process', 'Elixir.IO', 'Elixir.Logger', 'Elixir.Inspect',
         'Elixir.Inspect.Algebra', 'Elixir.Keyword']).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `trace': `module' (required), `function' (`name' or `name/arity'), `arity',
%% `returns' (default true: pair calls with their returns and exceptions; `exceptions => true'
%% also turns it on), `pid' (default every process), `max_events' (required, 1..10000 calls),
%% `duration_ms' (1..60000), `rate' (calls a second), `force' (needed for every function of a
%% hot module) -> `#{session, ...}'. Returns quickly.
-spec trace(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
trace(Args) ->
    Fmt = fmt_arg(Args),
    Force = arg_bool(force, Args),
    FunText = arg_text_only(function, Args),
    ArityArg = arg_range(arity, Args, undefined, 0, 255),
    case FunText =:= undefined andalso ArityArg =/= undefined of
        true -> fail(bad_args, "arity needs a function (e.g. function \"duplicate\" with arity "
                     "2, or function \"duplicate/2\")", []);
        false -> ok
    end,
    Mod = resolve_module(arg_text_only(module, Args), Force),
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
    Target = target(arg_text_only(pid, Args)),
    Limits = limits(Args),
    %% {message, {caller}}: each call event names the function that made it.
    MatchSpec = case Paired of
                    true -> [{'_', [], [{exception_trace}, {message, {caller}}]}];
                    false -> [{'_', [], [{message, {caller}}]}]
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

%% @doc Tool `trace_messages': `send' and `receive' of `pid' (required), `max_events',
%% `duration_ms', `rate' -> `#{session, ...}'.
-spec trace_messages(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
trace_messages(Args) ->
    Fmt = fmt_arg(Args),
    Pid = case arg_text_only(pid, Args) of
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

%%%===================================================================
%%% Private: session limits
%%%===================================================================

%% Common limits of `trace' and `trace_messages'.
limits(Args) ->
    case maps:get(max_events, Args, undefined) of
        V when V =:= undefined; V =:= nil; V =:= null ->
            fail(bad_args, "max_events is required (1..~b): a trace stops by itself after that "
                 "many events", [?MAX_EVENTS]);
        _ -> ok
    end,
    #{max_events => arg_range(max_events, Args, undefined, ?TRACE_MAX_EVENTS_MIN, ?MAX_EVENTS),
      duration_ms => arg_range(duration_ms, Args, ?DEFAULT_DURATION_MS, ?TRACE_DURATION_MS_MIN,
                                   ?MAX_DURATION_MS),
      rate => arg_range(rate, Args, undefined, ?TRACE_RATE_MIN, ?MAX_RATE)}.

%%%===================================================================
%%% Private: trace and trace_messages (run in the worker)
%%%===================================================================

start_session(Spec) ->
    case os_sup_trace_session:call({start, Spec}) of
        {ok, Info} ->
            #{session := Id, max_events := Max, duration_ms := Dur, rate := Rate,
              unit := Unit} = Info,
            Line = fmt("trace ~ts started: ~ts~ts; stops after ~ts, ~b ms~ts; read it with "
                       "trace_results (stop: true ends it)",
                       [Id, maps:get(description, Spec),
                        case maps:get(paired, Spec) of
                            true -> <<", each call paired with its return or exception">>;
                            false -> <<>>
                        end, os_sup_trace_session:count_text(Max, Unit), Dur,
                        case Rate of
                            undefined -> <<>>;
                            _ -> fmt(" or more than ~b ~ts a second", [Rate, Unit])
                        end]),
            ok_reply([Line], maps:without([table], Info), ?TEXT_BYTES);
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
            Candidates = os_sup_lib_proc:name_atoms(Text),
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
    Name = os_sup_lib_render:name(Mod, auto_fmt()),
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
                            try binary_to_integer(A) of
                                I when is_integer(I), I >= 0, I =< 255 -> {N, I};
                                _ -> {Text, '_'}
                            catch _:_ -> {Text, '_'}
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
        _:_ -> fail(not_found, "~ts has no function ~ts", [os_sup_lib_render:name(Mod, auto_fmt()),
                                                           Text])
    end.

check_function('_', _, _, _) ->
    ok;
check_function(_Mod, '_', _, _) ->
    ok;
check_function(Mod, Fun, Arity, Fmt) ->
    Funs = try erlang:get_module_info(Mod, functions) of
               L when is_list(L) -> L;
               _ -> []
           catch _:_ -> []
           end,
    case [A || {F, A} <- Funs, F =:= Fun, Arity =:= '_' orelse A =:= Arity] of
        [_ | _] -> ok;
        [] ->
            Known = lists:usort([A || {F, A} <- Funs, F =:= Fun]),
            fail(not_found, "~ts does not define ~ts~ts", [os_sup_lib_render:name(Mod, Fmt),
                                                        pattern_text({Mod, Fun, Arity}, Fmt),
                                                        case Known of
                                                            [] -> <<>>;
                                                            _ -> fmt(" (arities: ~w)", [Known])
                                                        end])
    end.

target(undefined) -> all;
target(Text) -> resolve_pid(Text).

resolve_pid(Text) ->
    case os_sup_lib_proc:pid_arg(Text) of
        {ok, Pid} -> Pid;
        {error, #{kind := Kind, message := Msg}} -> throw({tool_error, Kind, Msg})
    end.

pattern_text({'_', _, _}, _Fmt) ->
    <<"every module">>;
pattern_text({M, '_', _}, Fmt) ->
    Sep = case Fmt of elixir -> <<".">>; _ -> <<":">> end,
    <<(os_sup_lib_render:name(M, Fmt))/binary, Sep/binary, "*">>;
pattern_text({M, F, '_'}, Fmt) ->
    Text = os_sup_lib_render:mfa({M, F, 0}, Fmt),
    <<(binary:part(Text, 0, byte_size(Text) - 2))/binary, "/*">>;
pattern_text(MFA, Fmt) ->
    os_sup_lib_render:mfa(MFA, Fmt).

target_text(all, _Fmt) -> <<"all processes">>;
target_text(Pid, Fmt) ->
    case reg_name(Pid) of
        undefined -> os_sup_lib_render:pid(Pid, Fmt);
        Name -> fmt("~ts (~ts)", [os_sup_lib_render:pid(Pid, Fmt), os_sup_lib_render:name(Name, Fmt)])
    end.

auto_fmt() ->
    os_sup_lib_render:format(auto).

%% Refuses (kind busy) when another tool traces on this node; never takes over its tracer.
check_foreign(Target) ->
    case whereis(dbg) of
        D when is_pid(D) ->
            fail(busy, "dbg is running on this node (~ts) and may be tracing; stop it with "
                 "dbg:stop() first", [pid_to_list(D)]);
        _ -> ok
    end,
    Ours = ours(),
    [case tracer_of(Which) of
         {tracer, T} when T =/= [] ->
             case live_foreign(T, Ours) of
                 true -> fail(busy, "another tracer (~tP) traces every new process on this node; "
                              "stop that tool (dbg, recon_trace, redbug) first", [T, 5]);
                 false -> ok
             end;
         _ -> ok
     end || Which <- [new_processes, new_ports]],
    Pids = case Target of
               all -> os_sup_lib_proc:first_processes(?SCAN_MAX_PROCESSES);
               Pid -> [Pid]
           end,
    scan_tracers(Pids, Ours).

scan_tracers([], _Ours) ->
    ok;
scan_tracers([P | Rest], Ours) ->
    case tracer_of(P) of
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

%% erlang:trace_info(What, tracer), `undefined' when it raises (a process gone).
tracer_of(What) ->
    try erlang:trace_info(What, tracer) catch _:_ -> undefined end.

ours() ->
    case os_sup_trace_session:call(list) of
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
%%% Private: small helpers
%%%===================================================================

reg_name(Pid) when is_pid(Pid) ->
    case node(Pid) =:= node() andalso
             try erlang:process_info(Pid, registered_name) catch _:_ -> undefined end of
        {registered_name, N} when is_atom(N) -> N;
        _ -> undefined
    end;
reg_name(_) ->
    undefined.
