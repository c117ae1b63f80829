%%% @doc `os_sup_diagnose_makers' finds the application function that makes
%%% what a holder `diagnose' names accumulates, from a short trace. For a
%%% process, what makes its ports, ETS tables, monitors, links or dictionary
%%% keys; for the node (every process watched, the helper's own left out),
%%% what makes atoms and what opens files and NIF sockets; who writes a
%%% table; what starts the `timer' module's timers; who calls a library
%%% server that makes things for its callers (`timer_server'); and, for a process whose state grows, which of its own
%%% module's functions run.
%%%
%%% For a short window it traces the functions that make them (the BIFs and
%%% the library functions an application calls for them: `gen_udp:open',
%%% `ets:new', `erlang:monitor'...), each event naming the function it was
%%% called from (`{caller}'). Calls from the application are counted by that
%%% function, with the line of the call (`os_sup_code_beam:calls/1'). When
%%% every caller is library code, it walks up: the library function that
%%% called most is traced in turn, for its callers, until the application's
%%% code is reached (at most 5 levels).
%%%
%%% == Bounds and safety ==
%%% The process (or, for atoms, files, persistent terms, writes to a table
%%% and calls to a server, every process) is traced with `arity' (no arguments are copied), for at
%%% most 2 s and 60 events in all, by a throw-away tracer with a heap
%%% limit that removes its patterns when it ends and whose flags go with it.
%%% Nothing is traced when the process is traced already, when a pattern is
%%% set on any of the functions (a trace session of the agent's, or the
%%% user's `dbg'), or when another `diagnose' traces: the answer says so.
%%% Only modules already loaded are traced (none is loaded for it).
-module(os_sup_diagnose_makers).

-import(os_sup_lib_rank, [count/1]).
-import(os_sup_lib_text, [fmt/2]).

%% API
-export([find/3]).
%% what a trace of every process sets its flags on (os_sup_diagnose_mailbox too)
-export([likely/1, targets/0, trace_flags/3, not_all_note/1]).
%% the tracer's entry point
-export([tracer/6]).

-define(LOCK, os_sup_makers_tracer).
-define(MAX_MS, 2000).
-define(MAX_EVENTS, 60).
%% each step up from library code: this many calls, this long at most
-define(UP_EVENTS, 20).
-define(UP_MS, 400).
-define(UP_LEVELS, 5).
-define(HEAP, [{max_heap_size, #{size => 1000000, kill => true, error_logger => false}}]).
%% `erlang:trace(all, ...)' visits every process with the schedulers held (0.75 s, a 60 ms
%% stall of the node's processes, on a million): above this many processes a trace of
%% "every process" is one of the likeliest ones and of those born from then on.
-define(TRACE_ALL_MAX, 20000).
%% the key, in the dictionary of the process that runs `diagnose', of its likeliest processes
-define(LIKELY, '$os_sup_diagnose_likely').

-type kind() :: ports | files | persistent_terms | ets_tables | monitors | links | dictionary
              | atoms | timers
              | {module, module()}
              | {ets_insert, ets:tab()} | {calls_to, pid()}.
-export_type([kind/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Traces `Pid''s calls that make `Kind' for `Ms' (or until 200 calls):
%% `{ok, Makers, Calls, ElapsedMs}' with the application functions that made them, most
%% first (`#{mfa, file, line, count, via}': `via' is what it called), the calls seen in all,
%% and how long the trace that counted the makers' calls ran (when they were found by
%% walking up from library code, the last step's); `{none, Why}' when nothing could be
%% traced (why, as text).
-spec find(pid() | all, kind(), pos_integer()) ->
          {ok, [map()], non_neg_integer(), non_neg_integer()} | {none, binary()}.
find(Pid, Kind, Ms) ->
    Start = erlang:monotonic_time(millisecond),
    Patterns = [MFA || {M, _, _} = MFA <- makers(Kind), erlang:module_loaded(M)],
    case trace(Pid, Patterns, scope(Kind), match_spec(Kind), min(Ms, ?MAX_MS), ?MAX_EVENTS) of
        {ok, Events} ->
            Sites = summary(Kind, Events),
            Elapsed = erlang:monotonic_time(millisecond) - Start,
            case {Sites, Events, Kind} of
                {[], [_ | _], {module, _}} -> {ok, [], length(Events), Elapsed};
                {[], [_ | _], _} ->
                    up(Pid, Events, ?UP_LEVELS, length(Events), Elapsed);
                _ -> {ok, Sites, length(Events), Elapsed}
            end;
        {none, _} = None -> None
    end.

%% @doc Adds to the processes a trace of every process is narrowed to on a large node (the
%% busiest and the most grown of `diagnose''s window, a table's owner), for the rest of the
%% calling process's `diagnose'.
-spec likely([pid()]) -> ok.
likely(Pids) ->
    Known = case get(?LIKELY) of undefined -> []; L -> L end,
    _ = put(?LIKELY, lists:usort([P || P <- Pids, is_pid(P), node(P) =:= node()] ++ Known)),
    ok.

%% @doc What a trace of every process sets its flags on: `all' on a node of at most
%% ?TRACE_ALL_MAX processes, else the likeliest processes (`likely/1') and `new' ones.
-spec targets() -> all | [pid() | new].
targets() ->
    case erlang:system_info(process_count) =< ?TRACE_ALL_MAX of
        true -> all;
        false -> [new | case get(?LIKELY) of undefined -> []; L -> L end]
    end.

%% @doc Sets (`true') or takes off `Flags' on `Targets' (from `targets/0', or one pid).
-spec trace_flags(all | pid() | [pid() | new], boolean(), list()) -> ok.
trace_flags(Targets, How, Flags) when is_list(Targets) ->
    _ = [trace_one(T, How, Flags) || T <- Targets],
    ok;
trace_flags(Target, How, Flags) ->
    _ = trace_one(Target, How, Flags),
    ok.

%% erlang:trace/3, 0 when it raises (a process gone).
trace_one(Target, How, Flags) ->
    try erlang:trace(Target, How, Flags) catch _:_ -> 0 end.

%% @doc `` (of the N likeliest and new processes: 1000000 is too many to trace)'' when a trace
%% of every process was narrowed, else nothing.
-spec not_all_note(all | pid() | [pid() | new]) -> iodata().
not_all_note(Targets) when is_list(Targets) ->
    fmt(" (traced the ~b likeliest processes and new ones: ~b are too many to trace all)",
        [length(Targets) - 1, erlang:system_info(process_count)]);
not_all_note(_) ->
    [].

%%%===================================================================
%%% The tracer
%%%===================================================================

%% @private Traces `Pid' (or all processes) with `Patterns' (`Spec' in `Scope') for `Ms' or
%% `Max' events, sends `{self(), Events}' to `Caller', then removes its patterns (its flags
%% go when it exits: processes another tracer traces keep theirs, `erlang:trace(all, ...)'
%% skips them).
-spec tracer(pid(), pid() | all | [pid() | new], [mfa()], {local | global, list()},
             pos_integer(), pos_integer()) -> ok.
tracer(Caller, Pid, Patterns, {Scope, Spec}, Ms, Max) ->
    try register(?LOCK, self()) of
        true ->
            try
                _ = [erlang:trace_pattern(P, Spec, [Scope]) || P <- Patterns],
                ok = trace_flags(Pid, true, [{tracer, self()}, call, arity]),
                Events = collect(erlang:monotonic_time(millisecond) + Ms, Max, []),
                Caller ! {self(), Events},
                ok
            after
                _ = [try erlang:trace_pattern(P, false, [Scope]) catch _:_ -> 0 end
                     || P <- Patterns]
            end
    catch
        error:badarg -> Caller ! {self(), busy}, ok
    end.

collect(_Deadline, 0, Acc) ->
    Acc;
collect(Deadline, Left, Acc) ->
    Wait = Deadline - erlang:monotonic_time(millisecond),
    receive
        {trace, From, call, Callee, Caller} when Wait > 0 ->
            case os_sup_lib_label:helper_process(From) of
                true -> collect(Deadline, Left, Acc);
                false -> collect(Deadline, Left - 1, [{Callee, Caller} | Acc])
            end
    after max(0, Wait) ->
            Acc
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% Runs one tracer: `{ok, Events}' or `{none, Why}'.
trace(_Pid, [], _Scope, _Spec, _Ms, _Max) ->
    {none, <<"none of the functions that make them is loaded">>};
trace(Pid, Patterns, Scope, Spec, Wanted, Max) ->
    case {busy(Pid, Patterns), os_sup_diagnose_budget:ms(Wanted)} of
        {{true, Why}, _} -> {none, Why};
        {false, skip} -> {none, <<"no time left in this answer">>};
        {false, {ok, Ms}} ->
            Targets = case Pid of all -> targets(); _ -> Pid end,
            {Tracer, Mon} = spawn_opt(?MODULE, tracer,
                                      [self(), Targets, Patterns, {Scope, Spec}, Ms, Max],
                                      [monitor | ?HEAP]),
            receive
                {Tracer, busy} ->
                    erlang:demonitor(Mon, [flush]),
                    {none, <<"another diagnose is tracing">>};
                {Tracer, Events} ->
                    %% Gone (its patterns removed, its lock free) before the next trace.
                    receive {'DOWN', Mon, process, Tracer, _} -> ok
                    after 1000 -> erlang:demonitor(Mon, [flush])
                    end,
                    {ok, Events};
                {'DOWN', Mon, process, Tracer, Why} ->
                    {none, fmt("the trace ended early (~0p)", [Why])}
            after Ms + 1000 ->
                    exit(Tracer, kill),
                    {none, <<"the trace did not answer in time">>}
            end
    end.

%% Every caller was library code: trace the one that called most, for its own callers
%% (locally: a library calls its own functions), until the application's code is reached.
%% When none is found, `All' calls in `Elapsed' ms are those of the first trace.
up(_Pid, _Events, 0, All, Elapsed) ->
    {ok, [], All, Elapsed};
up(Pid, Events, Levels, All, Elapsed) ->
    Callers = count([Caller || {_, {M, _, _} = Caller} <- Events, is_atom(M)]),
    case lists:reverse(lists:keysort(2, maps:to_list(Callers))) of
        [{Caller, _} | _] ->
            Spec = [{'_', [], [{message, {caller}}]}],
            Traced = erlang:monotonic_time(millisecond),
            case trace(Pid, [Caller], local, Spec, ?UP_MS, ?UP_EVENTS) of
                {ok, [_ | _] = Up} ->
                    case summary(up, Up) of
                        [] -> up(Pid, Up, Levels - 1, All, Elapsed);
                        %% Their counts are of this trace: its time, not the whole walk's.
                        Sites -> {ok, Sites, All, erlang:monotonic_time(millisecond) - Traced}
                    end;
                _ -> {ok, [], All, Elapsed}
            end;
        [] -> {ok, [], All, Elapsed}
    end.

scope({module, _}) -> local;
scope(_) -> global.

%% Each call event names its caller; writes to a table, and calls to a server, only when
%% they are to that table or server (by pid or registered name).
match_spec({ets_insert, T}) -> [{[T, '_'], [], [{message, {caller}}]}];
match_spec({calls_to, Server}) ->
    Names = [Server | case erlang:process_info(Server, registered_name) of
                          {registered_name, N} when is_atom(N) -> [N];
                          _ -> []
                      end],
    %% gen_server:call/2,3, cast/2 and gen:call/3,4 (Elixir's GenServer.call) all take the
    %% server first.
    [{[S | Rest], [], [{message, {caller}}]}
     || S <- Names, Rest <- [['_'], ['_', '_'], ['_', '_', '_']]];
match_spec(_) -> [{'_', [], [{message, {caller}}]}].

%% What makes each kind, at the level an application calls (the BIF, and the library
%% function above it when the BIF's caller is library code).
makers(ports) ->
    [{erlang, open_port, 2}, {gen_udp, open, 1}, {gen_udp, open, 2}, {gen_tcp, connect, 3},
     {gen_tcp, connect, 4}, {gen_tcp, listen, 2}, {gen_tcp, accept, 1}, {gen_tcp, accept, 2},
     {gen_sctp, open, 1}, {gen_sctp, open, 2}, {os, cmd, 1}, {os, cmd, 2}];
makers(persistent_terms) ->
    [{persistent_term, put, 2}];
makers(files) ->
    [{file, open, 2}, {socket, open, 2}, {socket, open, 3}, {socket, open, 4}];
makers(ets_tables) ->
    [{ets, new, 2}];
makers(monitors) ->
    [{erlang, monitor, 2}, {erlang, monitor, 3}];
makers({calls_to, _}) ->
    [{gen_server, call, 2}, {gen_server, call, 3}, {gen_server, cast, 2}, {gen, call, 3},
     {gen, call, 4}];
makers({ets_insert, _}) ->
    [{ets, insert, 2}, {ets, insert_new, 2}];
makers({module, M}) ->
    try M:module_info(functions) of
        FAs -> [{M, F, A} || {F, A} <- FAs]
    catch
        _:_ -> []
    end;
makers(atoms) ->
    [{erlang, binary_to_atom, 1}, {erlang, binary_to_atom, 2}, {erlang, list_to_atom, 1},
     {'Elixir.String', to_atom, 1}, {'Elixir.List', to_atom, 1}];
makers(timers) ->
    %% What an application calls to start the `timer' module's timers (`timer_server''s), of
    %% those this OTP has (`apply_repeatedly/4' is OTP 26's).
    [MFA || {M, F, A} = MFA <- [{timer, send_interval, 2}, {timer, send_interval, 3}, {timer, apply_interval, 4},
     {timer, apply_repeatedly, 4}, {timer, apply_after, 4}, {timer, send_after, 2},
     {timer, send_after, 3}, {timer, exit_after, 2}, {timer, exit_after, 3},
     {timer, kill_after, 1}, {timer, kill_after, 2}], erlang:function_exported(M, F, A)];
makers(dictionary) ->
    [{erlang, put, 2}];
makers(links) ->
    [{erlang, link, 1}, {erlang, spawn_link, 1}, {erlang, spawn_link, 3},
     {proc_lib, spawn_link, 1}, {proc_lib, spawn_link, 3}].

busy(Pid, Patterns) ->
    Traced = [P || P <- Patterns, erlang:trace_info(P, traced) =/= {traced, false}],
    Tracer = case Pid of
                 all -> erlang:trace_info(new_processes, tracer);
                 _ -> erlang:trace_info(Pid, tracer)
             end,
    case {Tracer, Traced, whereis(?LOCK)} of
        {{tracer, []}, [], undefined} -> false;
        {{tracer, []}, [], _} -> {true, <<"another diagnose is tracing">>};
        {{tracer, _}, _, _} when Traced =:= [] ->
            {true, <<"the process is traced already (a trace session?)">>};
        {undefined, _, _} -> {true, <<"the process is gone">>};
        _ -> {true, fmt("a trace pattern is set on ~ts already (a trace session?)",
                        [os_sup_lib_render:mfa(hd(Traced), erlang)])}
    end.

%% The events by the application function they came from, most first (at most 3). For
%% `{module, M}', the functions of `M' that ran, with the line each starts at.
summary({module, M}, Events) ->
    Defs = try os_sup_code_beam:info(M) of
               #{defs := Ds, source := Src} -> {Src, Ds};
               _ -> {undefined, []}
           catch _:_ -> {undefined, []}
           end,
    Counts = count([os_sup_proc_origin:enclosing(Callee) || {{M1, _, _} = Callee, _} <- Events,
                                                     M1 =:= M]),
    Ranked = lists:reverse(lists:sort([{C, MFA} || {MFA, C} <- maps:to_list(Counts)])),
    [(def_site(MFA, Defs))#{count => C} || {C, MFA} <- lists:sublist(Ranked, 3)];
summary(_Kind, Events) ->
    App = [{MFA, Callee} || {Callee, {M, F, A}} <- Events, is_atom(M),
                            #{mfa := MFA} <- [os_sup_proc_origin:app_frame([{M, F, A, []}])]],
    Ranked = lists:reverse(lists:sort([{C, Key} || {Key, C} <- maps:to_list(count(App))])),
    [(call_site(MFA, Callee))#{count => C} || {C, {MFA, Callee}} <- lists:sublist(Ranked, 3)].

%% Where in `MFA' the call to `Callee' is: the first line that calls it, else (a library
%% function reached by tail calls, `timer:req/2' from `timer:send_interval/2') the first
%% that calls into its module, named as `via'. When `MFA' calls neither (it reached the call
%% through a local function's tail call: the stack keeps no frame of that function), the
%% function of its module that does; else its call to library code that reaches `Callee'.
call_site({M, F, A} = MFA, {CM, _, _} = Callee) ->
    {File, All} = try os_sup_code_beam:calls(M) of
                      {Src, Cs} when is_list(Cs) -> {Src, lists:sort([{L, FA, C} || {FA, C, L} <- Cs])};
                      _ -> {undefined, []}
                  catch _:_ -> {undefined, []}
                  end,
    Own = [{L, FA, C} || {L, FA, C} <- All, FA =:= {F, A}],
    Exact = fun(Calls) -> [S || {_, _, C} = S <- Calls, C =:= Callee] end,
    %% (a BIF calls no Erlang code: `erlang:is_binary/1' is no way to `binary_to_atom/2')
    Into = fun(Calls) -> [S || {_, _, {M1, F1, A1}} = S <- Calls, M1 =:= CM,
                               not erlang:is_builtin(M1, F1, A1)] end,
    %% A library function that tail-calls `Callee' leaves no frame (`File.open/2' ends in
    %% `:file.open/2'): then the call of `MFA''s to a function that reaches `Callee'.
    Through = fun() -> [S || {_, _, C} = S <- Own, calls(C, Callee, 3)] end,
    %% Its own call first; then a local function's (reached by a tail call: the stack keeps
    %% no frame of it); then through library code; then any call into `Callee''s module.
    Sites = lists:foldl(fun(_, [_ | _] = Found) -> Found;
                           (Find, []) -> Find()
                        end, [], [fun() -> Exact(Own) end, fun() -> Into(Own) end,
                                  fun() -> Exact(All) end, Through, fun() -> Into(All) end]),
    case Sites of
        [{Line, {LF, LA}, Via} | _] ->
            #{mfa => {M, LF, LA}, via => Via, file => relative(File), line => Line};
        [] -> #{mfa => MFA, via => Callee, file => relative(File), line => undefined}
    end.

%% Whether `{M, F, A}' (a library function) reaches `Callee' within `Depth' calls
%% (`File.open/2' → `:file.open/2' → `:file.call/2').
calls(_MFA, _Callee, 0) -> false;
calls({M, F, A} = MFA, Callee, Depth) when MFA =/= Callee ->
    try os_sup_code_beam:calls(M) of
        {_, Cs} when is_list(Cs) ->
            Out = lists:usort([C || {FA, C, _} <- Cs, FA =:= {F, A}]),
            lists:member(Callee, Out)
                orelse lists:any(fun(C) -> calls(C, Callee, Depth - 1) end, Out);
        _ -> false
    catch _:_ -> false
    end;
calls(_MFA, _Callee, _Depth) -> false.

%% Where `MFA' starts (its first clause), from the module's debug info.
def_site({_, F, A} = MFA, {File, Defs}) ->
    Line = case [L || {DF, DA, _, L, _} <- Defs, DF =:= F, DA =:= A] of
               [L | _] -> L;
               [] -> undefined
           end,
    #{mfa => MFA, via => undefined, file => relative(File), line => Line}.

relative(File) ->
    case file:get_cwd() of
        {ok, Cwd} -> os_sup_code_beam:relative(File, Cwd);
        _ -> File
    end.
