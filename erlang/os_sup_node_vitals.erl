%%% @doc `os_sup_node_vitals' takes the node's vital signs in one cheap sample.
%%% They are its memory by type, the counts and limits of processes, ports,
%%% atoms and ETS tables, the run queue, the cumulative reductions, garbage
%%% collections and IO, the timers of OTP's `timer' module
%%% (`os_sup_node_timers'), the cumulative reductions of the registered
%%% processes (at most ?WORK_NAMES, the busiest: the server keeps each one's
%%% work over the history), and the error-level log events and supervisor
%%% restarts the helper counted. Only O(1) `erlang:memory/0', `system_info'
%%% and `statistics' calls, a few ETS reads and one `process_info' per
%%% registered process: no process is walked or sent anything.
%%% The server samples every running node with it (tool `vitals') and keeps the
%%% history; `diagnose' takes one at each end of its window.
-module(os_sup_node_vitals).


-import(os_sup_lib_reply, [ok_reply/3]).
-import(os_sup_lib_text, [fmt/2, bytes/1]).

%% API
-export([vitals/1, sample/0]).

%% the registered processes whose reductions are read: at most this many names
-define(WORK_READ, 2000).
%% ... and sent, the busiest
-define(WORK_NAMES, 100).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `vitals' (no arguments): a flat map of integers (see {@link sample/0}).
-spec vitals(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
vitals(_Args) ->
    S = sample(),
    Get = fun(K) -> maps:get(K, S, 0) end,
    Line = fmt("memory ~ts (binary ~ts), ~b processes, ~b ports, ~b atoms, ~b ETS tables, "
               "run queue ~b",
               [bytes(Get(memory_total)), bytes(Get(memory_binary)), Get(processes),
                Get(ports), Get(atoms), Get(ets_tables), Get(run_queue)]),
    ok_reply([Line], S, 4096).

%% @doc `at_ms', `os_pid', `memory_*' (total, processes, processes_used, system, atom, binary, code, ets),
%% `processes', `process_limit', `ports', `port_limit', `atoms', `atom_limit', `ets_tables',
%% `ets_limit', `run_queue', `reductions', `gcs', `gc_words', `io_in', `io_out', `timers', `errors',
%% `restarts', and what of them is the helper's own: `own_atoms' (made by its evals and
%% tools), `own_ets_tables' and their bytes, `own_ets_memory', `own_memory' (its process
%% walks'); and `work', `#{Name => Reductions}' of the busiest registered processes. A
%% counter the VM cannot give is left out; never raises. A sampled node has its pauses
%% watched (`os_sup_trace_sysmon:watch/0') and the history of its tables' rows and
%% largest processes kept (`os_sup_node_history').
-spec sample() -> #{atom() => integer() | #{atom() => non_neg_integer()}}.
sample() ->
    _ = safe_value(fun os_sup_trace_sysmon:watch/0),
    _ = safe_value(fun os_sup_node_history:ensure/0),
    Memory = safe(fun() -> [{memory_key(K), V} || {K, V} <- erlang:memory(),
                                                  memory_key(K) =/= undefined] end),
    Counts = [{K, safe_value(fun() -> erlang:system_info(Info) end)}
              || {K, Info} <- [{processes, process_count}, {process_limit, process_limit},
                               {ports, port_count}, {port_limit, port_limit},
                               {atoms, atom_count}, {atom_limit, atom_limit},
                               {ets_tables, ets_count}, {ets_limit, ets_limit}]],
    Stats = safe(fun() ->
                         {Reds, _} = erlang:statistics(reductions),
                         {GCs, Words, _} = erlang:statistics(garbage_collection),
                         {{input, In}, {output, Out}} = erlang:statistics(io),
                         [{reductions, Reds}, {gcs, GCs}, {gc_words, Words},
                          {io_in, In}, {io_out, Out},
                          {run_queue, erlang:statistics(total_run_queue_lengths)}]
                 end),
    Log = safe(fun() ->
                       #{errors := E, restarts := #{total := R}} =
                           os_sup_log_stats:summary(erlang),
                       [{errors, E}, {restarts, R}]
               end),
    OsPid = safe_value(fun() -> list_to_integer(os:getpid()) end),
    Timers = safe_value(fun os_sup_node_timers:count/0),
    {OwnTables, OwnEtsBytes} = os_sup_helper_own:own_tables(),
    Own = [{own_atoms, safe_value(fun os_sup_helper_own:own_atoms/0)},
           {own_memory, safe_value(fun os_sup_helper_own:own_memory/0)},
           {own_ets_tables, OwnTables}, {own_ets_memory, OwnEtsBytes}],
    maps:from_list([{at_ms, erlang:system_time(millisecond)}, {work, work()}] ++ Own
                   ++ [KV || {_, V} = KV <- [{os_pid, OsPid}, {timers, Timers} | Memory ++ Counts ++ Stats ++ Log],
                             is_integer(V)]).

%%%===================================================================
%%% Private
%%%===================================================================


%% The cumulative reductions of the registered processes (the first ?WORK_READ names), the
%% ?WORK_NAMES with the most; the helper's own (`os_sup_*') left out.
work() ->
    try
        Names = lists:sublist(erlang:registered(), ?WORK_READ),
        Reds = [{R, N} || N <- Names, not own_name(N), P <- [whereis(N)], is_pid(P),
                          {reductions, R} <- [erlang:process_info(P, reductions)]],
        maps:from_list([{N, R} || {R, N} <- lists:sublist(lists:reverse(lists:sort(Reds)),
                                                          ?WORK_NAMES)])
    catch
        _:_ -> #{}
    end.

own_name(N) -> lists:prefix("os_sup_", atom_to_list(N)).

memory_key(total) -> memory_total;
memory_key(processes) -> memory_processes;
memory_key(processes_used) -> memory_processes_used;
memory_key(system) -> memory_system;
memory_key(atom) -> memory_atom;
memory_key(binary) -> memory_binary;
memory_key(code) -> memory_code;
memory_key(ets) -> memory_ets;
memory_key(_) -> undefined.

safe(F) ->
    try F() catch _:_ -> [] end.

safe_value(F) ->
    try F() catch _:_ -> undefined end.
