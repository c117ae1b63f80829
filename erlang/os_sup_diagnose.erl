%%% @doc `os_sup_diagnose' says in one call what is wrong with a node. It
%%% samples the node over a short window and answers with its findings, each
%%% a record (`finding/6': its evidence, numbers, holder, code and next call as
%%% `{Tool, [{Key, Value}]}'), and the figures it looked at. The server ranks
%%% them and writes the text; the text sent here is the figures line.
%%%
%%% == Findings ==
%%% Each kind's urgency, and which findings are one cause (restarts of a deadlock's
%%% members, a leak piling up behind a contended server, a flood's handler backlog), the
%%% server decides once (`node::diagnose::finding::Kind::urgency',
%%% `node::diagnose::cause::one_per_cause'), from the facts and keys each finding carries:
%%% <ul>
%%%   <li>`not_started' (`os_sup_diagnose_boot'): an application whose start has not
%%%       returned, with where it waits.</li>
%%%   <li>`deadlock': a cycle of blocked calls (`os_sup_waits:node_chains/2').</li>
%%%   <li>`leak': a process group (`os_sup_proc_groups', by initial call, current
%%%       function and parent) that grows by at least 10 processes and 5/s.</li>
%%%   <li>`restarts': child restarts by the application's supervisors
%%%       (`os_sup_log_stats:summary/1').</li>
%%%   <li>`lost': a temporary child of a supervisor that exited with an error
%%%       and is gone: its supervisor no longer has its child spec
%%%       (`supervisor:get_childspec/2', asked only of an OTP supervisor, under
%%%       a deadline), so nothing will start it again.</li>
%%%   <li>`code' (`os_sup_diagnose_code'): modules of the application whose loaded
%%%       code is not their `.beam' (loaded from memory, from elsewhere, changed
%%%       or gone on disk).</li>
%%%   <li>`ets': a table that grows by at least 100 rows/s or 1 MB/s, with owner.</li>
%%%   <li>`mailbox' (`os_sup_diagnose_mailbox'): a queue of at least 1000
%%%       messages, or one that grew by at least 100 to 100 or more, with what
%%%       is queued, who sends it and why it stays.</li>
%%%   <li>`contention': at least 5 processes blocked in calls on one process
%%%       (or on one process of another node) at both ends of the window, with
%%%       what it runs: every call waits behind the others, whether or not any
%%%       times out.</li>
%%%   <li>`cpu' (`os_sup_diagnose_cpu'): a process that took a fifth of a
%%%       scheduler or more, judged against the node (its share of the node's
%%%       reductions times the schedulers its work kept busy, or the reads of
%%%       its stack over the next 300 ms that found it running,
%%%       `os_sup_proc_profile'), with the application's functions seen most
%%%       when it ran, file:line; or, when most of the node's reductions, a
%%%       fifth of a scheduler's worth, went to processes that ended inside the
%%%       window, the processes born from then on read over 500 ms, with how
%%%       they were started.</li>
%%%   <li>`run_queue': run queue at least twice the online schedulers at both
%%%       ends of the window, or schedulers 95 % busy.</li>
%%%   <li>`log_flood' (`os_sup_diagnose_logs'): the application logs at least
%%%       100 lines a second (20 of warnings and errors) over the window and
%%%       the seconds before it, or lines are dropped; with the functions that
%%%       write them, file:line.</li>
%%%   <li>`errors' (`os_sup_diagnose_logs'): error-level log events of the last
%%%       5 minutes.</li>
%%% </ul>
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
%%% Nothing is sent to any process; the text is under 2 KB.
-module(os_sup_diagnose).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, fmt_arg/1]).
-import(os_sup_lib_proc, [queue_len/1]).
-import(os_sup_lib_reply, [ok_reply/3]).
-import(os_sup_lib_text, [fmt/2, bytes/1, cut_bin/2]).
-import(os_sup_lib_time, [secs/1]).

