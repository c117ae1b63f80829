%%% @doc `os_sup_waits' answers "who is waiting on whom?" inside the node,
%%% for tool `waits'. A process blocked in a call is followed to the process
%%% it waits on, and on, until a process that is not waiting (the
%%% bottleneck), a process on another node, or a process already on the
%%% chain (a deadlock). Each hop shows its message queue, what it runs, and
%%% over a short window how fast its queue grows, its reductions and the
%%% calls it serves. Kernel and stdlib only; names are rendered by
%%% `os_sup_lib_render' in the node's language.
%%%
%%% The helper runs it as tool `waits' ({@link waits/1}) in a
%%% throw-away worker under a deadline. This module finds the chains and
%%% samples them; `os_sup_waits_of' decides what one process waits on and
%%% `os_sup_waits_render' turns chains into text and data.
%%%
%%% == How a wait is found ==
%%% From `process_info' only: nothing is ever sent to a user process.
%%% <ul>
%%%   <li>The current function names the kind of wait: `gen:do_call/4' and
%%%       the `gen'/`gen_server'/`gen_statem'/`gen_event' response waits
%%%       (`call': GenServer, gen_statem, Agent, supervisor calls, and
%%%       `sys' requests), `erpc' (`erpc', `rpc'), `Task.await' and friends
%%%       (`await'), `io:execute_request/3' (`io'), `proc_lib' start-up
%%%       (`start': a parent waiting for a child's `init').</li>
%%%   <li>The target of a call is the process monitor the caller holds for
%%%       it (every one of these waits monitors its target). With several
%%%       monitors, the caller's stack frames (`process_info(P, backtrace)',
%%%       only when that is cheap, see below) name the one it called; if
%%%       they do not, the wait is reported as ambiguous and not followed.
%%%       A `start' wait's target is the linked child still in `init_it'.</li>
%%%   <li>A process waiting in a `receive' of user code (not OTP or Elixir)
%%%       with exactly one process monitor is reported as `receive', not
%%%       confirmed (it may wait for anything).</li>
%%% </ul>
%%%
%%% == Rates ==
%%% Over `window_ms' (default 500, 0..5000) the hops are sampled (at most
%%% 250 samples, at most 64 processes): queue growth and reductions per
%%% second from the first and last sample, the share of samples in the
%%% most frequent current function, and for a caller the calls it made
%%% (distinct call references seen in its top stack frame: a lower bound,
%%% marked `>=', when calls are faster than the sampling).
%%%
%%% == Bounds and safety ==
%%% A node-wide scan looks at every process once (current function,
%%% queue length, status) and stops at a 2 s deadline; chains are at most
%%% 16 hops; answers hold at most `limit' chains (default 5, at most 20),
%%% callers waiting on the same chain are grouped; the text is capped at
%%% 4 KB. Processes that exit midway are skipped or shown as exited. A
%%% backtrace is printed by the process it describes, so it is taken only
%%% when the process's heap is small for its queue length (at most 64 K
%%% words plus 24 words a queued message, 512 K words more at most), and
%%% sampled again only when the first one was under 8 KB.
-module(os_sup_waits).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text_only/2]).
-import(os_sup_lib_proc, [pinfo_items/2, pid_arg/1, queue_len/1]).

%% API
-export([waits/1, wait_of/1, deadlock/1, node_chains/2, node_chains/3, confirmed/1,
         still_waiting/2]).
%% for a walk that reads the node's processes for other ends too (os_sup_proc_scan)
-export([walk_context/0, candidate/3]).

-define(SCAN_MS, 2000).
-define(MAX_HOPS, 16).
-define(MAX_SAMPLES, 250).
-define(MAX_SAMPLED, 64).
-define(MAX_WAITED_BY, 100).
%% the processes most waited on that a scan's summary names (`crowds')
-define(MAX_CROWDS, 5).
-define(MAX_QUEUES, 10000).
%% waits whose top frame holds a fresh reference for every call
-define(REF_KINDS, [call, await, erpc, io]).
%% backtrace guard (words and bytes)
-define(BT_RESAMPLE_BYTES, 8192).

