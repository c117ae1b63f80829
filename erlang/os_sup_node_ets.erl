%%% @doc `os_sup_node_ets' looks at the node's ETS tables for tool `ets':
%%% the tables by memory, or one table's info and its first rows (a
%%% private table's rows only its owner can read). A table is named as
%%% the tool lists it (`demo_cache', `:demo_cache', or its id); tables
%%% that vanish during a scan are skipped.
-module(os_sup_node_ets).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text/2, fmt_arg/1]).
-import(os_sup_lib_proc, [reg_name/1, name_atoms/1]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2, render_opt_name/2, bytes/1]).

%% API
-export([ets/1]).

-define(TERM_BYTES, 1024).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc ETS tables by memory, or one table's info and rows.
-spec ets(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
ets(Args) ->
    Fmt = fmt_arg(Args),
    case arg_text(table, Args) of
        undefined -> ets_list(Fmt, arg_int(limit, Args, 20, ?ETS_LIMIT_MIN, ?ETS_LIMIT_MAX));
        Text -> ets_table(find_table(Text, Fmt), Fmt, arg_int(limit, Args, 10, 1, 100))
    end.

%%%===================================================================
%%% Private
%%%===================================================================

ets_list(Fmt, Limit) ->
    Word = erlang:system_info(wordsize),
    Infos = [I || T <- ets:all(), I <- [table_summary(T, Word)], I =/= undefined],
    Sorted = os_sup_lib_rank:top(Limit, 1, Infos),
    Rows = [render_table(I, Fmt) || {_, I} <- Sorted],
    Lines = [join([N, Id, fmt("size=~b", [S]), fmt("mem=~ts", [bytes(M)]), to_text(Ty),
                   to_text(P), <<"owner=", O/binary>>] ++
                      case ON of undefined -> []; _ -> [<<"(", ON/binary, ")">>] end,
                  <<" ">>)
             || #{name := N, id := Id, size := S, memory := M, type := Ty, protection := P,
                  owner := O, owner_name := ON} <- Rows],
    ok_reply(Lines, #{tables => Rows, total => length(Infos)}).

table_summary(T, Word) ->
    try ets:info(T) of
        Info when is_list(Info) ->
            Mem = proplists:get_value(memory, Info, 0) * Word,
            {Mem, (maps:from_list(Info))#{memory => Mem, table => T}};
        _ -> undefined
    catch _:_ -> undefined
    end.

render_table(#{} = I, Fmt) ->
    Owner = maps:get(owner, I, undefined),
    #{name => render_opt_name(maps:get(name, I, undefined), Fmt),
      id => os_sup_lib_render:term(maps:get(id, I, maps:get(table, I)), Fmt, 128),
      owner => os_sup_lib_render:pid(Owner, Fmt),
      owner_name => case is_pid(Owner) of
                        true -> render_opt_name(reg_name(Owner), Fmt);
                        false -> undefined
                    end,
      size => maps:get(size, I, 0), memory => maps:get(memory, I, 0),
      type => maps:get(type, I, undefined), protection => maps:get(protection, I, undefined),
      named_table => maps:get(named_table, I, false)}.

%% Match a name (`demo_cache', `:demo_cache') or an id as rendered by this tool. An unnamed table
%% (`ets:new/2' without `named_table', as a Registry's partitions are) answers to the name the
%% tools print for it, bare or with its ` (unnamed, #Reference<...>)' suffix: one such table is
%% opened, several are listed by id for the caller to choose.
find_table(Text, Fmt) ->
    Names = name_atoms(unnamed_bare(Text)),
    Stripped = strip_ref(Text),
    Tables = [{T, Name, Id} || T <- ets:all(),
                               Name <- [try ets:info(T, name) catch _:_ -> undefined end],
                               Id <- [try ets:info(T, id) catch _:_ -> undefined end]],
    ById = [T || {T, _, Id} <- Tables, Id =/= undefined,
                 strip_ref(os_sup_lib_render:term(Id, Fmt, 128)) =:= Stripped
                     orelse strip_ref(os_sup_lib_render:term(Id, erlang, 128)) =:= Stripped
                     orelse (is_integer(Id) andalso integer_to_binary(Id) =:= Text)],
    ByName = [{T, ets:info(T, named_table) =:= true}
              || {T, Name, _} <- Tables, is_atom(Name), lists:member(Name, Names)],
    case {ById, [T || {T, true} <- ByName], [T || {T, false} <- ByName]} of
        {[T | _], _, _} -> T;
        {[], [T | _], _} -> T;
        {[], [], [T]} -> T;
        {[], [], [_ | _] = Unnamed} ->
            fail(bad_args, "~b unnamed tables are called ~ts; give one of their ids: ~ts",
                 [length(Unnamed), unnamed_bare(Text),
                  join([os_sup_lib_render:term(T, Fmt, 128) || T <- lists:sublist(Unnamed, 10)],
                       <<", ">>)]);
        _ -> fail(not_found, "no ETS table named or with id ~ts (the ets tool without "
                  "table lists them)", [Text])
    end.

%% The name in `X.KeyPartition1 (unnamed, #Reference<...>)', as `table_name/2' prints it.
unnamed_bare(Text) ->
    hd(binary:split(Text, <<" (unnamed">>)).

strip_ref(B) ->
    case re:run(B, <<"([0-9]+(\\.[0-9]+)+)">>, [{capture, [1], binary}]) of
        {match, [Inner]} -> Inner;
        _ -> B
    end.

ets_table(T, Fmt, Limit) ->
    Word = erlang:system_info(wordsize),
    Info = try ets:info(T) of
               I when is_list(I) -> I;
               _ -> fail(not_found, "the table vanished", [])
           catch _:_ -> fail(not_found, "the table vanished", [])
           end,
    Owner = proplists:get_value(owner, Info),
    Prot = proplists:get_value(protection, Info),
    InfoMap = maps:from_list([{K, info_value(K, V, Fmt, Word)} || {K, V} <- Info, is_atom(K)]),
    {Rows, Note} =
        case Prot =:= private andalso Owner =/= self() of
            true -> {[], <<"private table: only its owner can read rows">>};
            false ->
                try ets:match_object(T, '_', Limit) of
                    {Objs, _} -> {[os_sup_lib_render:term(O, Fmt, ?TERM_BYTES) || O <- Objs],
                                  undefined};
                    '$end_of_table' -> {[], undefined}
                catch
                    _:_ -> {[], <<"rows could not be read (the table vanished?)">>}
                end
        end,
    Size = proplists:get_value(size, Info, 0),
    Note2 = case {Note, Size > length(Rows), Rows} of
                {undefined, true, [_ | _]} -> fmt("first ~b of ~b rows", [length(Rows), Size]);
                _ -> Note
            end,
    Lines = [fmt("~ts: ~ts", [K, to_text(V)]) || {K, V} <- lists:sort(maps:to_list(InfoMap))] ++
        [<<"rows:", (case Note2 of undefined -> <<>>; _ -> <<" ", Note2/binary>> end)/binary>>
         | [<<"  ", R/binary>> || R <- Rows]],
    ok_reply(Lines, #{info => InfoMap, rows => Rows, rows_note => Note2}).

info_value(memory, V, _Fmt, Word) when is_integer(V) -> V * Word;
info_value(owner, V, Fmt, _) -> os_sup_lib_render:pid(V, Fmt);
info_value(heir, none, _, _) -> none;
info_value(heir, V, Fmt, _) -> os_sup_lib_render:pid(V, Fmt);
info_value(name, V, Fmt, _) -> os_sup_lib_render:name(V, Fmt);
info_value(_, V, _, _) when is_integer(V); is_boolean(V) -> V;
info_value(_, V, _, _) when is_atom(V) -> V;
info_value(_, V, Fmt, _) -> os_sup_lib_render:term(V, Fmt, 256).
