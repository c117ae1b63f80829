%%% @doc `os_sup_diagnose' says in one call what is wrong with a node. It
%%% samples the node over a short window and answers with its findings, each
%%% a record (`finding/6': its evidence, numbers, holder, code and next call as
%%% `{Tool, [{Key, Value}]}'), and the figures it looked at. The server ranks
%%% them and writes the text; the text sent here is the figures line.
%%%
%%% == Findings ==
%%% What each kind checks, with its thresholds, is said once, in docs/tools.md
%%% ("What `diagnose' checks"). Each kind has its module: `not_started'
%%% (`os_sup_diagnose_boot'), `deadlock' (`os_sup_diagnose_deadlock'), `leak'
%%% (`os_sup_diagnose_leaks'), `restarts' and `lost' (`os_sup_diagnose_crashes'),
%%% `code' (`os_sup_diagnose_code'), `ets' (`os_sup_diagnose_ets'), `stall'
%%% (`os_sup_diagnose_stalls'), `queue' (`os_sup_diagnose_queue'), `rows'
%%% (`os_sup_diagnose_rows'), `focus' (`os_sup_diagnose_focus': the symptom the user named,
%%% first), `mailbox'
%%% (`os_sup_diagnose_mailbox'), `contention' (`os_sup_diagnose_crowd'), `cpu' and
%%% `run_queue' (`os_sup_diagnose_cpu'), `log_flood' and `errors'
%%% (`os_sup_diagnose_logs'). Each kind's urgency, and which findings are one
%%% cause (restarts of a deadlock's members, a leak piling up behind a contended
%%% server, a flood's handler backlog), the server decides once
%%% (`Kind::urgency', `cause::one_per_cause' in `src/node/diagnose/'), from the
%%% facts and keys each finding carries.
%%% Memory by type and the counts that have a limit are judged by the
%%% server, from the history it keeps (`os_sup_node_vitals' samples) and the two
%%% samples sent here (`vitals_start', `vitals_end'): their rates and times to
%%% the limit. For the meters it saw growing (arg `suspects') and those that
%%% grew inside the window, `holders' names who holds them
%%% (`os_sup_diagnose_holders').
%%% A healthy node (a freshly booted one too) gives no finding.
%%%
%%% == Bounds and safety ==
%%% Two walks of the processes (`os_sup_proc_scan': one `process_info' per
%%% process, split across the schedulers, a sample of the rest where a walk
%%% would not end within 800 ms, at most 2 s); the first also finds the waits, whose
%%% chains are followed for at most 1 s; two ETS passes (at most 10 000
%%% tables). The window runs from the start of the first walk to the end of
%%% the second (which starts so as to end with it), so the whole takes about
%%% max(window, two walks), plus at most 1 s per kind of holder looked for
%%% (`os_sup_diagnose_holders'). The schedulers' use is read between the
%%% walks, so theirs is not the node's. The call runs at low priority; the
%%% traces and reads that explain the findings end ?EXPLAIN_MS after the window
%%% (?EXPLAIN_LARGE_MS on a large node)
%%% at the latest (`os_sup_diagnose_budget'), and a trace of every process is
%%% of the likeliest ones on a large node (`os_sup_diagnose_makers:targets/0').
%%% Nothing is sent to any process but a system status request to at most three
%%% idle gen_statems (`os_sup_diagnose_queue'); the text is under 2 KB.
-module(os_sup_diagnose).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_bool/2, fmt_arg/1]).
-import(os_sup_lib_proc, [queue_len/1]).
-import(os_sup_lib_reply, [ok_reply/3]).
-import(os_sup_lib_text, [fmt/2, bytes/1, cut_bin/2]).
-import(os_sup_lib_time, [secs/1]).

%% API
-export([diagnose/1]).
%% for the other modules of the report (os_sup_diagnose_cpu)
-export([finding/6, frame_note/2, named/1]).

-type finding() :: #{kind := atom(), head := binary(), detail := binary(),
                     next := {atom(), [{binary(), term()}]}, pid := pid() | undefined,
                     site := map() | undefined, facts := #{atom() => number()},
                     keys := #{atom() => term()}}.
-export_type([finding/0]).

-define(SCAN_MS, 2000).
-define(CHAIN_MS, 1000).
%% the schedulers' use is read over at least this long between the walks
-define(QUIET_MS, 100).
%% what follows the second walk (the tables, the logs, the findings' details) takes about this
-define(AFTER_MS, 90).
%% the traces and reads that explain the findings end this long after the window at the latest
%% (`os_sup_diagnose_budget'), on a node of at most ?SMALL_NODE processes and on a larger one
%% (whose walks take longer: fewer run, the answer comes in time)
-define(EXPLAIN_MS, 2000).
-define(EXPLAIN_LARGE_MS, 400).
-define(SMALL_NODE, 20000).
-define(TEXT_BYTES, 2000).
%% A finding's line: room for a three-process deadlock with each member's file:line and who
%% waits behind it (cut, the agent needs another call to read it).
-define(LINE_BYTES, 600).
%% growth inside the window that sends `os_sup_diagnose_holders' looking
-define(GROWN_BYTES, 1048576).
-define(GROWN_COUNT, 3).
-define(GROWN_ATOMS, 20).
%% a group of at least this many processes is named where it holds the most memory
-define(CROWD, 100).
%% registered processes traced, at most, where a trace of every process is narrowed
-define(LIKELY_NAMED, 1000).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `diagnose': args `window_ms' (sent by the server; held to 100..5000 here too),
%% `format'. The text is the figures line: the server writes the findings above it.
-spec diagnose(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
diagnose(Args) ->
    %% The application first: this call's own work waits behind the node's processes.
    Priority = process_flag(priority, low),
    try report(Args)
    after process_flag(priority, Priority)
    end.

report(Args) ->
    Fmt = fmt_arg(Args),
    Window = arg_int(window_ms, Args, ?DIAGNOSE_WINDOW_DEFAULT_MS, ?DIAGNOSE_WINDOW_MS_MIN,
                     ?DIAGNOSE_WINDOW_MS_MAX),
    Named = suspects(maps:get(suspects, Args, [])),
    %% The symptom the user names, watched over the window (`os_sup_diagnose_focus').
    Focus = os_sup_diagnose_focus:start(os_sup_lib_args:arg_text_only(focus, Args),
                                        arg_bool(focus_anywhere, Args), Window, Fmt),
    T0 = erlang:monotonic_time(millisecond),
    Reds0 = os_sup_diagnose_cpu:reductions(),
    V0 = os_sup_node_vitals:sample(),
    Sys0 = system(),
    Log0 = os_sup_log_stats:summary(Fmt),
    Vol0 = os_sup_diagnose_logs:sample(),
    Ets0 = os_sup_diagnose_ets:sizes(),
    %% One walk reads what the groups, the deltas and the waits need (the helper's own
    %% processes, started in `os_sup_*' modules, are not the node's).
    G0 = os_sup_proc_groups:snapshot(origin, fun os_sup_lib_label:own/1, T0 + ?SCAN_MS,
                                     {keep, os_sup_waits:walk_context()}),
    Walked0 = erlang:monotonic_time(millisecond),
    {Chains, Scan} = try os_sup_waits:node_chains(5, ?CHAIN_MS, walked(G0))
                     catch _:_ -> {[], #{}} end,
    Chained = erlang:monotonic_time(millisecond),
    Queues0 = maps:from_list([{P, queue_len(P)} || P <- chain_pids(Chains)]),
    Calls0 = os_sup_diagnose_crowd:queued_calls(
               os_sup_diagnose_crowd:crowded(maps:get(crowds, Scan, []))),
    %% The second walk starts so that it and what follows it end with the window, taking as
    %% long as the first (and ?AFTER_MS). The schedulers' use is read between the walks, which
    %% are this call's work, not the node's: over at least ?QUIET_MS.
    Wall = sched_start(),
    FirstMs = maps:get(duration_us, G0) div 1000,
    Wait = max(?QUIET_MS, T0 + Window - FirstMs - ?AFTER_MS - erlang:monotonic_time(millisecond)),
    receive after Wait -> ok end,
    Util = sched_stop(Wall),
    Walk1 = erlang:monotonic_time(millisecond),
    G1 = os_sup_proc_groups:snapshot(origin, fun os_sup_lib_label:own/1, erlang:monotonic_time(millisecond) + ?SCAN_MS,
                                G0),
    %% A trace of every process is of these on a large node (`os_sup_diagnose_makers').
    ok = os_sup_diagnose_makers:likely(likely(G1)),
    Ets1 = os_sup_diagnose_ets:sizes(),
    Sys1 = system(),
    V1 = os_sup_node_vitals:sample(),
    Log1 = os_sup_log_stats:summary(Fmt),
    Vol1 = os_sup_diagnose_logs:sample(),
    Reds1 = os_sup_diagnose_cpu:reductions(),
    Elapsed = max(1, erlang:monotonic_time(millisecond) - T0),
    Secs = max(1, maps:get(at_ms, G1) - maps:get(at_ms, G0)) / 1000,
    %% The walks' own reductions, which are not the node's.
    WalkReds = maps:get(own_reductions, G0) + maps:get(own_reductions, G1),
    Grown = grown_groups(G0, G1),
    Ctx = #{fmt => Fmt, secs => Secs, elapsed => Elapsed,
            app_reductions => os_sup_diagnose_cpu:app_reductions(Reds0, Reds1, WalkReds),
            app_busy => os_sup_diagnose_cpu:app_busy(Util)},
    Walked1 = erlang:monotonic_time(millisecond),
    %% What explains a finding (who writes, who sends, who makes) takes what is left of this.
    ok = os_sup_diagnose_budget:until(T0 + Window + explain_ms()),
    Crowds = maps:get(crowds, Scan, []),
    %% Each kind is a check of its own: one that fails is said, and the others still answer.
    {Contention, Failed0} = checks([{contention, fun() ->
                                                      os_sup_diagnose_crowd:contention(
                                                        Crowds, Chains, Queues0, Calls0, Ctx)
                                              end}]),
    Code = os_sup_diagnose_code:scan(),
    {Findings0, Failed1} =
        checks([{focus, fun() -> os_sup_diagnose_focus:finding(Focus, Ctx) end},
                {not_started, fun() -> os_sup_diagnose_boot:not_started(Ctx) end},
                {deadlock, fun() -> os_sup_diagnose_deadlock:deadlocks(
                                      os_sup_diagnose_deadlock:rescanned(Chains, Log1), Ctx) end},
                {leak, fun() -> [os_sup_diagnose_leaks:behind(L, Contention, Ctx)
                                 || L <- os_sup_diagnose_leaks:leaks(Grown, Ctx)] end},
                {restarts, fun() -> os_sup_diagnose_crashes:restarts(Log1, Ctx) end},
                {log_flood, fun() -> os_sup_diagnose_logs:flood(Vol0, Vol1, Ctx) end},
                {lost, fun() -> os_sup_diagnose_crashes:lost(Ctx) end},
                {code, fun() -> os_sup_diagnose_code:findings(Code, Ctx) end},
                {ets, fun() -> os_sup_diagnose_ets:growth(Ets0, Ets1, Ctx) end},
                {rows, fun() -> os_sup_diagnose_rows:rows(
                                  [T || {_, _, T, _, _} <- os_sup_diagnose_ets:growing(Ets0, Ets1, Secs)],
                                  Ctx) end},
                {mailbox, fun() -> os_sup_diagnose_mailbox:mailboxes(G0, G1, Chains, Ctx) end},
                {queue, fun() -> os_sup_diagnose_queue:queues(G1, Ctx) end},
                {stall, fun() -> os_sup_diagnose_stalls:stalls(Crowds, Ctx) end},
                {contention, fun() -> Contention end},
                {cpu, fun() -> os_sup_diagnose_cpu:cpu(G1, Ctx) end},
                {run_queue, fun() -> os_sup_diagnose_cpu:run_queue(Sys0, Sys1, Util, Ctx) end},
                {errors, fun() -> os_sup_diagnose_logs:errors(Log1, Ctx) end}]),
    Found = erlang:monotonic_time(millisecond),
    Findings = [remote_callers(F) || F <- Findings0],
    %% The suspects: the meters the server saw grow, and those that grew in the window.
    Suspects = lists:usort(Named ++ grown(V0, V1)),
    Holders = case Suspects of
                  [] -> #{};
                  _ -> os_sup_diagnose_holders:find(Suspects, #{largest_before => maps:get(largest, G0),
                                                     largest_after => maps:get(largest, G1),
                                                     grown => maps:get(top_grown, G1, []),
                                                     groups => Grown,
                                                     busiest => maps:get(top_reductions, G1, []),
                                                     window_s => Secs,
                                                     ets_before => Ets0, ets_after => Ets1,
                                                     truncated => maps:get(truncated, G1)}, Fmt)
              end,
    %% Where the call's time went, for a bench or a slow answer.
    Steps = #{first_walk => Walked0 - T0, chains => Chained - Walked0, wait => Walk1 - Chained,
              second_walk => Walked1 - Walk1, findings => Found - Walked1,
              holders => erlang:monotonic_time(millisecond) - Found},
    Figures = maps:merge((figures(Sys0, Sys1, Log0, Log1, Util, {G0, G1}, Window, Elapsed))#{
                           largest_group => largest_group(G0, G1, Fmt)},
                         (os_sup_diagnose_logs:figures(Vol0, Vol1))#{
                           steps_ms => Steps,
                           code_checked => maps:get(checked, Code),
                           stalls_watched => os_sup_diagnose_stalls:watched(Fmt),
                           checks_failed => Failed0 ++ Failed1,
                           code_modules => maps:get(total, Code)}),
    Data = #{findings => Findings, holders => Holders, format => Fmt,
             window_start => V0, window_end => V1,
             cluster_facts => os_sup_cluster_facts:facts(maps:get(groups, G1), Code, Fmt),
             figures => Figures,
             window_ms => Window, duration_ms => Elapsed},
    ok_reply([figures_line(Figures)], Data, ?TEXT_BYTES).

%% The findings of each `{Kind, Fun}', and the checks that failed (`[#{check, why}]'): a bug
%% or a surprise of the node in one kind's check costs that check, not the report.
checks(Checks) ->
    Results = [try {F(), []}
               catch C:R:St ->
                       {[], [#{check => K,
                               why => cut_bin(fmt("~tp:~tP at ~tP", [C, R, 8, lists:sublist(St, 2), 12]),
                                              300)}]}
               end || {K, F} <- Checks],
    {lists:append([F || {F, _} <- Results]), lists:append([E || {_, E} <- Results])}.

%% @doc One finding as the server reads it (`node::diagnose::Finding' decodes it): `kind';
%% `head', what was found and how much, and `detail', the evidence after it (each clause
%% led by its own `; '), from `Evidence' (`{Head, Detail}', or the head alone); `facts', its
%% numbers (`#{Name => number()}', the unit in the name: `_per_s', `_bytes', `_ms', else a
%% count), and `keys', what ties it to another finding's cause (see `os_sup_diagnose'),
%% both set by the caller; `next', the call to make next as `{Tool, [{Key, Value}]}' (a pid
%% stays a pid); `pid', the holding process (a pid, or `undefined'); `site', where its code
%% is (`#{module, function, file, line}', or `undefined'). The server decides once how
%% urgent it is, which findings are one cause, and writes the text.
-spec finding(atom(), iodata() | {iodata(), iodata()}, {atom(), [{binary(), term()}]},
              pid() | undefined, map() | {binary(), binary() | undefined} | undefined, map()) ->
          finding().
finding(Kind, Evidence, {Tool, Args}, Pid, Frame, #{fmt := Fmt}) ->
    {Head, Detail} = case Evidence of
                         {H, D} -> {H, D};
                         H -> {H, <<>>}
                     end,
    HeadBin = cut_bin(unicode:characters_to_binary(Head), ?LINE_BYTES),
    #{kind => Kind,
      head => HeadBin,
      detail => cut_bin(unicode:characters_to_binary(Detail),
                        max(0, ?LINE_BYTES - byte_size(HeadBin))),
      next => {Tool, Args},
      pid => case is_pid(Pid) of true -> Pid; false -> undefined end,
      site => site(Frame, Fmt),
      facts => #{},
      keys => #{}}.

%% A finding held by a process that processes of other members call (a server one member runs
%% for the cluster) says who, by member: the calls in flight now, from its monitors (a
%% `gen_server' call monitors the server). The clause leads the detail, which is cut to fit.
remote_callers(#{pid := P, head := Head, detail := Detail, facts := Facts} = F)
  when is_pid(P), node(P) =:= node() ->
    case callers_by_node(P) of
        [] -> F;
        ByNode ->
            Text = fmt("; called now from other members: ~ts",
                       [lists:join(<<", ">>, [fmt("~ts ×~b", [N, C]) || {C, N} <- ByNode])]),
            F#{detail := cut_bin(<<Text/binary, Detail/binary>>,
                                 max(0, ?LINE_BYTES - byte_size(Head))),
               facts := Facts#{remote_callers => lists:sum([C || {C, _} <- ByNode])}}
    end;
remote_callers(F) ->
    F.

%% `[{Count, Node}]' of the remote processes monitoring `P', the most first (at most 4 nodes).
callers_by_node(P) ->
    case erlang:process_info(P, monitored_by) of
        {monitored_by, By} ->
            Nodes = [node(X) || X <- By, is_pid(X), node(X) =/= node()],
            Counts = lists:foldl(fun(N, Acc) -> maps:update_with(N, fun(C) -> C + 1 end, 1, Acc)
                                 end, #{}, Nodes),
            lists:sublist(lists:reverse(lists:sort([{C, N} || {N, C} <- maps:to_list(Counts)])),
                          4);
        _ -> []
    end.

%% Where a finding's code is: a stack frame (`#{mfa, file, line}'), or the module and function
%% a crash reason names (`{Module, Function}' as text).
site(#{mfa := {M, F, A}} = Frame, Fmt) ->
    #{module => os_sup_lib_render:name(M, Fmt), function => fmt("~ts/~b", [F, A]),
      file => maps:get(file, Frame, undefined), line => maps:get(line, Frame, undefined)};
site({M, F}, _Fmt) when is_binary(M) ->
    #{module => M, function => F, file => undefined, line => undefined};
site(_, _Fmt) ->
    undefined.

%% @doc The key `names' of a finding held by a registered process: its name as the node
%% writes it (`Elixir.Shop.Worker'), which a cluster's members are compared by.
-spec named(pid()) -> #{names => [binary()]}.
named(P) ->
    case os_sup_lib_proc:reg_name(P) of
        Name when is_atom(Name), Name =/= undefined -> #{names => [atom_to_binary(Name, utf8)]};
        _ -> #{}
    end.

frame_note(undefined, _Fmt) -> <<>>;
frame_note(Frame, Fmt) -> [" (in ", os_sup_proc_groups:frame_text(Frame, Fmt), ")"].

%%%===================================================================
%%% Private: sampling
%%%===================================================================

%% What the first walk read for the waits scan, as `os_sup_waits:node_chains/3' takes it.
walked(#{waits := Waits, scanned := N, truncated := T}) -> {Waits, N, T}.

system() ->
    %% what the walk workers hold (one ending now) is the helper's, not the node's
    Own = os_sup_helper_own:own_memory(),
    Mem = maps:map(fun(K, V) when K =:= total; K =:= processes; K =:= processes_used ->
                           max(0, V - Own);
                      (_, V) -> V
                   end, maps:from_list(erlang:memory())),
    RunQueue = try erlang:statistics(total_run_queue_lengths)
               catch _:_ -> erlang:statistics(run_queue) end,
    Limits = [{K, count(C), count(L)} || {K, C, L} <- [{processes, process_count, process_limit},
                                                        {ports, port_count, port_limit},
                                                        {atoms, atom_count, atom_limit},
                                                        {ets, ets_count, ets_limit}]],
    #{memory => Mem, run_queue => RunQueue, limits => Limits,
      process_count => erlang:system_info(process_count),
      schedulers => erlang:system_info(schedulers_online)}.

count(Key) ->
    try erlang:system_info(Key) catch _:_ -> undefined end.

sched_start() ->
    try
        Old = erlang:system_flag(scheduler_wall_time, true),
        {Old, lists:sort(erlang:statistics(scheduler_wall_time))}
    catch
        _:_ -> undefined
    end.

sched_stop(undefined) -> undefined;
sched_stop({Old, S1}) ->
    try
        S2 = lists:sort(erlang:statistics(scheduler_wall_time)),
        _ = erlang:system_flag(scheduler_wall_time, Old),
        N = erlang:system_info(schedulers),
        Per = [case T2 - T1 of 0 -> 0.0; DT -> (A2 - A1) / DT end
               || {{I, A1, T1}, {I, A2, T2}} <- lists:zip(S1, S2), I =< N],
        case Per of
            [] -> undefined;
            _ -> round(lists:sum(Per) / length(Per) * 1000) / 1000
        end
    catch
        _:_ -> undefined
    end.

chain_pids(Chains) ->
    lists:usort([H || #{hops := Hs} <- Chains, H <- Hs, is_pid(H), node(H) =:= node()]).

%%%===================================================================
%%% Private: findings
%%%===================================================================

%% Groups compared across two walks that read all the processes (or the same sample of
%% them): a walk cut short by its deadline would show a group it did not reach as grown.
grown_groups(#{truncated := false} = G0, #{truncated := false} = G1) ->
    os_sup_proc_groups:compare(G0, G1, growth);
grown_groups(_G0, _G1) ->
    [].

%% The processes a trace of every process is narrowed to on a large node: the busiest and
%% the most grown of the window, and the registered ones (servers write tables and send).
likely(G1) ->
    Named = [P || N <- lists:sublist(erlang:registered(), ?LIKELY_NAMED), P <- [whereis(N)],
                  is_pid(P)],
    [P || {_, P} <- maps:get(top_reductions, G1, []) ++ maps:get(top_grown, G1, [])] ++ Named.

explain_ms() ->
    case erlang:system_info(process_count) =< ?SMALL_NODE of
        true -> ?EXPLAIN_MS;
        false -> ?EXPLAIN_LARGE_MS
    end.

sign(G) when G >= 0 -> "+";
sign(_) -> "".

util_text(U) when is_float(U) -> fmt("~b%", [round(U * 100)]);
util_text(_) -> <<"?">>.

%% The suspects the server named: the meters it saw growing in its history.
suspects(List) when is_list(List) ->
    Known = [binary, process_memory, ets_tables, ets_memory, ports, atoms, files, persistent_terms,
             process_groups, timers, work],
    lists:usort([A || S <- List, A <- Known, S =:= atom_to_binary(A, utf8) orelse S =:= A]);
suspects(_) ->
    [].

%% What grew inside the window enough to look for its holder, whatever the server saw.
grown(V0, V1) ->
    D = fun(K) -> maps:get(K, V1, 0) - maps:get(K, V0, 0) end,
    [S || {S, K, Min} <- [{binary, memory_binary, ?GROWN_BYTES},
                          {process_memory, memory_processes, ?GROWN_BYTES},
                          {ets_memory, memory_ets, ?GROWN_BYTES},
                          {ports, ports, ?GROWN_COUNT}, {ets_tables, ets_tables, ?GROWN_COUNT},
                          {atoms, atoms, ?GROWN_ATOMS}],
          D(K) >= Min].

%%%===================================================================
%%% Private: the answer
%%%===================================================================

figures(Sys0, Sys1, Log0, Log1, Util, {G0, G1}, Window, Elapsed) ->
    Mem = maps:get(memory, Sys1),
    #{restarts := #{total := Restarts, last_5m := Recent}, errors := E1} = Log1,
    #{errors := E0} = Log0,
    WalkMs = (maps:get(busy_us, G0) + maps:get(busy_us, G1)) div 1000,
    #{process_count => maps:get(process_count, Sys1),
      process_change => maps:get(process_count, Sys1) - maps:get(process_count, Sys0),
      run_queue => maps:get(run_queue, Sys1),
      scheduler_utilisation => Util,
      memory => maps:with([total, processes, binary, ets, atom, code, system], Mem),
      restarts => Restarts, restarts_last_5m => Recent,
      errors_per_s => round((E1 - E0) * 10000 / Elapsed) / 10,
      scanned => maps:get(scanned, G1), scan_truncated => maps:get(truncated, G1)
                                                             orelse maps:get(truncated, G0),
      scan_sample => maps:get(sample, G1), scan_listed => maps:get(listed, G1),
      scan_ms => maps:get(duration_us, G1) div 1000, scans_scheduler_ms => WalkMs,
      window_ms => Window}.

figures_line(F) ->
    #{process_count := P, process_change := D, run_queue := R, memory := M,
      window_ms := W, scan_ms := S} = F,
    Mem = lists:join(", ", [fmt("~ts ~ts", [K, bytes(maps:get(K, M, 0))])
                            || K <- [processes, binary, ets, atom, code, system]]),
    unicode:characters_to_binary(
      [fmt("~b processes (~ts~b over ~b ms), run queue ~b, ~ts busy, memory ~ts (",
           [P, sign(D), D, W, R, util_text(maps:get(scheduler_utilisation, F)),
            bytes(maps:get(total, M, 0))]), Mem,
       fmt("), child restarts ~ts (~ts in 5 min), errors ~ts/s, ~ts, ~ts, scan ~b ms~ts~ts",
           [opt(maps:get(restarts, F)), opt(maps:get(restarts_last_5m, F)),
            opt(maps:get(errors_per_s, F)), os_sup_diagnose_logs:figures_text(F), code_text(F), S,
            sample_note(F),
            case maps:get(scan_truncated, F) of
                true -> " (TRUNCATED at 2 s: no leak judged)";
                false -> ""
            end]),
       case maps:get(largest_group, F, undefined) of
           #{text := Group} -> ["; the most memory: ", Group];
           undefined -> ""
       end]).

%% Where most of the processes' memory is when many processes share it: the group (by
%% origin) that holds the most, with its change over the window, so that a steady crowd (a
%% pool of connections) is told from a leak without another call.
largest_group(G0, G1, Fmt) ->
    case os_sup_proc_groups:compare(G0, G1, memory) of
        [#{key := K, count := C, memory := M, delta := D} = G | _]
          when K =/= other, C >= ?CROWD, is_integer(D) ->
            Text = fmt("~b processes ~ts, ~ts, ~ts~b over the window",
                       [C, os_sup_proc_groups:describe(origin, G, Fmt), bytes(M), sign(D), D]),
            #{count => C, memory => M, change => D, text => cut_bin(Text, ?LINE_BYTES)};
        _ ->
            undefined
    end.

%% `code 40 modules as on disk', or how many of them were compared in time.
code_text(#{code_checked := N, code_modules := N}) -> fmt("code ~b modules as on disk", [N]);
code_text(#{code_checked := C, code_modules := N}) ->
    fmt("code: ~b of ~b modules compared with their .beam so far", [C, N]).

%% A walk that read a sample of the processes says so (its counts are scaled).
sample_note(#{scan_sample := 1}) -> <<>>;
sample_note(#{scanned := Read, scan_listed := Listed}) ->
    fmt(" (a sample: ~b of ~b processes read, counts scaled)", [Read, Listed]).

opt(undefined) -> <<"?">>;
opt(V) -> os_sup_lib_text:to_text(V).
