%%%-------------------------------------------------------------------
%%% @doc `os_sup_makers' finds the application function that makes what a
%%% process accumulates (ports, ETS tables, monitors, links), for the
%%% holders `diagnose' names, and what makes atoms (no process holds them:
%%% every process is watched, the helper's own left out): for a short window
%%% it traces that process's calls to the functions that make them (the BIFs and the
%%% library functions an application calls for them: `gen_udp:open',
%%% `ets:new', `erlang:monitor'...), each event naming the function it was
%%% called from (`{caller}'), and counts them by the calling function of the
%%% application, with the line of the call read from its debug info
%%% (`os_sup_code_beam:calls/1'). For a process whose state grows, which of
%%% its own module's functions run (`{module, M}': counted by function, with
%%% the line each starts at).
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link find/3}: who in the application makes a kind of thing in a
%%%       process.</li>
%%% </ul>
%%%
%%% == Bounds and safety ==
%%% One process (or, for atoms, all) is traced, with `arity' (no arguments are copied), for at
%%% most 2 s or 200 events, by a throw-away tracer that removes its
%%% patterns when it ends and whose flags go with it. Nothing is traced
%%% when the process is traced already, when a pattern is set on any of
%%% the functions (a trace session of the agent's, or the user's `dbg'), or
%%% when another `diagnose' traces: the answer says so. Only modules already
%%% loaded are traced (none is loaded for it).
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_makers).

-import(os_sup_lib, [fmt/2]).

%% API
-export([find/3]).
%% the tracer's entry point
-export([tracer/5]).

-define(LOCK, os_sup_makers_tracer).
-define(MAX_MS, 2000).
-define(MAX_EVENTS, 200).
-define(HEAP, [{max_heap_size, #{size => 1000000, kill => true, error_logger => false}}]).

-type kind() :: ports | ets_tables | monitors | links | atoms | {module, module()}
              | {ets_insert, ets:tab()}.
-export_type([kind/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Traces `Pid''s calls that make `Kind' for `Ms' (or until 200 calls):
%% `{ok, Makers, Calls, ElapsedMs}' with the application functions that made them, most
%% first (`#{mfa, file, line, count, via}'), and the calls seen in all; `{none, Why}' when
%% nothing could be traced (why, as text).
-spec find(pid() | all, kind(), pos_integer()) ->
          {ok, [map()], non_neg_integer(), non_neg_integer()} | {none, binary()}.
find(Pid, Kind, Ms) ->
    Patterns = [MFA || {M, _, _} = MFA <- makers(Kind), erlang:module_loaded(M)],
    case busy(Pid, Patterns) of
        {true, Why} -> {none, Why};
        false ->
            Self = self(),
            Scope = case Kind of
                        {module, _} -> local;
                        _ -> global
                    end,
            {Tracer, Mon} = spawn_opt(?MODULE, tracer,
                                      [Self, Pid, Patterns, {Scope, match_spec(Kind)},
                                       min(Ms, ?MAX_MS)],
                                      [monitor | ?HEAP]),
            receive
                {Tracer, busy} ->
                    erlang:demonitor(Mon, [flush]),
                    {none, <<"another diagnose is tracing">>};
                {Tracer, Events, Elapsed} ->
                    erlang:demonitor(Mon, [flush]),
                    summary(Kind, Events, Elapsed);
                {'DOWN', Mon, process, Tracer, Why} ->
                    {none, fmt("the trace ended early (~0p)", [Why])}
            after min(Ms, ?MAX_MS) + 1000 ->
                    exit(Tracer, kill),
                    {none, <<"the trace did not answer in time">>}
            end
    end.

%%%===================================================================
%%% The tracer
%%%===================================================================

%% @private Traces `Pid' (or all processes) for `Ms', sends `{self(), Events, ElapsedMs}' to
%% `Caller', then removes its patterns (its flags go when it exits: processes another tracer
%% traces keep theirs, `erlang:trace(all, ...)' skips them).
-spec tracer(pid(), pid() | all, [mfa()], {local | global, list()}, pos_integer()) -> ok.
tracer(Caller, Pid, Patterns, {Scope, Spec}, Ms) ->
    try register(?LOCK, self()) of
        true ->
            try
                _ = [erlang:trace_pattern(P, Spec, [Scope]) || P <- Patterns],
                _ = erlang:trace(Pid, true, [call, arity, {tracer, self()}]),
                Start = erlang:monotonic_time(millisecond),
                Events = collect(Start + Ms, 0, []),
                Caller ! {self(), Events, erlang:monotonic_time(millisecond) - Start},
                ok
            after
                _ = [catch erlang:trace_pattern(P, false, [Scope]) || P <- Patterns]
            end
    catch
        error:badarg -> Caller ! {self(), busy}, ok
    end.

collect(_Deadline, ?MAX_EVENTS, Acc) ->
    Acc;
