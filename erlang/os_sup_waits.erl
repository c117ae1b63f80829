%%%-------------------------------------------------------------------
%%% @doc `os_sup_waits' answers "who is waiting on whom?" inside the node,
%%% for an AI agent: a process blocked in a call is followed to the process
%%% it waits on, and on, until a process that is not waiting (the
%%% bottleneck), a process on another node, or a process already on the
%%% chain (a deadlock). Each hop shows its message queue, what it runs, and
%%% over a short window how fast its queue grows, its reductions and the
%%% calls it serves. Kernel and stdlib only; names are rendered by
%%% `os_sup_render' in the node's language.
%%%
%%% The helper runs it as introspection tool `waits' (through
%%% `os_sup_introspect:run/2') in a throw-away worker under a deadline.
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link waits/1}: the wait chains of the node (the most interesting
%%%       ones, top N) or the chain from one process.</li>
%%%   <li>{@link wait_of/1}: what one process waits on, if anything.</li>
%%% </ul>
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
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_waits).

%% API
-export([waits/1, wait_of/1]).

-define(DEFAULT_WINDOW_MS, 500).
-define(MAX_WINDOW_MS, 5000).
-define(DEFAULT_LIMIT, 5).
-define(MAX_LIMIT, 20).
-define(SCAN_MS, 2000).
-define(MAX_HOPS, 16).
-define(MAX_SAMPLES, 250).
-define(MAX_SAMPLED, 64).
-define(MAX_LINKS, 500).
-define(MAX_WAITED_BY, 100).
-define(MAX_QUEUES, 10000).
-define(TEXT_BYTES, 4096).
%% waits whose top frame holds a fresh reference for every call
-define(REF_KINDS, [call, await, erpc, io]).
-define(LINE_BYTES, 1200).
%% backtrace guard (words and bytes)
-define(BT_BASE_WORDS, 65536).
-define(BT_WORDS_PER_MSG, 24).
-define(BT_MAX_EXTRA_WORDS, 524288).
-define(BT_RESAMPLE_BYTES, 8192).

-define(LIB_APPS,
        [kernel, stdlib, compiler, elixir, logger, mix, iex, eex, ex_unit, sasl,
         runtime_tools, crypto, ssl, public_key, asn1, inets, os_mon, tools, syntax_tools,
         parsetools, xmerl, mnesia, observer, debugger, ssh, hex]).

-type target() :: pid() | {atom(), node()}.
-type wait() :: #{kind := call | await | erpc | io | start | 'receive',
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
    os_sup_introspect:guarded(<<"waits">>, fun() -> run(Args) end).

%% @doc What `Pid' waits on, decided from `process_info' only: `{wait, Wait}',
%% `none' (not waiting) or `gone'.
-spec wait_of(pid()) -> {wait, wait()} | none | gone.
wait_of(Pid) ->
    wait_of(Pid, #{lib => lib_modules()}).

%%%===================================================================
%%% Private: the tool
%%%===================================================================

run(Args) ->
    Fmt = os_sup_render:format(maps:get(format, Args, auto)),
    Window = arg_int(window_ms, Args, ?DEFAULT_WINDOW_MS, 0, ?MAX_WINDOW_MS),
    Limit = arg_int(limit, Args, ?DEFAULT_LIMIT, 1, ?MAX_LIMIT),
    T0 = erlang:monotonic_time(microsecond),
    Ctx = #{lib => lib_modules(), fmt => Fmt, self => self(),
            deadline => erlang:monotonic_time(millisecond) + ?SCAN_MS},
    {Chains, Scan} = case arg_text(pid, Args) of
                         undefined -> scan_chains(Limit, Ctx);
                         Text -> pid_chain(resolve(Text), Ctx)
                     end,
    Stats = sample(Chains, Window),
    Us = erlang:monotonic_time(microsecond) - T0,
    render(Chains, Scan, Stats, Window, Us, Ctx).