%% API
-export([diagnose/1]).
%% for the other modules of the report (os_sup_diagnose_cpu)
-export([finding/6, frame_note/2]).

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
-define(MAX_TABLES, 10000).
%% thresholds
-define(ETS_ROWS_PER_S, 100).
-define(ETS_BYTES_PER_S, 1048576).
-define(CONTENDED, 5).
%% growth inside the window that sends `os_sup_diagnose_holders' looking
-define(GROWN_BYTES, 1048576).
-define(GROWN_COUNT, 3).
-define(GROWN_ATOMS, 20).
-define(BUSY, 0.95).
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
    Suspects = suspects(maps:get(suspects, Args, [])),
    T0 = erlang:monotonic_time(millisecond),
    Reds0 = os_sup_diagnose_cpu:reductions(),
    V0 = os_sup_node_vitals:sample(),
    Sys0 = system(),
    Log0 = os_sup_log_stats:summary(Fmt),
    Vol0 = os_sup_diagnose_logs:sample(),
    Ets0 = ets_sizes(),
    %% One walk reads what the groups, the deltas and the waits need (the helper's own
    %% processes, started in `os_sup_*' modules, are not the node's).
    G0 = os_sup_proc_groups:snapshot(origin, fun os_sup_lib_label:own/1, T0 + ?SCAN_MS,
                                     {keep, os_sup_waits:walk_context()}),
    Walked0 = erlang:monotonic_time(millisecond),
    {Chains, Scan} = try os_sup_waits:node_chains(5, ?CHAIN_MS, walked(G0))
                     catch _:_ -> {[], #{}} end,
    Chained = erlang:monotonic_time(millisecond),
    Queues0 = maps:from_list([{P, queue_len(P)} || P <- chain_pids(Chains)]),
    Calls0 = os_sup_diagnose_crowd:queued_calls([T || {N, T, _} <- maps:get(crowds, Scan, []),
                                             N >= ?CONTENDED]),
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
    Ets1 = ets_sizes(),
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
    Contention = contention(maps:get(crowds, Scan, []), Chains, Queues0, Calls0, Ctx),
    Code = os_sup_diagnose_code:scan(),
    Findings = lists:append(
                 [os_sup_diagnose_boot:not_started(Ctx),
                  deadlocks(rescanned(Chains, Log1), Ctx),
                  [os_sup_diagnose_leaks:behind(L, Contention, Ctx)
                   || L <- os_sup_diagnose_leaks:leaks(Grown, Ctx)],
                  os_sup_diagnose_crashes:restarts(Log1, Ctx),
                  os_sup_diagnose_logs:flood(Vol0, Vol1, Ctx),
                  os_sup_diagnose_crashes:lost(Ctx),
                  os_sup_diagnose_code:findings(Code, Ctx),
                  ets_growth(Ets0, Ets1, Ctx),
                  os_sup_diagnose_mailbox:mailboxes(G0, G1, Chains, Ctx),
                  Contention,
                  os_sup_diagnose_cpu:cpu(G1, Ctx),
                  run_queue(Sys0, Sys1, Util, Ctx),
                  os_sup_diagnose_logs:errors(Log1, Ctx)]),
    Found = erlang:monotonic_time(millisecond),
    Looked = lists:usort(Suspects ++ grown(V0, V1)),
    Holders = case Looked of
                  [] -> #{};
                  _ -> os_sup_diagnose_holders:find(Looked, #{largest_before => maps:get(largest, G0),
                                                     largest_after => maps:get(largest, G1),
                                                     grown => maps:get(top_grown, G1, []),
                                                     groups => Grown,
                                                     busiest => maps:get(top_reductions, G1, []),
                                                     window_s => Secs,
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
                           code_modules => maps:get(total, Code)}),
    Data = #{findings => Findings, holders => Holders, format => Fmt,
             window_start => V0, window_end => V1,
             cluster_facts => os_sup_cluster_facts:facts(maps:get(groups, G1), Code, Fmt),
             figures => Figures,
             window_ms => Window, duration_ms => Elapsed},
    ok_reply([figures_line(Figures)], Data, ?TEXT_BYTES).

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

