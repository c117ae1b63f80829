%%% @doc `os_sup_node_history' keeps, on its own schedule, the recent history of what the
%%% node's owners hold, for `diagnose' to judge growth by owner over minutes, not only inside
%%% its one-second window (a table gaining 4 rows a second, a process whose heap steps up a
%%% minute apart). Its process, registered as `os_sup_node_history' and started by the first
%%% vitals sample (`ensure/0'), reads every ?EVERY_MS (or `OS_SUP_HISTORY_EVERY_MS'):
%%% <ul>
%%%   <li>each ETS table's rows (`ets:info(T, size)', at most ?TABLES tables);</li>
%%%   <li>the memory and queue of the processes it follows: the ?FOLLOWED largest, found by a
%%%       walk of the processes every ?WALK_EVERY readings (none past ?WALK_MAX processes:
%%%       it then follows those it has).</li>
%%% </ul>
%%% and keeps the last ?KEPT readings of each in its protected table `os_sup_node_history';
%%% what is gone is dropped. The helper's own tables and processes are left out.
%%%
%%% == Bounds and safety ==
%%% One `ets:info/2' a table and one `process_info/2' a followed process a reading, a walk of
%%% one `process_info(P, memory)' a process every ?WALK_EVERY readings, at low priority;
%%% ?KEPT readings of at most ?TABLES tables (about 0.6 KB a table: 3 MB at 5000) and
%%% 2 × ?FOLLOWED processes. A walk of 100 000 processes took 361 ms on a loaded 2-core machine:
%%% once a minute, about 0.6 % of a core. It loops
%%% through `?MODULE:loop/1' (reload-safe) and hibernates between readings.
-module(os_sup_node_history).

%% API
-export([ensure/0, stop/0, tables/0, processes/0]).
%% Internal entry points: spawn target and reload-safe loop. Not an API.
-export([init/2, loop/1]).

