%%% @doc `os_sup_proc_listing' lists the node's processes for a walk
%%% (`os_sup_proc_scan') into an ETS table, in chunks of ?CHUNK pids in the
%%% order `erlang:processes()' gives them, so that no process that lives on
%%% holds a list of every pid: on a node of a million processes, a garbage
%%% collection of a heap holding one holds its scheduler, and the
%%% application's processes queued on it, for 8 to 26 ms (measured, OTP 25).
%%% The list is made by a process that lives only to cut it into chunks,
%%% with a heap sized to hold it and its chunks: it is never collected.
%%%
%%% A second listing (`relist/2') is cut where each chunk of the first
%%% began (at its first pid still alive; the order of the processes that
%%% live on does not change), so that each of its chunks holds the
%%% processes of whole chunks of the first and those born among them, and
%%% says which (`spans').
%%%
%%% Workers take the chunks in turn (`claim/1'). The tables are the
%%% caller's, public (the workers read them), named `os_sup_*' (the helper's
%%% own, which `diagnose' leaves out).
-module(os_sup_proc_listing).

%% API
-export([list/0, relist/1, claim/1, rewind/1, delete/1, mark/0, born_since/1]).

-define(CHUNK, 1000).
%% the first pids of each chunk kept to find where it begins in a second listing
-define(BOUND, 16).
%% the lister's heap, in words a process of the node: the list (2), the chunks cut from it (2)
%% and a margin for the processes born before it reads them
-define(WORDS_A_PROCESS, 5).
-define(MIN_WORDS, 100000).

-type listing() :: #{tab := ets:tid(), chunks := non_neg_integer(), count := non_neg_integer()}.
-export_type([listing/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The node's processes, listed in chunks: `{I, Pids, Spans}' for I in 1..chunks, Spans
%% `[I]'; `{error, Reason}' when the lister could not finish (its heap limit).
-spec list() -> listing() | {error, term()}.
list() ->
    Tab = ets:new(os_sup_proc_listing, [public, set, {read_concurrency, true}]),
    lister(Tab, fun() -> first(Tab, erlang:processes()) end).

%% @doc The node's processes listed again, each chunk cut to begin where a chunk of `First'
%% began: `{J, Pids, Spans}', Spans the chunks of `First' whose processes (those alive) it holds,
%% in order, with those born among them.
-spec relist(listing()) -> listing() | {error, term()}.
relist(#{tab := First, chunks := N}) ->
    Tab = ets:new(os_sup_proc_listing, [public, set, {read_concurrency, true}]),
    lister(Tab, fun() ->
                        Starts = [{I, first_alive(ets:lookup_element(First, {bounds, I}, 2))}
                                  || I <- lists:seq(1, N)],
                        again(Tab, erlang:processes(), [S || {_, P} = S <- Starts, is_pid(P)],
                              [I || {I, _} <- Starts])
                end).

%% @doc The next chunk no worker took yet: `{I, Pids, Spans}', or `done'.
-spec claim(listing()) -> {pos_integer(), [pid()], [pos_integer()]} | done.
claim(#{tab := Tab, chunks := N}) ->
    case ets:update_counter(Tab, next, 1) of
        I when I > N -> done;
        I -> [Chunk] = ets:lookup(Tab, I), Chunk
    end.

%% @doc The same listing, every chunk to be taken again.
-spec rewind(listing()) -> listing().
rewind(#{tab := Tab} = Listing) ->
    true = ets:insert(Tab, {next, 0}),
    Listing.

%% @doc A process spawned (and gone) now, for {@link born_since/1}.
-spec mark() -> pid().
mark() ->
    spawn(fun() -> ok end).

%% @doc Whether a process was spawned on the node since `Mark' was: a node numbers its
%% processes in the order they are spawned (`<0.N.S>' is the S * 32768 + N-th, OTP 25), so the
%% next one's number is the mark's + 1 when none was. A number that wrapped around says yes.
-spec born_since(pid()) -> boolean().
born_since(Mark) ->
    number(mark()) - number(Mark) =/= 1.

number(Pid) ->
    ["<0", N, S] = string:lexemes(pid_to_list(Pid), ".>"),
    list_to_integer(S) bsl 15 + list_to_integer(N).

-spec delete(listing()) -> ok.
delete(#{tab := Tab}) ->
    _ = try ets:delete(Tab) catch _:_ -> false end,
    ok.

%%%===================================================================
%%% The lister
%%%===================================================================

%% `Fun' (which fills `Tab') in a process of its own, at low priority, with a heap that holds
%% the list: `{Chunks, Count}' is its exit reason.
lister(Tab, Fun) ->
    Words = ?MIN_WORDS + ?WORDS_A_PROCESS * erlang:system_info(process_count),
    {Pid, Ref} = spawn_opt(fun() -> exit({listed, Fun()}) end,
                           [monitor, {priority, low}, {min_heap_size, Words},
                            {max_heap_size, #{size => 4 * Words, kill => true,
                                              error_logger => false}}]),
    receive
        {'DOWN', Ref, process, Pid, {listed, {Chunks, Count}}} ->
            true = ets:insert(Tab, {next, 0}),
            #{tab => Tab, chunks => Chunks, count => Count};
        {'DOWN', Ref, process, Pid, Reason} ->
            _ = ets:delete(Tab),
            {error, Reason}
    end.

first(Tab, Pids) ->
    first(Tab, Pids, 1, 0).

first(_Tab, [], I, Count) -> {I - 1, Count};
first(Tab, Pids, I, Count) ->
    {Chunk, N, Rest} = take(Pids, ?CHUNK, [], 0),
    true = ets:insert(Tab, [{I, Chunk, [I]}, {{bounds, I}, lists:sublist(Chunk, ?BOUND)}]),
    first(Tab, Rest, I + 1, Count + N).

%% The first `Max' of `Pids' in order, how many, and the rest.
take(Rest, 0, Acc, N) -> {lists:reverse(Acc), N, Rest};
take([], _Max, Acc, N) -> {lists:reverse(Acc), N, []};
take([P | Rest], Max, Acc, N) -> take(Rest, Max - 1, [P | Acc], N + 1).

%% `Pids' cut before each start `{I, Pid}': a chunk spans the chunks of the first listing from
%% its start's to the next start's (those with no living start join the chunk before theirs;
%% the processes before the first start join the first chunk). A chunk born much larger than
%% ?CHUNK stays whole: its first-listing processes are diffed in order.
again(Tab, Pids, [], All) ->
    true = ets:insert(Tab, {1, Pids, All}),
    {1, length(Pids)};
again(Tab, Pids, [{_, P1} | _] = Starts, All) ->
    {Before, From} = lists:splitwith(fun(P) -> P =/= P1 end, Pids),
    cut(Tab, From, Starts, All, Before, 1, 0).

cut(Tab, Pids, [_ | Starts], All, Prefix, J, Count) ->
    {{Spans, AllRest}, {Chunk, Rest}} =
        case Starts of
            [] -> {{All, []}, {Pids, []}};
            [{Next, PNext} | _] -> {lists:splitwith(fun(K) -> K < Next end, All),
                                    lists:splitwith(fun(P) -> P =/= PNext end, Pids)}
        end,
    Whole = Prefix ++ Chunk,
    true = ets:insert(Tab, {J, Whole, Spans}),
    Count1 = Count + length(Whole),
    case Starts of
        [] -> {J, Count1};
        _ -> cut(Tab, Rest, Starts, AllRest, [], J + 1, Count1)
    end;
cut(_Tab, _Pids, [], _All, _Prefix, J, Count) ->
    {J - 1, Count}.

first_alive([]) -> undefined;
first_alive([P | Rest]) ->
    case is_process_alive(P) of
        true -> P;
        false -> first_alive(Rest)
    end.
