%%% @doc `os_sup_diagnose_rows' is the rows part of `diagnose' (`os_sup_diagnose'): a table
%%% whose rows only grow, however slowly and whatever its bytes, from the history its keeper
%%% holds (`os_sup_node_history', a reading every 10 s). A table whose rows never fell over its
%%% last ?MIN_READINGS readings or more, rose in ?RISING_SHARE of the steps and gained
%%% ?MIN_GAIN rows and ?MIN_SHARE of its rows is a `rows' finding (at most two; one the
%%% window's `ets' finding already tells is left to it): its rate, for a bag or duplicate
%%% bag (a Registry's partitions are such) the key that holds the most rows and the process
%%% those rows name, who writes them and its owner. The code server's and `timer_server''s
%%% tables are left to the meters they make (code, timers).
%%%
%%% == Bounds and safety ==
%%% Reads the keeper's table; per candidate, a walk of at most ?KEYS keys or ?WALK_MS, each
%%% counted by a match on its key (a lookup, no copy), one select of at most ?HOLDERS pids of the
%%% largest key, and the writers' trace (`os_sup_diagnose_holders:table_writers/2', within the
%%% report's budget).
-module(os_sup_diagnose_rows).

-import(os_sup_lib_text, [fmt/2, bytes/1]).

%% API
-export([rows/2]).

-define(MIN_READINGS, 6).
-define(RISING_SHARE, 0.8).
-define(MIN_GAIN, 50).
-define(MIN_SHARE, 0.05).
-define(SHOWN, 2).
-define(KEYS, 5000).
-define(WALK_MS, 20).
-define(HOLDERS, 10000).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The `rows' findings; `Told', the tables the window's `ets' findings are about.
-spec rows([term()], map()) -> [os_sup_diagnose:finding()].
rows(Told, Ctx) ->
    History = os_sup_node_history:tables(),
    Growing = [{{Gain, Ms0, Ms1}, {Gain / max(1, (Ms1 - Ms0) / 1000), T, Ms1 - Ms0, Rows1}}
               || {T, Kept} <- History, length(Kept) >= ?MIN_READINGS,
                  not lists:member(T, Told),
                  {Gain, Ms0, Ms1, Rows1} <- [only_grows(lists:reverse(Kept))],
                  not told_by_a_meter(T)],
    %% Tables that gained the same rows between the same readings grow together (one write
    %% puts a row in each: a Registry keeps a table of keys and one of pids): one finding.
    Together = maps:groups_from_list(fun({Key, _}) -> Key end, fun({_, G}) -> G end, Growing),
    Found = [pick(Group) || Group <- maps:values(Together)],
    Ranked = lists:reverse(lists:sort([{Rate, F} || {{Rate, _, _, _}, _, _} = F <- Found])),
    [finding(F, Ctx) || {_, F} <- lists:sublist(Ranked, ?SHOWN)].

%%%===================================================================
%%% Private
%%%===================================================================

%% The code server's tables grow as modules load (the code meter's), `timer_server''s with the
%% timers it keeps (the timers meter's, told with who starts them).
told_by_a_meter(T) ->
    lists:member(ets:info(T, owner), [whereis(code_server), whereis(timer_server)]).

%% `{Gain, FirstMs, LastMs, LastRows}' of readings (oldest first) that never fell, rose in
%% most steps and gained enough; none otherwise.
only_grows([{Ms0, Rows0} | _] = Kept) ->
    Steps = lists:zip(lists:droplast(Kept), tl(Kept)),
    Rises = length([x || {{_, A}, {_, B}} <- Steps, B > A]),
    Fell = lists:any(fun({{_, A}, {_, B}}) -> B < A end, Steps),
    {Ms1, Rows1} = lists:last(Kept),
    Gain = Rows1 - Rows0,
    case not Fell andalso Rises >= ?RISING_SHARE * length(Steps) andalso Gain >= ?MIN_GAIN
        andalso Gain >= ?MIN_SHARE * Rows0 of
        true -> {Gain, Ms0, Ms1, Rows1};
        false -> none
    end.

%% Of tables that grow together, the one whose largest key holds the most rows (with its
%% rows per key), and the others.
pick(Group) ->
    Counted = [{top_count(C), G, C} || {_, T, _, _} = G <- Group, C <- [counts(T)]],
    [{_, Main, Counts} | _] = lists:reverse(lists:keysort(1, Counted)),
    {Main, Counts, [G || G <- Group, G =/= Main]}.

top_count({Counts, _}) -> lists:max([0 | [N || {_, N} <- Counts]]).

finding({{Rate, T, Over, Rows}, Counts, Others}, #{fmt := Fmt} = Ctx) ->
    Type = ets:info(T, type),
    Bytes = ets:info(T, memory) * erlang:system_info(wordsize),
    Owner = ets:info(T, owner),
    Keys = keys_text(T, Counts, Fmt),
    {WrittenBy, Next} = os_sup_diagnose_ets:written_by(T, Fmt),
    Head = fmt("rows: ~ts ~ts +~.1f rows/s for ~ts and never fewer, ~b rows, ~ts",
               [os_sup_diagnose_holders:table_name(T, Fmt), Type, Rate, os_sup_lib_time:secs(Over), Rows,
                bytes(Bytes)]),
    Detail = [Keys,
              [fmt("; with it ~ts +~.1f rows/s", [os_sup_diagnose_holders:table_name(O, Fmt), R])
               || {R, O, _, _} <- Others],
              WrittenBy,
              case is_pid(Owner) of
                  true -> ["; owner ", os_sup_lib_label:label(Owner, Fmt)];
                  false -> []
              end],
    Frame = case is_pid(Owner) of true -> os_sup_proc_groups:app_frame(Owner); false -> undefined end,
    Found = os_sup_diagnose:finding(rows, {Head, Detail}, Next, Owner, Frame, Ctx),
    Found#{facts := #{rows => Rows, rows_per_s => Rate, over_ms => Over, bytes => Bytes}}.

%% The key of a bag that holds the most rows, against the others, and the process its rows
%% name when they are a Registry's (`{Key, {Pid, Value}}').
keys_text(T, Counted, Fmt) ->
    case Counted of
        {[], _} -> [];
        {Counts, Whole} ->
            [{Top, N} | Rest] = lists:reverse(lists:keysort(2, Counts)),
            Others = case Rest of
                         [] -> <<>>;
                         _ -> fmt(" (the other ~b keys ≤ ~b each)",
                                  [length(Rest), lists:max([C || {_, C} <- Rest])])
                     end,
            [fmt("; key ~ts ~b rows~ts", [os_sup_lib_render:term(Top, Fmt, 80), N, Others]),
             [fmt(" (~b keys read)", [length(Counts)]) || not Whole],
             named_by(T, Top, Fmt)]
    end.

%% `{[{Key, Rows}], WholeTable}': rows per key of a bag or duplicate bag, for at most ?KEYS
%% keys or ?WALK_MS (a set holds one row a key).
counts(T) ->
    KeyPos = ets:info(T, keypos),
    Bag = lists:member(ets:info(T, type), [bag, duplicate_bag]),
    case Bag andalso ets:select(T, [{'$1', [], [{size, '$1'}]}], 1) of
        {[Arity], _} when Arity >= KeyPos ->
            Deadline = erlang:monotonic_time(millisecond) + ?WALK_MS,
            walk(T, ets:first(T), KeyPos, Arity, Deadline, ?KEYS, []);
        _ -> {[], true}
    end.

walk(_T, '$end_of_table', _KeyPos, _Arity, _Deadline, _Left, Acc) ->
    {Acc, true};
walk(_T, _K, _KeyPos, _Arity, _Deadline, 0, Acc) ->
    {Acc, false};
walk(T, K, KeyPos, Arity, Deadline, Left, Acc) ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> {Acc, false};
        false ->
            Acc1 = case plain(K) of
                       true ->
                           Head = setelement(KeyPos, erlang:make_tuple(Arity, '_'), K),
                           [{K, ets:select_count(T, [{Head, [], [true]}])} | Acc];
                       false -> Acc
                   end,
            case try ets:next(T, K) catch _:_ -> '$end_of_table' end of
                Next -> walk(T, Next, KeyPos, Arity, Deadline, Left - 1, Acc1)
            end
    end.

%% A key a match head takes as itself: no atom in it that a match spec reads as a variable.
plain(A) when is_atom(A) -> A =/= '_' andalso hd(atom_to_list(A) ++ " ") =/= $$;
plain(T) when is_tuple(T) -> lists:all(fun plain/1, tuple_to_list(T));
plain([H | R]) -> plain(H) andalso plain(R);
plain(M) when is_map(M) -> map_size(M) =:= 0;
plain(_) -> true.

%% A Registry's rows are `{Key, {Pid, Value}}': the process that holds most of the key's.
named_by(T, Key, Fmt) ->
    case plain(Key) andalso ets:info(T, keypos) =:= 1 andalso
        ets:select(T, [{{Key, {'$1', '_'}}, [{is_pid, '$1'}], ['$1']}], ?HOLDERS) of
        {[_ | _] = Pids, _} ->
            Counts = os_sup_lib_rank:count(Pids),
            [{P, N}] = os_sup_lib_rank:top(1, 2, maps:to_list(Counts)),
            case map_size(Counts) of
                1 -> fmt(", all naming ~ts", [os_sup_lib_label:label(P, Fmt)]);
                Many -> fmt(", naming ~b processes, ~ts the most (~b)",
                            [Many, os_sup_lib_label:label(P, Fmt), N])
            end;
        _ -> []
    end.
