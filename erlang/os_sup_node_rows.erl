%%% @doc `os_sup_node_rows' keeps, on its own schedule, the recent history of every ETS
%%% table's rows, for `diagnose' to judge a table whose rows only grow however slowly
%%% (`os_sup_diagnose_rows'): a one-second window sees 4 rows a second as nothing. Its process,
%%% registered as `os_sup_node_rows' and started by the first vitals sample (`ensure/0'), reads
%%% `ets:info(T, size)' of at most ?TABLES tables every ?EVERY_MS (or `OS_SUP_ROWS_EVERY_MS')
%%% and keeps each table's last ?KEPT readings in its protected table `os_sup_node_rows'; the
%%% rows of a table gone are dropped. The helper's own tables are left out.
%%%
%%% == Bounds and safety ==
%%% One `ets:info/2' a table a tick (it wakes no process), at low priority; ?KEPT readings of
%%% ?TABLES tables at most (about 1 MB). It loops through `?MODULE:loop/1' (reload-safe) and
%%% hibernates between ticks.
-module(os_sup_node_rows).

%% API
-export([ensure/0, stop/0, history/0]).
%% Internal entry points: spawn target and reload-safe loop. Not an API.
-export([init/2, loop/1]).

-define(KEEPER, os_sup_node_rows).
-define(EVERY_MS, 10000).
-define(TABLES, 5000).
-define(KEPT, 12).

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

%% @doc `{EveryMs, [{Tid, [{Ms, Rows}]}]}': each table's readings, newest first (monotonic
%% ms); no table before the keeper has run.
-spec history() -> {pos_integer(), [{ets:tid() | atom(), [{integer(), non_neg_integer()}]}]}.
history() ->
    try ets:tab2list(?KEEPER) of
        Rows -> {every(), [{T, R} || {T, R, _Gen} <- Rows]}
    catch _:_ -> {every(), []}
    end.

%%%===================================================================
%%% Internal entry points
%%%===================================================================

%% @doc Keeper entry: registers as `os_sup_node_rows' (or exits) and loops.
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

%% @doc The keeper's loop: a reading of every table each tick.
-spec loop(non_neg_integer()) -> ok.
loop(Gen) ->
    receive
        {?MODULE, tick} ->
            erlang:send_after(every(), self(), {?MODULE, tick}),
            _ = try read(Gen + 1) catch _:_ -> ok end,
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

every() ->
    case os:getenv("OS_SUP_ROWS_EVERY_MS") of
        false -> ?EVERY_MS;
        Text -> try max(100, list_to_integer(Text)) catch _:_ -> ?EVERY_MS end
    end.

read(Gen) ->
    Now = erlang:monotonic_time(millisecond),
    _ = [case ets:lookup(?KEEPER, T) of
             [{_, Kept, _}] -> ets:insert(?KEEPER, {T, lists:sublist([{Now, Rows} | Kept], ?KEPT), Gen});
             [] -> ets:insert(?KEEPER, {T, [{Now, Rows}], Gen})
         end || T <- lists:sublist(ets:all(), ?TABLES), not own(T),
                Rows <- [ets:info(T, size)], is_integer(Rows)],
    %% The tables gone since.
    _ = ets:select_delete(?KEEPER, [{{'_', '_', '$1'}, [{'=/=', '$1', Gen}], [true]}]),
    ok.

own(T) ->
    case ets:info(T, name) of
        Name when is_atom(Name) -> lists:prefix("os_sup_", atom_to_list(Name));
        _ -> true
    end.
