%%% @doc `os_sup_helper_own' counts what the helper's own work makes on the
%%% node (atoms, ETS tables, the memory of its process walks), so that
%%% `diagnose' leaves it out of the node's figures. The atoms are those its
%%% evals and code tools make, the tables those of its trace sessions and
%%% caches, the memory what the workers of a walk keep of every process: the
%%% server's work is never a finding about the application.
-module(os_sup_helper_own).

%% API
-export([init/0, counting_own_atoms/1, own_atoms/0, own_tables/0, own_table/1, walking/0,
         own_memory/0]).

-define(OWN_ATOMS, {?MODULE, own_atoms}).
%% the walk workers alive (or killed since), by pid
-define(WALKERS, os_sup_helper_walkers).
%% the tables are looked for on a node with at most this many (past it, a dozen is noise)
-define(OWN_TABLES_SCAN, 20000).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Made by the helper's server process, which owns them for the node's life.
-spec init() -> ok.
init() ->
    _ = own_counter(),
    _ = try ets:new(?WALKERS, [named_table, public, set, {write_concurrency, true}])
        catch _:_ -> ok
        end,
    ok.

%% @doc The calling process walks the node's processes for the helper (`os_sup_proc_scan'):
%% its memory, which holds what it read of them, is the helper's until it exits.
-spec walking() -> ok.
walking() ->
    _ = try ets:insert(?WALKERS, {self()}) catch _:_ -> false end,
    ok.

%% @doc The memory of the helper's walk workers alive now, in bytes (those gone are
%% forgotten).
-spec own_memory() -> non_neg_integer().
own_memory() ->
    try ets:tab2list(?WALKERS) of
        Walkers ->
            lists:sum([case erlang:process_info(P, memory) of
                           {memory, M} -> M;
                           undefined -> ets:delete(?WALKERS, P), 0
                       end || {P} <- Walkers])
    catch
        _:_ -> 0
    end.

%% @doc Runs `Fun' and counts the atoms made meanwhile as the helper's own (an eval's
%% variables and names, a module's debug info read by `source'): `diagnose' leaves them out
%% of the node's atom count. Atoms the application makes during the call count as ours too:
%% a short call's error is small.
-spec counting_own_atoms(fun(() -> T)) -> T.
counting_own_atoms(Fun) ->
    Before = erlang:system_info(atom_count),
    try
        Fun()
    after
        case erlang:system_info(atom_count) - Before of
            0 -> ok;
            Made -> counters:add(own_counter(), 1, Made)
        end
    end.

%% @doc The atoms the helper's own work made since it started (see {@link counting_own_atoms/1}).
-spec own_atoms() -> non_neg_integer().
own_atoms() ->
    counters:get(own_counter(), 1).

own_counter() ->
    case persistent_term:get(?OWN_ATOMS, undefined) of
        undefined ->
            %% Made once per VM (a `persistent_term:put' is a global GC): the helper's start
            %% makes it before any request can race here.
            C = counters:new(1, [write_concurrency]),
            persistent_term:put(?OWN_ATOMS, C),
            C;
        C -> C
    end.

%% @doc The ETS tables of the helper's own (trace sessions' events, caches), by name, and
%% their bytes; not looked for on a node with more than ?OWN_TABLES_SCAN tables.
-spec own_tables() -> {non_neg_integer(), non_neg_integer()}.
own_tables() ->
    try erlang:system_info(ets_count) =< ?OWN_TABLES_SCAN of
        true ->
            Own = [M || T <- ets:all(), own_table(ets:info(T, name)),
                        M <- [ets:info(T, memory)], is_integer(M)],
            {length(Own), lists:sum(Own) * erlang:system_info(wordsize)};
        false -> {0, 0}
    catch
        _:_ -> {0, 0}
    end.

%% @doc Whether a table of this name is the helper's own.
-spec own_table(term()) -> boolean().
own_table(Name) when is_atom(Name) -> lists:prefix("os_sup_", atom_to_list(Name));
own_table(_) -> false.
