%%% @doc `os_sup_lib_rank' counts and ranks, the way every report of the
%%% helper picks what to show: how often each element occurs, and the N
%%% largest.
-module(os_sup_lib_rank).

%% API
-export([count/1, top/3]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc How many times each element of `L' occurs in it.
-spec count(list()) -> #{term() => pos_integer()}.
count(L) ->
    lists:foldl(fun(X, Acc) -> maps:update_with(X, fun(C) -> C + 1 end, 1, Acc) end, #{}, L).

%% @doc The `N' tuples of `Tuples' with the largest element `Pos', largest first (of equal
%% ones, the later first).
-spec top(non_neg_integer(), pos_integer(), [tuple()]) -> [tuple()].
top(N, Pos, Tuples) ->
    lists:sublist(lists:reverse(lists:keysort(Pos, Tuples)), N).
