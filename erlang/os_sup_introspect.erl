%%%-------------------------------------------------------------------
%%% @doc `os_sup_introspect' looks inside the node the way `observer' and
%%% `recon' do, for an AI agent: every tool returns a compact `text' (one
%%% line per item, capped at ~16 KB) and plain `data' (maps with atom keys,
%%% lists, binaries, numbers, atoms; every user term rendered to a bounded
%%% binary by `os_sup_render').
%%%
%%% The helper runs {@link run/2} in a throw-away worker under a deadline
%%% (request `{introspect, Tool, Args, TimeoutMs}'); each tool is also
%%% exported for use from `eval'. Kernel and stdlib only; Elixir is used
%%% for rendering when it is loaded.
%%%
%%% == Supervision ==
%%% <ul>
%%%   <li>{@link supervision_tree/1}: the tree under an application, a
%%%       registered name or a pid, summarised where it is huge.</li>
%%% </ul>
%%%
%%% == Processes ==
%%% <ul>
%%%   <li>{@link processes/1}: top N processes by an attribute, absolute or
%%%       over a window (like `recon:proc_count/2' and `proc_window/3').</li>
%%%   <li>{@link process_info/1}: one process in detail, its mailbox
%%%       counted by message shape ({@link mailbox/4}).</li>
%%%   <li>Tool `waits' (module `os_sup_waits'): who waits on whom, chains
%%%       of blocked calls to the bottleneck, deadlocks.</li>
%%%   <li>{@link get_state/1}: an OTP process's state (`sys:get_state/2').</li>
%%% </ul>
%%%
%%% == System ==
%%% <ul>
%%%   <li>{@link applications/1}: running applications, or one app's env.</li>
%%%   <li>{@link system_info/1}: memory, limits, schedulers, run queue.</li>
%%%   <li>{@link ets/1}: tables by memory, or one table's info and rows.</li>
%%%   <li>{@link module_details/1} (tool `module_info'): one module's
%%%       exports, attributes, compile info.</li>
%%% </ul>
%%%
%%% == Arguments ==
%%% A map with atom keys; text as binaries, numbers as integers. Every tool
%%% takes `format => elixir | erlang | auto' (default auto). A process is
%%% given as `<0.1.0>', `#PID<0.1.0>', `0.1.0' or a registered name
%%% (`DemoApp.Counter', `Elixir.DemoApp.Counter', `user').
%%%
%%% == Safety ==
%%% Never crashes (errors come back as `{error, #{kind, message}}'), never
%%% creates atoms from arguments, never sends a process a message it may not
%%% understand: `sys:get_state' goes only to processes shown, without a
%%% message, to run an OTP behaviour loop (their stack, then `$initial_call'
%%% confirmed by the callback module: see otp_behaviour/1), never to a Task,
%%% a plain spawn or a custom proc_lib loop; a supervisor is identified with
%%% `sys:get_state/2' before it gets `which_children'/`count_children' (an
%%% unknown call kills OTP 25 supervisors); every call has a timeout. Scans skip processes and tables that vanish.
%%% Results are capped (top N, sample sizes, byte limits).
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_introspect).

%% API
-export([run/2, tools/0]).
-export([supervision_tree/1, processes/1, process_info/1, get_state/1,
         applications/1, system_info/1, ets/1, module_details/1, mailbox/4]).

%% Argument and reply conventions shared with `os_sup_trace'.
-export([pid_arg/1, name_atoms/1, guarded/2, ok_reply/3, error_reply/2, fail/3]).

%% Internal spawn target (deadline-bounded call). Not an API.
-export([deadline_call/3]).

-define(TEXT_BYTES, 16384).
-define(TERM_BYTES, 1024).
-define(STATE_BYTES, 16384).
-define(CALL_MS, 2000).
-define(GET_STATE_MS, 1000).
-define(MAX_TREE_NODES, 2000).
-define(MAX_LIST, 50).
%% process_info mailbox: read (copy) the queue only up to this many messages (the caller
%% may raise it to MAX), in a reader with its own heap limit and deadline.
-define(MAILBOX_DEFAULT, 10000).
-define(MAILBOX_MAX, 100000).
-define(MAILBOX_HEAP_WORDS, 8000000).
-define(MAILBOX_MS, 2000).
-define(MAILBOX_SHAPES, 1000).
-define(MAILBOX_SHOWN, 10).

-define(OTP_APPS,
        [kernel, stdlib, elixir, logger, compiler, sasl, crypto, ssl, public_key, asn1,
         inets, mix, iex, eex, ex_unit, runtime_tools, os_mon, hex, syntax_tools, tools,
         parsetools, xmerl, mnesia, observer, wx, debugger, et, reltool, snmp, ssh, tftp,
         ftp, eldap, erl_interface, jinterface, megaco, diameter, edoc, erts, common_test,
         dialyzer, eunit, odbc, os_sup, otp_mibs, sasl, erl_docgen, hipe, inviso, rebar,
         rebar3, relx, telemetry_poller]).

-type reply() :: {ok, #{text := binary(), data := term()}}
               | {error, #{kind := atom(), message := binary()}}.
-type args() :: #{atom() => term()}.
-export_type([reply/0, args/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Runs tool `Tool' with `Args'; never raises.
-spec run(atom(), args()) -> reply().
run(Tool, Args) when is_atom(Tool), is_map(Args) ->
    case lists:member(Tool, tools()) of
        true -> guarded(fun() -> dispatch(Tool, Args) end);
        false ->
            error_reply(unknown_tool,
                        fmt("unknown introspection tool ~tp; known: ~ts",
                            [Tool, join([atom_to_binary(T, utf8) || T <- tools()], <<", ">>)]))
    end;
run(_Tool, _Args) ->
    error_reply(bad_args, <<"run/2 expects a tool name (atom) and an argument map">>).

%% @doc The tool names {@link run/2} accepts.
-spec tools() -> [atom()].
tools() ->
    [supervision_tree, processes, process_info, get_state, applications, system_info,
     ets, module_info, waits].

%% @doc Supervision tree: args `root', `depth' (5, 1..20), `max_children' (50, 1..1000).
-spec supervision_tree(args()) -> reply().
supervision_tree(Args) ->
    guarded(fun() -> tree(Args) end).

%% @doc Top processes: args `sort_by', `limit' (10, 1..100), `window_ms' (1..10000), `filter'.
-spec processes(args()) -> reply().
processes(Args) ->
    guarded(fun() -> procs(Args) end).

%% @doc One process in detail: args `pid', `messages' (sample, 5, 0..20), `max_messages'
%% (10000, 1..100000: the mailbox is read and counted by shape only when at most this many
%% messages are queued).
-spec process_info(args()) -> reply().
process_info(Args) ->
    guarded(fun() -> pinfo(Args) end).

%% @doc State of an OTP process: args `pid', `timeout_ms' (2000, 1..10000).
-spec get_state(args()) -> reply().
get_state(Args) ->
    guarded(fun() -> state(Args) end).

%% @doc Running applications, or one app's env: args `app' (optional).
-spec applications(args()) -> reply().
applications(Args) ->
    guarded(fun() -> apps(Args) end).

%% @doc Memory, counts vs limits, scheduler utilisation (~100 ms sample), run queue, versions.
-spec system_info(args()) -> reply().
system_info(Args) ->
    guarded(fun() -> sysinfo(Args) end).

%% @doc ETS tables by memory, or one table: args `table' (optional), `limit'.
-spec ets(args()) -> reply().
ets(Args) ->
    guarded(fun() -> ets_tool(Args) end).

%% @doc Tool `module_info' (named so to leave `module_info/1' to the compiler): args `module'.
-spec module_details(args()) -> reply().
module_details(Args) ->
    guarded(fun() -> modinfo(Args) end).

%% @doc A process given as pid text or registered name: `{ok, Pid}' (alive, local) or an error reply.
-spec pid_arg(term()) -> {ok, pid()} | {error, #{kind := atom(), message := binary()}}.
pid_arg(Text) ->
    try resolve_pid(Text) of
        Pid -> {ok, Pid}
    catch
        throw:{tool_error, Kind, Msg} -> error_reply(Kind, Msg)
    end.

%% @doc Runs `apply(M, F, A)' and sends `{deadline_call, self(), Result}' to `Parent'.
-spec deadline_call(pid(), atom(), {atom(), atom(), list()}) -> ok.
deadline_call(Parent, Tag, {M, F, A}) ->
    Result = try {ok, apply(M, F, A)} catch C:R -> {error, {C, R}} end,
    Parent ! {Tag, self(), Result},
    ok.

%%%===================================================================
%%% Private: tool plumbing
%%%===================================================================

dispatch(supervision_tree, Args) -> tree(Args);
dispatch(processes, Args) -> procs(Args);
dispatch(process_info, Args) -> pinfo(Args);
dispatch(get_state, Args) -> state(Args);
dispatch(applications, Args) -> apps(Args);
dispatch(system_info, Args) -> sysinfo(Args);
dispatch(ets, Args) -> ets_tool(Args);
dispatch(module_info, Args) -> modinfo(Args);
dispatch(waits, Args) -> os_sup_waits:waits(Args).

guarded(Fun) ->
    guarded(<<"introspection">>, Fun).

%% @doc Runs a tool body: `fail/3' becomes an error reply, a crash a bounded `internal' one.
-spec guarded(binary(), fun(() -> {ok, map()} | {error, map()})) -> {ok, map()} | {error, map()}.
guarded(What, Fun) ->
    try Fun() of
        {ok, #{text := _, data := _}} = Ok -> Ok;
        {error, #{kind := _, message := _}} = Err -> Err
    catch
        throw:{tool_error, Kind, Msg} ->
            error_reply(Kind, Msg);
        Class:Reason:Stack ->
            error_reply(internal,
                        bound(fmt("~ts failed: ~tp:~tP at ~tP",
                                  [What, Class, Reason, 12, lists:sublist(Stack, 3), 12]),
                              ?TERM_BYTES))
    end.

ok_reply(Lines, Data) ->
    ok_reply(Lines, Data, ?TEXT_BYTES).

%% @doc A tool's answer: `Lines' joined under `TextBytes', and the plain `Data'.
-spec ok_reply([iodata()], term(), pos_integer()) -> {ok, map()}.
ok_reply(Lines, Data, TextBytes) ->
    {ok, #{text => os_sup_render:lines(Lines, TextBytes), data => Data}}.

%% @doc A tool's failure the agent can act on.
-spec error_reply(atom(), iodata()) -> {error, map()}.
error_reply(Kind, Msg) ->
    {error, #{kind => Kind, message => os_sup_render:to_bin(Msg)}}.

%% @doc Ends a tool body with `error_reply(Kind, io_lib:format(Fmt, Args))' (see guarded/2).
-spec fail(atom(), string(), list()) -> no_return().
fail(Kind, Fmt, Args) ->
    throw({tool_error, Kind, fmt(Fmt, Args)}).

%% Arguments
arg_int(Key, Args, Default, Lo, Hi) ->
    case maps:get(Key, Args, undefined) of
        undefined -> Default;
        V when is_integer(V) -> max(Lo, min(Hi, V));
        V when is_binary(V) ->
            case catch binary_to_integer(string:trim(V)) of
                I when is_integer(I) -> max(Lo, min(Hi, I));
                _ -> fail(bad_args, "~ts must be an integer, got ~tp", [Key, V])
            end;
        V -> fail(bad_args, "~ts must be an integer, got ~tP", [Key, V, 5])
    end.

arg_text(Key, Args) ->
    case maps:get(Key, Args, undefined) of
        undefined -> undefined;
        null -> undefined;
        nil -> undefined;
        <<>> -> undefined;
        V when is_binary(V) -> string:trim(V);
        V when is_atom(V) -> atom_to_binary(V, utf8);
        V when is_integer(V) -> integer_to_binary(V);
        V when is_pid(V) -> V;
        V when is_list(V) ->
            case catch unicode:characters_to_binary(V) of
                B when is_binary(B) -> string:trim(B);
                _ -> fail(bad_args, "~ts must be text", [Key])
            end;
        V -> fail(bad_args, "~ts must be text, got ~tP", [Key, V, 5])
    end.

arg_choice(Key, Args, Choices, Default) ->
    case maps:get(Key, Args, undefined) of
        undefined -> Default;
        V when is_atom(V) -> check_choice(Key, V, Choices);
        V when is_binary(V) ->
            case [C || C <- Choices, atom_to_binary(C, utf8) =:= string:trim(V)] of
                [C] -> C;
                [] -> check_choice(Key, V, Choices)
            end;
        V -> check_choice(Key, V, Choices)
    end.

check_choice(Key, V, Choices) ->
    case lists:member(V, Choices) of
        true -> V;
        false -> fail(bad_args, "~ts must be one of ~ts, got ~tP",
                      [Key, join([atom_to_binary(C, utf8) || C <- Choices], <<", ">>), V, 5])
    end.

fmt_arg(Args) ->
    os_sup_render:format(maps:get(format, Args, auto)).

%%%===================================================================
%%% Private: resolving processes and names
%%%===================================================================

%% -> pid() (alive, local) or throws not_found.
resolve_pid(undefined) ->
    fail(bad_args, "pid is required: a pid (<0.123.0>, #PID<0.123.0>, 0.123.0) or a "
         "registered name (DemoApp.Counter, user)", []);
resolve_pid(Pid) when is_pid(Pid) ->
    check_alive(Pid, pid_to_list(Pid));
resolve_pid(Text) when is_binary(Text) ->
    case parse_pid(Text) of
        {ok, Pid} -> check_alive(Pid, Text);
        error ->
            case whereis_name(Text) of
                {ok, Pid} -> Pid;
                error ->
                    fail(not_found, "no process is registered as ~ts (give a pid like "
                         "<0.123.0> or a registered name; processes tool with filter can "
                         "find one)", [Text])
            end
    end.

check_alive(Pid, Text) ->
    case node(Pid) =:= node() of
        false -> fail(not_found, "~ts is not a process of this node", [Text]);
        true ->
            case is_process_alive(Pid) of
                true -> Pid;
                false -> fail(not_found, "process ~ts is not alive (it exited)", [Text])
            end
    end.

parse_pid(Text) ->
    Inner = case Text of
                <<"#PID<", R/binary>> -> strip_gt(R);
                <<"<", R/binary>> -> strip_gt(R);
                _ -> Text
            end,
    case re:run(Inner, <<"^[0-9]+\\.[0-9]+\\.[0-9]+$">>, [{capture, none}]) of
        match ->
            try list_to_pid("<" ++ binary_to_list(Inner) ++ ">") of
                Pid -> {ok, Pid}
            catch
                _:_ -> fail(not_found, "~ts is not a valid pid of this node (no such process)",
                            [Text])
            end;
        nomatch -> error
    end.

strip_gt(R) ->
    case binary:last(R) of
        $> -> binary:part(R, 0, byte_size(R) - 1);
        _ -> R
    end.

%% Registered name in any spelling, without creating atoms.
whereis_name(Text) ->
    first_ok([fun() -> whereis_atom(A) end || A <- name_atoms(Text)]).

whereis_atom(A) ->
    case whereis(A) of
        Pid when is_pid(Pid) -> {ok, Pid};
        _ -> error
    end.

%% @doc Existing atoms a name may spell (`:user', `user', `DemoApp.X', `Elixir.DemoApp.X'); creates none.
-spec name_atoms(binary()) -> [atom()].
name_atoms(Text0) ->
    Text = case Text0 of
               <<":", R/binary>> -> unquote(R);
               _ -> unquote(Text0)
           end,
    Candidates = case Text of
                     <<"Elixir.", _/binary>> -> [Text];
                     <<C, _/binary>> when C >= $A, C =< $Z -> [<<"Elixir.", Text/binary>>, Text];
                     _ -> [Text]
                 end,
    [A || B <- Candidates, A <- [existing_atom(B)], A =/= undefined].

unquote(<<"\"", R/binary>> = B) when byte_size(R) > 0 ->
    case binary:last(R) of $" -> binary:part(R, 0, byte_size(R) - 1); _ -> B end;
unquote(<<"'", R/binary>> = B) when byte_size(R) > 0 ->
    case binary:last(R) of $' -> binary:part(R, 0, byte_size(R) - 1); _ -> B end;
unquote(B) -> B.

existing_atom(B) ->
    try binary_to_existing_atom(B, utf8) of
        A -> A
    catch
        _:_ -> undefined
    end.

first_ok([]) -> error;
first_ok([F | Rest]) ->
    case F() of
        {ok, _} = Ok -> Ok;
        _ -> first_ok(Rest)
    end.

%% Process facts; `undefined' when the process is gone.
pinfo_items(Pid, Items) ->
    try erlang:process_info(Pid, Items) of
        undefined -> undefined;
        L when is_list(L) -> L;
        [] -> undefined
    catch
        _:_ -> undefined
    end.

reg_name(Pid) ->
    case pinfo_items(Pid, [registered_name]) of
        [{registered_name, N}] when is_atom(N), N =/= [] -> N;
        _ -> undefined
    end.

%% `$initial_call' from the proc_lib dictionary, or undefined.
dict_initial_call(Dict) when is_list(Dict) ->
    case lists:keyfind('$initial_call', 1, Dict) of
        {_, {M, F, A} = MFA} when is_atom(M), is_atom(F), is_integer(A) -> MFA;
        _ -> undefined
    end;
dict_initial_call(_) ->
    undefined.

proc_dict(Pid) ->
    case pinfo_items(Pid, [dictionary]) of
        [{dictionary, D}] -> D;
        _ -> undefined
    end.

%% Runs M:F(A) in a throw-away process; {ok, V} | timeout | {error, _}.
call_with_deadline(MFA, Ms) ->
    call_with_deadline(MFA, Ms, []).

call_with_deadline(MFA, Ms, SpawnOpts) ->
    Tag = make_ref(),
    {Pid, MRef} = spawn_opt(?MODULE, deadline_call, [self(), Tag, MFA], [monitor | SpawnOpts]),
    receive
        {Tag, Pid, Result} ->
            erlang:demonitor(MRef, [flush]),
            Result;
        {'DOWN', MRef, process, Pid, Reason} ->
            {error, {exit, Reason}}
    after Ms ->
            exit(Pid, kill),
            erlang:demonitor(MRef, [flush]),
            timeout
    end.

%%%===================================================================
%%% Private: which processes answer system messages
%%%===================================================================

%% Only a process running an OTP behaviour loop (gen_server, gen_statem,
%% gen_event, gen_fsm; supervisors, supervisor bridges, DynamicSupervisor,
%% Task.Supervisor, Agent and Registry partitions are gen_servers) answers
%% system messages. Anything else (an Elixir Task, a plain spawn, a custom
%% proc_lib loop) takes `{system, From, Req}' in its own `receive', or leaves
%% it in its mailbox, and the caller waits out its timeout. So the helper
%% decides from what the process shows without a message: its call stack
%% first (the outermost frame above proc_lib is the loop it runs), then its
%% `$initial_call' (what `proc_lib:translate_initial_call/1' reads) checked
%% against the callback module's behaviour attributes or exports.
%%
%% `$initial_call' alone is not enough: an Agent overwrites it with its
%% function (`{Mod, "-fun-0-", 0}'), and every Elixir Task sets it to its
%% function too, so `Task.start(MyServer, :init, [x])' looks like a
%% GenServer `{MyServer, init, 1}'.

%% @doc How `Pid' answers system messages, decided without sending it anything.
%% `{ok, #{loop, kind, behaviour, module}}': it runs (or starts, or hibernates
%% in) an OTP behaviour loop; `loop' is the loop seen on its stack (gen_server,
%% gen_statem, gen_event, gen_fsm, sys when sys-suspended, hibernated), `kind'
%% the behaviour it was started as (gen_server, gen_statem, gen_event,
%% gen_fsm, supervisor, supervisor_bridge) or undefined, `behaviour' and
%% `module' as declared by its callback module. `{no, Kind, Detail}' (Kind
%% task | plain | proc_lib | hibernated): it may not understand a system
%% message. `gone': it exited.
-spec otp_behaviour(pid()) -> {ok, #{loop := atom(), kind := atom(), behaviour := atom(),
                                     module := atom()}}
                                  | {no, task | plain | proc_lib | hibernated, map()}
                                  | gone.
otp_behaviour(Pid) ->
    case pinfo_items(Pid, [current_function, current_stacktrace, initial_call, dictionary]) of
        undefined -> gone;
        Items -> otp_behaviour_of(Items)
    end.

otp_behaviour_of(Items) ->
    Get = fun(K) -> proplists:get_value(K, Items) end,
    Dict = case Get(dictionary) of D when is_list(D) -> D; _ -> [] end,
    Stack = case Get(current_stacktrace) of
                S when is_list(S) -> [{M, F, A} || {M, F, A, _} <- S];
                _ -> []
            end,
    Initial = dict_initial_call(Dict),
    Claimed = claimed_behaviour(Initial),
    Outer = outer_frame(Stack),
    Detail = #{initial_call => Initial, outer => Outer, current => Get(current_function)},
    case loop_of(Outer) of
        {loop, Loop} -> {ok, loop_info(Loop, Claimed)};
        sys -> {ok, loop_info(sys, Claimed)};
        task -> {no, task, Detail};
        none ->
            Hibernated = Get(current_function) =:= {erlang, hibernate, 3} andalso Stack =:= [],
            ProcLib = Initial =/= undefined orelse proc_lib_start(Get(initial_call))
                orelse lists:any(fun({M, _, _}) -> M =:= proc_lib end, Stack),
            if
                %% A hibernated process shows no stack: trust a `$initial_call'
                %% whose callback module confirms the behaviour, unless the
                %% process has Task's `$callers'.
                Hibernated, Claimed =/= undefined ->
                    case lists:keymember('$callers', 1, Dict) of
                        false -> {ok, loop_info(hibernated, Claimed)};
                        true -> {no, task, Detail}
                    end;
                Hibernated -> {no, hibernated, Detail};
                ProcLib -> {no, proc_lib, Detail};
                true -> {no, plain, Detail}
            end
    end.

proc_lib_start({proc_lib, init_p, _}) -> true;
proc_lib_start(_) -> false.

%% The outermost frame above the process's start (proc_lib, gen start-up).
outer_frame(Stack) ->
    case lists:dropwhile(fun start_frame/1, lists:reverse(Stack)) of
        [Outer | _] -> Outer;
        [] -> undefined
    end.

start_frame({proc_lib, F, _}) -> F =:= init_p_do_apply orelse F =:= init_p orelse F =:= wake_up;
start_frame({gen, F, _}) -> F =:= init_it orelse F =:= init_it2;
start_frame(_) -> false.

%% The loop a process's outermost frame belongs to: a behaviour's own
%% server-side functions only (a process blocked in `gen_server:call/3' is a
%% client, not a server).
loop_of({gen_server, F, _}) ->
    loop_if(gen_server, lists:member(F, [loop, decode_msg, handle_msg, try_dispatch,
                                         try_handle_call, try_handle_continue,
                                         handle_common_reply, wake_hib, init_it, enter_loop]));
loop_of({gen_statem, F, _}) ->
    loop_if(gen_statem, prefix(<<"loop">>, F) orelse
                lists:member(F, [init_it, init_result, enter, wakeup_from_hibernate,
                                 enter_loop]));
loop_of({gen_event, F, _}) ->
    loop_if(gen_event, prefix(<<"server_">>, F) orelse
                lists:member(F, [loop, fetch_msg, decode_msg, handle_msg, wake_hib, init_it,
                                 s_s_h, do_swap, handle_exit]));
loop_of({gen_fsm, F, _}) ->
    loop_if(gen_fsm, lists:member(F, [loop, decode_msg, handle_msg, dispatch, wake_hib,
                                      init_it, enter_loop]));
loop_of({sys, F, _}) ->
    %% Inside sys:handle_system_msg (a sys:suspend-ed behaviour, or one
    %% answering a system message right now): it takes the next one too.
    case lists:member(F, [handle_system_msg, suspend_loop, suspend_loop_hib]) of
        true -> sys;
        false -> none
    end;
loop_of({'Elixir.Task.Supervised', _, _}) ->
    task;
loop_of(_) ->
    none.

loop_if(Loop, true) -> {loop, Loop};
loop_if(_, false) -> none.

prefix(P, F) ->
    B = atom_to_binary(F, utf8),
    binary:longest_common_prefix([P, B]) =:= byte_size(P).

%% {Kind, Behaviour, Module} claimed by `$initial_call' (as proc_lib
%% translates it) and confirmed by the loaded callback module, or undefined.
claimed_behaviour({supervisor, M, 1}) when is_atom(M) ->
    %% OTP supervisor, Elixir Supervisor, DynamicSupervisor (which writes
    %% this itself), Task.Supervisor, Registry.
    case module_behaviour(M) of
        {supervisor, B} -> {supervisor, B, M};
        _ ->
            case module_exports(M, [{init, 1}]) of
                true -> {supervisor, supervisor, M};
                false -> undefined
            end
    end;
claimed_behaviour({supervisor_bridge, M, 1}) when is_atom(M) ->
    case module_behaviour(M) =:= {supervisor_bridge, supervisor_bridge}
        orelse module_exports(M, [{init, 1}]) of
        true -> {supervisor_bridge, supervisor_bridge, M};
        false -> undefined
    end;
claimed_behaviour({gen_event, init_it, 6}) ->
    {gen_event, gen_event, undefined};
claimed_behaviour({M, init, 1}) when is_atom(M) ->
    case module_behaviour(M) of
        {K, B} when K =:= gen_server; K =:= gen_statem; K =:= gen_fsm -> {K, B, M};
        _ ->
            case {module_exports(M, [{init, 1}, {handle_call, 3}]),
                  module_exports(M, [{init, 1}, {callback_mode, 0}])} of
                {_, true} -> {gen_statem, gen_statem, M};
                {true, _} -> {gen_server, gen_server, M};
                _ -> undefined
            end
    end;
claimed_behaviour(_) ->
    undefined.

%% The first process behaviour a loaded module declares: {Kind, AsDeclared}.
%% Never loads code (erlang:get_module_info/2 is a BIF).
module_behaviour(M) ->
    Declared = try erlang:get_module_info(M, attributes) of
                   Attrs when is_list(Attrs) ->
                       lists:append([V || {K, V} <- Attrs, K =:= behaviour orelse
                                              K =:= behavior, is_list(V)]);
                   _ -> []
               catch
                   _:_ -> []
               end,
    case [{K, B} || B <- Declared, K <- [behaviour_kind(B)], K =/= undefined] of
        [First | _] -> First;
        [] -> undefined
    end.

behaviour_kind(gen_server) -> gen_server;
behaviour_kind('Elixir.GenServer') -> gen_server;
behaviour_kind(gen_statem) -> gen_statem;
behaviour_kind(gen_fsm) -> gen_fsm;
behaviour_kind(gen_event) -> gen_event;
behaviour_kind(supervisor) -> supervisor;
behaviour_kind('Elixir.Supervisor') -> supervisor;
behaviour_kind('Elixir.DynamicSupervisor') -> supervisor;
behaviour_kind(supervisor_bridge) -> supervisor_bridge;
behaviour_kind(_) -> undefined.

module_exports(M, FAs) ->
    erlang:module_loaded(M) andalso
        lists:all(fun({F, A}) -> erlang:function_exported(M, F, A) end, FAs).

%% The loop seen on the stack, with what `$initial_call' claims where it fits.
loop_info(Loop, Claimed) ->
    Fits = case {Loop, Claimed} of
               {_, undefined} -> false;
               {hibernated, _} -> true;
               {sys, _} -> true;
               {gen_server, {K, _, _}} -> lists:member(K, [gen_server, supervisor,
                                                           supervisor_bridge]);
               {L, {K, _, _}} -> L =:= K
           end,
    case Fits of
        true ->
            {Kind, Behaviour, Module} = Claimed,
            #{loop => Loop, kind => Kind, behaviour => Behaviour, module => Module};
        false ->
            Kind = case lists:member(Loop, [gen_server, gen_statem, gen_event, gen_fsm]) of
                       true -> Loop;
                       false -> undefined
                   end,
            #{loop => Loop, kind => Kind, behaviour => Kind, module => undefined}
    end.

%% Why `get_state' sends `PidText' nothing (Kind and Detail from otp_behaviour/1).
not_otp(PidText, task, Detail, Fmt) ->
    fail(not_otp, "~ts is an Elixir Task (running ~ts), not an OTP process: it does not "
         "answer system messages, so get_state sent it nothing; use process_info instead",
         [PidText, case initial_text(Detail, Fmt) of
                       <<"-">> -> running(Detail, Fmt);
                       Fun -> Fun
                   end]);
not_otp(PidText, plain, Detail, Fmt) ->
    fail(not_otp, "~ts is a plain process (spawned without proc_lib, running ~ts), not an OTP "
         "process: it does not answer system messages, so get_state sent it nothing; use "
         "process_info instead", [PidText, running(Detail, Fmt)]);
not_otp(PidText, hibernated, Detail, Fmt) ->
    fail(not_otp, "~ts is hibernated and its initial call (~ts) names no OTP behaviour (an Agent "
         "or a Task?): it is not known to answer system messages, so get_state sent it "
         "nothing; use process_info instead, or retry once it has woken up",
         [PidText, initial_text(Detail, Fmt)]);
not_otp(PidText, proc_lib, Detail, Fmt) ->
    fail(not_otp, "~ts is a proc_lib process (started as ~ts, running ~ts) but not an OTP "
         "behaviour (gen_server, gen_statem, gen_event, supervisor): it is not known to answer "
         "system messages, so get_state sent it nothing; use process_info instead",
         [PidText, initial_text(Detail, Fmt), running(Detail, Fmt)]).

running(#{outer := {_, _, _} = MFA}, Fmt) -> os_sup_render:mfa(MFA, Fmt);
running(#{current := {_, _, _} = MFA}, Fmt) -> os_sup_render:mfa(MFA, Fmt);
running(_, _) -> <<"-">>.

initial_text(#{initial_call := {_, _, _} = MFA}, Fmt) -> os_sup_render:mfa(MFA, Fmt);
initial_text(_, _) -> <<"-">>.

%%%===================================================================
%%% Private: supervision_tree
%%%===================================================================

tree(Args) ->
    Fmt = fmt_arg(Args),
    Opts = #{fmt => Fmt,
             depth => arg_int(depth, Args, 5, 1, 20),
             max_children => arg_int(max_children, Args, 50, 1, 1000)},
    T0 = erlang:monotonic_time(microsecond),
    Roots = tree_roots(arg_text(root, Args)),
    {Trees, Budget} = lists:mapfoldl(fun(R, B) -> walk_root(R, Opts, B) end,
                                     ?MAX_TREE_NODES, Roots),
    Us = erlang:monotonic_time(microsecond) - T0,
    Lines = case Trees of
                [] -> [<<"no project applications are running (running: ",
                         (join([atom_to_binary(A, utf8) || A <- running_apps()], <<", ">>))/binary,
                         "); pass root (an application, registered name or pid)">>];
                _ -> lists:append([tree_lines(T, Fmt) || T <- Trees])
            end,
    ok_reply(Lines, #{roots => Trees, node_count => ?MAX_TREE_NODES - Budget,
                      truncated => Budget =< 0, duration_us => Us}).

running_apps() ->
    case catch application:which_applications(2000) of
        L when is_list(L) -> [A || {A, _, _} <- L];
        _ -> []
    end.

%% -> [{app, App, TopPid} | {pid, Pid}]
tree_roots(undefined) ->
    [{app, A} || A <- running_apps(), not lists:member(A, ?OTP_APPS)];
tree_roots(Text) when is_pid(Text) ->
    [{pid, resolve_pid(Text)}];
tree_roots(Text) ->
    case parse_pid(Text) of
        {ok, _} -> [{pid, resolve_pid(Text)}];
        error ->
            Apps = running_apps(),
            case [A || A <- name_atoms(Text), lists:member(A, Apps)] of
                [App | _] -> [{app, App}];
                [] ->
                    case whereis_name(Text) of
                        {ok, Pid} -> [{pid, Pid}];
                        error ->
                            fail(not_found, "~ts is neither a running application nor a "
                                 "registered process (running applications: ~ts)",
                                 [Text, join([atom_to_binary(A, utf8) || A <- Apps],
                                             <<", ">>)])
                    end
            end
    end.

walk_root({app, App}, Opts, Budget) ->
    case app_top(App) of
        {ok, Top} ->
            Kind = classify_root(Top),
            {Node, B1} = walk(Top, Kind, #{id => undefined, restart => undefined,
                                           modules => undefined}, 0, Opts, Budget - 1),
            {Node#{application => App}, B1};
        {error, Why} ->
            {(empty_node(Opts))#{application => App, kind => unknown, note => Why}, Budget}
    end;
walk_root({pid, Pid}, Opts, Budget) ->
    Kind = classify_root(Pid),
    {Node, B1} = walk(Pid, Kind, #{id => undefined, restart => undefined,
                                   modules => undefined}, 0, Opts, Budget - 1),
    {Node#{application => undefined}, B1}.

app_top(App) ->
    case catch application_controller:get_master(App) of
        Master when is_pid(Master) ->
            case call_with_deadline({application_master, get_child, [Master]}, ?CALL_MS) of
                {ok, {Top, _Mod}} when is_pid(Top) -> {ok, Top};
                {ok, _} -> {error, <<"the application has no top process">>};
                timeout -> {error, <<"the application master did not answer in time">>};
                {error, _} -> {error, <<"the application master could not be asked">>}
            end;
        _ ->
            {error, <<"library application (no processes)">>}
    end.

%% A root given by pid/name: only processes started as supervisors (OTP,
%% Elixir, DynamicSupervisor, Task.Supervisor) are asked anything.
classify_root(Pid) ->
    case otp_behaviour(Pid) of
        {ok, #{kind := supervisor}} -> supervisor;
        _ -> worker
    end.

empty_node(#{fmt := _}) ->
    #{id => undefined, pid => undefined, kind => unknown, name => undefined,
      strategy => undefined, intensity => undefined, period => undefined,
      restart => undefined, modules => [], children => [], child_count => undefined,
      truncated_children => 0}.

%% Walk one process. Spec: #{id, restart, modules} from the parent's child list.
walk(Pid, Type, Spec, Depth, Opts, Budget) ->
    Fmt = maps:get(fmt, Opts),
    Base = (empty_node(Opts))#{
             id => render_id(maps:get(id, Spec), Fmt),
             pid => case is_pid(Pid) of true -> os_sup_render:pid(Pid, Fmt); false -> undefined end,
             name => render_opt_name(reg_name_if_pid(Pid), Fmt),
             restart => maps:get(restart, Spec),
             modules => render_modules(maps:get(modules, Spec), Fmt)},
    case {is_pid(Pid), Type} of
        {false, _} ->
            {Base#{kind => child_kind(Type), status => status_of(Pid)}, Budget};
        {true, worker} ->
            {Base#{kind => worker}, Budget};
        {true, _} ->
            case identify(Pid) of
                {supervisor, Info} -> walk_sup(Pid, supervisor, Info, Base, Depth, Opts, Budget);
                {dynamic_supervisor, Info} ->
                    walk_sup(Pid, dynamic_supervisor, Info, Base, Depth, Opts, Budget);
                unknown -> {Base#{kind => unknown}, Budget}
            end
    end.

child_kind(supervisor) -> supervisor;
child_kind(worker) -> worker;
child_kind(_) -> unknown.

status_of(restarting) -> restarting;
status_of({restarting, _}) -> restarting;
status_of(_) -> not_running.

reg_name_if_pid(Pid) when is_pid(Pid) -> reg_name(Pid);
reg_name_if_pid(_) -> undefined.

render_opt_name(undefined, _) -> undefined;
render_opt_name(N, Fmt) -> os_sup_render:name(N, Fmt).

render_id(undefined, _) -> undefined;
render_id(Id, Fmt) when is_atom(Id) -> os_sup_render:name(Id, Fmt);
render_id(Id, Fmt) -> os_sup_render:term(Id, Fmt, 256).

render_modules(dynamic, _) -> [<<"dynamic">>];
render_modules(Ms, Fmt) when is_list(Ms) ->
    [os_sup_render:name(M, Fmt) || M <- lists:sublist(Ms, 10)];
render_modules(_, _) -> [].

%% Identify a process that claims to be a supervisor, by its state only;
%% `sys:get_state' goes only to a gen_server (every supervisor kind is one)
%% that otp_behaviour/1 shows answers system messages.
identify(Pid) ->
    case otp_behaviour(Pid) of
        {ok, #{kind := Kind}} when Kind =:= supervisor; Kind =:= gen_server ->
            try sys:get_state(Pid, ?GET_STATE_MS) of
                State -> identify_state(State)
            catch
                _:_ -> unknown
            end;
        _ -> unknown
    end.

identify_state(#{'__struct__' := 'Elixir.DynamicSupervisor'} = S) ->
    {dynamic_supervisor,
     #{strategy => plain_atom(maps:get(strategy, S, undefined)),
       intensity => plain_int(maps:get(max_restarts, S, undefined)),
       period => plain_int(maps:get(max_seconds, S, undefined)),
       restarts => dyn_restarts(maps:get(children, S, #{}))}};
identify_state(S) when is_tuple(S), tuple_size(S) >= 8, element(1, S) =:= state ->
    L = tuple_to_list(S),
    case [X || X <- L, is_atom(X), lists:member(X, [one_for_one, one_for_all, rest_for_one,
                                                   simple_one_for_one])] of
        [Strategy | _] ->
            {Intensity, Period} = int_pair(L),
            {supervisor, #{strategy => Strategy, intensity => Intensity, period => Period,
                           restarts => sup_restarts(L)}};
        [] -> unknown
    end;
identify_state(_) ->
    unknown.

%% The first two adjacent non-negative integers after the children field (intensity, period).
int_pair([I, P | _]) when is_integer(I), I >= 0, is_integer(P), P > 0 -> {I, P};
int_pair([_ | Rest]) -> int_pair(Rest);
int_pair([]) -> {undefined, undefined}.

plain_atom(A) when is_atom(A) -> A;
plain_atom(_) -> undefined.

plain_int(I) when is_integer(I) -> I;
plain_int(_) -> undefined.

%% Restart types by child: {by_id, Map} | {all, Restart} | none.
sup_restarts(L) ->
    Records = lists:append([child_records(X) || X <- L]),
    case [R || R <- Records, element(1, R) =:= child] of
        [] -> none;
        Children ->
            case lists:member(simple_one_for_one, L) of
                true -> {all, restart_of(hd(Children))};
                false -> {by_id, maps:from_list([{child_id(C), restart_of(C)} || C <- Children])}
            end
    end.

child_records({Ids, Map}) when is_list(Ids), is_map(Map) ->
    [C || C <- maps:values(Map), is_tuple(C), tuple_size(C) >= 5];
child_records(List) when is_list(List) ->
    [C || C <- List, is_tuple(C), tuple_size(C) >= 5, element(1, C) =:= child];
child_records(_) ->
    [].

%% #child{pid, id, mfargs, restart_type, ...}: the id follows the pid.
child_id(C) -> element(3, C).

restart_of(C) when is_tuple(C) ->
    case [R || R <- tuple_to_list(C), is_restart(R)] of
        [R | _] -> restart_name(R);
        [] -> undefined
    end;
restart_of(_) ->
    undefined.

is_restart(R) when R =:= permanent; R =:= transient; R =:= temporary -> true;
is_restart({R, _}) when R =:= permanent; R =:= transient -> true;
is_restart(_) -> false.

restart_name({R, _}) -> R;
restart_name(R) -> R.

dyn_restarts(Children) when is_map(Children), map_size(Children) =< 100000 ->
    {by_pid, Children};
dyn_restarts(_) ->
    none.

lookup_restart(_Id, _Pid, none) -> undefined;
lookup_restart(_Id, _Pid, {all, R}) -> R;
lookup_restart(Id, _Pid, {by_id, M}) -> maps:get(Id, M, undefined);
lookup_restart(_Id, Pid, {by_pid, M}) -> restart_of(maps:get(Pid, M, undefined)).

walk_sup(Pid, Kind, Info, Base, Depth, Opts, Budget) ->
    #{max_children := MaxChildren, depth := MaxDepth} = Opts,
    Node0 = Base#{kind => Kind, strategy => maps:get(strategy, Info),
                  intensity => maps:get(intensity, Info), period => maps:get(period, Info)},
    Counts = sup_call(Pid, count_children),
    Node1 = case Counts of
                {ok, C} when is_list(C) ->
                    Node0#{counts => counts_map(C), child_count => proplists:get_value(active, C)};
                _ -> Node0
            end,
    case Depth >= MaxDepth of
        true ->
            {Node1#{children_note => <<"depth limit">>}, Budget};
        false ->
            case sup_call(Pid, which_children) of
                {ok, Children} when is_list(Children) ->
                    Total = length(Children),
                    Shown = lists:sublist(start_order(Kind, Children), MaxChildren),
                    Restarts = maps:get(restarts, Info),
                    {Nodes, B1} = walk_children(Shown, Restarts, Depth + 1, Opts, Budget, []),
                    Count = case maps:get(child_count, Node1) of
                                undefined -> Total;
                                N -> N
                            end,
                    {Node1#{children => Nodes, child_count => Count,
                            truncated_children => Total - length(Nodes)}, B1};
                _ ->
                    {Node1#{children_note => <<"which_children did not answer in time">>},
                     Budget}
            end
    end.

%% OTP supervisors list the newest child first; DynamicSupervisor in map
%% order. Show both in (approximate) start order.
start_order(supervisor, Children) -> lists:reverse(Children);
start_order(_, Children) -> lists:keysort(2, Children).

walk_children([], _Restarts, _Depth, _Opts, Budget, Acc) ->
    {lists:reverse(Acc), Budget};
walk_children(_, _Restarts, _Depth, _Opts, Budget, Acc) when Budget =< 0 ->
    {lists:reverse(Acc), Budget};
walk_children([{Id, Child, Type, Mods} | Rest], Restarts, Depth, Opts, Budget, Acc) ->
    Spec = #{id => Id, restart => lookup_restart(Id, Child, Restarts), modules => Mods},
    {Node, B1} = walk(Child, Type, Spec, Depth, Opts, Budget - 1),
    walk_children(Rest, Restarts, Depth, Opts, B1, [Node | Acc]);
walk_children([_ | Rest], Restarts, Depth, Opts, Budget, Acc) ->
    walk_children(Rest, Restarts, Depth, Opts, Budget, Acc).

%% Only `which_children' and `count_children': both OTP supervisors and
%% DynamicSupervisor understand them. Always with a timeout.
sup_call(Pid, Req) when Req =:= which_children; Req =:= count_children ->
    try gen_server:call(Pid, Req, ?CALL_MS) of
        R -> {ok, R}
    catch
        _:_ -> error
    end.

counts_map(C) ->
    maps:from_list([{K, V} || {K, V} <- C, is_atom(K), is_integer(V)]).

tree_lines(Node, Fmt) ->
    tree_lines(Node, Fmt, 0).

tree_lines(Node, Fmt, Indent) ->
    Pad = binary:copy(<<"  ">>, Indent),
    Line = [Pad, node_line(Node, Fmt)],
    Kids = [L || C <- maps:get(children, Node, []), L <- tree_lines(C, Fmt, Indent + 1)],
    More = case maps:get(truncated_children, Node, 0) of
               N when is_integer(N), N > 0 ->
                   [[Pad, <<"  ... ">>, integer_to_binary(N), <<" more children">>]];
               _ -> []
           end,
    [Line | Kids ++ More].

node_line(Node, _Fmt) ->
    Label = node_label(Node),
    Pid = case maps:get(pid, Node) of
              undefined -> maps:get(status, Node, undefined);
              P -> P
          end,
    Kind = maps:get(kind, Node),
    Parts = [Label, Pid, Kind] ++
        case Kind of
            K when K =:= supervisor; K =:= dynamic_supervisor ->
                [maps:get(strategy, Node),
                 fmt("~tp/~tps", [maps:get(intensity, Node), maps:get(period, Node)]),
                 fmt("children=~tp", [maps:get(child_count, Node)])];
            _ -> []
        end ++
        [maps:get(restart, Node)] ++
        case maps:get(name, Node) of
            undefined -> [];
            Label -> [];
            Name -> [<<"name=", Name/binary>>]
        end ++
        case maps:get(application, Node, undefined) of
            undefined -> [];
            App -> [<<"app=", (atom_to_binary(App, utf8))/binary>>]
        end ++
        [<<"(", Note/binary, ")">> || Note <- [maps:get(children_note, Node, undefined),
                                               maps:get(note, Node, undefined)],
                                      is_binary(Note)],
    join([to_text(P) || P <- Parts, P =/= undefined], <<" ">>).

node_label(#{id := Id}) when is_binary(Id) -> Id;
node_label(#{name := Name}) when is_binary(Name) -> Name;
node_label(#{modules := [M | _]}) -> M;
node_label(_) -> <<"-">>.

%%%===================================================================
%%% Private: processes
%%%===================================================================

procs(Args) ->
    Fmt = fmt_arg(Args),
    SortBy = arg_choice(sort_by, Args,
                        [memory, reductions, message_queue_len, binary_memory, heap_size], memory),
    Limit = arg_int(limit, Args, 10, 1, 100),
    Window = case maps:get(window_ms, Args, undefined) of
                 undefined -> undefined;
                 _ -> arg_int(window_ms, Args, 1000, 1, 10000)
             end,
    Filter = case arg_text(filter, Args) of
                 undefined -> undefined;
                 F -> string:lowercase(F)
             end,
    T0 = erlang:monotonic_time(microsecond),
    Pids = [P || P <- erlang:processes(), P =/= self(), matches(P, Filter)],
    Ranked = case Window of
                 undefined ->
                     [{V, P} || {P, V} <- snapshot(Pids, SortBy)];
                 W ->
                     Before = maps:from_list(snapshot(Pids, SortBy)),
                     timer:sleep(W),
                     After = [S || S = {P, _} <- snapshot(erlang:processes(), SortBy),
                                   P =/= self(), is_map_key(P, Before) orelse matches(P, Filter)],
                     [{V - maps:get(P, Before, 0), P} || {P, V} <- After]
             end,
    Top = lists:sublist(lists:reverse(lists:sort(Ranked)), Limit),
    Rows = [R || {V, P} <- Top, R <- [proc_row(P, V, Fmt)], R =/= undefined],
    Us = erlang:monotonic_time(microsecond) - T0,
    Total = erlang:system_info(process_count),
    Lines = [row_line(R, SortBy, Window) || R <- Rows],
    ok_reply(Lines, #{rows => Rows, sort_by => SortBy, window_ms => Window,
                      total => Total, scanned => length(Pids), duration_us => Us}).

snapshot(Pids, binary_memory) ->
    [{P, V} || P <- Pids, V <- [binary_memory(P)], V =/= undefined];
snapshot(Pids, Item) ->
    [{P, V} || P <- Pids, {_, V} <- [catch erlang:process_info(P, Item)], is_integer(V)].

binary_memory(P) ->
    case catch erlang:process_info(P, binary) of
        {binary, Bins} when is_list(Bins) -> lists:sum([S || {_, S, _} <- Bins]);
        _ -> undefined
    end.

matches(_P, undefined) -> true;
matches(P, Filter) ->
    case pinfo_items(P, [registered_name, initial_call, current_function]) of
        undefined -> false;
        Items ->
            Texts = [term_text(V) || {_, V} <- Items, V =/= []],
            lists:any(fun(T) -> contains(T, Filter) end, Texts) orelse
                case dict_initial_call(proc_dict(P)) of
                    undefined -> false;
                    MFA -> contains(term_text(MFA), Filter)
                end
    end.

term_text(A) when is_atom(A) -> atom_to_binary(A, utf8);
term_text({M, F, A}) ->
    iolist_to_binary([term_text(M), ":", term_text(F), "/", term_text(A)]);
term_text(I) when is_integer(I) -> integer_to_binary(I);
term_text(_) -> <<>>.

contains(Text, Filter) ->
    binary:match(string:lowercase(Text), Filter) =/= nomatch.

proc_row(P, V, Fmt) ->
    case pinfo_items(P, [registered_name, initial_call, current_function,
                         message_queue_len, memory, dictionary]) of
        undefined -> undefined;
        Items ->
            Get = fun(K) -> proplists:get_value(K, Items) end,
            Name = case Get(registered_name) of
                       N when is_atom(N), N =/= [], N =/= undefined -> os_sup_render:name(N, Fmt);
                       _ ->
                           case dict_initial_call(Get(dictionary)) of
                               undefined -> os_sup_render:mfa(Get(initial_call), Fmt);
                               MFA -> os_sup_render:mfa(MFA, Fmt)
                           end
                   end,
            #{pid => os_sup_render:pid(P, Fmt), name => Name,
              current_function => os_sup_render:mfa(Get(current_function), Fmt),
              value => V, memory => Get(memory),
              message_queue_len => Get(message_queue_len)}
    end.

row_line(#{pid := Pid, name := Name, current_function := CF, value := V,
           message_queue_len := Q}, SortBy, Window) ->
    Value = case Window of
                undefined -> fmt("~ts=~ts", [SortBy, human(SortBy, V)]);
                _ -> fmt("~ts_delta=~ts", [SortBy, human(SortBy, V)])
            end,
    join([Pid, Name, Value, fmt("mq=~b", [Q]), <<"in ", CF/binary>>], <<" ">>).

human(K, V) when (K =:= memory orelse K =:= binary_memory), is_integer(V) -> bytes(V);
human(_, V) -> fmt("~tp", [V]).

bytes(V) when abs(V) >= 1048576 -> fmt("~.1fMB", [V / 1048576]);
bytes(V) when abs(V) >= 1024 -> fmt("~.1fKB", [V / 1024]);
bytes(V) -> fmt("~bB", [V]).

%%%===================================================================
%%% Private: process_info
%%%===================================================================

-define(PINFO_ITEMS, [registered_name, status, initial_call, current_stacktrace, links,
                      monitors, memory, reductions, message_queue_len, trap_exit,
                      heap_size, total_heap_size, group_leader, dictionary]).

pinfo(Args) ->
    Fmt = fmt_arg(Args),
    Pid = resolve_pid(arg_text(pid, Args)),
    Sample = arg_int(messages, Args, 5, 0, 20),
    MaxMessages = arg_int(max_messages, Args, ?MAILBOX_DEFAULT, 1, ?MAILBOX_MAX),
    Items = case pinfo_items(Pid, ?PINFO_ITEMS) of
                undefined -> fail(not_found, "process ~ts exited", [os_sup_render:pid(Pid, Fmt)]);
                I -> I
            end,
    Get = fun(K) -> proplists:get_value(K, Items) end,
    Dict = case Get(dictionary) of D when is_list(D) -> D; _ -> [] end,
    Qlen = Get(message_queue_len),
    {Messages, MsgNote, Mailbox} = read_mailbox(Pid, Qlen, Sample, MaxMessages, Fmt),
    Links = Get(links),
    Monitors = Get(monitors),
    Data = #{pid => os_sup_render:pid(Pid, Fmt),
             registered_name => render_opt_name(case Get(registered_name) of
                                                    [] -> undefined;
                                                    N -> N
                                                end, Fmt),
             status => Get(status),
             initial_call => os_sup_render:mfa(Get(initial_call), Fmt),
             proc_lib_initial_call => case dict_initial_call(Dict) of
                                          undefined -> undefined;
                                          MFA -> os_sup_render:mfa(MFA, Fmt)
                                      end,
             current_stacktrace => render_stack(Get(current_stacktrace), Fmt),
             ancestors => [render_ref(A, Fmt) || A <- ancestors(Dict)],
             links => [render_ref(L, Fmt) || L <- lists:sublist(Links, ?MAX_LIST)],
             link_count => length(Links),
             monitors => [render_monitor(M, Fmt) || M <- lists:sublist(Monitors, ?MAX_LIST)],
             monitor_count => length(Monitors),
             memory => Get(memory),
             reductions => Get(reductions),
             message_queue_len => Qlen,
             messages => Messages,
             messages_note => MsgNote,
             mailbox => Mailbox,
             dictionary_keys => [os_sup_render:term(K, Fmt, 256)
                                 || {K, _} <- lists:sublist(Dict, ?MAX_LIST)],
             trap_exit => Get(trap_exit),
             heap_size => Get(heap_size),
             total_heap_size => Get(total_heap_size),
             group_leader => os_sup_render:pid(Get(group_leader), Fmt)},
    Lines = [fmt("~ts: ~ts", [K, line_value(maps:get(K, Data))])
             || K <- [pid, registered_name, status, initial_call, proc_lib_initial_call,
                      ancestors, memory, reductions, message_queue_len, heap_size,
                      total_heap_size, trap_exit, group_leader, links, monitors,
                      dictionary_keys]] ++
        [<<"current_stacktrace:">> | [<<"  ", F/binary>> || F <- stack_lines(Data)]] ++
        mailbox_lines(Mailbox) ++
        [<<"messages:", (case MsgNote of undefined -> <<>>;
                                         _ -> <<" ", MsgNote/binary>> end)/binary>>
         | [<<"  ", M/binary>> || M <- Messages]],
    ok_reply(Lines, Data).

%% -> {Sample, SampleNote, Mailbox}: the first `Sample' messages rendered and the
%% queue counted by shape, both from one read of the queue when it holds at most
%% `Max' messages; a note saying how to raise `Max' otherwise.
read_mailbox(_Pid, 0, _Sample, _Max, _Fmt) ->
    {[], undefined, undefined};
read_mailbox(_Pid, Qlen, _Sample, Max, _Fmt) when Qlen > Max ->
    Note = case Qlen > ?MAILBOX_MAX of
               true ->
                   fmt("not read: ~b messages queued, more than the ~b process_info reads at "
                       "most (reading copies the whole queue); watch it with processes "
                       "(window_ms) or see what arrives with trace_messages", [Qlen, ?MAILBOX_MAX]);
               false ->
                   fmt("not read: ~b messages queued, more than max_messages ~b (reading copies "
                       "the whole queue); pass max_messages: ~b (at most ~b) to count them by "
                       "shape", [Qlen, Max, min(?MAILBOX_MAX, (Qlen * 5 div 4) div 1000 * 1000 + 1000),
                                 ?MAILBOX_MAX])
           end,
    {[], <<"sample skipped (see mailbox)">>, #{queued => Qlen, read => 0, note => Note,
                                              shapes => []}};
read_mailbox(Pid, Qlen, Sample, Max, Fmt) ->
    Heap = [{max_heap_size, #{size => ?MAILBOX_HEAP_WORDS, kill => true,
                              error_logger => false}}],
    case call_with_deadline({?MODULE, mailbox, [Pid, Max, Sample, Fmt]}, ?MAILBOX_MS, Heap) of
        {ok, #{sample := Msgs, read := Read} = Box} ->
            Note = case Read > length(Msgs) of
                       true -> fmt("first ~b of ~b", [length(Msgs), Read]);
                       false -> undefined
                   end,
            {Msgs, Note, maps:remove(sample, Box)};
        {ok, {skipped, Queued}} ->
            read_mailbox(Pid, Queued, Sample, min(Max, Queued - 1), Fmt);
        {ok, gone} ->
            {[], undefined, undefined};
        timeout ->
            {[], undefined, #{queued => Qlen, read => 0, shapes => [],
                              note => fmt("not read: counting took over ~b ms", [?MAILBOX_MS])}};
        {error, _} ->
            {[], undefined, #{queued => Qlen, read => 0, shapes => [],
                              note => fmt("not read: the queue takes over ~b MB in memory",
                                          [?MAILBOX_HEAP_WORDS * erlang:system_info(wordsize)
                                           div 1000000])}}
    end.

%% @doc The mailbox of `Pid' counted by message shape (`$gen_cast {:post, _, _}',
%% `$gen_call :balance', `{:DOWN, _, _, _, _}'...), most frequent first, and its first
%% `Sample' messages rendered; reads the queue (a copy) only when it holds at most `Max'
%% messages: `{skipped, Queued}' otherwise, `gone' when the process exited. Meant to run
%% in a process with a heap limit.
-spec mailbox(pid(), pos_integer(), non_neg_integer(), os_sup_render:fmt()) ->
          #{queued := non_neg_integer(), read := non_neg_integer(),
            shapes := [#{shape := binary(), count := pos_integer()}],
            other_shapes := non_neg_integer(), sample := [binary()],
            duration_us := non_neg_integer()}
              | {skipped, non_neg_integer()} | gone.
mailbox(Pid, Max, Sample, Fmt) ->
    T0 = erlang:monotonic_time(microsecond),
    case pinfo_items(Pid, [message_queue_len]) of
        undefined -> gone;
        [{_, Q}] when Q > Max -> {skipped, Q};
        [{_, _}] ->
            case pinfo_items(Pid, [messages]) of
                [{messages, Ms}] when is_list(Ms) ->
                    Counts = count_shapes(Ms, #{}),
                    Sorted = lists:reverse(lists:keysort(2, maps:to_list(Counts))),
                    {Shown, Rest} = lists:split(min(?MAILBOX_SHOWN, length(Sorted)), Sorted),
                    #{queued => length(Ms), read => length(Ms),
                      shapes => [#{shape => shape_text(S, Fmt), count => C} || {S, C} <- Shown],
                      other_shapes => length(Rest),
                      other_count => lists:sum([C || {_, C} <- Rest]),
                      sample => [os_sup_render:term(M, Fmt, ?TERM_BYTES)
                                 || M <- lists:sublist(Ms, Sample)],
                      duration_us => erlang:monotonic_time(microsecond) - T0};
                _ -> gone
            end
    end.

count_shapes([], Acc) ->
    Acc;
count_shapes([M | Rest], Acc) ->
    S0 = shape(M),
    S = case map_size(Acc) < ?MAILBOX_SHAPES orelse is_map_key(S0, Acc) of
            true -> S0;
            false -> other
        end,
    count_shapes(Rest, Acc#{S => maps:get(S, Acc, 0) + 1}).

%% A message's shape: OTP envelopes kept, one level of the payload (a tuple's tag and
%% arity, an atom, a struct's name, otherwise the type).
shape({'$gen_cast', Msg}) -> {'$gen_cast', inner(Msg)};
shape({'$gen_call', _From, Req}) -> {'$gen_call', inner(Req)};
shape({system, _From, Req}) -> {system, inner(Req)};
shape(M) -> inner(M).

inner(A) when is_atom(A) -> {atom, A};
inner(T) when is_tuple(T), tuple_size(T) > 0, is_atom(element(1, T)) ->
    {tuple, element(1, T), tuple_size(T)};
inner(T) when is_tuple(T) -> {tuple, '_', tuple_size(T)};
inner(#{'__struct__' := S}) when is_atom(S) -> {struct, S};
inner(M) when is_map(M) -> map;
inner(B) when is_binary(B) -> binary;
inner(L) when is_list(L) -> list;
inner(I) when is_integer(I) -> integer;
inner(F) when is_float(F) -> float;
inner(P) when is_pid(P) -> pid;
inner(R) when is_reference(R) -> reference;
inner(F) when is_function(F) -> 'fun';
inner(P) when is_port(P) -> port;
inner(_) -> term.

shape_text(other, _Fmt) -> <<"(other shapes)">>;
shape_text({Envelope, Inner}, Fmt) when Envelope =:= '$gen_cast'; Envelope =:= '$gen_call';
                                        Envelope =:= system ->
    <<(atom_to_binary(Envelope, utf8))/binary, " ", (shape_text(Inner, Fmt))/binary>>;
shape_text({atom, A}, Fmt) -> os_sup_render:term(A, Fmt, 256);
shape_text({tuple, Tag, N}, Fmt) ->
    Head = case Tag of
               '_' -> <<"_">>;
               _ -> os_sup_render:term(Tag, Fmt, 256)
           end,
    Sep = case Fmt of elixir -> <<", ">>; _ -> <<",">> end,
    iolist_to_binary([<<"{">>, lists:join(Sep, [Head | lists:duplicate(N - 1, <<"_">>)]),
                      <<"}">>]);
shape_text({struct, S}, elixir) -> <<"%", (os_sup_render:name(S, elixir))/binary, "{}">>;
shape_text({struct, S}, Fmt) -> <<"#{'__struct__' => ", (os_sup_render:name(S, Fmt))/binary, "}">>;
shape_text(map, elixir) -> <<"%{...}">>;
shape_text(map, _) -> <<"#{...}">>;
shape_text(binary, elixir) -> <<"\"...\"">>;
shape_text(binary, _) -> <<"<<...>>">>;
shape_text(list, _) -> <<"[...]">>;
shape_text(Type, elixir) -> <<"<", (atom_to_binary(Type, utf8))/binary, ">">>;
shape_text(Type, _) -> <<(atom_to_binary(Type, utf8))/binary, "()">>.

mailbox_lines(undefined) ->
    [];
mailbox_lines(#{note := Note}) ->
    [<<"mailbox: ", Note/binary>>];
mailbox_lines(#{read := Read, shapes := Shapes, other_shapes := OtherN,
                other_count := OtherC, duration_us := Us}) ->
    [fmt("mailbox by shape (~b messages read in ~b ms):", [Read, Us div 1000])
     | [<<"  ", S/binary, " × "/utf8, (integer_to_binary(C))/binary>>
        || #{shape := S, count := C} <- Shapes]] ++
        case OtherN of
            0 -> [];
            _ -> [fmt("  ~b other shapes × ~b", [OtherN, OtherC])]
        end.

ancestors(Dict) ->
    case lists:keyfind('$ancestors', 1, Dict) of
        {_, L} when is_list(L) -> lists:sublist(L, 20);
        _ -> []
    end.

render_ref(P, Fmt) when is_pid(P) -> os_sup_render:pid(P, Fmt);
render_ref(A, Fmt) when is_atom(A) -> os_sup_render:name(A, Fmt);
render_ref(X, Fmt) -> os_sup_render:term(X, Fmt, 256).

render_monitor({process, P}, Fmt) -> render_ref(P, Fmt);
render_monitor({port, P}, Fmt) -> os_sup_render:term(P, Fmt, 256);
render_monitor(X, Fmt) -> os_sup_render:term(X, Fmt, 256).

render_stack(Stack, Fmt) when is_list(Stack) ->
    os_sup_render:bound(join([frame(F, Fmt) || F <- lists:sublist(Stack, 30)], <<"\n">>),
                        4096);
render_stack(_, _) ->
    <<>>.

frame({M, F, A, Loc}, Fmt) ->
    Where = case {proplists:get_value(file, Loc), proplists:get_value(line, Loc)} of
                {File, Line} when is_list(File), is_integer(Line) ->
                    fmt(" (~ts:~b)", [File, Line]);
                _ -> <<>>
            end,
    <<(os_sup_render:mfa({M, F, A}, Fmt))/binary, Where/binary>>;
frame(X, Fmt) ->
    os_sup_render:term(X, Fmt, 256).

stack_lines(#{current_stacktrace := <<>>}) -> [];
stack_lines(#{current_stacktrace := S}) -> binary:split(S, <<"\n">>, [global]).

line_value(undefined) -> <<"-">>;
line_value(L) when is_list(L) -> fmt("[~ts]", [join([to_text(X) || X <- L], <<", ">>)]);
line_value(V) -> to_text(V).

%%%===================================================================
%%% Private: get_state
%%%===================================================================

state(Args) ->
    Fmt = fmt_arg(Args),
    Pid = resolve_pid(arg_text(pid, Args)),
    Timeout = arg_int(timeout_ms, Args, 2000, 1, 10000),
    PidText = os_sup_render:pid(Pid, Fmt),
    %% Nothing is sent unless the process is known to answer system messages.
    Otp = case otp_behaviour(Pid) of
              {ok, Info} -> Info;
              {no, Kind, Detail} -> not_otp(PidText, Kind, Detail, Fmt);
              gone -> fail(not_found, "process ~ts exited", [PidText])
          end,
    case pinfo_items(Pid, [status]) of
        undefined -> fail(not_found, "process ~ts exited", [PidText]);
        [{status, suspended}] ->
            fail(timeout, "~ts is suspended (erlang:suspend_process): it cannot answer "
                 "sys:get_state; use process_info instead", [PidText]);
        _ -> ok
    end,
    T0 = erlang:monotonic_time(microsecond),
    State = try sys:get_state(Pid, Timeout) of
                S -> S
            catch
                exit:{timeout, _} ->
                    fail(timeout, "~ts did not answer sys:get_state within ~b ms: it is busy "
                         "(in a callback, or still in init); its message queue and stacktrace "
                         "are in process_info",
                         [PidText, Timeout]);
                exit:{noproc, _} ->
                    fail(not_found, "process ~ts exited", [PidText]);
                exit:{Reason, _} ->
                    fail(not_otp, "sys:get_state failed for ~ts: ~ts",
                         [PidText, os_sup_render:term(Reason, Fmt, 512)])
            end,
    Us = erlang:monotonic_time(microsecond) - T0,
    {Module, Behaviour} = case State of
                              #{'__struct__' := 'Elixir.DynamicSupervisor'} ->
                                  {'Elixir.DynamicSupervisor', 'Elixir.DynamicSupervisor'};
                              _ -> {maps:get(module, Otp), maps:get(behaviour, Otp)}
                          end,
    Rendered = os_sup_render:pretty(State, Fmt, ?STATE_BYTES),
    Data = #{pid => PidText, module => render_opt_name(Module, Fmt),
             behaviour => render_opt_name(Behaviour, Fmt), state => Rendered,
             duration_us => Us},
    Head = join([to_text(X) || X <- [PidText, maps:get(module, Data), maps:get(behaviour, Data)],
                               X =/= undefined], <<" ">>),
    ok_reply([Head | binary:split(Rendered, <<"\n">>, [global])], Data).


%%%===================================================================
%%% Private: applications
%%%===================================================================

apps(Args) ->
    Fmt = fmt_arg(Args),
    Running = case catch application:which_applications(2000) of
                  L when is_list(L) -> L;
                  _ -> fail(timeout, "the application controller did not answer in 2 s", [])
              end,
    case arg_text(app, Args) of
        undefined ->
            Rows = [#{name => A, vsn => to_text(V), description => to_text(D)}
                    || {A, D, V} <- Running],
            ok_reply([fmt("~ts ~ts ~ts", [A, V, D]) || #{name := A, vsn := V, description := D}
                                                           <- Rows],
                     #{applications => Rows});
        Text ->
            Loaded = [A || {A, _, _} <- application:loaded_applications()],
            App = case [A || A <- name_atoms(Text), lists:member(A, Loaded)] of
                      [A | _] -> A;
                      [] -> fail(not_found, "no application ~ts is loaded (running: ~ts)",
                                 [Text, join([atom_to_binary(A, utf8) || {A, _, _} <- Running],
                                             <<", ">>)])
                  end,
            Vsn = case application:get_key(App, vsn) of {ok, V} -> to_text(V); _ -> undefined end,
            Desc = case application:get_key(App, description) of
                       {ok, D} -> to_text(D);
                       _ -> undefined
                   end,
            Env0 = application:get_all_env(App),
            Env = [#{key => os_sup_render:term(K, Fmt, 256),
                     value => os_sup_render:term(V, Fmt, ?TERM_BYTES)}
                   || {K, V} <- lists:sublist(lists:sort(Env0), 200)],
            IsRunning = lists:keymember(App, 1, Running),
            Head = fmt("~ts ~ts ~ts (~ts)", [App, to_text(Vsn), to_text(Desc),
                                            case IsRunning of true -> <<"running">>;
                                                false -> <<"loaded, not running">> end]),
            ok_reply([Head | [<<"  ", K/binary, " = ", V/binary>> || #{key := K, value := V} <- Env]],
                     #{name => App, vsn => Vsn, description => Desc, running => IsRunning,
                       env => Env, env_count => length(Env0)})
    end.

%%%===================================================================
%%% Private: system_info
%%%===================================================================

sysinfo(_Args) ->
    Mem = maps:from_list([{K, V} || {K, V} <- erlang:memory(), is_atom(K), is_integer(V)]),
    Limits = #{processes => limit(process_count, process_limit),
               ports => limit(port_count, port_limit),
               atoms => limit(atom_count, atom_limit),
               ets => limit(ets_count, ets_limit)},
    Util = scheduler_utilisation(100),
    RunQueue = try erlang:statistics(total_run_queue_lengths)
               catch _:_ -> erlang:statistics(run_queue) end,
    {Uptime, _} = erlang:statistics(wall_clock),
    Data = #{memory => Mem, limits => Limits,
             schedulers => erlang:system_info(schedulers),
             schedulers_online => erlang:system_info(schedulers_online),
             scheduler_utilisation => Util,
             run_queue => RunQueue,
             uptime_ms => Uptime,
             otp_release => to_text(erlang:system_info(otp_release)),
             erts_version => to_text(erlang:system_info(version)),
             elixir_version => elixir_version(),
             node => node()},
    MemLine = join([fmt("~ts=~ts", [K, bytes(maps:get(K, Mem))])
                    || K <- [total, processes, binary, ets, atom, code, system],
                       is_map_key(K, Mem)], <<" ">>),
    LimitLines = [fmt("~ts: ~b/~b (~.1f%)~ts", [K, C, L, P, case H of true -> <<" HIGH">>;
                                                                  false -> <<>> end])
                  || K <- [processes, ports, atoms, ets],
                     #{count := C, limit := L, percent := P, high := H} <- [maps:get(K, Limits)],
                     is_integer(C), is_integer(L)],
    UtilLine = case Util of
                   #{average := Avg, per_scheduler := Per} ->
                       fmt("scheduler utilisation (100 ms): avg ~.1f% [~ts]",
                           [Avg * 100, join([fmt("~.1f", [U * 100]) || U <- Per], <<" ">>)]);
                   _ -> <<"scheduler utilisation: unavailable">>
               end,
    Lines = [fmt("node ~ts otp ~ts erts ~ts elixir ~ts uptime ~bs",
                 [node(), maps:get(otp_release, Data), maps:get(erts_version, Data),
                  to_text(maps:get(elixir_version, Data)), Uptime div 1000]),
             <<"memory: ", MemLine/binary>>] ++ LimitLines ++
        [fmt("schedulers ~b online ~b run_queue ~b",
             [maps:get(schedulers, Data), maps:get(schedulers_online, Data), RunQueue]),
         UtilLine],
    ok_reply(Lines, Data).

limit(CountKey, LimitKey) ->
    try {erlang:system_info(CountKey), erlang:system_info(LimitKey)} of
        {C, L} when is_integer(C), is_integer(L), L > 0 ->
            P = round(C * 1000 / L) / 10,
            #{count => C, limit => L, percent => P, high => P > 80.0};
        _ -> #{count => undefined, limit => undefined, percent => undefined, high => false}
    catch
        _:_ -> #{count => undefined, limit => undefined, percent => undefined, high => false}
    end.

scheduler_utilisation(Ms) ->
    try
        Old = erlang:system_flag(scheduler_wall_time, true),
        try
            S1 = lists:sort(erlang:statistics(scheduler_wall_time)),
            timer:sleep(Ms),
            S2 = lists:sort(erlang:statistics(scheduler_wall_time)),
            N = erlang:system_info(schedulers),
            Per = [case T2 - T1 of 0 -> 0.0; DT -> (A2 - A1) / DT end
                   || {{I, A1, T1}, {I, A2, T2}} <- lists:zip(S1, S2), I =< N],
            Avg = case Per of [] -> 0.0; _ -> lists:sum(Per) / length(Per) end,
            #{average => round4(Avg), per_scheduler => [round4(U) || U <- Per],
              sample_ms => Ms}
        after
            _ = erlang:system_flag(scheduler_wall_time, Old)
        end
    catch
        _:_ -> undefined
    end.

round4(F) -> round(F * 10000) / 10000.

elixir_version() ->
    case code:is_loaded('Elixir.System') of
        {file, _} -> try to_text('Elixir.System':version()) catch _:_ -> undefined end;
        false -> undefined
    end.

%%%===================================================================
%%% Private: ets
%%%===================================================================

ets_tool(Args) ->
    Fmt = fmt_arg(Args),
    case arg_text(table, Args) of
        undefined -> ets_list(Fmt, arg_int(limit, Args, 20, 1, 200));
        Text -> ets_table(find_table(Text, Fmt), Fmt, arg_int(limit, Args, 10, 1, 100))
    end.

ets_list(Fmt, Limit) ->
    Word = erlang:system_info(wordsize),
    Infos = [I || T <- ets:all(), I <- [table_summary(T, Word)], I =/= undefined],
    Sorted = lists:sublist(lists:reverse(lists:keysort(1, Infos)), Limit),
    Rows = [render_table(I, Fmt) || {_, I} <- Sorted],
    Lines = [join([N, Id, fmt("size=~b", [S]), fmt("mem=~ts", [bytes(M)]), to_text(Ty),
                   to_text(P), <<"owner=", O/binary>>] ++
                      case ON of undefined -> []; _ -> [<<"(", ON/binary, ")">>] end,
                  <<" ">>)
             || #{name := N, id := Id, size := S, memory := M, type := Ty, protection := P,
                  owner := O, owner_name := ON} <- Rows],
    ok_reply(Lines, #{tables => Rows, total => length(Infos)}).

table_summary(T, Word) ->
    case catch ets:info(T) of
        Info when is_list(Info) ->
            Mem = proplists:get_value(memory, Info, 0) * Word,
            {Mem, (maps:from_list(Info))#{memory => Mem, table => T}};
        _ -> undefined
    end.

render_table(#{} = I, Fmt) ->
    Owner = maps:get(owner, I, undefined),
    #{name => render_opt_name(maps:get(name, I, undefined), Fmt),
      id => os_sup_render:term(maps:get(id, I, maps:get(table, I)), Fmt, 128),
      owner => os_sup_render:pid(Owner, Fmt),
      owner_name => case is_pid(Owner) of
                        true -> render_opt_name(reg_name(Owner), Fmt);
                        false -> undefined
                    end,
      size => maps:get(size, I, 0), memory => maps:get(memory, I, 0),
      type => maps:get(type, I, undefined), protection => maps:get(protection, I, undefined),
      named_table => maps:get(named_table, I, false)}.

%% Match a name (`demo_cache', `:demo_cache') or an id as rendered by this tool.
find_table(Text, Fmt) ->
    Names = name_atoms(Text),
    Stripped = strip_ref(Text),
    Found = [T || T <- ets:all(),
                  begin
                      Name = catch ets:info(T, name),
                      Id = catch ets:info(T, id),
                      (is_atom(Name) andalso lists:member(Name, Names)
                       andalso ets:info(T, named_table) =:= true)
                          orelse strip_ref(os_sup_render:term(Id, Fmt, 128)) =:= Stripped
                          orelse strip_ref(os_sup_render:term(Id, erlang, 128)) =:= Stripped
                          orelse (is_integer(Id) andalso integer_to_binary(Id) =:= Text)
                  end],
    case Found of
        [T | _] -> T;
        [] -> fail(not_found, "no ETS table named or with id ~ts (the ets tool without "
                   "table lists them)", [Text])
    end.

strip_ref(B) ->
    case re:run(B, <<"([0-9]+(\\.[0-9]+)+)">>, [{capture, [1], binary}]) of
        {match, [Inner]} -> Inner;
        _ -> B
    end.

ets_table(T, Fmt, Limit) ->
    Word = erlang:system_info(wordsize),
    Info = case catch ets:info(T) of
               I when is_list(I) -> I;
               _ -> fail(not_found, "the table vanished", [])
           end,
    Owner = proplists:get_value(owner, Info),
    Prot = proplists:get_value(protection, Info),
    InfoMap = maps:from_list([{K, info_value(K, V, Fmt, Word)} || {K, V} <- Info, is_atom(K)]),
    {Rows, Note} =
        case Prot =:= private andalso Owner =/= self() of
            true -> {[], <<"private table: only its owner can read rows">>};
            false ->
                try ets:match_object(T, '_', Limit) of
                    {Objs, _} -> {[os_sup_render:term(O, Fmt, ?TERM_BYTES) || O <- Objs],
                                  undefined};
                    '$end_of_table' -> {[], undefined}
                catch
                    _:_ -> {[], <<"rows could not be read (the table vanished?)">>}
                end
        end,
    Size = proplists:get_value(size, Info, 0),
    Note2 = case {Note, Size > length(Rows), Rows} of
                {undefined, true, [_ | _]} -> fmt("first ~b of ~b rows", [length(Rows), Size]);
                _ -> Note
            end,
    Lines = [fmt("~ts: ~ts", [K, to_text(V)]) || {K, V} <- lists:sort(maps:to_list(InfoMap))] ++
        [<<"rows:", (case Note2 of undefined -> <<>>; _ -> <<" ", Note2/binary>> end)/binary>>
         | [<<"  ", R/binary>> || R <- Rows]],
    ok_reply(Lines, #{info => InfoMap, rows => Rows, rows_note => Note2}).

info_value(memory, V, _Fmt, Word) when is_integer(V) -> V * Word;
info_value(owner, V, Fmt, _) -> os_sup_render:pid(V, Fmt);
info_value(heir, none, _, _) -> none;
info_value(heir, V, Fmt, _) -> os_sup_render:pid(V, Fmt);
info_value(name, V, Fmt, _) -> os_sup_render:name(V, Fmt);
info_value(_, V, _, _) when is_integer(V); is_boolean(V) -> V;
info_value(_, V, _, _) when is_atom(V) -> V;
info_value(_, V, Fmt, _) -> os_sup_render:term(V, Fmt, 256).

%%%===================================================================
%%% Private: module_info
%%%===================================================================

modinfo(Args) ->
    Fmt = fmt_arg(Args),
    Text = case arg_text(module, Args) of
               undefined -> fail(bad_args, "module is required (DemoApp.Counter, lists)", []);
               T -> T
           end,
    Atoms = name_atoms(Text),
    case [M || M <- Atoms, code:is_loaded(M) =/= false] of
        [M | _] -> loaded_module(M, Fmt);
        [] ->
            case [{M, P} || M <- Atoms, P <- [code:which(M)], is_list(P)] of
                [{M, Path} | _] -> unloaded(M, Path, Fmt);
                [] ->
                    %% No atom exists (or no file for it): look for a file without making one.
                    case [P || F <- file_names(Text), P <- [code:where_is_file(F)], is_list(P)] of
                        [Path | _] -> unloaded(undefined, Path, Fmt, Text);
                        [] -> fail(not_found, "no module ~ts is loaded or in the code path",
                                   [Text])
                    end
            end
    end.

file_names(Text0) ->
    Text = case Text0 of <<":", R/binary>> -> R; _ -> Text0 end,
    Base = case Text of
               <<"Elixir.", _/binary>> -> [Text];
               <<C, _/binary>> when C >= $A, C =< $Z -> [<<"Elixir.", Text/binary>>, Text];
               _ -> [Text]
           end,
    [binary_to_list(B) ++ ".beam" || B <- Base].

unloaded(M, Path, Fmt) ->
    unloaded(M, Path, Fmt, os_sup_render:name(M, Fmt)).

unloaded(_M, Path, _Fmt, Label) ->
    PathBin = to_text(Path),
    ok_reply([fmt("~ts not loaded; loadable from ~ts (not loaded by this tool)", [Label, PathBin])],
             #{module => Label, loaded => false, loadable => true, path => PathBin,
               exports => [], export_count => 0, attributes => [], compile => #{},
               behaviours => []}).

loaded_module(M, Fmt) ->
    Label = os_sup_render:name(M, Fmt),
    Exports = try M:module_info(exports) catch _:_ -> [] end,
    Attrs = try M:module_info(attributes) catch _:_ -> [] end,
    Compile = try M:module_info(compile) catch _:_ -> [] end,
    Path = case code:which(M) of
               P when is_list(P) -> to_text(P);
               P when is_atom(P) -> P;
               _ -> undefined
           end,
    ExportBins = [fmt("~ts/~b", [fun_name(F, Fmt), A])
                  || {F, A} <- lists:sublist(lists:sort(Exports), 500)],
    AttrRows = [#{name => K, value => os_sup_render:term(V, Fmt, 512)}
                || {K, V} <- lists:sublist(Attrs, 100), is_atom(K),
                   erlang:external_size(V) =< 65536],
    Behaviours = [os_sup_render:name(B, Fmt)
                  || {K, V} <- Attrs, K =:= behaviour orelse K =:= behavior, is_list(V),
                     B <- V, is_atom(B)],
    CompileMap = #{version => to_text(proplists:get_value(version, Compile, undefined)),
                   source => to_text(proplists:get_value(source, Compile, undefined)),
                   options => os_sup_render:term(proplists:get_value(options, Compile, []),
                                                 Fmt, 1024)},
    Lines = [fmt("~ts loaded from ~ts", [Label, to_text(Path)]),
             fmt("exports (~b): ~ts", [length(Exports), join(ExportBins, <<" ">>)]),
             fmt("behaviours: ~ts", [join(Behaviours, <<" ">>)]),
             fmt("compile: version ~ts source ~ts options ~ts",
                 [to_text(maps:get(version, CompileMap)), to_text(maps:get(source, CompileMap)),
                  maps:get(options, CompileMap)])] ++
        [fmt("attribute ~ts: ~ts", [K, V]) || #{name := K, value := V} <- AttrRows],
    ok_reply(Lines, #{module => Label, loaded => true, loadable => true, path => Path,
                      exports => ExportBins, export_count => length(Exports),
                      attributes => AttrRows, compile => CompileMap,
                      behaviours => Behaviours}).

fun_name(F, elixir) ->
    case os_sup_render:term(F, elixir, 256) of
        <<":", R/binary>> -> R;
        R -> R
    end;
fun_name(F, _) ->
    fmt("~tp", [F]).

%%%===================================================================
%%% Private: text helpers
%%%===================================================================

to_text(undefined) -> <<"-">>;
to_text(B) when is_binary(B) -> B;
to_text(A) when is_atom(A) -> atom_to_binary(A, utf8);
to_text(I) when is_integer(I) -> integer_to_binary(I);
to_text(F) when is_float(F) -> fmt("~tp", [F]);
to_text(L) when is_list(L) ->
    case catch unicode:characters_to_binary(L) of
        B when is_binary(B) -> B;
        _ -> fmt("~tP", [L, 10])
    end;
to_text(X) -> fmt("~tP", [X, 10]).

join([], _Sep) -> <<>>;
join(Parts, Sep) -> iolist_to_binary(lists:join(Sep, [to_text(P) || P <- Parts])).

bound(Bin, Max) -> os_sup_render:bound(Bin, Max).

fmt(Fmt, Args) ->
    case catch unicode:characters_to_binary(io_lib:format(Fmt, Args)) of
        Bin when is_binary(Bin) -> Bin;
        _ -> iolist_to_binary(io_lib:format("~P", [Args, 10]))
    end.
