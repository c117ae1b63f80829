%%% @doc `os_sup_proc_scan' walks every process of the node once, split
%%% across its schedulers, for the tools that count processes in groups
%%% (`os_sup_proc_groups': `diagnose', `processes' by group). One worker per
%%% online scheduler reads a run of the processes as `erlang:processes()'
%%% lists them (cut at the same processes at each end of a window, so a
%%% process is read by the same worker) and keeps per process what the next
%%% walk diffs against: reductions,
%%% memory and the initial call (when it cost a read of the dictionary).
%%% The coordinator merges the workers' groups.
%%%
%%% Where a full walk cannot fit the time it is given, a share of the
%%% processes is read, the same share at both ends (1 in `sample', chosen
%%% from the cost of the first reads), and the counts are scaled: the answer
%%% says so.
%%%
%%% == Bounds and safety ==
%%% One `process_info(P, [few items])' per process read (the dictionary
%%% only for `proc_lib' processes whose initial call is not yet known, and
%%% whole only under 1 M heap words); processes that exit mid-walk are
%%% skipped; each walk stops at its deadline and says so; nothing is sent to
%%% any process. Workers stop when their caller is gone, have a heap limit,
%%% and wait at most 60 s for a second walk. At most 1 200 000 processes are
%%% kept for a diff (~50 MB), 5000 groups a worker.
-module(os_sup_proc_scan).

-import(os_sup_lib_proc, [dict_initial_call/1, proc_dict/1]).

%% API
-export([walk/1, again/2]).
%% Internal spawn target. Not an API.
-export([worker/3]).

-define(MAX_GROUPS, 5000).
-define(LARGEST, 16).
-define(TOP_DELTAS, 5).
-define(KEEP_PROCS, 1200000).
%% the first non-empty queues a worker notes for the waits scan
-define(MAX_QUEUES, 10000).
%% a worker's heap, in words: this much, and this much a process of the node (the list of all
%% the processes, 2 words each, and what it keeps of its share, 7 words each, with room for
%% the garbage collector's copy)
-define(WORKER_HEAP_WORDS, 4000000).
-define(WORKER_HEAP_WORDS_A_PROCESS, 48).
%% a worker waits this long for its second walk before it exits
-define(IDLE_MS, 60000).
%% the reads timed to choose the sample: batches of this many processes
-define(PROBE, 128).
-define(PROBES, 4).
%% pids are hashed into this many slots; a sample is those of the slots divisible by it
-define(SLOTS, 1 bsl 24).
%% the first processes of each worker's run remembered, to cut the runs of the second walk
-define(BOUND_PIDS, 64).
-define(DICT_DIRECT_WORDS, 1000000).

-type opts() :: #{by := os_sup_proc_groups:by(), skip := fun((mfa()) -> boolean()),
                  deadline := integer(), budget_ms => pos_integer(), keep => boolean(),
                  waits => map() | undefined}.
-type walk() :: #{workers := [{pid(), reference()}], sample := pos_integer(),
                  bounds := [[pid()]]}.
-export_type([opts/0, walk/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc One walk of every process (or of one in `sample' when the walk cannot fit
%% `budget_ms'), grouped `by' (`os_sup_proc_groups'), the helper's own (`skip') left out.
%% Returns the merged result and, with `keep', the walk whose workers wait for {@link again/2}.
-spec walk(opts()) -> {map(), walk() | undefined}.
walk(Opts) ->
    T0 = erlang:monotonic_time(microsecond),
    K = erlang:system_info(schedulers_online),
    Items = items(),
    Sample = sample(Opts, Items, K),
    Chunks = chunks(erlang:processes(), K),
    Workers = [spawn_opt(?MODULE, worker, [self(), {Chunk, Sample}, Opts#{items => Items}],
                         [monitor, {max_heap_size, #{size => heap_limit(K), kill => true,
                                                     error_logger => false}}])
               || Chunk <- Chunks],
    Keep = maps:get(keep, Opts, false),
    Parts = collect(Workers, maps:get(deadline, Opts), not Keep),
    Merged = merge(Parts, Sample, T0),
    case Keep of
        true ->
            Bounds = [lists:sublist(Chunk, ?BOUND_PIDS) || Chunk <- tl(Chunks)],
            {Merged, #{workers => Workers, sample => Sample, bounds => Bounds}};
        false -> {Merged, undefined}
    end.

%% @doc The second walk of `Walk''s workers, each of the processes it read before and of
%% those born between them since: the merged result with the deltas since (`top_reductions',
%% `top_grown', `reductions').
-spec again(walk(), integer()) -> map().
again(#{workers := Workers, sample := Sample, bounds := Bounds}, Deadline) ->
    T0 = erlang:monotonic_time(microsecond),
    {Chunks, Found} = rechunk(erlang:processes(), Bounds),
    [W ! {again, self(), Chunk, Deadline, Found} || {{W, _}, Chunk} <- lists:zip(Workers, Chunks)],
    merge(collect(Workers, Deadline, true), Sample, T0).

%% `Pids' in `K' runs of about the same length, in their order.
chunks(Pids, K) ->
    chunks(Pids, K, length(Pids)).

chunks(Pids, 1, _N) -> [Pids];
chunks(Pids, K, N) ->
    {Chunk, Rest} = lists:split(N div K, Pids),
    [Chunk | chunks(Rest, K - 1, N - N div K)].

%% `Pids' cut where each worker's run began in the first walk: at the first of its first
%% processes that is still alive (the order of the processes that live on does not change).
%% `Found' is false when none of one run's first processes is: the runs are then cut by
%% length, and a process read by another worker the first time may look new to this one.
rechunk(Pids, Bounds) ->
    Starts = [first_alive(B) || B <- Bounds],
    case lists:member(undefined, Starts) of
        true -> {chunks(Pids, length(Bounds) + 1), false};
        false -> {cut(Pids, Starts, []), true}
    end.

first_alive([]) -> undefined;
first_alive([P | Rest]) ->
    case is_process_alive(P) of
        true -> P;
        false -> first_alive(Rest)
    end.

cut(Pids, [], Acc) -> lists:reverse([Pids | Acc]);
cut(Pids, [Start | Starts], Acc) ->
    {Chunk, Rest} = lists:splitwith(fun(P) -> P =/= Start end, Pids),
    cut(Rest, Starts, [Chunk | Acc]).

%%%===================================================================
%%% The workers
%%%===================================================================

%% @private One worker: walks its run of processes, reports, and with `keep' walks its run
%% again when asked.
-spec worker(pid(), {[pid()], pos_integer()}, map()) -> ok.
worker(Parent, {Pids, Sample}, Opts) ->
    MRef = erlang:monitor(process, Parent),
    {Part, Kept} = walk_run(Pids, Sample, Opts#{parent => Parent}, first),
    Parent ! {?MODULE, self(), Part},
    case maps:get(keep, Opts, false) of
        false -> ok;
        true ->
            Complete = not maps:get(truncated, Part) andalso not maps:get(kept_cut, Part),
            receive
                {again, Parent, Pids1, Deadline, Found} ->
                    {Part1, _} = walk_run(Pids1, Sample,
                                          Opts#{deadline := Deadline, parent => Parent},
                                          {second, Kept, Complete andalso Found}),
                    Parent ! {?MODULE, self(), Part1},
                    ok;
                {'DOWN', MRef, process, Parent, _} -> ok
            after ?IDLE_MS -> ok
            end
    end.

%% A walk's state. `phase': `first' (keeping, with `keep') or `second' (diffing). `kept': what
%% the first walk keeps of each process, `{Pid, Reductions, Memory, InitialCall}', in the order
%% `erlang:processes()' lists them (the order of the processes that live on does not change;
%% a list costs a fifth of a hash table); in the second walk, what is left of it. Deltas of
%% processes the first walk kept and of those it did not (born since, or past its cut) are
%% ranked apart: the second are kept only when the first walk read all the processes.
-record(w, {phase, keep, cap, by, skip, waits, groups = #{}, largest = {0, []}, n = 0,
            kept = [], nkept = 0, cands = [], queues = {0, []}, complete = true,
            reds = {0, []}, grown = {0, []}, sum = 0,
            reds_new = {0, []}, grown_new = {0, []}, sum_new = 0, own = #{}}).

walk_run(Pids, Sample, Opts, Phase0) ->
    T0 = erlang:monotonic_time(microsecond),
    {reductions, R0} = erlang:process_info(self(), reductions),
    #{by := By, skip := Skip, items := Items, deadline := Deadline} = Opts,
    W0 = #w{keep = Phase0 =:= first andalso maps:get(keep, Opts, false),
            cap = ?KEEP_PROCS div erlang:system_info(schedulers_online), by = By, skip = Skip,
            waits = maps:get(waits, Opts, undefined)},
    W1 = case Phase0 of
             first -> W0#w{phase = first};
             {second, Kept, Complete} -> W0#w{phase = second, kept = Kept, complete = Complete}
         end,
    Stop = {Deadline, maps:get(parent, Opts)},
    {W, Truncated} = loop(Pids, Sample, Items, Stop, W1, 0),
    {reductions, R1} = erlang:process_info(self(), reductions),
    Part = #{groups => W#w.groups, largest => element(2, W#w.largest), scanned => W#w.n,
             truncated => Truncated, cands => W#w.cands, queues => element(2, W#w.queues),
             own_reductions => R1 - R0, busy_us => erlang:monotonic_time(microsecond) - T0,
             kept_cut => W#w.nkept >= W#w.cap},
    case W#w.phase of
        first -> {Part, lists:reverse(W#w.kept)};
        second -> {maps:merge(Part, deltas(W, Truncated)), []}
    end.

%% The deltas of the second walk. Those of processes the first did not keep count only when
%% the first read them all (else a process past its cut would count its whole life) and when
%% the second read them all and met every living process the first kept on its way (else the
%% order of the processes was not the one the first walk saw, and a process it kept could be
%% taken for a new one).
deltas(#w{complete = Complete, kept = Left} = W, Truncated) ->
    InOrder = not Truncated andalso not lists:any(fun({P, _, _, _}) -> is_process_alive(P) end,
                                                  Left),
    Top = fun({_, A}, {_, B}) -> lists:sublist(lists:reverse(lists:sort(A ++ B)), ?TOP_DELTAS) end,
    case Complete andalso InOrder of
        true ->
            #{top_reductions => Top(W#w.reds, W#w.reds_new),
              top_grown => Top(W#w.grown, W#w.grown_new), reductions => W#w.sum + W#w.sum_new};
        false ->
            #{top_reductions => Top(W#w.reds, {0, []}), top_grown => Top(W#w.grown, {0, []}),
              reductions => W#w.sum}
    end.

%% Every 1024 reads: past the deadline, or the caller gone, the walk stops. With a sample,
%% the processes read are those whose pid hashes to 0 (the same at each end of the window).
loop([], _Sample, _Items, _Stop, W, _N) -> {W, false};
loop([P | Rest], Sample, Items, {Deadline, Parent} = Stop, W, N) ->
    case N band 1023 =:= 0 andalso (erlang:monotonic_time(millisecond) > Deadline orelse
                                    not is_process_alive(Parent)) of
        true -> {W, true};
        false ->
            case Sample =:= 1 orelse erlang:phash2(P, ?SLOTS) rem Sample =:= 0 of
                true ->
                    W1 = case catch erlang:process_info(P, Items) of
                             Info when is_list(Info) -> visit(P, Info, W);
                             _ -> W
                         end,
                    loop(Rest, Sample, Items, Stop, W1, N + 1);
                false -> loop(Rest, Sample, Items, Stop, W, N)
            end
    end.

%% The items read of each process, in this order (`parent' where the node has it, OTP 25+).
items() ->
    Base = [initial_call, current_function, message_queue_len, memory, links, total_heap_size,
            reductions, status, registered_name, monitors],
    case catch erlang:process_info(self(), parent) of
        {parent, _} -> Base ++ [parent];
        _ -> Base
    end.

visit(P, [{_, Init0}, {_, CF}, {_, Mq}, {_, Mem}, {_, Links}, {_, Heap}, {_, Reds},
          {_, Status}, {_, Reg}, {_, Monitors} | MaybeParent], W0) ->
    {Known, W} = known(P, W0),
    Init = case Known of
               {_, _, _, I} when I =/= undefined -> I;
               _ -> initial(P, Init0, Heap)
           end,
    case own(Init, W) of
        {true, W1} -> W1;
        {false, W1} ->
            Parent = case MaybeParent of [{_, Pa}] -> Pa; [] -> undefined end,
            Key = os_sup_proc_groups:key(W#w.by, Init, CF, Parent, Reg),
            W2 = W1#w{n = W1#w.n + 1,
                      groups = add(Key, P, Mem, Mq, length(Links), W1#w.groups),
                      largest = top(Mem, P, W1#w.largest, ?LARGEST)},
            W3 = waits(P, {CF, Mq, Status, Monitors}, W2),
            case W3#w.phase of
                first -> keep(P, Reds, Mem, Init =/= Init0 andalso Init, W3);
                second -> diff(P, Reds, Mem, Known, W3)
            end
    end.

%% In the second walk, the first walk's entry for `P', taken off the kept list: the entries
%% before it are of processes that exited since (a living one means `P' is new).
known(P, #w{phase = second, kept = [{P, _, _, _} = Entry | Rest]} = W) ->
    {Entry, W#w{kept = Rest}};
known(P, #w{phase = second, kept = [{Head, _, _, _} | Rest]} = W) ->
    case is_process_alive(Head) of
        false -> known(P, W#w{kept = Rest});
        true -> {undefined, W}
    end;
known(_P, W) ->
    {undefined, W}.

%% Reductions and memory, and the initial call when it came from the dictionary (a read).
keep(P, Reds, Mem, FromDict, #w{keep = true, nkept = N, cap = Cap, kept = Kept} = W)
  when N < Cap ->
    Init = case FromDict of false -> undefined; I -> I end,
    W#w{kept = [{P, Reds, Mem, Init} | Kept], nkept = N + 1};
keep(_P, _Reds, _Mem, _FromDict, W) ->
    W.

%% Since the first walk: a process it kept from what it had then, another from zero.
diff(P, Reds, Mem, {_, R0, M0, _}, W) ->
    DR = Reds - R0,
    W#w{reds = top(DR, P, W#w.reds, ?TOP_DELTAS), grown = top(Mem - M0, P, W#w.grown, ?TOP_DELTAS),
        sum = W#w.sum + max(0, DR)};
diff(P, Reds, Mem, undefined, W) ->
    W#w{reds_new = top(Reds, P, W#w.reds_new, ?TOP_DELTAS),
        grown_new = top(Mem, P, W#w.grown_new, ?TOP_DELTAS), sum_new = W#w.sum_new + Reds}.

%% What the waits scan (`os_sup_waits') takes from the same read: the processes that may wait
%% in a call, and the first queues.
waits(_P, _Read, #w{waits = undefined} = W) ->
    W;
waits(P, {CF, Mq, Status, Monitors}, #w{waits = Ctx, cands = Cands, queues = Queues} = W) ->
    W#w{cands = case os_sup_waits:candidate(CF, Status, Monitors, Ctx) of
                    true -> [P | Cands];
                    false -> Cands
                end,
        queues = case Queues of
                     {QN, Qs} when Mq > 0, QN < ?MAX_QUEUES -> {QN + 1, [{Mq, P} | Qs]};
                     Q -> Q
                 end}.

initial(P, {proc_lib, init_p, 5} = Init, Heap) ->
    Dict = case is_integer(Heap) andalso Heap =< ?DICT_DIRECT_WORDS of
               true ->
                   case catch erlang:process_info(P, dictionary) of
                       {dictionary, D} -> D;
                       _ -> undefined
                   end;
               false -> proc_dict(P)
           end,
    case dict_initial_call(Dict) of
        undefined -> Init;
        MFA -> MFA
    end;
initial(_P, Init, _Heap) ->
    Init.

%% `skip' asked once per module: it is a text test, and a walk meets few modules.
own({M, _, _} = Init, #w{skip = Skip, own = Memo} = W) ->
    case Memo of
        #{M := Own} -> {Own, W};
        _ -> Own = Skip(Init), {Own, W#w{own = Memo#{M => Own}}}
    end;
own(Init, #w{skip = Skip} = W) ->
    {Skip(Init), W}.

add(Key0, P, Mem, Q, L, Groups) ->
    Key = case map_size(Groups) < ?MAX_GROUPS orelse is_map_key(Key0, Groups) of
              true -> Key0;
              false -> other
          end,
    case Groups of
        #{Key := {C, M, Qs, Ls, _}} -> Groups#{Key := {C + 1, M + Mem, Qs + Q, Ls + L, P}};
        _ -> Groups#{Key => {1, Mem, Q, L, P}}
    end.

%% The `Max' largest `{Value, Pid}' so far, smallest first.
top(V, P, {N, Top}, Max) when N < Max -> {N + 1, lists:sort([{V, P} | Top])};
top(V, P, {N, [{Min, _} | Rest]}, _Max) when V > Min -> {N, lists:sort([{V, P} | Rest])};
top(_V, _P, Top, _Max) -> Top.

%%%===================================================================
%%% The coordinator
%%%===================================================================

%% 1 in `Sample' processes is read when reading all of them would not fit the budget. The
%% cost of a read is timed on a few batches of processes, the fastest batch taken (a batch the
%% OS preempted would make a walk look slower than it is).
sample(#{budget_ms := Budget}, Items, K) ->
    Pids = lists:sublist(erlang:processes(), ?PROBE * ?PROBES),
    PerRead = lists:min([read_us(Batch, Items) || Batch <- batches(Pids)]),
    %% a read in a walk also groups and keeps what it read: a third more than the bare read
    Projected = 1.3 * PerRead * erlang:system_info(process_count) / K / 1000,
    max(1, ceil(Projected / Budget));
sample(_Opts, _Items, _K) ->
    1.

batches(Pids) when length(Pids) > ?PROBE ->
    {Batch, Rest} = lists:split(?PROBE, Pids),
    [Batch | batches(Rest)];
batches(Pids) ->
    [Pids].

read_us(Pids, Items) ->
    T0 = erlang:monotonic_time(microsecond),
    _ = [catch erlang:process_info(P, Items) || P <- Pids],
    max(1, erlang:monotonic_time(microsecond) - T0) / max(1, length(Pids)).

%% The workers' parts. A worker stops at the deadline; one that has not answered a second after
%% it, or that died (its heap limit), gives an empty part, marked truncated. After the `Last'
%% part of a worker, its monitor goes.
collect(Workers, Deadline, Last) ->
    Until = Deadline + 1000,
    [receive
         {?MODULE, W, Part} ->
             _ = Last andalso erlang:demonitor(Ref, [flush]),
             Part;
         {'DOWN', Ref, process, W, _} -> lost_part()
     after max(0, Until - erlang:monotonic_time(millisecond)) ->
             exit(W, kill),
             erlang:demonitor(Ref, [flush]),
             lost_part()
     end || {W, Ref} <- Workers].

heap_limit(K) ->
    ?WORKER_HEAP_WORDS + ?WORKER_HEAP_WORDS_A_PROCESS * erlang:system_info(process_count) div K.

lost_part() ->
    #{groups => #{}, largest => [], scanned => 0, truncated => true, cands => [], queues => [],
      own_reductions => 0, busy_us => 0, top_reductions => [], top_grown => [], reductions => 0}.

merge(Parts, Sample, T0) ->
    Groups = lists:foldl(fun(#{groups := G}, Acc) -> merge_groups(G, Sample, Acc) end, #{},
                         Parts),
    Sum = fun(Key) -> lists:sum([maps:get(Key, P) || P <- Parts]) end,
    Top = fun(Key, N) ->
                  All = lists:append([maps:get(Key, P) || P <- Parts]),
                  lists:sublist(lists:reverse(lists:sort(All)), N)
          end,
    Walk = #{groups => Groups, scanned => Sum(scanned), sample => Sample,
             truncated => lists:any(fun(#{truncated := T}) -> T end, Parts),
             largest => [{P, M} || {M, P} <- Top(largest, ?LARGEST)],
             waits => {lists:append([maps:get(cands, P) || P <- Parts]),
                       lists:append([maps:get(queues, P) || P <- Parts])},
             own_reductions => Sum(own_reductions), busy_us => Sum(busy_us),
             duration_us => erlang:monotonic_time(microsecond) - T0},
    case lists:all(fun(P) -> is_map_key(top_reductions, P) end, Parts) of
        true -> Walk#{top_reductions => Top(top_reductions, ?TOP_DELTAS),
                      top_grown => Top(top_grown, ?TOP_DELTAS),
                      reductions => Sum(reductions) * Sample};
        false -> Walk
    end.

%% Groups as `os_sup_proc_groups' has them, counts scaled to the whole node when sampled.
merge_groups(G, Sample, Acc) ->
    maps:fold(fun(K0, {C, M, Q, L, P}, A) ->
                      K = case map_size(A) < ?MAX_GROUPS orelse is_map_key(K0, A) of
                              true -> K0;
                              false -> other
                          end,
                      case A of
                          #{K := #{count := C1, memory := M1, queue := Q1, links := L1} = Old} ->
                              A#{K := Old#{count := C1 + C * Sample, memory := M1 + M * Sample,
                                           queue := Q1 + Q * Sample, links := L1 + L * Sample}};
                          _ ->
                              A#{K => #{count => C * Sample, memory => M * Sample,
                                        queue => Q * Sample, links => L * Sample, sample => P}}
                      end
              end, Acc, G).