collect(Deadline, N, Acc) ->
    Left = Deadline - erlang:monotonic_time(millisecond),
    receive
        {trace, From, call, Callee, Caller} when Left > 0 ->
            case os_sup_lib:helper_process(From) of
                true -> collect(Deadline, N, Acc);
                false -> collect(Deadline, N + 1, [{Callee, Caller} | Acc])
            end
    after max(0, Left) ->
            Acc
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% Each call event names its caller; writes to a table only when they are to that table.
match_spec({ets_insert, T}) -> [{[T, '_'], [], [{message, {caller}}]}];
match_spec(_) -> [{'_', [], [{message, {caller}}]}].

%% What makes each kind, at the level an application calls (the BIF, and the library
%% function above it when the BIF's caller is library code).
makers(ports) ->
    [{erlang, open_port, 2}, {gen_udp, open, 1}, {gen_udp, open, 2}, {gen_tcp, connect, 3},
     {gen_tcp, connect, 4}, {gen_tcp, listen, 2}, {gen_tcp, accept, 1}, {gen_tcp, accept, 2},
     {gen_sctp, open, 1}, {gen_sctp, open, 2}, {os, cmd, 1}, {os, cmd, 2}];
makers(ets_tables) ->
    [{ets, new, 2}];
makers(monitors) ->
    [{erlang, monitor, 2}, {erlang, monitor, 3}];
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
makers(links) ->
    [{erlang, link, 1}, {erlang, spawn_link, 1}, {erlang, spawn_link, 3},
     {proc_lib, spawn_link, 1}, {proc_lib, spawn_link, 3}].

busy(_Pid, []) ->
    {true, <<"none of the functions that make them is loaded">>};
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
                        [os_sup_render:mfa(hd(Traced), erlang)])}
    end.

%% The events by the application function they came from. A call made in library code
%% (`prim_inet' opening the port of `gen_udp:open') is counted once, by its library entry.
summary(_Kind, [], Elapsed) ->
    {ok, [], 0, Elapsed};
summary({module, M}, Events, Elapsed) ->
    Defs = case catch os_sup_code_beam:info(M) of
               #{defs := Ds, source := Src} -> {Src, Ds};
               _ -> {undefined, []}
           end,
    Counts = lists:foldl(fun({Callee, _}, Acc) ->
                                 MFA = os_sup_origin:enclosing(Callee),
                                 maps:update_with(MFA, fun(C) -> C + 1 end, 1, Acc)
                         end, #{}, [E || {{M1, _, _}, _} = E <- Events, M1 =:= M]),
    Ranked = lists:reverse(lists:sort([{C, MFA} || {MFA, C} <- maps:to_list(Counts)])),
    {ok, [(def_site(MFA, Defs))#{count => C} || {C, MFA} <- lists:sublist(Ranked, 3)],
     length(Events), Elapsed};
summary(_Kind, Events, Elapsed) ->
    App = [{os_sup_origin:app_frame([{M, F, A, []}]), Callee}
           || {Callee, {M, F, A}} <- Events, is_atom(M)],
    Counts = lists:foldl(fun({#{mfa := MFA}, Callee}, Acc) ->
                                 maps:update_with({MFA, Callee}, fun(C) -> C + 1 end, 1, Acc);
                            (_, Acc) -> Acc
                         end, #{}, App),
    Ranked = lists:reverse(lists:sort([{C, MFA, Callee} || {{MFA, Callee}, C} <- maps:to_list(Counts)])),
    {ok, [(call_site(MFA, Callee))#{count => C} || {C, MFA, Callee} <- lists:sublist(Ranked, 3)],
     length(Events), Elapsed}.

%% Where in `MFA' the call to `Callee' is (the first line that calls it; the function's file).
call_site({M, F, A} = MFA, Callee) ->
    {File, Lines} = case catch os_sup_code_beam:calls(M) of
                        {Src, Calls} when is_list(Calls) ->
                            {Src, [L || {{CF, CA}, C, L} <- Calls, CF =:= F, CA =:= A,
                                        C =:= Callee]};
                        _ -> {undefined, []}
                    end,
    #{mfa => MFA, via => Callee, file => relative(File),
      line => case lists:sort(Lines) of [L | _] -> L; [] -> undefined end}.

%% Where `MFA' starts (its first clause), from the module's debug info.
def_site({_, F, A} = MFA, {File, Defs}) ->
    Line = case [L || {DF, DA, _, L, _} <- Defs, DF =:= F, DA =:= A] of
               [L | _] -> L;
               [] -> undefined
           end,
    #{mfa => MFA, via => undefined, file => relative(File), line => Line}.

relative(undefined) -> undefined;
relative(File) ->
    case file:get_cwd() of
        {ok, Cwd} ->
            case string:prefix(File, [Cwd, "/"]) of
                nomatch -> File;
                Rel -> iolist_to_binary(Rel)
            end;
        _ -> File
    end.
