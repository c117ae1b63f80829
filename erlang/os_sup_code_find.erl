%%% @doc `os_sup_code_find' finds modules and functions by name across the
%%% node's code, for tool `find'. It searches the project's own modules (loaded
%%% or not), every loaded module, and the names of the modules only in the code
%%% path. Nothing is loaded: exports of modules that are not loaded are read
%%% from their `.beam' files (project modules only), docs from the docs chunk.
%%%
%%% == Tools ==
%%% <ul>
%%%   <li>{@link find/1}: a case-insensitive substring
%%%       (`Ledger', `Ledger.post', `chunk_while') or a regex written
%%%       `/.../' (matched against `Module.fun/arity'); the project's own
%%%       modules first, then exact names, prefixes, the rest; each hit
%%%       with its arity and the first line of its doc.</li>
%%% </ul>
%%%
%%% == Limits ==
%%% At most `limit' hits (default 30, max 200); the scan stops after 2 s
%%% and says so; docs are read only for the hits shown.
-module(os_sup_code_find).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text/2, fmt_arg/1]).
-import(os_sup_lib_call, [safe/2]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [fmt/2, cut_bin/2]).

%% API
-export([find/1]).

-define(BUDGET_MS, 2000).
-define(DEFAULT_LIMIT, ?FIND_LIMIT_DEFAULT).
-define(MAX_LIMIT, ?FIND_LIMIT_MAX).
-define(DOC_LINE_BYTES, 160).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `find': modules and functions whose name matches `query' (a substring, or a
%% regex written `/.../'), at most `limit'.
-spec find(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
find(Args) ->
    Fmt = fmt_arg(Args),
    Limit = arg_int(limit, Args, ?DEFAULT_LIMIT, ?FIND_LIMIT_MIN, ?MAX_LIMIT),
    Query = case arg_text(query, Args) of
                Q when is_binary(Q) -> Q;
                _ -> fail(bad_args, "query is required: a name or part of one (Ledger, "
                          "Ledger.post, chunk_while) or a regex /^Shop\\./", [])
            end,
    Match = matcher(Query),
    Deadline = erlang:monotonic_time(millisecond) + ?BUDGET_MS,
    #{modules := Project} = os_sup_code_beam:project(),
    ProjectSet = maps:from_list([{M, true} || {M, _} <- Project]),
    %% (the helper's own modules are not the node's code)
    Loaded = [M || M <- erlang:loaded(), not is_map_key(M, ProjectSet),
                   not lists:prefix("os_sup_", atom_to_list(M))],
    LoadedSet = maps:from_list([{M, true} || M <- Loaded]),
    Others = [N || N <- safe(fun os_sup_code_beam:not_loaded/0, []),
                   not is_map_key(list_to_atom_if_exists(N), ProjectSet),
                   not is_map_key(list_to_atom_if_exists(N), LoadedSet)],
    %% {Group (0: the project), module (or the name of one not loaded), search its functions?}
    Universe = [{0, M, true} || {M, _} <- Project] ++ [{1, M, true} || M <- Loaded]
        ++ [{1, N, false} || N <- Others],
    {Hits, Partial} = scan(Universe, Match, Fmt, Deadline, []),
    Sorted = lists:sort(Hits),
    Shown = with_docs(lists:sublist(Sorted, Limit), Deadline),
    Lines = [line(H) || H <- Shown]
        ++ [fmt("... ~b more (raise limit, max ~b, or narrow the query)",
                [length(Sorted) - length(Shown), ?MAX_LIMIT]) || length(Sorted) > length(Shown)]
        ++ [<<"PARTIAL: the 2 s budget ran out before every module was searched">> || Partial]
        ++ [<<"nothing matches (functions are searched in loaded and project modules only)">>
            || Shown =:= []],
    ok_reply(Lines, #{query => Query, hits => Shown, total => length(Sorted),
                      truncated => length(Sorted) > length(Shown), partial => Partial}).

%%%===================================================================
%%% Private
%%%===================================================================

%% An atom only when it exists (a module name from the code path, never created here).
list_to_atom_if_exists(Name) ->
    try list_to_existing_atom(Name) catch _:_ -> undefined end.

%% `{Qualified, fun(Hay, Short) -> false | Quality}' (quality 0: exact, 1: prefix, 2: the
%% rest): a qualified query (or a regex) is matched against `Module.fun/arity', another
%% against the last part of the name alone.
matcher(<<"/", Rest/binary>> = Query) when byte_size(Rest) > 1 ->
    case binary:last(Rest) of
        $/ ->
            Source = binary:part(Rest, 0, byte_size(Rest) - 1),
            case re:compile(Source, [caseless, unicode]) of
                {ok, Re} ->
                    {true, fun(Hay, _Short) ->
                                   case re:run(Hay, Re, [{capture, none}]) of
                                       match -> 2;
                                       nomatch -> false
                                   end
                           end};
                {error, {Why, At}} ->
                    fail(bad_args, "the regex ~ts does not compile: ~ts at ~b", [Query, Why, At])
            end;
        _ -> substring(Query)
    end;
matcher(Query) ->
    substring(Query).

substring(Query0) ->
    Query = string:lowercase(case Query0 of <<":", R/binary>> -> R; _ -> Query0 end),
    Qualified = binary:match(Query, [<<".">>, <<":">>, <<"/">>]) =/= nomatch,
    {ok, Re} = re:compile(escape(Query), [caseless, unicode]),
    Len = byte_size(Query),
    {Qualified,
     fun(Hay, Short) ->
             case re:run(Hay, Re, [{capture, first, index}]) of
                 nomatch -> false;
                 {match, [{At, _}]} ->
                     ShortL = string:lowercase(Short),
                     if
                         ShortL =:= Query -> 0;
                         byte_size(Hay) =:= Len -> 0;
                         At =:= 0 -> 1;
                         true ->
                             case binary:longest_common_prefix([ShortL, Query]) of
                                 Len -> 1;
                                 _ -> 2
                             end
                     end
             end
     end}.

escape(Text) ->
    << <<(case lists:member(C, "\\^$.|?*+()[]{}") of true -> <<"\\", C>>; false -> <<C>> end)/binary>>
       || <<C>> <= Text >>.

%% Hits as `{Group, Quality, KindRank, Label, Hit}'.
scan([], _Match, _Fmt, _Deadline, Acc) ->
    {Acc, false};
scan([{Group, Mod, Functions} | Rest], Match, Fmt, Deadline, Acc) ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> {Acc, true};
        false ->
            Label = module_label(Mod, Fmt),
            Short = last_segment(Label),
            ModHit = case (element(2, Match))(Label, Short) of
                         false -> [];
                         Q -> [{Group, Q, 0, Label, #{kind => module, name => Label,
                                                       module => Label, arity => undefined,
                                                       project => Group =:= 0, ref => Mod}}]
                     end,
            FunHits = case Functions of
                          true -> function_hits(Group, Mod, Label, Match, Fmt);
                          false -> []
                      end,
            scan(Rest, Match, Fmt, Deadline, ModHit ++ FunHits ++ Acc)
    end.

function_hits(Group, M, ModLabel, {Qualified, Match}, Fmt) ->
    Sep = case Fmt of elixir -> <<".">>; erlang -> <<":">> end,
    Hay = fun(Name, _A) when not Qualified -> Name;
             (Name, A) -> <<ModLabel/binary, Sep/binary, Name/binary, "/",
                            (integer_to_binary(A))/binary>>
          end,
    [{Group, Q, 1, FLabel, #{kind => Kind, name => FLabel, module => ModLabel, arity => A,
                            project => Group =:= 0, ref => {M, Kind, Name, A}}}
     || {Kind, Name, A} <- functions(M),
        Q <- [Match(Hay(Name, A), Name)],
        Q =/= false,
        FLabel <- [os_sup_code:label(M, Kind, Name, A, Fmt)]].

functions(M) ->
    [case atom_to_binary(F, utf8) of
         <<"MACRO-", Name/binary>> -> {macro, Name, A - 1};
         Name -> {function, Name, A}
     end || {F, A} <- os_sup_code_beam:exports(M), F =/= module_info,
            not lists:prefix("__", atom_to_list(F))].

module_label(M, Fmt) when is_atom(M) -> os_sup_lib_render:name(M, Fmt);
module_label(Name, Fmt) ->
    case {list_to_binary(Name), Fmt} of
        {<<"Elixir.", Rest/binary>>, elixir} -> Rest;
        {Bin, elixir} -> <<":", Bin/binary>>;
        {Bin, _} -> Bin
    end.

last_segment(Label) ->
    lists:last(binary:split(Label, [<<".">>, <<":">>], [global])).

%% The first doc line of each hit shown (one docs chunk read per module, within the budget).
with_docs(Hits, Deadline) ->
    {Shown, _} = lists:mapfoldl(
                   fun({_, _, _, _, Hit}, Cache) ->
                           Key = chunk_key(maps:get(ref, Hit)),
                           {Chunk, Cache1} =
                               case Cache of
                                   #{Key := C} -> {C, Cache};
                                   _ ->
                                       C = case erlang:monotonic_time(millisecond) > Deadline of
                                               true -> none;
                                               false -> chunk(Key)
                                           end,
                                       {C, Cache#{Key => C}}
                               end,
                           {maps:remove(ref, Hit#{doc => first_line(maps:get(ref, Hit), Chunk)}),
                            Cache1}
                   end, #{}, Hits),
    Shown.

chunk_key({M, _, _, _}) -> M;
chunk_key(M) -> M.

chunk(M) when is_atom(M) -> safe(fun() -> os_sup_code_beam:docs_chunk(M) end, none);
chunk(Name) ->
    case code:where_is_file(Name ++ ".beam") of
        File when is_list(File) -> safe(fun() -> os_sup_code_beam:docs_chunk_file(File) end, none);
        _ -> none
    end.

first_line({_M, Kind, Name, A}, {docs_v1, _, _, Format, _, _, Docs}) ->
    case [D || {{K, F, Ar}, _, _, D, _} <- Docs, K =:= Kind, Ar =:= A,
               atom_to_binary(F, utf8) =:= Name] of
        [hidden | _] -> <<"(hidden)">>;
        [D | _] -> first_doc_line(Format, D);
        [] -> undefined
    end;
first_line(_Module, {docs_v1, _, _, Format, ModDoc, _, _}) ->
    first_doc_line(Format, ModDoc);
first_line(_, _) ->
    undefined.

first_doc_line(Format, Doc) ->
    case os_sup_code:doc_text(Format, Doc) of
        undefined -> undefined;
        Text ->
            case [L || L <- binary:split(Text, <<"\n">>, [global]), string:trim(L) =/= <<>>] of
                [First | _] -> cut_bin(string:trim(First), ?DOC_LINE_BYTES);
                [] -> undefined
            end
    end.

line(#{name := Name, kind := Kind, doc := Doc, project := Project}) ->
    Tag = case {Kind, Project} of
              {module, true} -> <<" (module, project)">>;
              {module, false} -> <<" (module)">>;
              {macro, _} -> <<" (macro)">>;
              _ -> <<>>
          end,
    case Doc of
        undefined -> <<Name/binary, Tag/binary>>;
        _ -> <<Name/binary, Tag/binary, " - ", Doc/binary>>
    end.