%% Where a finding's code is: a stack frame (`#{mfa, file, line}'), or the module and function
%% a crash reason names (`{Module, Function}' as text).
site(#{mfa := {M, F, A}} = Frame, Fmt) ->
    #{module => os_sup_lib_render:name(M, Fmt), function => fmt("~ts/~b", [F, A]),
      file => maps:get(file, Frame, undefined), line => maps:get(line, Frame, undefined)};
site({M, F}, _Fmt) when is_binary(M) ->
    #{module => M, function => F, file => undefined, line => undefined};
site(_, _Fmt) ->
    undefined.

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

%% #{Table => {Size, MemoryBytes}} for at most MAX_TABLES tables.
ets_sizes() ->
    Word = erlang:system_info(wordsize),
    maps:from_list([{T, {S, M * Word}} || T <- lists:sublist(ets:all(), ?MAX_TABLES),
                                          S <- [ets:info(T, size)], is_integer(S),
                                          M <- [ets:info(T, memory)], is_integer(M)]).

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

deadlocks(Chains, #{fmt := Fmt} = Ctx) ->
    [begin
         [First | _] = Hops = maps:get(hops, C),
         Frames = [{H, os_sup_proc_groups:app_frame(H)} || H <- Hops],
         Parts = [[os_sup_lib_label:label(H, Fmt), frame_note(F, Fmt)] || {H, F} <- Frames],
         Behind = lists:usort([H || #{stop := deadlocked, deadlocked := To, hops := Hs} <- Chains,
                                    lists:member(To, Hops), H <- Hs]),
         BehindText = case Behind of
                          [] -> [];
                          _ -> ["; waiting behind it (not members): ",
                                lists:join(", ", [[os_sup_lib_label:label(B, Fmt),
                                                   frame_note(os_sup_proc_groups:app_frame(B), Fmt)]
                                                  || B <- lists:sublist(Behind, 3)])]
                      end,
         Line = {["DEADLOCK ", lists:join(" → call → ", Parts), " → call → ",
                  os_sup_lib_label:label(First, Fmt)], BehindText},
         Found = finding(deadlock, Line, {process_info, [{<<"pid">>, First}]}, First,
                         proplists:get_value(First, Frames), Ctx),
         %% How its members are known to their supervisors' reports: by name or by module.
         Found#{facts := #{processes => length(Hops), waiting_behind => length(Behind)},
                keys := #{members => lists:usort(lists:append([member_names(H, Fmt)
                                                               || H <- Hops]))}}
     end || C <- lists:sublist([C || C <- Chains, os_sup_waits:deadlock(C),
                                    os_sup_waits:confirmed(C)], 2)].

member_names(P, Fmt) ->
    Module = case os_sup_proc_origin:initial_call(P) of
                 {M, _, _} when is_atom(M) -> [os_sup_lib_render:name(M, Fmt)];
                 _ -> []
             end,
    [os_sup_lib_label:label(P, Fmt) | Module].

%% The chains again, at the end of the window, when the first scan saw no deadlock on a node
%% whose supervisors restarted something lately: a deadlock that times out and restarts is
%% missing from the node for a moment each time (cheap elsewhere: no second scan).
rescanned(Chains, #{restarts := #{last_5m := Recent}}) when Recent > 0 ->
    case lists:any(fun os_sup_waits:deadlock/1, Chains) of
        true -> Chains;
        false ->
            try os_sup_waits:node_chains(5, ?CHAIN_MS) of
                {Again, _} -> Again
            catch
                _:_ -> Chains
            end
    end;
rescanned(Chains, _Log) ->
    Chains.

%% Groups compared across two walks that read all the processes (or the same sample of
%% them): a walk cut short by its deadline would show a group it did not reach as grown.
grown_groups(#{truncated := false} = G0, #{truncated := false} = G1) ->
    os_sup_proc_groups:compare(G0, G1, growth);
grown_groups(_G0, _G1) ->
    [].

ets_growth(Ets0, Ets1, #{fmt := Fmt, secs := Secs} = Ctx) ->
    Growing = lists:reverse(lists:sort(
                              [{(S1 - S0) / Secs, (M1 - M0) / Secs, T, S1, M1}
                               || {T, {S1, M1}} <- maps:to_list(Ets1),
                                  {S0, M0} <- [maps:get(T, Ets0, {S1, M1})],
                                  (S1 - S0) / Secs >= ?ETS_ROWS_PER_S orelse
                                      (M1 - M0) / Secs >= ?ETS_BYTES_PER_S,
                                  not loading_code(T)])),
    [begin
         Name = ets:info(T, name),
         Owner = ets:info(T, owner),
         Frame = case is_pid(Owner) of true -> os_sup_proc_groups:app_frame(Owner); false -> undefined end,
         OwnerText = case is_pid(Owner) of
                         true -> [os_sup_lib_label:label(Owner, Fmt), frame_note(Frame, Fmt)];
                         false -> <<"(gone)">>
                     end,
         %% Who writes the rows, which the owner of a library's table (`timer_server') is not.
         Writers = os_sup_diagnose_holders:table_writers(T, Fmt),
         WrittenBy = case Writers of
                         #{target := _, text := W} -> ["; written by ", W];
                         #{text := W} -> ["; who writes: ", W]
                     end,
         Line = {[fmt("ets: ~ts +~b rows/s (+~ts/s), ~b rows, ~ts, owner ",
                      [os_sup_lib_render:term(Name, Fmt, 80), round(Rows), bytes(round(Bytes)), S,
                       bytes(M)]), OwnerText], WrittenBy},
         %% A named table by its name; another by its id, which is what `ets' takes for it.
         TableArg = case ets:info(T, named_table) of
                        true -> atom_to_binary(Name, utf8);
                        _ -> os_sup_lib_render:term(T, erlang, 80)
                    end,
         Next = case Writers of
                    #{target := Target} -> {source, [{<<"target">>, Target}]};
                    _ -> {ets, [{<<"table">>, TableArg}]}
                end,
         Found = finding(ets, Line, Next, Owner, Frame, Ctx),
         Found#{facts := #{rows_per_s => round(Rows), bytes_per_s => round(Bytes), rows => S,
                           bytes => M}}
     end || {Rows, Bytes, T, S, M} <- lists:sublist(Growing, 2), ets:info(T, name) =/= undefined].

%% The code server's tables grow while modules load (a boot, a first call of many modules):
%% loading code, which the code memory meter follows, not a table that leaks.
loading_code(T) ->
    ets:info(T, owner) =:= whereis(code_server).

%% Many processes blocked in calls on one, at the start and still at the end of the window.
%% A process in a deadlock, or behind one, is the deadlock's finding; a long queue, the
%% mailbox's.
contention(Crowds, Chains, Queues0, Calls0, #{fmt := Fmt, elapsed := Elapsed} = Ctx) ->
    Covered = lists:usort([H || #{hops := Hs, stop := S} <- Chains,
                                S =:= cycle orelse S =:= deadlocked, H <- Hs]),
    Crowded = [{N0, T, N, Now}
               || {N0, T, Ps} <- Crowds, N0 >= ?CONTENDED, not lists:member(T, Covered),
                  not long_queue(T, Queues0),
                  Now <- [os_sup_waits:still_waiting(T, Ps)], N <- [length(Now)],
                  N >= ?CONTENDED],
    [begin
         Local = is_pid(T) andalso node(T) =:= node(),
         %% Where the server's code was entered (its callback, what to change) and where it
         %% is now.
         {Entry, Now} = case Local andalso os_sup_lib_proc:pinfo_items(T, [current_stacktrace]) of
                            [{_, Stack}] -> {os_sup_proc_origin:entry_frame(Stack),
                                             os_sup_proc_origin:app_frame(Stack)};
                            _ -> {undefined, undefined}
                        end,
         %% What they wait for: a call on it, or a `:global' lock it holds.
         Waits = case [K || W <- lists:sublist(Waiters, 1),
                            {wait, #{kind := K}} <- [os_sup_waits:wait_of(W)]] of
                     [lock] -> lock;
                     _ -> call
                 end,
         On = case Waits of
                  lock -> " processes waiting for a :global lock held by ";
                  call -> " processes blocked in calls on "
              end,
         {Doing, Next, Cause} = case Local andalso os_sup_diagnose_crowd:doing(T, Waits, Fmt) of
                                    {Said, Then} -> {Said, Then, undefined};
                                    {_, _, _} = Found -> Found;
                                    false -> {[], {waits, []}, undefined}
                                end,
         Frame = case Entry of undefined -> Now; _ -> Entry end,
         Where = case {Entry, Now} of
                     {#{mfa := A}, #{mfa := B}} when A =/= B ->
                         [" (in ", os_sup_proc_groups:frame_text(Entry, Fmt), " → ",
                          os_sup_proc_groups:frame_text(Now, Fmt), ")"];
                     _ -> frame_note(Frame, Fmt)
                 end,
         Line = {[fmt("contention: ~b~ts", [N0, On]),
                  os_sup_lib_label:label(T, Fmt), Where,
                  fmt(", and ~ts still at the end of ~ts", [count_text(N), secs(Elapsed)])],
                 [os_sup_diagnose_crowd:served(maps:get(T, Calls0, undefined), T), Doing]},
         %% The server's own code is where its callers' wait is made: it is next rather than
         %% the chains, unless something more precise is.
         Next1 = case {Next, Frame} of
                     {{waits, []}, #{mfa := MFA}} ->
                         {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]};
                     _ -> Next
                 end,
         %% The code to change: what holds it, when that is elsewhere, else its own.
         Site = case Cause of undefined -> Frame; _ -> Cause end,
         Contended = finding(contention, Line, Next1,
                             case Local of true -> T; false -> hd(Waiters) end, Site, Ctx),
         Contended#{facts := #{waiting => N0, waiting_at_end => N}}
     end || {N0, T, N, Waiters} <- lists:sublist(lists:reverse(lists:sort(Crowded)), 2)].

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

long_queue(T, Queues0) ->
    is_pid(T) andalso node(T) =:= node() andalso
        os_sup_diagnose_mailbox:long(max(maps:get(T, Queues0, 0), queue_len(T))).

%% `still_waiting' looks at 100 waiters or so: more is "100 or more".
count_text(N) when N >= 100 -> <<"100 or more">>;
count_text(N) -> integer_to_binary(N).

sign(G) when G >= 0 -> "+";
sign(_) -> "".

run_queue(#{run_queue := R0, schedulers := S}, #{run_queue := R1}, Util, Ctx) ->
    Queued = R0 >= 2 * S andalso R1 >= 2 * S,
    Busy = is_float(Util) andalso Util >= ?BUSY,
    case Queued orelse Busy of
        false -> [];
        true ->
            Found = finding(run_queue,
                            fmt("run queue: ~b then ~b with ~b schedulers, ~ts busy",
                                [R0, R1, S, util_text(Util)]),
                            {processes, [{<<"sort_by">>, <<"reductions">>},
                                         {<<"window_ms">>, 1000}]},
                            undefined, undefined, Ctx),
            [Found#{facts := maps:merge(#{run_queue_start => R0, run_queue_end => R1,
                                          schedulers => S},
                                        case is_float(Util) of
                                            true -> #{scheduler_busy => Util};
                                            false -> #{}
                                        end)}]
    end.

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