-define(KEEPER, os_sup_node_history).
-define(EVERY_MS, 10000).
-define(TABLES, 5000).
-define(KEPT, 12).
-define(FOLLOWED, 32).
-define(WALK_EVERY, 6).
-define(WALK_MAX, 200000).
-define(WALK_CHUNK, 1000).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Makes sure the keeper runs (one `whereis' when it does).
-spec ensure() -> ok.
ensure() ->
    case whereis(?KEEPER) of
        undefined -> _ = os_sup_lib_call:ensure_started(?KEEPER, ?MODULE, init), ok;
        _ -> ok
    end.

%% @doc Ends the keeper (the server detaches from a node it attached to).
-spec stop() -> ok.
stop() ->
    case whereis(?KEEPER) of
        undefined -> ok;
        Pid -> Pid ! {?MODULE, stop}, ok
    end.

%% @doc Each table's readings, `[{Tid, [{Ms, Rows}]}]', newest first (monotonic ms).
-spec tables() -> [{ets:tid() | atom(), [{integer(), non_neg_integer()}]}].
tables() ->
    [{T, R} || {{table, T}, R, _Gen} <- kept()].

%% @doc Each followed process's readings, `[{Pid, [{Ms, MemoryBytes, Queue}]}]', newest
%% first.
-spec processes() -> [{pid(), [{integer(), non_neg_integer(), non_neg_integer()}]}].
processes() ->
    [{P, R} || {{process, P}, R, _Gen} <- kept()].

%%%===================================================================
%%% Internal entry points
%%%===================================================================

%% @doc Keeper entry: registers as `os_sup_node_history' (or exits) and loops.
-spec init(pid(), reference()) -> ok.
init(Parent, Ref) ->
    case try register(?KEEPER, self()) catch _:_ -> false end of
        true ->
            _ = process_flag(priority, low),
            _ = process_flag(message_queue_data, off_heap),
            ?KEEPER = ets:new(?KEEPER, [set, protected, named_table]),
            Parent ! {Ref, started},
            self() ! {?MODULE, tick},
            ?MODULE:loop(0);
        _ ->
            Parent ! {Ref, exists},
            ok
    end.

%% @doc The keeper's loop: a reading each tick.
-spec loop(non_neg_integer()) -> ok.
loop(Gen) ->
    receive
        {?MODULE, tick} ->
            erlang:send_after(every(), self(), {?MODULE, tick}),
            Now = erlang:monotonic_time(millisecond),
            _ = try read_tables(Now, Gen + 1) catch _:_ -> ok end,
            _ = try read_processes(Now, Gen + 1) catch _:_ -> ok end,
            %% What is gone since.
            _ = ets:select_delete(?KEEPER, [{{'_', '_', '$1'}, [{'=/=', '$1', Gen + 1}], [true]}]),
            ?MODULE:loop(Gen + 1);
        {?MODULE, stop} ->
            ok;
        _ ->
            ?MODULE:loop(Gen)
    after 1000 ->
            erlang:hibernate(?MODULE, loop, [Gen])
    end.

%%%===================================================================
%%% Private
%%%===================================================================

kept() ->
    try ets:tab2list(?KEEPER) catch _:_ -> [] end.

every() ->
    case os:getenv("OS_SUP_HISTORY_EVERY_MS") of
        false -> ?EVERY_MS;
        Text -> try max(100, list_to_integer(Text)) catch _:_ -> ?EVERY_MS end
    end.

read_tables(Now, Gen) ->
    _ = [keep({table, T}, {Now, Rows}, Gen)
         || T <- lists:sublist(ets:all(), ?TABLES), not os_sup_helper_own:own_table(ets:info(T, name)),
            Rows <- [ets:info(T, size)], is_integer(Rows)],
    ok.

%% The followed processes: at a walk, the largest and those still growing of the ones followed
%% (at most twice ?FOLLOWED); else those followed.
read_processes(Now, Gen) ->
    Kept = [{P, R} || {{process, P}, R, _} <- kept()],
    Walk = Gen rem ?WALK_EVERY =:= 1 andalso erlang:system_info(process_count) =< ?WALK_MAX,
    Followed = case Walk of
                   true ->
                       Walked = largest(),
                       Growing = [P || {P, [{_, M1, _} | _] = R} <- Kept,
                                       M1 > element(2, lists:last(R)), not lists:member(P, Walked)],
                       lists:sublist(Walked ++ Growing, 2 * ?FOLLOWED);
                   false -> [P || {P, _} <- Kept]
               end,
    _ = [keep({process, P}, {Now, Mem, Queue}, Gen)
         || P <- Followed,
            [{memory, Mem}, {message_queue_len, Queue}] <-
                [os_sup_lib_proc:pinfo_items(P, [memory, message_queue_len])]],
    ok.

largest() ->
    Top = largest(erlang:processes(), []),
    lists:sublist([P || {_, P} <- Top, not os_sup_lib_label:helper_process(P)], ?FOLLOWED).

%% The 2 × ?FOLLOWED largest, the largest first, read ?WALK_CHUNK processes at a time: the
%% heap holds the process list and one chunk, never a reading of every process (a sort of
%% 100 000 readings made an 18 MB heap).
largest([], Top) ->
    Top;
largest(Pids, Top) ->
    {Sized, Rest} = sized(Pids, ?WALK_CHUNK, Top),
    largest(Rest, lists:sublist(lists:reverse(lists:sort(Sized)), 2 * ?FOLLOWED)).

sized(Rest, 0, Acc) -> {Acc, Rest};
sized([], _, Acc) -> {Acc, []};
sized([P | Rest], N, Acc) ->
    case erlang:process_info(P, memory) of
        {memory, M} -> sized(Rest, N - 1, [{M, P} | Acc]);
        undefined -> sized(Rest, N - 1, Acc)
    end.

keep(Key, Reading, Gen) ->
    case ets:lookup(?KEEPER, Key) of
        [{_, Kept, _}] -> ets:insert(?KEEPER, {Key, lists:sublist([Reading | Kept], ?KEPT), Gen});
        [] -> ets:insert(?KEEPER, {Key, [Reading], Gen})
    end.
