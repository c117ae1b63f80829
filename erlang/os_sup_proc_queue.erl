%%% @doc `os_sup_proc_queue' reads the events a `gen_statem' postponed: it holds them in its
%%% loop, not its mailbox, so `message_queue_len' does not count them. Used by `diagnose'
%%% (`os_sup_diagnose_queue') and `get_state'.
%%%
%%% == Bounds and safety ==
%%% One system status request (`sys:get_status/2', 300 ms), which copies the process's state,
%%% so only of a process of at most ?READ_BYTES, from a throw-away process under a heap limit
%%% and a 500 ms deadline, which sends back only counts and the shapes of the first ?SHAPES_READ.
-module(os_sup_proc_queue).

%% API
-export([postponed/2]).
%% run in a throw-away process
-export([reader/2]).

-define(READ_BYTES, 16 * 1024 * 1024).
-define(READ_MS, 500).
-define(STATUS_MS, 300).
-define(SHAPES_READ, 1000).
-define(READ_HEAP, [{max_heap_size, #{size => 4000000, kill => true, error_logger => false}}]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The events the gen_statem `Pid' postponed: `#{count, state, shapes, shapes_of}' (its
%% state name, the three commonest shapes of the first `shapes_of' events, as a mailbox's are
%% written), `{too_large, Bytes}' for a process whose state would be copied, or `none'.
-spec postponed(pid(), os_sup_lib_render:fmt()) -> map() | {too_large, non_neg_integer()} | none.
postponed(Pid, Fmt) ->
    case os_sup_lib_proc:pinfo_items(Pid, [memory]) of
        [{_, Mem}] when Mem > ?READ_BYTES -> {too_large, Mem};
        [{_, _}] -> read(Pid, Fmt);
        _ -> none
    end.

%% @private `Pid''s postponed events, read in a throw-away process (`postponed/2').
-spec reader(pid(), os_sup_lib_render:fmt()) -> map() | none.
reader(Pid, Fmt) ->
    try sys:get_status(Pid, ?STATUS_MS) of
        {status, _, _, [_Dict, _Sys, _Parent, _Debug, Misc]} when is_list(Misc) ->
            Data = lists:append([L || {data, L} <- Misc, is_list(L)]),
            case proplists:get_value("Postponed", Data) of
                Events when is_list(Events) ->
                    Shapes = os_sup_lib_rank:count(
                               [os_sup_proc_mailbox:shape(as_message(E))
                                || E <- lists:sublist(Events, ?SHAPES_READ)]),
                    Count = length(Events),
                    #{count => Count,
                      state => state_name(proplists:get_value("State", Data)),
                      shapes => [{os_sup_proc_mailbox:shape_text(S, Fmt), N}
                                 || {S, N} <- os_sup_lib_rank:top(3, 2, maps:to_list(Shapes))],
                      shapes_of => min(Count, ?SHAPES_READ)};
                _ -> none
            end;
        _ -> none
    catch _:_ -> none
    end.

%%%===================================================================
%%% Private
%%%===================================================================

read(P, Fmt) ->
    case os_sup_lib_call:call_with_deadline({?MODULE, reader, [P, Fmt]}, ?READ_MS, ?READ_HEAP) of
        {ok, Reply} -> Reply;
        _ -> none
    end.

%% A postponed event as the message it came in, so its shape reads as a mailbox's does.
as_message({cast, C}) -> {'$gen_cast', C};
as_message({{call, From}, C}) -> {'$gen_call', From, C};
as_message({info, C}) -> C;
as_message(E) -> E.

state_name({Name, _Data}) -> Name;
state_name(_) -> undefined.