resolve(Text) ->
    case os_sup_introspect:pid_arg(Text) of
        {ok, Pid} -> Pid;
        {error, #{kind := Kind, message := Msg}} -> throw({tool_error, Kind, Msg})
    end.

%%%===================================================================
%%% Private: finding chains
%%%===================================================================

%% One process: its chain, and who waits on it.
pid_chain(Pid, Ctx) ->
    {Chain, Memo} = follow(Pid, #{}, Ctx),
    WaitedBy = waited_on_by(Pid, Memo, Ctx),
    {[Chain], #{mode => pid, start => Pid, waited_by => WaitedBy}}.

waited_on_by(Pid, Memo, Ctx) ->
    Watchers = case info(Pid, [monitored_by]) of
                   [{monitored_by, Ms}] -> [M || M <- Ms, is_pid(M), node(M) =:= node()];
                   _ -> []
               end,
    {Found, _} = lists:foldl(
                   fun(M, {Acc, Mem}) ->
                           {W, Mem1} = edge(M, Mem, Ctx),
                           case W of
                               #{targets := Ts, kind := Kind} ->
                                   case lists:member(Pid, Ts) of
                                       true -> {[{M, Kind} | Acc], Mem1};
                                       false -> {Acc, Mem1}
                                   end;
                               _ -> {Acc, Mem1}
                           end
                   end, {[], Memo}, lists:sublist(Watchers, ?MAX_WAITED_BY)),
    lists:reverse(Found).

%% The whole node: blocked processes and the largest queues, top `Limit' chains.
scan_chains(Limit, Ctx) ->
    All = erlang:processes(),
    {Cands, Queues, Scanned, Truncated0} = scan(All, Ctx),
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
    Grouped = group(Chains0 ++ Cycles),
    Ranked = lists:sublist([C || {_, C} <- lists:reverse(lists:sort([{rank(C), C} || C <- Grouped]))],
                           Limit),
    {Ranked, #{mode => scan, scanned => Scanned, process_count => length(All),
               truncated => Truncated, waiting => length(Waiters),
               chains_found => length(Grouped)}}.

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
                info(P, [current_function, message_queue_len, status]) of
                [{_, CF}, {_, Mq}, {_, St}] ->
                    Q1 = case Mq > 0 andalso QN < ?MAX_QUEUES of
                             true -> {QN + 1, [{Mq, P} | Queues]};
                             false -> Q
                         end,
                    C1 = case candidate(CF, St, Ctx) of
                             true -> [P | Cands];
                             false -> Cands
                         end,
                    scan(Rest, Ctx, C1, Q1, N + 1);
                _ -> scan(Rest, Ctx, Cands, Q, N + 1)
            end
    end.

candidate(CF, Status, Ctx) ->
    case wait_kind(CF) of
        none -> generic_candidate(CF, Status, Ctx);
        _ -> not own(CF)
    end.

generic_candidate({M, _, _}, waiting, Ctx) when is_atom(M) ->
    not library(M, Ctx) andalso not own({M, x, 0});
generic_candidate(_, _, _) ->
    false.

own({M, _, _}) when is_atom(M) ->
    lists:member(M, [os_sup_helper, os_sup_introspect, os_sup_waits, os_sup_trace,
                     os_sup_logger, os_sup_dev, os_sup_render]);
own(_) -> false.

queue_len(P) ->
    case info(P, [message_queue_len]) of
        [{_, Q}] -> Q;
        _ -> 0
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
            W = case wait_of(P, Ctx) of
                    {wait, Wait} -> Wait;
                    Other -> Other
                end,
            {W, Memo#{P => W}}
    end.

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

deadlock(#{stop := cycle}) -> true;
deadlock(_) -> false.

%%%===================================================================
%%% Private: one process's wait
%%%===================================================================

wait_of(Pid, Ctx) ->
    case info(Pid, [current_function, status, monitors, message_queue_len,
                    total_heap_size]) of
        undefined -> gone;
        Items ->
            Get = fun(K) -> proplists:get_value(K, Items) end,
            CF = Get(current_function),
            Monitors = [normalise(T) || {process, T} <- list(Get(monitors))],
            case wait_kind(CF) of
                none ->
                    case generic_candidate(CF, Get(status), Ctx) of
                        true when length(Monitors) =:= 1 ->
                            {wait, #{kind => 'receive', function => CF, targets => Monitors,
                                     confirmed => false, ambiguous => false}};
                        _ -> none
                    end;
                start ->
                    Links = case info(Pid, [links]) of
                                [{links, Ls}] -> Ls;
                                _ -> []
                            end,
                    Children = init_children(Pid, Links),
                    Targets = lists:usort(Children ++ case CF of
                                                          {_, sync_start_monitor, _} -> Monitors;
                                                          _ -> []
                                                      end),
                    {wait, #{kind => start, function => CF, targets => Targets,
                             confirmed => Targets =/= [], ambiguous => length(Targets) > 1}};
                Kind ->
                    Multi = multi_wait(CF),
                    {Targets, Ambiguous} =
                        case Monitors of
                            [_, _ | _] when not Multi ->
                                disambiguate(Pid, Monitors, Get(message_queue_len),
                                             Get(total_heap_size), Ctx);
                            _ -> {lists:sublist(Monitors, 10), false}
                        end,
                    {wait, #{kind => Kind, function => CF, targets => Targets,
                             confirmed => Targets =/= [] andalso not Ambiguous,
                             ambiguous => Ambiguous}}
            end
    end.

%% The kind of wait a current function means, or none.
wait_kind({gen, F, _}) ->
    one_of(F, [do_call, wait_response, receive_response, do_receive_response], call);
wait_kind({gen_server, F, _}) ->
    one_of(F, [wait_response, receive_response], call);
wait_kind({gen_statem, F, _}) ->
    one_of(F, [call_clean, wait_response, receive_response], call);
wait_kind({gen_event, F, _}) ->
    one_of(F, [wait_response, receive_response], call);
wait_kind({erpc, F, _}) ->
    one_of(F, [call, receive_response, wait_response, multicall, multicall_receive], erpc);
wait_kind({io, execute_request, _}) -> io;
wait_kind({proc_lib, F, _}) ->
    one_of(F, [sync_start, sync_start_link, sync_start_monitor, sync_wait], start);
wait_kind({'Elixir.Task', F, _}) ->
    one_of(F, [await, await_many, yield, yield_many], await);
wait_kind(_) -> none.

one_of(F, Fs, Kind) ->
    case lists:member(F, Fs) of
        true -> Kind;
        false -> none
    end.

%% Waits that wait on several processes at once.
multi_wait({'Elixir.Task', F, _}) -> F =:= await_many orelse F =:= yield_many;
multi_wait({erpc, F, _}) -> F =:= multicall orelse F =:= multicall_receive;
multi_wait(_) -> false.

normalise({Name, Node}) when is_atom(Name), Node =:= node() ->
    case whereis(Name) of
        P when is_pid(P) -> P;
        _ -> {Name, Node}
    end;
normalise(T) -> T.

%% Linked children still in `init_it' (a parent in proc_lib start-up waits for them).
init_children(Parent, Links) ->
    [L || L <- lists:sublist(Links, ?MAX_LINKS), is_pid(L), node(L) =:= node(), L =/= Parent,
          case info(L, [initial_call, current_stacktrace]) of
              [{_, {proc_lib, init_p, 5}}, {_, Stack}] when is_list(Stack) ->
                  lists:any(fun({_, F, _, _}) -> F =:= init_it; (_) -> false end, Stack);
              _ -> false
          end].

%% Several monitors: the one whose pid or registered name the caller's frames hold.
disambiguate(Pid, Monitors, Mq, Heap, Ctx) ->
    Frames = case backtrace_allowed(Mq, Heap) of
                 true -> call_frames(backtrace(Pid), Ctx);
                 false -> undefined
             end,
    case Frames of
        undefined -> {Monitors, true};
        _ ->
            case [T || T <- Monitors, mentioned(T, Frames)] of
                [T] -> {[T], false};
                _ -> {Monitors, true}
            end
    end.

mentioned(P, Frames) when is_pid(P) ->
    binary:match(Frames, list_to_binary(pid_to_list(P))) =/= nomatch orelse
        case info(P, [registered_name]) of
            [{_, N}] when is_atom(N), N =/= [] -> mentioned_atom(N, Frames);
            _ -> false
        end;
mentioned({Name, _Node}, Frames) ->
    mentioned_atom(Name, Frames).

mentioned_atom(Name, Frames) ->
    Text = unicode:characters_to_binary(io_lib:format("~tp", [Name])),
    binary:match(Frames, <<" ", Text/binary, "\n">>) =/= nomatch.

%% The backtrace frames from the top down to the first frame of user code.
call_frames(undefined, _Ctx) -> undefined;
call_frames(Bt, Ctx) ->
    Frames = binary:split(Bt, <<"\n\n">>, [global]),
    iolist_to_binary(take_until_user(lists:sublist(Frames, 12), Ctx)).

take_until_user([], _Ctx) -> [];
take_until_user([F | Rest], Ctx) ->
    case frame_module(F) of
        {ok, M} ->
            case library(M, Ctx) of
                true -> [F, <<"\n">> | take_until_user(Rest, Ctx)];
                false -> [F, <<"\n">>]
            end;
        error -> [F, <<"\n">> | take_until_user(Rest, Ctx)]
    end.

frame_module(F) ->
    case re:run(F, <<"\\(([^:() ]+):[^/]+/[0-9]+ \\+">>, [{capture, [1], binary}]) of
        {match, [M]} ->
            try binary_to_existing_atom(unquote(M), utf8) of
                A -> {ok, A}
            catch
                _:_ -> error
            end;
        _ -> error
    end.

unquote(<<"'", R/binary>>) when byte_size(R) > 0 -> binary:part(R, 0, byte_size(R) - 1);
unquote(B) -> B.

backtrace_allowed(Mq, Heap) when is_integer(Mq), is_integer(Heap) ->
    Heap =< ?BT_BASE_WORDS + min(Mq * ?BT_WORDS_PER_MSG, ?BT_MAX_EXTRA_WORDS);
backtrace_allowed(_, _) ->
    false.

backtrace(Pid) ->
    case catch erlang:process_info(Pid, backtrace) of
        {backtrace, B} when is_binary(B) -> B;
        _ -> undefined
    end.

%% The first reference in the top frame when that frame is the wait `Top' (a new
%% reference for every call), else undefined.
top_ref(undefined, _Top) -> undefined;
top_ref(Bt, Top) ->
    First = case binary:match(Bt, <<"\n\n">>) of
                {Pos, _} -> binary:part(Bt, 0, Pos);
                nomatch -> Bt
            end,
    case binary:match(First, Top) of
        nomatch -> undefined;
        _ ->
            case re:run(First, <<"#Ref<[0-9.]+>">>, [{capture, first, binary}]) of
                {match, [R]} -> R;
                _ -> undefined
            end
    end.

%%%===================================================================
%%% Private: library code
%%%===================================================================

%% Modules of OTP and Elixir (their applications' module lists, and preloaded
%% modules): a frame in one of them is not the user's code.
lib_modules() ->
    Loaded = try [A || {A, _, _} <- application:loaded_applications()] catch _:_ -> [] end,
    Mods = lists:append([case catch application:get_key(A, modules) of
                             {ok, Ms} when is_list(Ms) -> Ms;
                             _ -> []
                         end || A <- ?LIB_APPS, lists:member(A, Loaded)]),
    maps:from_list([{M, true} || M <- Mods ++ erlang:pre_loaded(), is_atom(M)]).

library(M, #{lib := Lib}) ->
    is_map_key(M, Lib) orelse own({M, x, 0}).

%% The first frame of user code below a library current function.
user_frame(Stack, Ctx) when is_list(Stack) ->
    case [{M, F, A} || {M, F, A, _} <- Stack, is_atom(M), not library(M, Ctx)] of
        [First | _] -> First;
        [] -> undefined
    end;
user_frame(_, _) ->
    undefined.

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
    Callers = lists:ukeysort(1, [{P, W} || C <- Chains,
                                           {P, W} <- lists:zip(lists:sublist(maps:get(hops, C),
                                                                             length(maps:get(waits, C))),
                                                               maps:get(waits, C)),
                                           lists:member(maps:get(kind, W), ?REF_KINDS),
                                           lists:member(P, Pids)]),
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
    case info(P, [message_queue_len, total_heap_size]) of
        [{_, Mq}, {_, Heap}] ->
            case backtrace_allowed(Mq, Heap) of
                true ->
                    Top = frame_text(F),
                    Bt = backtrace(P),
                    Ref = top_ref(Bt, Top),
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
    case info(P, [message_queue_len, reductions]) of
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
    case info(P, [current_function]) of
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
    Ref = top_ref(backtrace(P), Top),
    New = Ref =/= undefined andalso Last =/= undefined andalso Ref =/= Last,
    S#{last => case Ref of undefined -> Last; _ -> Ref end,
       changes => C + case New of true -> 1; false -> 0 end,
       same => Same andalso Ref =:= First}.

%%%===================================================================
%%% Private: rendering
%%%===================================================================

render(Chains, Scan, Stats, Window, Us, Ctx) ->
    Fmt = maps:get(fmt, Ctx),
    Calls = calls_into(Chains, Stats),
    Rendered = [render_chain(C, Stats, Calls, Window, Ctx) || C <- Chains],
    Deadlocks = length([C || C <- Chains, deadlock(C)]),
    Head = head_line(Scan, length(Chains), Deadlocks, Window, Us, Fmt),
    Lines0 = [Head | [L || {L, _} <- Rendered]],
    {Lines, Extra} =
        case Scan of
            #{mode := pid, waited_by := By} ->
                ByData = [#{pid => os_sup_render:pid(P, Fmt), label => label(P, Fmt),
                            kind => K} || {P, K} <- By],
                Line = case By of
                           [] -> [];
                           _ -> [iolist_to_binary(
                                   ["waited on by ", integer_to_binary(length(By)), ": ",
                                    lists:join(<<", ">>, [[label(P, Fmt), " (", atom_to_binary(K, utf8), ")"]
                                                          || {P, K} <- lists:sublist(By, 5)]),
                                    case length(By) > 5 of true -> <<", ...">>; false -> <<>> end])]
                       end,
                {Lines0 ++ Line, #{waited_on_by => ByData}};
            _ when Chains =:= [] ->
                {Lines0 ++ [<<"nothing waits: no process is blocked in a call and every message "
                              "queue is empty; pass pid to see one process">>], #{}};
            _ -> {Lines0, #{}}
        end,
    Data = maps:merge(
             #{chains => [D || {_, D} <- Rendered], deadlocks => Deadlocks,
               window_ms => Window, duration_us => Us,
               mode => maps:get(mode, Scan),
               scanned => maps:get(scanned, Scan, undefined),
               process_count => maps:get(process_count, Scan, undefined),
               scan_truncated => maps:get(truncated, Scan, false),
               waiting => maps:get(waiting, Scan, undefined),
               chains_found => maps:get(chains_found, Scan, length(Chains))}, Extra),
    os_sup_introspect:ok_reply(Lines, Data, ?TEXT_BYTES).

head_line(#{mode := pid, start := P}, _N, Deadlocks, Window, Us, Fmt) ->
    iolist_to_binary(["waits from ", label(P, Fmt), deadlock_note(Deadlocks), " (",
                      window_note(Window), ", ", ms(Us), ")"]);
head_line(Scan, N, Deadlocks, Window, Us, _Fmt) ->
    #{scanned := S, process_count := Total, truncated := T, waiting := W,
      chains_found := Found} = Scan,
    iolist_to_binary([integer_to_binary(N), " of ", integer_to_binary(Found), " chains",
                      deadlock_note(Deadlocks), " (", integer_to_binary(W), " waiting of ",
                      integer_to_binary(S), " processes scanned",
                      case T of true -> [" of ", integer_to_binary(Total), ", scan deadline hit"];
                          false -> [] end,
                      "; ", window_note(Window), ", ", ms(Us), ")"]).

deadlock_note(0) -> <<>>;
deadlock_note(N) -> [", ", integer_to_binary(N), " DEADLOCK", case N of 1 -> ""; _ -> "S" end].

window_note(0) -> <<"no window">>;
window_note(W) -> ["rates over ", integer_to_binary(W), " ms"].

ms(Us) -> [integer_to_binary(Us div 1000), " ms"].

%% Calls per second into each callee, from its callers' call references.
calls_into(Chains, Stats) ->
    Refs = maps:get(refs, Stats, #{}),
    Elapsed = maps:get(elapsed_ms, Stats, 0),
    Samples = maps:get(samples, Stats, 1),
    Pairs = lists:usort([{Callee, Caller} || C <- Chains,
                                             {Caller, Callee, W} <- edges(C),
                                             lists:member(maps:get(kind, W), ?REF_KINDS),
                                             is_map_key(Caller, Refs)]),
    lists:foldl(
      fun({Callee, Caller}, M) ->
              case maps:get(Caller, Refs) of
                  #{resample := true, changes := Ch} when Elapsed > 0 ->
                      {Sum, Lower} = maps:get(Callee, M, {0, false}),
                      M#{Callee => {Sum + Ch, Lower orelse Ch * 2 > Samples}};
                  _ -> M
              end
      end, #{}, Pairs).

%% {Caller, Callee, Wait} of a chain.
edges(#{hops := Hops, waits := Waits} = C) ->
    Next = tl(Hops) ++ case C of
                          #{stop := cycle, cycle_to := To} -> [To];
                          #{stop := remote, remote := R} -> [R];
                          #{stop := gone, gone := G} -> [G];
                          _ -> []
                      end,
    N = min(length(Waits), length(Next)),
    lists:zip3(lists:sublist(Hops, N), lists:sublist(Next, N), lists:sublist(Waits, N)).

render_chain(C, Stats, Calls, Window, Ctx) ->
    Fmt = maps:get(fmt, Ctx),
    #{hops := Hops, waits := Waits, stop := Stop} = C,
    HopData = [hop(H, Stats, Calls, Window, Ctx) || H <- Hops],
    HopTexts = [hop_text(case deadlock(C) of
                             true -> Hd#{calls_per_s => undefined};
                             false -> Hd
                         end) || Hd <- HopData],
    Pending = [pending(P, W, Stats) || {P, W} <- lists:zip(lists:sublist(Hops, length(Waits)),
                                                            Waits)],
    WaitData = [wait_data(W, Pend, Fmt) || {W, Pend} <- lists:zip(Waits, Pending)],
    HopsWithWaits = attach_waits(HopData, WaitData),
    Parts = interleave(HopTexts, [wait_text(W) || W <- WaitData]),
    Tail = stop_text(C, Waits, Fmt),
    AllPending = Pending =/= [] andalso lists:all(fun(P) -> P =:= true end, Pending),
    Confirmed = lists:all(fun(#{confirmed := Cf}) -> Cf end, Waits),
    Prefix = case deadlock(C) of
                 true when not Confirmed ->
                     [<<"POSSIBLE DEADLOCK (a receive? may wait for something else): ">>];
                 true when AllPending ->
                     [<<"DEADLOCK (every wait pending the whole window): ">>];
                 true -> [<<"DEADLOCK: ">>];
                 false -> []
             end,
    Also = maps:get(also, C, []),
    AlsoText = case Also of
                   [] -> [];
                   _ -> [" (+", integer_to_binary(length(Also)), " more waiting the same way: ",
                         lists:join(<<", ">>, [label(A, Fmt) || A <- lists:sublist(Also, 3)]),
                         case length(Also) > 3 of true -> ", ..."; false -> "" end, ")"]
               end,
    Line = os_sup_render:bound(iolist_to_binary([Prefix, Parts, Tail, AlsoText]), ?LINE_BYTES),
    Data = #{hops => HopsWithWaits, deadlock => deadlock(C), stop => Stop,
             confirmed => Confirmed,
             cycle_to => case C of #{cycle_to := To} -> label(To, Fmt); _ -> undefined end,
             also_waiting => [os_sup_render:pid(A, Fmt) || A <- lists:sublist(Also, 20)],
             also_count => length(Also), text => Line},
    {Line, Data}.

attach_waits([H | Hs], [W | Ws]) -> [H#{wait => W} | attach_waits(Hs, Ws)];
attach_waits(Hs, []) -> [H#{wait => undefined} || H <- Hs];
attach_waits([], _) -> [].

interleave([H], []) -> [H];
interleave([H], [W | _]) -> [H, W];
interleave([H | Hs], [W | Ws]) -> [H, W | interleave(Hs, Ws)];
interleave([], _) -> [].

%% The calling hop's wait ended the chain (cycle back, remote, gone...): say where.
stop_text(#{stop := cycle, cycle_to := To}, _Waits, Fmt) -> [label(To, Fmt)];
stop_text(#{stop := remote, remote := R}, _Waits, Fmt) -> [label(R, Fmt), " (not followed)"];
stop_text(#{stop := gone, gone := G}, _Waits, Fmt) -> [label(G, Fmt), " (exited)"];
stop_text(#{stop := depth}, _Waits, _Fmt) -> [" ... (longer than ", integer_to_binary(?MAX_HOPS),
                                              " hops)"];
stop_text(#{stop := unresolved}, _Waits, _Fmt) -> ["? (no monitor names the target)"];
stop_text(#{stop := ambiguous}, Waits, Fmt) ->
    ["one of ", targets_text(maps:get(targets, lists:last(Waits)), Fmt),
     " (several monitors; not followed)"];
stop_text(#{stop := multi}, Waits, Fmt) ->
    Ts = maps:get(targets, lists:last(Waits)),
    [integer_to_binary(length(Ts)), " processes: ", targets_text(Ts, Fmt)];
stop_text(#{stop := terminal, hops := [_]}, _Waits, _Fmt) -> [" not waiting on another process"];
stop_text(_, _, _) -> [].

targets_text(Ts, Fmt) ->
    lists:join(<<", ">>, [label(T, Fmt) || T <- lists:sublist(Ts, 5)]) ++
        case length(Ts) > 5 of true -> [", ..."]; false -> [] end.

%% true when the caller was in the same call (same reference, or the same wait when
%% references are not sampled) for every sample of the window.
pending(P, W, Stats) ->
    case Stats of
        #{refs := #{P := #{resample := true, same := Same, first := F}}} when F =/= undefined ->
            Same;
        #{funs := #{P := Funs}, samples := N} ->
            maps:get(maps:get(function, W), Funs, 0) =:= N;
        _ -> undefined
    end.

wait_data(#{kind := K, targets := Ts, confirmed := C, function := F}, Pending, Fmt) ->
    #{kind => K, confirmed => C, function => os_sup_render:mfa(F, Fmt),
      targets => [label(T, Fmt) || T <- lists:sublist(Ts, 10)],
      pending_whole_window => Pending}.

wait_text(#{kind := K, confirmed := C}) ->
    [<<" → "/utf8>>, atom_to_binary(K, utf8), case C of true -> <<>>; false -> <<"?">> end,
     <<" → "/utf8>>].

hop(H, Stats, Calls, Window, Ctx) when is_pid(H) ->
    Fmt = maps:get(fmt, Ctx),
    Base = #{pid => os_sup_render:pid(H, Fmt), label => label(H, Fmt), node => node(H)},
    case node(H) =:= node() andalso
        info(H, [current_function, current_stacktrace, message_queue_len, status]) of
        false -> Base#{alive => undefined};
        undefined -> Base#{alive => false};
        Items ->
            Get = fun(K) -> proplists:get_value(K, Items) end,
            CF = Get(current_function),
            {Top, Share} = top_function(H, CF, Stats),
            From = case Top of
                       {M, _, _} when is_atom(M) ->
                           case library(M, Ctx) of
                               true -> user_frame(Get(current_stacktrace), Ctx);
                               false -> undefined
                           end;
                       _ -> undefined
                   end,
            Rates = rates(H, Stats),
            {CallsPerS, Lower} = case Calls of
                                     #{H := {Count, Lo}} ->
                                         {round(Count * 1000 / maps:get(elapsed_ms, Stats)), Lo};
                                     _ -> {undefined, false}
                                 end,
            Base#{alive => true,
                  message_queue_len => Get(message_queue_len),
                  status => Get(status),
                  current_function => os_sup_render:mfa(CF, Fmt),
                  top_function => os_sup_render:mfa(Top, Fmt),
                  top_function_share => Share,
                  from => case From of undefined -> undefined;
                              _ -> os_sup_render:mfa(From, Fmt) end,
                  queue_growth_per_s => maps:get(growth, Rates, undefined),
                  reductions_per_s => maps:get(reductions, Rates, undefined),
                  calls_per_s => CallsPerS,
                  calls_per_s_is_lower_bound => Lower,
                  window_ms => Window}
    end;
hop(H, _Stats, _Calls, _Window, Ctx) ->
    Fmt = maps:get(fmt, Ctx),
    #{pid => undefined, label => label(H, Fmt), node => element(2, H), alive => undefined}.

top_function(H, CF, #{funs := Funs, samples := N}) ->
    case maps:get(H, Funs, #{}) of
        PF when map_size(PF) > 0 ->
            {Top, Count} = hd(lists:reverse(lists:keysort(2, maps:to_list(maps:remove(other, PF)) ++
                                                              [{CF, 0}]))),
            {Top, round(Count * 100 / max(1, N))};
        _ -> {CF, undefined}
    end;
top_function(_H, CF, _) ->
    {CF, undefined}.

%% Each process_info request is handled by the process itself and costs it a
%% reduction: the sampling's own requests are not counted.
rates(H, #{start := S, 'end' := E, elapsed_ms := Ms, samples := N, refs := Refs}) ->
    Own = N + case Refs of
                  #{H := #{resample := true}} -> N;
                  _ -> 0
              end,
    case {maps:get(H, S, gone), maps:get(H, E, gone)} of
        {{Q0, R0}, {Q1, R1}} ->
            #{growth => round((Q1 - Q0) * 1000 / Ms),
              reductions => round(max(0, R1 - R0 - Own) * 1000 / Ms)};
        _ -> #{}
    end;
rates(_, _) ->
    #{}.

hop_text(#{alive := false, label := L}) ->
    [L, " (exited)"];
hop_text(#{alive := true, label := L, message_queue_len := Q} = H) ->
    Bits = [["mq ", integer_to_binary(Q)]] ++
        case maps:get(queue_growth_per_s, H) of
            G when is_integer(G), G > 0 -> [["+", integer_to_binary(G), "/s"]];
            G when is_integer(G), G < 0 -> [[integer_to_binary(G), "/s"]];
            _ -> []
        end ++
        [["in ", maps:get(top_function, H),
          case maps:get(top_function_share, H) of
              S when is_integer(S), S < 100 -> [" ", integer_to_binary(S), "%"];
              _ -> []
          end,
          case maps:get(from, H) of undefined -> []; F -> [" from ", F] end]] ++
        case maps:get(status, H) of
            St when St =:= suspended; St =:= exiting; St =:= garbage_collecting ->
                [atom_to_binary(St, utf8)];
            _ -> []
        end ++
        case maps:get(calls_per_s, H) of
            undefined -> [];
            C -> [[case maps:get(calls_per_s_is_lower_bound, H) of true -> ">="; false -> "" end,
                   integer_to_binary(C), " calls/s"]]
        end ++
        case maps:get(reductions_per_s, H) of
            undefined -> [];
            R -> [[human(R), " red/s"]]
        end,
    [L, " (", lists:join(<<", ">>, Bits), ")"];
hop_text(#{label := L}) ->
    [L].

human(N) when N >= 10000000 -> [integer_to_binary(N div 1000000), "M"];
human(N) when N >= 10000 -> [integer_to_binary(N div 1000), "k"];
human(N) -> integer_to_binary(N).

%% A process as a person would name it: its registered name, or its pid and the
%% module it was started in; a process of another node with its node.
label(P, Fmt) when is_pid(P) ->
    case node(P) =:= node() of
        false -> iolist_to_binary([os_sup_render:pid(P, Fmt), " on ", atom_to_binary(node(P), utf8)]);
        true ->
            case info(P, [registered_name, initial_call]) of
                [{_, N}, _] when is_atom(N), N =/= [] -> os_sup_render:name(N, Fmt);
                [_, {_, Init}] ->
                    Started = case proc_lib_initial(P) of
                                  undefined -> Init;
                                  MFA -> MFA
                              end,
                    case Started of
                        {M, _, _} when is_atom(M), M =/= proc_lib, M =/= erlang ->
                            iolist_to_binary([os_sup_render:pid(P, Fmt), " (",
                                              os_sup_render:name(M, Fmt), ")"]);
                        _ -> os_sup_render:pid(P, Fmt)
                    end;
                _ -> os_sup_render:pid(P, Fmt)
            end
    end;
label({Name, Node}, Fmt) ->
    case Node =:= node() of
        true -> iolist_to_binary([os_sup_render:name(Name, Fmt), " (not registered)"]);
        false -> iolist_to_binary([os_sup_render:name(Name, Fmt), " on ",
                                   atom_to_binary(Node, utf8)])
    end;
label(Other, Fmt) ->
    os_sup_render:term(Other, Fmt, 128).

proc_lib_initial(P) ->
    case info(P, [dictionary]) of
        [{dictionary, D}] when is_list(D) ->
            case lists:keyfind('$initial_call', 1, D) of
                {_, {M, F, A} = MFA} when is_atom(M), is_atom(F), is_integer(A) -> MFA;
                _ -> undefined
            end;
        _ -> undefined
    end.

%%%===================================================================
%%% Private: small helpers
%%%===================================================================

info(Pid, Items) ->
    try erlang:process_info(Pid, Items) of
        L when is_list(L), L =/= [] -> L;
        _ -> undefined
    catch
        _:_ -> undefined
    end.

list(L) when is_list(L) -> L;
list(_) -> [].

past(#{deadline := D}) ->
    erlang:monotonic_time(millisecond) > D.

arg_int(Key, Args, Default, Lo, Hi) ->
    case maps:get(Key, Args, undefined) of
        undefined -> Default;
        V when is_integer(V) -> max(Lo, min(Hi, V));
        V when is_binary(V) ->
            case catch binary_to_integer(string:trim(V)) of
                I when is_integer(I) -> max(Lo, min(Hi, I));
                _ -> os_sup_introspect:fail(bad_args, "~ts must be an integer, got ~tp", [Key, V])
            end;
        V -> os_sup_introspect:fail(bad_args, "~ts must be an integer, got ~tP", [Key, V, 5])
    end.

arg_text(Key, Args) ->
    case maps:get(Key, Args, undefined) of
        undefined -> undefined;
        null -> undefined;
        nil -> undefined;
        <<>> -> undefined;
        V when is_binary(V) -> string:trim(V);
        V when is_pid(V) -> V;
        V when is_atom(V) -> atom_to_binary(V, utf8);
        V -> os_sup_introspect:fail(bad_args, "~ts must be text, got ~tP", [Key, V, 5])
    end.
