%%% @doc `os_sup_diagnose_budget' owns the time a `diagnose' answer may still
%%% spend once its window has ended: the traces and reads that explain a
%%% finding (who writes a table, who sends to a mailbox, what a busy process
%%% runs) each take what they want or what is left, and a step with too little
%%% left is skipped, which its text says. On a large node the walks take most
%%% of the time, and the answer still comes in time.
%%%
%%% The deadline is kept in the dictionary of the process that runs the
%%% `diagnose' request (one request, one process); outside one, every step
%%% takes what it wants.
-module(os_sup_diagnose_budget).

-export([until/1, ms/1]).

-define(KEY, '$os_sup_diagnose_deadline').
%% a step given less than this is skipped
-define(LEAST_MS, 50).

%% @doc Sets the deadline (monotonic ms) of the rest of this process's `diagnose'.
-spec until(integer()) -> ok.
until(Deadline) ->
    _ = put(?KEY, Deadline),
    ok.

%% @doc The time a step that wants `Wanted' ms may take: `{ok, Ms}', or `skip' when less
%% than ?LEAST_MS is left.
-spec ms(non_neg_integer()) -> {ok, non_neg_integer()} | skip.
ms(Wanted) ->
    Left = case get(?KEY) of
               undefined -> Wanted;
               Deadline -> min(Wanted, Deadline - erlang:monotonic_time(millisecond))
           end,
    case Left >= min(Wanted, ?LEAST_MS) of
        true -> {ok, Left};
        false -> skip
    end.
