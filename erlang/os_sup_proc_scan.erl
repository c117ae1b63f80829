%%% @doc `os_sup_proc_scan' walks every process of the node once, split
%%% across its schedulers, for the tools that count processes in groups
%%% (`os_sup_proc_groups': `diagnose', `processes' by group). The processes
%%% are listed in chunks (`os_sup_proc_listing'); one worker per online
%%% scheduler takes chunks in turn and keeps, per chunk, what the next walk
%%% diffs against: reductions, memory and the initial call (when it cost a
%%% read of the dictionary) of each process. The coordinator merges the
%%% workers' groups.
%%%
%%% A walk that would not end within its budget reads a sample of the rest:
%%% the processes whose pid hashes to a multiple of 2, then 4, and so on,
%%% each read counting for as many processes. A second walk reads the same
%%% processes (those the first read, at the weight each was read with) and
%%% every process born since (the first walk keeps the pids it passed over,
%%% so a new one is known): growth is counted whole, the population it grows
%%% from is sampled. The answer says how many processes were read of how
%%% many.
%%%
%%% == Bounds and safety ==
%%% One `process_info(P, [few items])' per process read (the dictionary
%%% only for `proc_lib' processes whose initial call is not yet known, and
%%% whole only under 1 M heap words); processes that exit mid-walk are
%%% skipped; each walk stops at its deadline and says so; nothing is sent to
%%% any process. Workers run at low priority, yield every few reads, stop
%%% when their caller is gone, have a heap limit, and wait at most 60 s for a
%%% second walk. What a walk keeps lives in ETS tables the caller owns
%%% (deleted by {@link again/2}), never on a worker's heap: a heap holding
%%% a million processes' entries stalls its scheduler when collected. At
%%% most 1 200 000 processes are kept for a diff (~90 MB), 5000 groups a
%%% worker.
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
%% the first non-empty queues, and processes waiting in a receive, a worker notes for the
%% waits scan
-define(MAX_QUEUES, 10000).
-define(MAX_RECEIVES, 5000).
%% a worker's heap, in words: it holds a chunk of the listing and what it keeps of it (a
%% chunk of a second listing holds the processes born among those of the first: up to all)
-define(WORKER_HEAP_WORDS, 4000000).
-define(WORKER_HEAP_WORDS_A_PROCESS, 6).
%% a worker waits this long for its second walk before it exits
-define(IDLE_MS, 60000).
%% pids are hashed into this many slots; a sample of 1 in N is the slots divisible by N
-define(SLOTS, 1 bsl 24).
-define(MAX_SAMPLE, 1024).
%% a walk checks its clock (and its pace) every this many processes
-define(CHECK_EVERY, 1024).
%% ... and yields every this many (a read is a few µs: a slice is ~100 µs)
-define(YIELD_EVERY, 32).
%% a first walk judges its pace over at least this long (µs) before it halves its sample
-define(PACE_US, 30000).
-define(DICT_DIRECT_WORDS, 1000000).

-type opts() :: #{by := os_sup_proc_groups:by(), skip := fun((mfa()) -> boolean()),
                  deadline := integer(), budget_ms => pos_integer(), keep => boolean(),
                  waits => map() | undefined}.
-type walk() :: #{workers := [{pid(), reference()}], listing := os_sup_proc_listing:listing(),
                  kept := ets:tid(), complete := boolean(), mark := pid()}.