-type target() :: pid() | {atom(), node()}.
-type wait() :: #{kind := call | await | erpc | io | start | lock | 'receive',
                  function := mfa(), targets := [target()], confirmed := boolean(),
                  ambiguous := boolean()}.
-export_type([wait/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `waits': args `pid' (optional start), `window_ms' (500, 0..5000),
%% `limit' (5, 1..20), `format'.
-spec waits(map()) -> {ok, map()} | {error, map()}.
waits(Args) ->
    Fmt = os_sup_lib_render:format(maps:get(format, Args, auto)),
    Window = arg_int(window_ms, Args, ?WAITS_WINDOW_DEFAULT_MS, ?WAITS_WINDOW_MS_MIN,
                     ?WAITS_WINDOW_MS_MAX),
    Limit = arg_int(limit, Args, ?WAITS_LIMIT_DEFAULT, ?WAITS_LIMIT_MIN, ?WAITS_LIMIT_MAX),
    T0 = erlang:monotonic_time(microsecond),
    Ctx = scan_ctx(Fmt, ?SCAN_MS),
    {Chains0, Scan} = case arg_text_only(pid, Args) of
                         undefined -> scan_chains(Limit, Ctx);
                         Text -> pid_chain(resolve(Text), Ctx)
                     end,
    Stats = sample(Chains0, Window),
    %% A deadlock must still hold at the end of the window (its members alive and waiting).
    Chains = [case deadlock(C) andalso not confirmed(C) of
                  true -> C#{stop => broke};
                  false -> C
              end || C <- Chains0],
    Us = erlang:monotonic_time(microsecond) - T0,
    os_sup_waits_render:render(Chains, Scan, Stats, Window, Us, Ctx).

%% @doc What `Pid' waits on, decided from `process_info' only: `{wait, Wait}',
%% `none' (not waiting) or `gone'.
-spec wait_of(pid()) -> {wait, wait()} | none | gone.
wait_of(Pid) ->
    os_sup_waits_of:wait_of(Pid).

%% @doc The top `Limit' chains of a node scan (deadlocks first, then the largest queues),
%% each `#{hops, waits, stop}', and the scan's summary; the scan stops after `Ms'. The
%% summary's `crowds' are the processes (or remote targets) the most processes of this node
%% wait on in a confirmed wait, at least two: `[{Count, Target, Waiters}]' (100 waiters at
%% most), most first.
-spec node_chains(pos_integer(), non_neg_integer()) -> {[map()], map()}.
node_chains(Limit, Ms) ->
    scan_chains(Limit, scan_ctx(erlang, Ms)).

%% @doc {@link node_chains/2} from a walk made already: `{Candidates, Queues}' as
%% `os_sup_proc_scan' gathers them with {@link walk_context/0} and {@link candidate/3}
%% (`[{Mq, Pid}]', the first 10 000 non-empty queues of each worker), `Scanned' processes read.
-spec node_chains(pos_integer(), non_neg_integer(),
                  {{[pid()], [{non_neg_integer(), pid()}]}, non_neg_integer(), boolean()}) ->
          {[map()], map()}.
node_chains(Limit, Ms, {{Cands, Queues}, Scanned, Truncated}) ->
    chains(Limit, scan_ctx(erlang, Ms), {Cands, Queues, Scanned, Truncated},
           erlang:system_info(process_count)).

%% @doc What {@link candidate/3} takes, for a walk's workers.
-spec walk_context() -> map().
walk_context() ->
    scan_ctx(erlang, ?SCAN_MS).

%% @doc Whether a process in `CF' with `Status' may be waiting in a call (`call') or in a
%% receive of the application's code (`receive', followed only when it monitors one process)
%% that {@link node_chains/3} follows; `false' when not.
-spec candidate(term(), atom(), map()) -> call | 'receive' | false.
candidate(CF, Status, Ctx) ->
    case os_sup_waits_of:wait_kind(CF) of
        none ->
            os_sup_waits_of:generic_candidate(CF, Status, Ctx) andalso 'receive';
        _ ->
            not os_sup_lib_label:own(CF) andalso call
    end.

%% @doc True for a chain that ends where it started (a deadlock).
-spec deadlock(map()) -> boolean().
deadlock(#{stop := cycle}) -> true;
deadlock(_) -> false.

%% @doc Whether a deadlock still holds: every member alive and still waiting on the next one.
%% Checked again at the end of a window, so a cycle whose members exited, or that broke, is
%% not reported.
-spec confirmed(map()) -> boolean().
confirmed(#{stop := cycle, hops := Hops}) ->
    Next = tl(Hops) ++ [hd(Hops)],
    lists:all(fun({H, N}) ->
                      case os_sup_waits_of:wait_of(H) of
                          {wait, #{targets := Ts}} -> lists:member(N, Ts);
                          _ -> false
                      end
              end, lists:zip(Hops, Next));
confirmed(_) ->
    false.

%% @doc Which of `Waiters' (processes of this node) wait on `Target' now, in a confirmed wait;
%% for a process of this node, also any other process that does (those that monitor it, at most
%% 100), so a crowd whose members change (short requests) is counted whole.
-spec still_waiting(target(), [pid()]) -> [pid()].
still_waiting(Target, Waiters) ->
    Ctx = scan_ctx(erlang, ?SCAN_MS),
    Watchers = case is_pid(Target) andalso node(Target) =:= node() of
                   true -> [P || {P, #{confirmed := true}} <- waited_on_by(Target, #{}, Ctx)];
                   false -> []
               end,
    Again = [P || P <- Waiters, not lists:member(P, Watchers),
                  case os_sup_waits_of:wait_of(P, Ctx) of
                      {wait, #{targets := [Target], confirmed := true}} -> true;
                      _ -> false
                  end],
    Watchers ++ Again.

%%%===================================================================
%%% Private: the tool
%%%===================================================================

%% What deciding waits needs: the library modules (computed once), the language, this
%% process (never a wait of its own) and the time the work stops.
scan_ctx(Fmt, Ms) ->
    #{lib => os_sup_lib_label:lib_modules(), fmt => Fmt, self => self(),
      deadline => erlang:monotonic_time(millisecond) + Ms}.

resolve(Text) ->
    case pid_arg(Text) of
        {ok, Pid} -> Pid;
        {error, #{kind := Kind, message := Msg}} -> throw({tool_error, Kind, Msg})
    end.

%%%===================================================================
%%% Private: finding chains
%%%===================================================================

%% One process: its chain, and who waits on it.
pid_chain(Pid, Ctx) ->
    {Chain, Memo} = follow(Pid, #{}, Ctx),
    WaitedBy = [{P, K} || {P, #{kind := K}} <- waited_on_by(Pid, Memo, Ctx)],
    %% A cycle through the asked pid starts there; one it runs into is shown apart.
    Chains = case Chain of
                 #{stop := cycle, hops := [Pid | _], cycle_to := Pid} -> [Chain];
                 _ -> split_cycle(Chain)
             end,
    {Chains, #{mode => pid, start => Pid, waited_by => WaitedBy}}.

waited_on_by(Pid, Memo, Ctx) ->
    Watchers = case pinfo_items(Pid, [monitored_by]) of
                   [{monitored_by, Ms}] -> [M || M <- Ms, is_pid(M), node(M) =:= node()];
                   _ -> []
               end,
    {Found, _} = lists:foldl(
                   fun(M, {Acc, Mem}) ->
                           {W, Mem1} = edge(M, Mem, Ctx),
                           case W of
                               #{targets := Ts} ->
                                   case lists:member(Pid, Ts) of
                                       true -> {[{M, W} | Acc], Mem1};
                                       false -> {Acc, Mem1}
                                   end;
                               _ -> {Acc, Mem1}
                           end
                   end, {[], Memo}, lists:sublist(Watchers, ?MAX_WAITED_BY)),
    lists:reverse(Found).

%% The whole node: blocked processes and the largest queues, top `Limit' chains.
scan_chains(Limit, Ctx) ->
    All = erlang:processes(),
    chains(Limit, Ctx, scan(All, Ctx), length(All)).

chains(Limit, Ctx, {Cands, Queues, Scanned, Truncated0}, Count) ->
    {Memo0, Truncated} =
        lists:foldl(fun(_P, {M, true}) -> {M, true};
                       (P, {M, false}) ->
                            case past(Ctx) of
                                true -> {M, true};
                                false -> {element(2, edge(P, M, Ctx)), false}
                            end
                    end, {#{}, Truncated0}, Cands),
    Waiters = [{P, W} || {P, W} <- maps:to_list(Memo0), is_map(W)],
    WaitedOn = maps:from_list([{T, true} || {_, #{targets := Ts, confirmed := true}} <- Waiters,
                                            T <- Ts]),
    TopQ = [P || {_, P} <- lists:sublist(lists:reverse(lists:sort(Queues)), Limit)],
    Starts = lists:usort([P || {P, #{confirmed := C}} <- Waiters, not is_map_key(P, WaitedOn),
                               C orelse queue_len(P) > 0]) ++ TopQ,
    {Chains0, Memo1} = follow_all(Starts, Memo0, Ctx, [], #{}),
    %% Waiters no chain reached: cycles nobody outside them waits on, and processes
    %% only a multi-process wait (Task.await_many) waits on. A chain from an unconfirmed
    %% wait (a `receive' with one monitor) is kept only when it is a cycle.
    Seen0 = maps:from_list([{H, true} || #{hops := Hs} <- Chains0, H <- Hs]),
    {Cycles, _} = lists:foldl(
                    fun({P, _}, {Acc, {Seen, Mem}}) ->
                            case is_map_key(P, Seen) of
                                true -> {Acc, {Seen, Mem}};
                                false ->
                                    {C, Mem1} = follow(P, Mem, Ctx),
                                    case keep(C) of
                                        false -> {Acc, {Seen, Mem1}};
                                        true ->
                                            Seen1 = maps:merge(Seen, maps:from_list(
                                                                       [{H, true} || H <- maps:get(hops, C)])),
                                            {[rotate(C) | Acc], {Seen1, Mem1}}
                                    end
                            end
                    end, {[], {Seen0, Memo1}}, Waiters),
    Split = lists:append([split_cycle(C) || C <- Chains0 ++ Cycles]),
    {Pure, Others} = lists:partition(fun deadlock/1, Split),
    %% One chain per cycle, however many chains ran into it.
    UniqueCycles = [C || {_, C} <- lists:ukeysort(1, [{lists:sort(maps:get(hops, C)), C}
                                                      || C <- Pure])],
    Grouped = group(UniqueCycles ++ Others),
    Ranked = lists:sublist([C || {_, C} <- lists:reverse(lists:sort([{rank(C), C} || C <- Grouped]))],
                           Limit),
    {Ranked, #{mode => scan, scanned => Scanned, process_count => Count,
               truncated => Truncated, waiting => length(Waiters),
               chains_found => length(Grouped), crowds => crowds(Waiters)}}.

crowds(Waiters) ->
    By = lists:foldl(fun({P, #{targets := [T], confirmed := true}}, M) ->
                             maps:update_with(T, fun(Ps) -> [P | Ps] end, [P], M);
                        (_, M) -> M
                     end, #{}, Waiters),
    Counted = [{length(Ps), T, lists:sublist(Ps, ?MAX_WAITED_BY)}
               || {T, Ps} <- maps:to_list(By), length(Ps) >= 2],
    lists:sublist(lists:reverse(lists:sort(Counted)), ?MAX_CROWDS).

keep(#{hops := []}) -> false;
keep(#{stop := cycle}) -> true;
keep(#{waits := [#{confirmed := Confirmed} | _]}) -> Confirmed;
keep(_) -> false.

%% -> {Candidates, [{Mq, Pid}], Scanned, Truncated}
scan(Pids, Ctx) ->
    scan(Pids, Ctx, [], {0, []}, 0).

scan([], _Ctx, Cands, {_, Queues}, N) ->
    {Cands, Queues, N, false};
scan([P | Rest], Ctx, Cands, {QN, Queues} = Q, N) ->
    case N band 511 =:= 0 andalso past(Ctx) of
        true -> {Cands, Queues, N, true};
        false ->
            case P =/= maps:get(self, Ctx) andalso
                pinfo_items(P, [current_function, message_queue_len, status]) of
                [{_, CF}, {_, Mq}, {_, St}] ->
                    Q1 = case Mq > 0 andalso QN < ?MAX_QUEUES of
                             true -> {QN + 1, [{Mq, P} | Queues]};
                             false -> Q
                         end,
                    C1 = case candidate(CF, St, Ctx) of
                             false -> Cands;
                             _ -> [P | Cands]
                         end,
                    scan(Rest, Ctx, C1, Q1, N + 1);
                _ -> scan(Rest, Ctx, Cands, Q, N + 1)
            end
    end.

follow_all([], Memo, _Ctx, Acc, _Done) ->
    {lists:reverse(Acc), Memo};
follow_all([P | Rest], Memo, Ctx, Acc, Done) ->
    case is_map_key(P, Done) of
        true -> follow_all(Rest, Memo, Ctx, Acc, Done);
        false ->
            {Chain, Memo1} = follow(P, Memo, Ctx),
            case maps:get(hops, Chain) of
                [] -> follow_all(Rest, Memo1, Ctx, Acc, Done);
                Hops ->
                    follow_all(Rest, Memo1, Ctx, [Chain | Acc],
                               maps:merge(Done, maps:from_list([{H, true} || H <- Hops])))
            end
    end.

%% Follow waits from `P'. A chain: `hops' (processes, the start first), `waits' (the
%% wait of each hop but the last, plus the last one's when it stops on it), `stop':
%% terminal | cycle | remote | unresolved | ambiguous | multi | gone | depth.
follow(P, Memo, Ctx) ->
    follow(P, [], [], Memo, Ctx).

follow(P, Hops, Waits, Memo, Ctx) ->
    Done = fun(Stop, Extra, M) ->
                   {maps:merge(#{hops => lists:reverse(Hops), waits => lists:reverse(Waits),
                                 stop => Stop}, Extra), M}
           end,
    case lists:member(P, Hops) of
        true -> Done(cycle, #{cycle_to => P}, Memo);
        false when length(Hops) >= ?MAX_HOPS -> Done(depth, #{}, Memo);
        false ->
            case is_pid(P) andalso node(P) =:= node() of
                false -> Done(remote, #{remote => P}, Memo);
                true ->
                    {W, Memo1} = edge(P, Memo, Ctx),
                    case W of
                        gone when Hops =:= [] -> {#{hops => [], waits => [], stop => gone}, Memo1};
                        gone -> Done(gone, #{gone => P}, Memo1);
                        none -> follow_stop(P, Hops, Waits, terminal, Memo1);
                        #{targets := [], kind := _} ->
                            follow_stop(P, Hops, [W | Waits], unresolved, Memo1);
                        #{ambiguous := true} ->
                            follow_stop(P, Hops, [W | Waits], ambiguous, Memo1);
                        #{targets := [T]} ->
                            follow(T, [P | Hops], [W | Waits], Memo1, Ctx);
                        #{targets := [_, _ | _]} ->
                            follow_stop(P, Hops, [W | Waits], multi, Memo1)
                    end
            end
    end.

follow_stop(P, Hops, Waits, Stop, Memo) ->
    {#{hops => lists:reverse([P | Hops]), waits => lists:reverse(Waits), stop => Stop}, Memo}.

%% A memoised wait_of/2.
edge(P, Memo, Ctx) ->
    case Memo of
        #{P := W} -> {W, Memo};
        _ ->
            W = case os_sup_waits_of:wait_of(P, Ctx) of
                    {wait, Wait} -> Wait;
                    Other -> Other
                end,
            {W, Memo#{P => W}}
    end.

%% A chain that runs into a cycle is two: the cycle (its members only, a deadlock) and the
%% processes waiting behind it (`stop => deadlocked', not members).
split_cycle(#{hops := [First | _] = Hops, waits := Waits, stop := cycle, cycle_to := To} = C)
  when First =/= To ->
    {Lead, Members} = lists:splitwith(fun(H) -> H =/= To end, Hops),
    {LeadWaits, MemberWaits} = lists:split(min(length(Lead), length(Waits)), Waits),
    [rotate(C#{hops => Members, waits => MemberWaits}),
     #{hops => Lead, waits => LeadWaits, stop => deadlocked, deadlocked => To}];
split_cycle(C) ->
    [rotate(C)].

%% A pure cycle starts at its smallest pid (one chain per cycle).
rotate(#{hops := Hops, stop := cycle, cycle_to := To} = C) ->
    case lists:splitwith(fun(H) -> H =/= To end, Hops) of
        {[], Cycle} ->
            Min = lists:min(Cycle),
            {A, B} = lists:splitwith(fun(H) -> H =/= Min end, Cycle),
            Ws = maps:get(waits, C),
            {WA, WB} = lists:split(length(A), Ws),
            C#{hops => B ++ A, waits => WB ++ WA, cycle_to => Min};
        _ -> C
    end;
rotate(C) -> C.

%% Chains that differ only in their first hop (many callers of one server) become one,
%% with the other callers in `also'.
group(Chains) ->
    Keyed = [{group_key(C), C} || C <- Chains],
    Groups = lists:foldl(fun({K, C}, M) -> maps:update_with(K, fun(L) -> [C | L] end, [C], M) end,
                         #{}, Keyed),
    lists:append([merge_group(K, lists:reverse(Cs)) || {K, Cs} <- maps:to_list(Groups)]).

%% Single hops into the same process of another node (or the same exited one) group too.
group_key(#{hops := [_], stop := remote, remote := R}) -> {to, R, remote};
group_key(#{hops := [_], stop := gone, gone := G}) -> {to, G, gone};
group_key(#{hops := [H], stop := S}) -> {single, H, S};
group_key(#{hops := [_ | Tail], stop := S} = C) -> {Tail, S, maps:get(cycle_to, C, undefined)}.

merge_group({single, _, _}, Cs) -> Cs;
merge_group(_, [C]) -> [C];
merge_group(_, Cs) ->
    Sorted = lists:reverse(lists:sort([{queue_len(hd(maps:get(hops, C))), C} || C <- Cs])),
    [{_, Best} | Others] = Sorted,
    [Best#{also => [hd(maps:get(hops, C)) || {_, C} <- Others]}].

rank(#{hops := Hops} = C) ->
    Deadlock = case deadlock(C) of true -> 1; false -> 0 end,
    Waiting = case maps:get(waits, C) of [] -> 0; _ -> 1 end,
    {Deadlock, lists:max([0 | [queue_len(H) || H <- Hops, is_pid(H), node(H) =:= node()]]),
     Waiting, length(Hops)}.

%%%===================================================================
%%% Private: sampling over the window
%%%===================================================================

%% Samples every local hop (and, for callers whose backtrace is cheap, their call
%% references) over `Window' ms.
sample(_Chains, 0) ->
    #{};
sample(Chains, Window) ->
    Hops = lists:usort([H || C <- Chains, H <- maps:get(hops, C), is_pid(H), node(H) =:= node()]),
    Pids = lists:sublist(Hops, ?MAX_SAMPLED),
    HopCallers = [{P, W} || C <- Chains,
                            {P, W} <- lists:zip(lists:sublist(maps:get(hops, C),
                                                              length(maps:get(waits, C))),
                                                maps:get(waits, C)),
                            lists:member(maps:get(kind, W), ?REF_KINDS),
                            lists:member(P, Pids)],
    %% The other callers of a grouped chain call the same process: their calls count into
    %% its rate too (one caller of many may see no call return in a short window).
    AlsoCallers = [{A, W} || #{also := Also, waits := [W | _]} <- Chains,
                             lists:member(maps:get(kind, W), ?REF_KINDS), A <- Also],
    Callers = lists:ukeysort(1, HopCallers ++
                                 lists:sublist(AlsoCallers,
                                               max(0, ?MAX_SAMPLED - length(HopCallers)))),
    Refs0 = maps:from_list([{P, S} || {P, W} <- Callers, S <- [first_ref(P, W)], S =/= skip]),
    N = max(1, min(?MAX_SAMPLES, Window div 2)),
    T0 = erlang:monotonic_time(millisecond),
    Start = maps:from_list([{P, counters(P)} || P <- Pids]),
    Acc = sample_loop(1, N, T0, Window, Pids, #{funs => #{}, refs => Refs0}),
    End = maps:from_list([{P, counters(P)} || P <- Pids]),
    Elapsed = max(1, erlang:monotonic_time(millisecond) - T0),
    #{elapsed_ms => Elapsed, samples => N, start => Start, 'end' => End,
      funs => maps:get(funs, Acc), refs => maps:get(refs, Acc)}.

%% skip (no cheap backtrace) or the state of a caller's call references.
first_ref(P, #{function := F}) ->
    case pinfo_items(P, [message_queue_len, total_heap_size]) of
        [{_, Mq}, {_, Heap}] ->
            case os_sup_waits_of:backtrace_allowed(Mq, Heap) of
                true ->
                    Top = frame_text(F),
                    Bt = os_sup_waits_of:backtrace(P),
                    Ref = os_sup_waits_of:top_ref(Bt, Top),
                    #{top => Top, first => Ref, last => Ref, changes => 0,
                      same => Ref =/= undefined,
                      resample => is_binary(Bt) andalso byte_size(Bt) =< ?BT_RESAMPLE_BYTES};
                false -> skip
            end;
        _ -> skip
    end.

%% How a backtrace names function `F' in its frame header: `(gen:do_call/4 + 776)'.
frame_text({M, F, A}) ->
    unicode:characters_to_binary(io_lib:format("(~tp:~tp/~b ", [M, F, A]));
frame_text(_) ->
    <<"(">>.

counters(P) ->
    case pinfo_items(P, [message_queue_len, reductions]) of
        [{_, Mq}, {_, Red}] -> {Mq, Red};
        _ -> gone
    end.

sample_loop(I, N, _T0, _Window, _Pids, Acc) when I > N ->
    Acc;
sample_loop(I, N, T0, Window, Pids, Acc) ->
    Due = T0 + (Window * I) div N,
    Wait = Due - erlang:monotonic_time(millisecond),
    _ = case Wait > 0 of
            true -> receive after Wait -> ok end;
            false -> ok
        end,
    Funs = lists:foldl(fun(P, F) -> sample_fun(P, F) end, maps:get(funs, Acc), Pids),
    Refs = maps:map(fun(P, S) -> sample_ref(P, S) end, maps:get(refs, Acc)),
    sample_loop(I + 1, N, T0, Window, Pids, Acc#{funs => Funs, refs => Refs}).

sample_fun(P, Funs) ->
    case pinfo_items(P, [current_function]) of
        [{_, CF}] ->
            PF = maps:get(P, Funs, #{}),
            case map_size(PF) < 32 orelse is_map_key(CF, PF) of
                true -> Funs#{P => PF#{CF => maps:get(CF, PF, 0) + 1}};
                false -> Funs#{P => PF#{other => maps:get(other, PF, 0) + 1}}
            end;
        _ -> Funs
    end.

%% A new reference in the caller's wait frame means the previous call returned.
sample_ref(_P, #{resample := false} = S) -> S;
sample_ref(P, #{top := Top, last := Last, changes := C, same := Same, first := First} = S) ->
    Ref = os_sup_waits_of:top_ref(os_sup_waits_of:backtrace(P), Top),
    New = Ref =/= undefined andalso Last =/= undefined andalso Ref =/= Last,
    S#{last => case Ref of undefined -> Last; _ -> Ref end,
       changes => C + case New of true -> 1; false -> 0 end,
       same => Same andalso Ref =:= First}.

%%%===================================================================
%%% Private: small helpers
%%%===================================================================

past(#{deadline := D}) ->
    erlang:monotonic_time(millisecond) > D.