-export_type([opts/0, walk/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc One walk of every process (a sample of them where the walk would not end within
%% `budget_ms'), grouped `by' (`os_sup_proc_groups'), the helper's own (`skip') left out:
%% `scanned' processes read of `listed'. Returns the merged result and, with `keep', the walk
%% whose workers wait for {@link again/2} (its tables are the caller's until then).
-spec walk(opts()) -> {map(), walk() | undefined}.
walk(Opts) ->
    T0 = erlang:monotonic_time(microsecond),
    Pace = erlang:monotonic_time(millisecond) + maps:get(budget_ms, Opts, 1 bsl 40),
    case os_sup_proc_listing:list() of
        {error, _} ->
            {merge([lost_part()], T0), undefined};
        Listing ->
            Keep = maps:get(keep, Opts, false),
            Kept = case Keep of
                       true -> ets:new(os_sup_proc_scan_kept,
                                       [public, set, {write_concurrency, true}]);
                       false -> undefined
                   end,
            Workers = workers(Listing, Opts#{items => items(), pace => Pace, kept => Kept}),
            %% a process born from here on is in the second walk's listing
            Mark = os_sup_proc_listing:mark(),
            Parts = collect(Workers, maps:get(deadline, Opts), not Keep),
            Merged = merge(Parts, T0),
            case Keep of
                true ->
                    Complete = lists:all(fun(#{truncated := T, kept_cut := C}) -> not (T or C);
                                            (_) -> false
                                         end, Parts),
                    {Merged, #{workers => Workers, listing => Listing, kept => Kept,
                               complete => Complete, mark => Mark}};
                false ->
                    ok = os_sup_proc_listing:delete(Listing),
                    {Merged, undefined}
            end
    end.

%% @doc The second walk of `Walk''s workers, each of the processes it read before and of
%% those born between them since: the merged result with the deltas since (`top_reductions',
%% `top_grown', `reductions').
-spec again(walk(), integer()) -> map().
again(#{workers := Workers, listing := First, kept := Kept, complete := Complete,
        mark := Mark}, Deadline) ->
    T0 = erlang:monotonic_time(microsecond),
    %% No process born since the first walk: the same listing, of the processes that live on
    %% (a listing of a million processes takes ~50 ms of a scheduler, in slices of 3–12 ms).
    {Listing, Found} = case os_sup_proc_listing:born_since(Mark) of
                           false -> {os_sup_proc_listing:rewind(First), true};
                           true ->
                               case os_sup_proc_listing:relist(First) of
                                   {error, _} -> {os_sup_proc_listing:rewind(First), false};
                                   Again -> {Again, true}
                               end
                       end,
    [W ! {again, self(), Listing, Deadline, Complete andalso Found} || {W, _} <- Workers],
    Merged = merge(collect(Workers, Deadline, true), T0),
    ok = os_sup_proc_listing:delete(Listing),
    ok = os_sup_proc_listing:delete(First),
    true = ets:delete(Kept),
    %% A listing that could not be made again misses the processes born since.
    Merged#{truncated := maps:get(truncated, Merged) orelse not Found}.

%%%===================================================================
%%% The workers
%%%===================================================================

workers(Listing, Opts) ->
    [spawn_opt(?MODULE, worker, [self(), Listing, Opts],
               [monitor, {priority, low},
                {max_heap_size, #{size => ?WORKER_HEAP_WORDS + ?WORKER_HEAP_WORDS_A_PROCESS
                                          * erlang:system_info(process_count), kill => true,
                                  error_logger => false}}])
     || _ <- lists:seq(1, erlang:system_info(schedulers_online))].

%% @private One worker: walks chunks of the listing, reports, and with `keep' walks the
%% chunks of the second listing when asked.
-spec worker(pid(), os_sup_proc_listing:listing(), map()) -> ok.
worker(Parent, Listing, Opts) ->
    MRef = erlang:monitor(process, Parent),
    os_sup_helper_own:walking(),
    Part = walk_chunks(Listing, Opts#{parent => Parent}, first),
    Parent ! {?MODULE, self(), Part},
    case maps:get(keep, Opts, false) of
        false -> ok;
        true ->
            receive
                {again, Parent, Again, Deadline, Complete} ->
                    Part1 = walk_chunks(Again, Opts#{deadline := Deadline, parent => Parent},
                                        {second, Complete}),
                    Parent ! {?MODULE, self(), Part1},
                    ok;
                {'DOWN', MRef, process, Parent, _} -> ok
            after ?IDLE_MS -> ok
            end
    end.

%% A walk's state. `phase': `first' (keeping, with `keep') or `second' (diffing). `kept': what
%% the first walk keeps of each process of a chunk it read, `{Pid, Reductions, Memory,
%% InitialCall, Weight}', and the pid alone of each it passed over (outside its sample), in the
%% order of the chunk (a list costs a fifth of a hash table), stored with the chunk's number in
%% `kept_tab' when the chunk is done; in the second walk, what is left of the entries of the
%% chunks the one it reads spans. `sample': 1 in how many processes a first walk reads now
%% (their weight). `complete': in a second walk, whether the first read the whole of the chunks
%% it reads now (else it stops where the first stopped: its counts are of the same processes);
%% `all_complete', whether the first read them all. Deltas of processes the first walk kept and
%% of those it did not (born since) are ranked apart: the second count only when the first walk
%% read every chunk and the second met every living process the first kept in its chunks.
-record(w, {phase, keep, kept_tab, cap, by, skip, waits, sample = 1, complete = true,
            all_complete = true, in_order = true, listed = 0, spans = [],
            groups = #{}, largest = {0, []}, n = 0, kept = [], nkept = 0,
            cands = [], receives = 0, queues = {0, []},
            reds = {0, []}, grown = {0, []}, sum = 0,
            reds_new = {0, []}, grown_new = {0, []}, sum_new = 0, own = #{}}).

walk_chunks(Listing, Opts, Phase) ->
    T0 = erlang:monotonic_time(microsecond),
    {reductions, R0} = erlang:process_info(self(), reductions),
    #{by := By, skip := Skip, items := Items, deadline := Deadline, pace := Pace,
      parent := Parent, kept := KeptTab} = Opts,
    W0 = #w{keep = KeptTab =/= undefined, kept_tab = KeptTab,
            cap = ?KEEP_PROCS div erlang:system_info(schedulers_online), by = By, skip = Skip,
            waits = maps:get(waits, Opts, undefined)},
    W1 = case Phase of
             first -> W0#w{phase = first};
             {second, All} -> W0#w{phase = second, keep = false, all_complete = All}
         end,
    Clock = #{deadline => Deadline, parent => Parent, pace => Pace, listing => Listing,
              left => 0, from => 0, at => {erlang:monotonic_time(microsecond), 0}},
    {W, Truncated} = chunks(Items, Clock, W1, 0),
    {reductions, R1} = erlang:process_info(self(), reductions),
    Part = #{groups => W#w.groups, largest => element(2, W#w.largest), scanned => W#w.n,
             listed => W#w.listed, sample => W#w.sample, truncated => Truncated,
             cands => W#w.cands, queues => element(2, W#w.queues),
             own_reductions => R1 - R0, busy_us => erlang:monotonic_time(microsecond) - T0,
             kept_cut => W#w.nkept >= W#w.cap},
    case W#w.phase of
        first -> Part;
        second -> maps:merge(Part, deltas(W, Truncated))
    end.

%% The chunks this worker takes in turn, until none is left or the walk stops (`true').
chunks(Items, #{listing := Listing} = Clock, W, N) ->
    case os_sup_proc_listing:claim(Listing) of
        done ->
            {W, false};
        {I, Pids, Spans} ->
            Len = length(Pids),
            %% what is left for this worker: this chunk, and its share of those not taken
            #{chunks := Chunks, count := Count} = Listing,
            Left = Len + (Chunks - I) * (Count div max(1, Chunks))
                div erlang:system_info(schedulers_online),
            {W1, Clock1, N1, Truncated} =
                loop(Pids, Items, Clock#{left := Left, from := N},
                     start_chunk(Spans, W#w{listed = W#w.listed + Len}), N),
            W2 = end_chunk(I, Truncated, W1),
            case Truncated of
                true -> {W2, true};
                false -> chunks(Items, Clock1, W2, N1)
            end
    end.

%% A second walk diffs a chunk against the entries the first kept of the chunks it spans, in
%% order, loaded one chunk at a time (`load/2'), up to the first the first did not read whole.
start_chunk(_Spans, #w{phase = first} = W) ->
    W#w{kept = []};
start_chunk(Spans, #w{phase = second} = W) ->
    W#w{kept = [], spans = Spans, complete = true}.

load(I, #w{kept_tab = Tab} = W) ->
    case ets:lookup(Tab, I) of
        [{I, Entries, true}] -> W#w{kept = Entries};
        [{I, Entries, false}] -> W#w{kept = Entries, spans = [], complete = false};
        [] -> W#w{kept = [], spans = [], complete = false}
    end.

%% A first walk stores what it kept of the chunk (whole when it read the chunk to its end and
%% kept every process of it); a second checks it met every living process the first kept.
end_chunk(I, Truncated, #w{phase = first, keep = true, kept_tab = Tab} = W) ->
    true = ets:insert(Tab, {I, lists:reverse(W#w.kept), not Truncated andalso W#w.nkept < W#w.cap}),
    W#w{kept = []};
end_chunk(_I, _Truncated, #w{phase = first} = W) ->
    W;
end_chunk(_I, true, #w{phase = second} = W) ->
    W;
end_chunk(_I, false, #w{phase = second, in_order = InOrder} = W) ->
    W#w{kept = [], spans = [], in_order = InOrder andalso met(W)}.

%% Whether every process the first walk kept of the chunk and that is still alive was met.
met(#w{kept = [], spans = []}) -> true;
met(#w{kept = [], spans = [I | Spans]} = W) -> met(load(I, W#w{spans = Spans}));
met(#w{kept = [Entry | Rest]} = W) ->
    not is_process_alive(entry_pid(Entry)) andalso met(W#w{kept = Rest}).

%% The process of a kept entry: one read, or one passed over.
entry_pid({P, _, _, _, _}) -> P;
entry_pid(P) -> P.

%% The deltas of the second walk. Those of processes the first did not keep count only when
%% the first read every chunk and the second read every chunk and met every living process
%% the first kept on its way (else a process it kept could be taken for a new one).
deltas(W, Truncated) ->
    Top = fun({_, A}, {_, B}) -> lists:sublist(lists:reverse(lists:sort(A ++ B)), ?TOP_DELTAS) end,
    case W#w.all_complete andalso W#w.in_order andalso not Truncated of
        true ->
            #{top_reductions => Top(W#w.reds, W#w.reds_new),
              top_grown => Top(W#w.grown, W#w.grown_new), reductions => W#w.sum + W#w.sum_new};
        false ->
            #{top_reductions => Top(W#w.reds, {0, []}), top_grown => Top(W#w.grown, {0, []}),
              reductions => W#w.sum}
    end.

%% Every ?CHECK_EVERY processes: past the deadline, or the caller gone, the walk stops
%% (`true'); a first walk that would not end within its pace halves its sample. A second walk
%% whose first did not read the chunk whole stops where the first stopped (what it kept runs
%% out).
loop([], _Items, Clock, W, N) -> {W, Clock, N, false};
loop(_Pids, _Items, Clock, #w{phase = second, complete = false, kept = []} = W, N) ->
    {W, Clock, N, false};
loop([P | Rest], Items, Clock, W, N) when N rem ?CHECK_EVERY =:= 0, N > 0 ->
    case check(Clock, W, N) of
        stop -> {W, Clock, N, true};
        {Clock1, W1} -> step(P, Rest, Items, Clock1, W1, N)
    end;
loop([P | Rest], Items, Clock, W, N) when N rem ?YIELD_EVERY =:= 0 ->
    %% The node's processes waiting for this scheduler run now, not after a whole slice.
    erlang:yield(),
    step(P, Rest, Items, Clock, W, N);
loop([P | Rest], Items, Clock, W, N) ->
    step(P, Rest, Items, Clock, W, N).

step(P, Rest, Items, Clock, W0, N) ->
    {Known, W} = known(P, W0),
    W1 = case Known =/= passed andalso sampled(P, W) of
             true ->
                 try erlang:process_info(P, Items) of
                     Info when is_list(Info) -> visit(P, Info, Known, W);
                     _ -> W
                 catch _:_ -> W
                 end;
             false -> passed(P, W)
         end,
    loop(Rest, Items, Clock, W1, N + 1).

%% A first walk that keeps notes the pids it passes over, so the second knows them from new.
passed(P, #w{phase = first, keep = true, nkept = N, cap = Cap, kept = Kept} = W) when N < Cap ->
    W#w{kept = [P | Kept]};
passed(_P, W) ->
    W.

check(#{deadline := Deadline, parent := Parent, pace := Pace, left := Left, from := From,
        at := {At, N0}} = Clock, W, N) ->
    Now = erlang:monotonic_time(microsecond),
    case Now div 1000 > Deadline orelse not is_process_alive(Parent) of
        true -> stop;
        false when W#w.phase =:= first, Now - At >= ?PACE_US, W#w.sample < ?MAX_SAMPLE ->
            %% the pace since the sample last changed (over ?PACE_US at least, so that one
            %% preemption does not halve it), over what is left
            Ends = Now + (Now - At) * max(0, Left - (N - From)) div max(1, N - N0),
            case Ends div 1000 > Pace of
                true -> {Clock#{at := {Now, N}}, W#w{sample = W#w.sample * 2}};
                false -> {Clock, W}
            end;
        false ->
            {Clock, W}
    end.

%% In a first walk, whether `P' is in the sample (a process of a sample of 1 in 2N is in the
%% one of 1 in N); in a second, every process not passed over the first time is read.
sampled(_P, #w{phase = second}) -> true;
sampled(_P, #w{sample = 1}) -> true;
sampled(P, #w{sample = S}) -> erlang:phash2(P, ?SLOTS) rem S =:= 0.

%% The items read of each process, in this order (`parent' where the node has it, OTP 25+).
items() ->
    Base = [initial_call, current_function, message_queue_len, memory, links, total_heap_size,
            reductions, status, registered_name],
    try erlang:process_info(self(), parent) of
        {parent, _} -> Base ++ [parent];
        _ -> Base
    catch _:_ -> Base
    end.

visit(P, [{_, Init0}, {_, CF}, {_, Mq}, {_, Mem}, {_, Links}, {_, Heap}, {_, Reds},
          {_, Status}, {_, Reg} | MaybeParent], Known, W) ->
    {Init, Weight} = case Known of
                         {_, _, _, I, Wt} when I =/= undefined -> {I, Wt};
                         {_, _, _, _, Wt} -> {initial(P, Init0, Heap), Wt};
                         %% new since the first walk (counted whole), or in a first walk
                         undefined when W#w.phase =:= second -> {initial(P, Init0, Heap), 1};
                         undefined -> {initial(P, Init0, Heap), W#w.sample}
                     end,
    case own(Init, W) of
        {true, W1} -> W1;
        {false, W1} ->
            Parent = case MaybeParent of [{_, Pa}] -> Pa; [] -> undefined end,
            Key = os_sup_proc_groups:key(W#w.by, Init, CF, Parent, Reg),
            %% Born since the first walk: a second walk's process it did not know.
            Born = case W#w.phase =:= second andalso Known =:= undefined of
                       true -> 1;
                       false -> 0
                   end,
            W2 = W1#w{n = W1#w.n + 1,
                      groups = add(Key, P, Weight, {Mem, Mq, length(Links), Born},
                                   W1#w.groups),
                      largest = top(Mem, P, W1#w.largest, ?LARGEST)},
            W3 = waits(P, {CF, Mq, Status}, W2),
            case W3#w.phase of
                first -> keep(P, Reds, Mem, Init =/= Init0 andalso Init, W3);
                second -> diff(P, Reds, Mem, Known, Weight, W3)
            end
    end;
visit(_P, _Info, _Known, W) ->
    W.

%% In the second walk, the first walk's entry for `P', taken off the kept list (`passed' when
%% the first walk passed over it): the entries before it are of processes that exited since (a
%% living one means `P' is new).
known(P, #w{phase = second, kept = [], spans = [I | Spans]} = W) ->
    known(P, load(I, W#w{spans = Spans}));
known(_P, #w{phase = second, kept = [], complete = false} = W) ->
    %% past where the first walk stopped: not read (the walk stops here)
    {passed, W};
known(P, #w{phase = second, kept = [{P, _, _, _, _} = Entry | Rest]} = W) ->
    {Entry, W#w{kept = Rest}};
known(P, #w{phase = second, kept = [P | Rest]} = W) ->
    {passed, W#w{kept = Rest}};
known(P, #w{phase = second, kept = [Head | Rest]} = W) ->
    case is_process_alive(entry_pid(Head)) of
        false -> known(P, W#w{kept = Rest});
        true -> {undefined, W}
    end;
known(_P, W) ->
    {undefined, W}.

%% Reductions and memory, the initial call when it came from the dictionary (a read), and the
%% sample it was read in.
keep(P, Reds, Mem, FromDict, #w{keep = true, nkept = N, cap = Cap, kept = Kept} = W)
  when N < Cap ->
    Init = case FromDict of false -> undefined; I -> I end,
    W#w{kept = [{P, Reds, Mem, Init, W#w.sample} | Kept], nkept = N + 1};
keep(_P, _Reds, _Mem, _FromDict, W) ->
    W.

%% Since the first walk: a process it kept from what it had then, another from zero.
diff(P, Reds, Mem, {_, R0, M0, _, _}, Weight, W) ->
    DR = Reds - R0,
    W#w{reds = top(DR, P, W#w.reds, ?TOP_DELTAS), grown = top(Mem - M0, P, W#w.grown, ?TOP_DELTAS),
        sum = W#w.sum + max(0, DR) * Weight};
diff(P, Reds, Mem, undefined, Weight, W) ->
    W#w{reds_new = top(Reds, P, W#w.reds_new, ?TOP_DELTAS),
        grown_new = top(Mem, P, W#w.grown_new, ?TOP_DELTAS), sum_new = W#w.sum_new + Reds * Weight}.

%% What the waits scan (`os_sup_waits') takes from the same read: the processes that may wait
%% in a call, the first ?MAX_RECEIVES that wait in a receive of the application's code (a node
%% of a million idle processes has a million; which of them monitors one process, the sign of
%% a call made by hand, costs a read of its monitors, made by the waits scan), and the first
%% queues.
waits(_P, _Read, #w{waits = undefined} = W) ->
    W;
waits(P, {CF, Mq, Status}, #w{waits = Ctx, cands = Cands, queues = Queues} = W) ->
    W1 = case os_sup_waits:candidate(CF, Status, Ctx) of
             call -> W#w{cands = [P | Cands]};
             'receive' when W#w.receives < ?MAX_RECEIVES ->
                 W#w{cands = [P | Cands], receives = W#w.receives + 1};
             _ -> W
         end,
    W1#w{queues = case Queues of
                      {QN, Qs} when Mq > 0, QN < ?MAX_QUEUES -> {QN + 1, [{Mq, P} | Qs]};
                      Q -> Q
                  end}.

initial(P, {proc_lib, init_p, 5} = Init, Heap) ->
    Dict = case is_integer(Heap) andalso Heap =< ?DICT_DIRECT_WORDS of
               true ->
                   try erlang:process_info(P, dictionary) of
                       {dictionary, D} -> D;
                       _ -> undefined
                   catch _:_ -> undefined
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

%% A group's count, memory, queue and links, each read counting for `Weight' processes, a
%% sample pid, and how many of its processes were born since the first walk (each read whole).
%% The sample is one that lived through the window when one did: a process just born may be
%% gone before it is looked at (a request's), one that stayed is what the group is (a leak's).
add(Key0, P, Weight, {Mem, Q, L, Born}, Groups) ->
    Key = case map_size(Groups) < ?MAX_GROUPS orelse is_map_key(Key0, Groups) of
              true -> Key0;
              false -> other
          end,
    case Groups of
        #{Key := {C, M, Qs, Ls, S, B}} ->
            Sample = case Born of
                         0 -> P;
                         1 -> S
                     end,
            Groups#{Key := {C + Weight, M + Mem * Weight, Qs + Q * Weight, Ls + L * Weight, Sample,
                            B + Born}};
        _ ->
            Groups#{Key => {Weight, Mem * Weight, Q * Weight, L * Weight, P, Born}}
    end.

%% The `Max' largest `{Value, Pid}' so far, smallest first.
top(V, P, {N, Top}, Max) when N < Max -> {N + 1, lists:sort([{V, P} | Top])};
top(V, P, {N, [{Min, _} | Rest]}, _Max) when V > Min -> {N, lists:sort([{V, P} | Rest])};
top(_V, _P, Top, _Max) -> Top.

%%%===================================================================
%%% The coordinator
%%%===================================================================

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

lost_part() ->
    #{groups => #{}, largest => [], scanned => 0, listed => 0, sample => 1, truncated => true,
      cands => [], queues => [], own_reductions => 0, busy_us => 0, top_reductions => [],
      top_grown => [], reductions => 0}.

merge(Parts, T0) ->
    Groups = lists:foldl(fun(#{groups := G}, Acc) -> merge_groups(G, Acc) end, #{}, Parts),
    Sum = fun(Key) -> lists:sum([maps:get(Key, P) || P <- Parts]) end,
    Top = fun(Key, N) ->
                  All = lists:append([maps:get(Key, P) || P <- Parts]),
                  lists:sublist(lists:reverse(lists:sort(All)), N)
          end,
    Walk = #{groups => Groups, scanned => Sum(scanned), listed => Sum(listed),
             sample => lists:max([maps:get(sample, P) || P <- Parts]),
             truncated => lists:any(fun(#{truncated := T}) -> T end, Parts),
             largest => [{P, M} || {M, P} <- Top(largest, ?LARGEST)],
             waits => {lists:append([maps:get(cands, P) || P <- Parts]),
                       lists:append([maps:get(queues, P) || P <- Parts])},
             own_reductions => Sum(own_reductions), busy_us => Sum(busy_us),
             duration_us => erlang:monotonic_time(microsecond) - T0},
    case lists:all(fun(P) -> is_map_key(top_reductions, P) end, Parts) of
        true -> Walk#{top_reductions => Top(top_reductions, ?TOP_DELTAS),
                      top_grown => Top(top_grown, ?TOP_DELTAS), reductions => Sum(reductions)};
        false -> Walk
    end.

%% Groups as `os_sup_proc_groups' has them.
merge_groups(G, Acc) ->
    maps:fold(fun(K0, {C, M, Q, L, P, B}, A) ->
                      K = case map_size(A) < ?MAX_GROUPS orelse is_map_key(K0, A) of
                              true -> K0;
                              false -> other
                          end,
                      case A of
                          #{K := #{count := C1, memory := M1, queue := Q1, links := L1,
                                   born := B1, sample := P1} = Old} ->
                              %% a sample that lived through the window, as `add' keeps
                              Sample = case B1 >= C1 andalso B < C of
                                           true -> P;
                                           false -> P1
                                       end,
                              A#{K := Old#{count := C1 + C, memory := M1 + M, queue := Q1 + Q,
                                           links := L1 + L, born := B1 + B, sample := Sample}};
                          _ ->
                              A#{K => #{count => C, memory => M, queue => Q, links => L,
                                        sample => P, born => B}}
                      end
              end, Acc, G).
