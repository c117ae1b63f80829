%%% @doc `os_sup_code' answers what an agent asks about code the node has:
%%% docs, specs and where things are defined, for the project, its deps,
%%% Elixir and OTP alike. It reads `.beam' files (`os_sup_code_beam');
%%% it never loads or compiles anything.
%%%
%%% == Tools ==
%%% <ul>
%%%   <li>{@link docs/1}: signature(s), specs, doc text and
%%%       deprecation of a function, macro, callback or type; a module's
%%%       summary and members. The doc is Markdown as stored (OTP's
%%%       `erlang+html' flattened to text), cut with a marker. Without a
%%%       docs chunk (OTP docs not installed, compiled without docs) it
%%%       says so and answers with the exports and specs.</li>
%%%   <li>{@link source/1}: file and line of a module, of each
%%%       clause of a function (private ones too), of a callback or a
%%%       type, relative to the project when inside it; for one function,
%%%       its code read from that file (numbered, at most 40 lines and
%%%       3 KB), when the file is on the node's machine.</li>
%%% </ul>
%%%
%%% == Targets ==
%%% {@link target/1} reads `Enum.map/2', `Enum.map', `Enum', `:lists.seq/3',
%%% `lists:seq/3', `t:Enum.t/0', `c:GenServer.init/1' and
%%% `GenServer.handle_call/3' (a callback when no function has that name).
%%% Names are compared as text: no atom is made from a name that does not
%%% exist. A missing target is a `not_found' error with the nearest names
%%% ("no function Enum.mapp/2; did you mean Enum.map/2?").
-module(os_sup_code).

-import(os_sup_lib_args, [arg_text/2, fmt_arg/1]).
-import(os_sup_lib_call, [safe/2]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [fmt/2, join/2, cut_bin/2]).

%% API
-export([docs/1, source/1]).
%% Shared with os_sup_code_xref and os_sup_code_find
-export([target/1, members/3, label/5, suggest/2, doc_text/2]).

-define(DOC_BYTES, 6000).
-define(MODULEDOC_BYTES, 3000).
-define(SUGGESTIONS, 3).
%% the functions a module's `source' lists
-define(MODULE_DEFS, 60).

-type target() :: #{kind := any | type | callback, module := module(),
                    name := binary() | undefined, arity := arity() | undefined,
                    text := binary()}.
-type member() :: {function | macro | callback | type, binary(), arity()}.
-export_type([target/0, member/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `docs': the docs and specs of `target' (a module, function, callback or type),
%% in `format'.
-spec docs(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
docs(Args) ->
    Fmt = fmt_arg(Args),
    #{module := M, name := Name} = T = target(Args),
    Chunk = os_sup_code_beam:docs_chunk(M),
    Info = os_sup_code_beam:info(M),
    Members = members(M, Chunk, Info),
    Note = case Chunk of
               none -> fmt("no docs chunk for ~ts (OTP docs not installed, e.g. Debian's "
                           "erlang-nox, or compiled without docs); exports and specs from the "
                           "BEAM instead", [os_sup_lib_render:name(M, Fmt)]);
               _ -> undefined
           end,
    Base = #{module => os_sup_lib_render:name(M, Fmt), docs_chunk => Chunk =/= none, note => Note},
    case Name of
        undefined -> module_docs(M, Chunk, Members, Base, Fmt);
        _ ->
            case select(T, Members) of
                [] -> no_member(T, Members, Fmt);
                Found -> member_docs(M, Found, Chunk, Info, Base, Fmt)
            end
    end.

%% @doc Tool `source': where `target' is defined (file and line), in `format'.
-spec source(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
source(Args) ->
    Fmt = fmt_arg(Args),
    #{module := M, name := Name} = T = target(Args),
    Info = case os_sup_code_beam:info(M) of
               undefined -> fail(not_found, "~ts has no object file (preloaded in the VM): its "
                                 "source is not on this node", [os_sup_lib_render:name(M, Fmt)]);
               I -> I
           end,
    Dir = os_sup_code_beam:project_dir(),
    Source = maps:get(source, Info),
    File = os_sup_code_beam:relative(Source, Dir),
    Missing = case Source =/= undefined andalso not filelib:is_regular(Source) of
                  true -> fmt("~ts is not on this machine (compiled elsewhere)", [Source]);
                  false -> undefined
              end,
    Memory = loaded_from_memory(M),
    NoDebug = case {Memory, maps:get(debug, Info)} of
                  {true, _} -> memory_note(M, File, Dir);
                  {false, true} -> undefined;
                  {false, false} -> <<"compiled without debug_info: lines unknown">>
              end,
    Base = #{module => os_sup_lib_render:name(M, Fmt), file => File, note => first_of([Missing, NoDebug])},
    case Name of
        undefined ->
            Line = maps:get(line, Info),
            Label = os_sup_lib_render:name(M, Fmt),
            Defs = lists:keysort(2, [{fmt("~ts/~b", [F, A]), L}
                                     || {F, A, _, L, _} <- maps:get(defs, Info), is_integer(L)]),
            %% Code loaded from memory has no lines: the file it was compiled from is shown.
            FileCode = case Memory andalso Missing =:= undefined of
                           true -> os_sup_code_text:lines(os_sup_code_text:code(Source, 1, 40, 41));
                           false -> []
                       end,
            ok_reply([fmt("~ts  ~ts", [Label, at(File, Line)])
                      | os_sup_code_text:defs_line(Defs, ?MODULE_DEFS)] ++ notes(Base) ++ FileCode,
                     Base#{target => Label, kind => module, line => Line, entries => [],
                           functions => [#{function => FA, line => L}
                                         || {FA, L} <- lists:sublist(Defs, ?MODULE_DEFS)]});
        _ ->
            Entries = source_entries(T, Info, Fmt),
            [#{line := Line} | _] = Entries,
            Lines = [fmt("~ts  ~ts~ts", [L, at(File, EL), clauses(Cs)])
                     || #{name := L, line := EL, clauses := Cs} <- Entries],
            #{name := Label, kind := Kind} = hd(Entries),
            Code = case {Entries, Missing} of
                       {[#{line := First, arity := A}], undefined} when is_integer(First) ->
                           os_sup_code_text:code(Source, First,
                                                 os_sup_code_text:last_line(Name, A, Info),
                                                 os_sup_code_text:next_def(First, Info));
                       _ -> undefined
                   end,
            ok_reply(Lines ++ os_sup_code_text:lines(Code) ++ notes(Base),
                     Base#{target => case Entries of [_] -> Label; _ -> maps:get(text, T) end,
                           kind => Kind, line => Line, entries => Entries,
                           code => case Code of
                                       undefined -> undefined;
                                       {Text, _} -> Text
                                   end})
    end.

%% @doc The `target' argument read and its module found; a `fail/3' naming the nearest
%% modules when there is none.
-spec target(os_sup_lib_args:args()) -> target().
target(Args) ->
    Text = case arg_text(target, Args) of
               T when is_binary(T) -> T;
               _ -> fail(bad_args, "target is required: Enum.map/2, Enum, :lists.seq/3, "
                         "lists:seq/3, t:Enum.t/0", [])
           end,
    {Kind, ModText, Name, Arity} = parse(Text),
    case os_sup_code_beam:module_atom(ModText) of
        {ok, M} -> #{kind => Kind, module => M, name => Name, arity => Arity, text => Text};
        error ->
            Known = [os_sup_lib_render:name(M, elixir) || M <- erlang:loaded()]
                ++ [available_name(N) || N <- safe(fun os_sup_code_beam:not_loaded/0, [])],
            case registered_as(ModText) of
                {ok, Pid, Started} ->
                    fail(not_found, "~ts is no module: it is the registered name of process "
                         "~ts~ts",
                         [ModText, os_sup_lib_render:pid(Pid, elixir), Started]);
                error ->
                    fail(not_found, "no module ~ts is loaded or in the code path~ts",
                         [ModText, did_you_mean(suggest(strip_colon(ModText), Known))])
            end
    end.

%% A process registered under the name a target's module was written as (`Notify.Supervisor'),
%% with what started it, from its `$initial_call' (` (supervisor Notify.Application)').
registered_as(ModText) ->
    Names = [<<"Elixir.", (strip_colon(ModText))/binary>>, strip_colon(ModText)],
    case [P || N <- Names, A <- [safe(fun() -> binary_to_existing_atom(N, utf8) end, undefined)],
               is_atom(A), A =/= undefined, P <- [whereis(A)], is_pid(P)] of
        [Pid | _] ->
            Started = case os_sup_lib_proc:dict_initial_call(os_sup_lib_proc:proc_dict(Pid)) of
                          {supervisor, Mod, _} ->
                              fmt(" (a supervisor with callback module ~ts)",
                                  [os_sup_lib_render:name(Mod, elixir)]);
                          {Mod, _, _} ->
                              fmt(" (started in ~ts)", [os_sup_lib_render:name(Mod, elixir)]);
                          undefined -> <<>>
                      end,
            {ok, Pid, [Started, app_note(Pid)]};
        [] -> error
    end.

%% ` in application notify, started by Notify.Application.start/2'.
app_note(Pid) ->
    case application:get_application(Pid) of
        {ok, App} ->
            case application:get_key(App, mod) of
                {ok, {Mod, _}} -> fmt(" in application ~ts, started by ~ts.start/2",
                                      [App, os_sup_lib_render:name(Mod, elixir)]);
                _ -> fmt(" in application ~ts", [App])
            end;
        undefined -> <<>>
    end.

%% @doc The functions, macros, callbacks and types of `M' (exports, the docs chunk, the
%% debug info), as `{Kind, Name, Arity}'.
-spec members(module(), tuple() | none, os_sup_code_beam:info() | undefined) -> [member()].
members(M, Chunk, Info) ->
    Exported = [member(F, A) || {F, A} <- os_sup_code_beam:exports(M),
                                F =/= module_info, F =/= '__info__'],
    FromDocs = case Chunk of
                   {docs_v1, _, _, _, _, _, Docs} ->
                       [{K, atom_to_binary(F, utf8), A} || {{K, F, A}, _, _, _, _} <- Docs,
                                                          K =:= callback orelse K =:= type];
                   _ -> []
               end,
    FromInfo = case Info of
                   #{callbacks := Cbs, types := Types} ->
                       [{callback, atom_to_binary(F, utf8), A} || {{F, A}, _, _} <- Cbs]
                           ++ [{type, atom_to_binary(N, utf8), length(As)}
                               || {_, {N, _, As}, _} <- Types];
                   _ -> []
               end,
    lists:usort(Exported ++ FromDocs ++ FromInfo).

member(F, A) ->
    case atom_to_binary(F, utf8) of
        <<"MACRO-", Name/binary>> -> {macro, Name, A - 1};
        Name -> {function, Name, A}
    end.

%% @doc A member's name in the node's syntax: `Enum.map/2', `:lists.seq/2', `lists:seq/2',
%% `t:Enum.t/0', `c:GenServer.init/1'; without a name, the module's.
-spec label(module(), atom(), binary() | undefined, arity() | undefined,
            os_sup_lib_render:fmt()) -> binary().
label(M, _Kind, undefined, _Arity, Fmt) ->
    os_sup_lib_render:name(M, Fmt);
label(M, Kind, Name, Arity, Fmt) ->
    Prefix = case Kind of type -> <<"t:">>; callback -> <<"c:">>; _ -> <<>> end,
    Sep = case Fmt of elixir -> <<".">>; erlang -> <<":">> end,
    Tail = case Arity of undefined -> <<>>; _ -> <<"/", (integer_to_binary(Arity))/binary>> end,
    <<Prefix/binary, (os_sup_lib_render:name(M, Fmt))/binary, Sep/binary, Name/binary, Tail/binary>>.

%% @doc The (at most 3) `Candidates' nearest to `Text': those containing it, then those a
%% few edits away; case-insensitive.
-spec suggest(binary(), [binary()]) -> [binary()].
suggest(Text, Candidates) ->
    Lower = string:lowercase(Text),
    Len = string:length(Lower),
    Scored = lists:usort(
               [{Score, C} || C <- Candidates, is_binary(C),
                              Score <- [score(Lower, Len, string:lowercase(C))],
                              Score =/= none]),
    lists:sublist(uniq([C || {_, C} <- Scored]), ?SUGGESTIONS).

score(Text, Len, Cand) ->
    CLen = string:length(Cand),
    if
        Cand =:= Text -> 0;
        abs(CLen - Len) =< 2 ->
            Max = max(1, Len div 3),
            case edit_distance(Text, Cand) of
                D when D =< Max -> D;
                _ -> contains(Text, Cand, CLen)
            end;
        true -> contains(Text, Cand, CLen)
    end.

contains(Text, Cand, CLen) ->
    case byte_size(Text) >= 3 andalso binary:match(Cand, Text) =/= nomatch of
        true -> 10 + CLen;
        false -> none
    end.

edit_distance(A, B) ->
    As = string:to_graphemes(A),
    Bs = string:to_graphemes(B),
    First = lists:seq(0, length(Bs)),
    lists:last(lists:foldl(fun(Ca, Prev = [P0 | _]) -> row(Ca, Bs, Prev, [P0 + 1]) end,
                           First, As)).

row(_Ca, [], _Prev, Acc) -> lists:reverse(Acc);
row(Ca, [Cb | Bs], [Diag, Up | Prev], [Left | _] = Acc) ->
    Cost = case Ca =:= Cb of true -> 0; false -> 1 end,
    row(Ca, Bs, [Up | Prev], [min(min(Up + 1, Left + 1), Diag + Cost) | Acc]).

uniq(L) -> uniq(L, #{}).
uniq([], _) -> [];
uniq([H | T], Seen) when is_map_key(H, Seen) -> uniq(T, Seen);
uniq([H | T], Seen) -> [H | uniq(T, Seen#{H => true})].

%% @doc A doc (`#{Lang => Doc}' of a docs chunk) as text in `Format' (Markdown as stored,
%% `erlang+html' flattened); `undefined' for none or hidden.
-spec doc_text(binary(), term()) -> binary() | undefined.
doc_text(Format, Doc) when is_map(Doc), map_size(Doc) > 0 ->
    Text = case maps:find(<<"en">>, Doc) of
               {ok, T} -> T;
               error -> hd(maps:values(Doc))
           end,
    case Format of
        <<"application/erlang+html">> -> string:trim(flatten_html(Text));
        _ when is_binary(Text) -> Text;
        _ -> os_sup_lib_render:to_bin(Text)
    end;
doc_text(_Format, _Doc) ->
    undefined.

flatten_html(B) when is_binary(B) -> B;
flatten_html(L) when is_list(L) -> iolist_to_binary([flatten_html(E) || E <- L]);
flatten_html({Tag, _Attrs, Content}) ->
    Inner = flatten_html(Content),
    case Tag of
        p -> [Inner, "\n\n"];
        pre -> [Inner, "\n\n"];
        li -> ["- ", Inner, "\n"];
        dt -> [Inner, "\n"];
        dd -> ["  ", Inner, "\n"];
        h1 -> ["# ", Inner, "\n\n"];
        h2 -> ["## ", Inner, "\n\n"];
        h3 -> ["### ", Inner, "\n\n"];
        code -> ["`", Inner, "`"];
        ul -> [Inner, "\n"];
        ol -> [Inner, "\n"];
        br -> "\n";
        _ -> Inner
    end;
flatten_html(_) -> <<>>.

%%%===================================================================
%%% Private: targets
%%%===================================================================

%% `{Kind, ModuleText, Name | undefined, Arity | undefined}' (by hand: a regex compiled per
%% call costs more than the rest of a `docs').
parse(Text) ->
    {Kind, Rest} = case Text of
                       <<"t:", R/binary>> -> {type, R};
                       <<"c:", R/binary>> -> {callback, R};
                       _ -> {any, Text}
                   end,
    {Body, Arity} = case binary:matches(Rest, <<"/">>) of
                        [] -> {Rest, undefined};
                        Slashes ->
                            {At, 1} = lists:last(Slashes),
                            Digits = binary:part(Rest, At + 1, byte_size(Rest) - At - 1),
                            case At > 0 andalso byte_size(Digits) =< 3 andalso Digits =/= <<>>
                                andalso lists:all(fun(C) -> C >= $0 andalso C =< $9 end,
                                                  binary_to_list(Digits)) of
                                true -> {binary:part(Rest, 0, At), binary_to_integer(Digits)};
                                false -> {Rest, undefined}
                            end
                    end,
    {Mod, Fun} = split(Body),
    {Kind, Mod, unquote(Fun), Arity}.

%% `:lists.seq', `lists:seq', `Enum.map', `Elixir.Enum.map', or a module alone.
split(<<":\"", _/binary>> = Body) ->
    case binary:split(Body, <<"\".">>) of
        [Mod, Fun] when Fun =/= <<>> -> {<<Mod/binary, "\"">>, Fun};
        _ -> {Body, undefined}
    end;
split(<<":", _/binary>> = Body) ->
    case binary:split(Body, [<<".">>, <<":">>], [{scope, {1, byte_size(Body) - 1}}]) of
        [Mod, Fun] when Fun =/= <<>> -> {Mod, Fun};
        _ -> {Body, undefined}
    end;
split(<<C, _/binary>> = Body) when C >= $A, C =< $Z ->
    Parts = binary:split(Body, <<".">>, [global]),
    {ModParts, FunParts} = lists:splitwith(fun(<<P, _/binary>>) -> P >= $A andalso P =< $Z;
                                              (_) -> false
                                           end, Parts),
    case FunParts of
        [] -> {Body, undefined};
        _ -> {join(ModParts, <<".">>), join(FunParts, <<".">>)}
    end;
split(Body) ->
    case binary:split(Body, <<":">>) of
        [Mod, Fun] when Mod =/= <<>>, Fun =/= <<>> -> {Mod, Fun};
        _ -> {Body, undefined}
    end.

unquote(undefined) -> undefined;
unquote(<<":\"", R/binary>>) -> unquote(<<"\"", R/binary>>);
unquote(<<Q, R/binary>> = B) when (Q =:= $' orelse Q =:= $"), byte_size(R) > 0 ->
    case binary:last(R) of
        Q -> binary:part(R, 0, byte_size(R) - 1);
        _ -> B
    end;
unquote(B) -> B.

strip_colon(<<":", R/binary>>) -> R;
strip_colon(B) -> B.

available_name(Name) ->
    case list_to_binary(Name) of
        <<"Elixir.", Rest/binary>> -> Rest;
        Erl -> <<":", Erl/binary>>
    end.

did_you_mean([]) -> <<"">>;
did_you_mean(Names) -> fmt("; did you mean ~ts?", [join(Names, <<", ">>)]).

%% The members `T' names: functions and macros (callbacks when none), or types, or callbacks.
select(#{kind := Kind, name := Name, arity := Arity}, Members) ->
    Pick = fun(Kinds) ->
                   [E || {K, N, A} = E <- Members, lists:member(K, Kinds), N =:= Name,
                         Arity =:= undefined orelse A =:= Arity]
           end,
    case Kind of
        any ->
            case Pick([function, macro]) of
                [] -> Pick([callback]);
                Found -> Found
            end;
        _ -> Pick([Kind])
    end.

%% `not_found' naming the nearest members of the module.
no_member(#{kind := Kind, module := M, name := Name, arity := Arity}, Members, Fmt) ->
    What = case Kind of any -> <<"function">>; type -> <<"type">>; callback -> <<"callback">> end,
    Kinds = case Kind of any -> [function, macro, callback]; _ -> [Kind] end,
    Same = [label(M, K, N, A, Fmt) || {K, N, A} <- Members, lists:member(K, Kinds), N =:= Name],
    Near = [label(M, K, N, A, Fmt) || {K, N, A} <- Members, lists:member(K, Kinds),
                                      lists:member(N, suggest(Name, [N2 || {_, N2, _} <- Members]))],
    Hint = case Same ++ Near of
               [] -> fmt("; docs ~ts lists its members", [label(M, any, undefined, undefined, Fmt)]);
               Found -> did_you_mean(lists:sublist(uniq(Found), ?SUGGESTIONS))
           end,
    fail(not_found, "no ~ts ~ts~ts", [What, label(M, Kind, Name, Arity, Fmt), Hint]).

%%%===================================================================
%%% Private: docs
%%%===================================================================

module_docs(M, Chunk, Members, Base, Fmt) ->
    {Doc, Meta} = case Chunk of
                      {docs_v1, _, _, Format, ModDoc, MetaMap, _} ->
                          {doc_text(Format, ModDoc), MetaMap};
                      _ -> {undefined, #{}}
                  end,
    Cut = case Doc of undefined -> undefined; _ -> cut_bin(Doc, ?MODULEDOC_BYTES) end,
    Group = fun(K) -> [<<N/binary, "/", (integer_to_binary(A))/binary>> || {K2, N, A} <- Members,
                                                                          K2 =:= K] end,
    Groups = [{G, Group(K)} || {G, K} <- [{functions, function}, {macros, macro},
                                          {callbacks, callback}, {types, type}]],
    Label = os_sup_lib_render:name(M, Fmt),
    Lines = [Label,
             deprecated_line(Meta)]
        ++ [case {Cut, Chunk} of
                {undefined, none} -> maps:get(note, Base);
                {undefined, {docs_v1, _, _, _, hidden, _, _}} -> <<"(hidden module)">>;
                {undefined, _} -> <<"(no module doc)">>;
                _ -> Cut
            end]
        ++ [fmt("~ts (~b): ~ts", [G, length(Ns), join(Ns, <<", ">>)]) || {G, Ns} <- Groups, Ns =/= []],
    ok_reply([L || L <- Lines, L =/= undefined],
             maps:merge(Base#{target => Label, kind => module, moduledoc => Cut, entries => [],
                              deprecated => deprecated(Meta)},
                        maps:from_list(Groups))).

member_docs(M, Found, Chunk, Info, Base, Fmt) ->
    {Format, Docs} = case Chunk of
                         {docs_v1, _, _, F, _, _, D} -> {F, D};
                         _ -> {<<>>, []}
                     end,
    Entries = [entry(M, Member, Format, Docs, Info, Fmt) || Member <- Found],
    Lines = lists:append([entry_lines(E) || E <- Entries]),
    Lines1 = case maps:get(note, Base) of undefined -> Lines; Note -> [Note, <<>> | Lines] end,
    [{Kind, Name, _} | _] = Found,
    Arity = case Found of [{_, _, A}] -> A; _ -> undefined end,
    ok_reply(Lines1, Base#{target => label(M, Kind, Name, Arity, Fmt), kind => Kind,
                           entries => Entries, moduledoc => undefined, deprecated => undefined}).

entry(M, {Kind, Name, Arity}, Format, Docs, Info, Fmt) ->
    Doc = [E || {{K, F, A}, _, _, _, _} = E <- Docs, K =:= Kind, A =:= Arity,
                atom_to_binary(F, utf8) =:= Name],
    {Sigs, Text, Meta} = case Doc of
                             [{_, _, S, D, Mt} | _] ->
                                 {[os_sup_lib_render:to_bin(X) || X <- S], doc_or_mark(Format, D), Mt};
                             [] -> {[], undefined, #{}}
                         end,
    #{kind => Kind, name => label(M, Kind, Name, Arity, Fmt), arity => Arity,
      signatures => Sigs, specs => specs(Kind, Name, Arity, Info, Fmt),
      doc => Text, deprecated => deprecated(Meta)}.

doc_or_mark(_Format, hidden) -> <<"(hidden: not part of the documented API)">>;
doc_or_mark(_Format, none) -> <<"(no doc written)">>;
doc_or_mark(Format, Doc) ->
    case doc_text(Format, Doc) of
        undefined -> <<"(no doc written)">>;
        Text -> cut_bin(Text, ?DOC_BYTES)
    end.

deprecated(Meta) when is_map(Meta) ->
    case maps:get(deprecated, Meta, undefined) of
        undefined -> undefined;
        D -> os_sup_lib_render:to_bin(D)
    end;
deprecated(_) -> undefined.

deprecated_line(Meta) ->
    case deprecated(Meta) of
        undefined -> undefined;
        D -> <<"deprecated: ", D/binary>>
    end.

entry_lines(#{name := Label, signatures := Sigs, specs := Specs, doc := Doc,
              deprecated := Dep}) ->
    [Label]
        ++ [<<"  ", S/binary>> || S <- Sigs]
        ++ Specs
        ++ [<<"deprecated: ", Dep/binary>> || Dep =/= undefined]
        ++ case Doc of undefined -> []; _ -> [<<>>, string:trim(Doc, trailing)] end
        ++ [<<>>].

%% Specs (or callback specs) of one member, rendered in the node's syntax.
specs(_Kind, _Name, _Arity, undefined, _Fmt) -> [];
specs(Kind, Name, Arity, Info, Fmt) ->
    {Attr, Found} =
        case Kind of
            callback -> {callback, [{F, S} || {{F, A}, S, _} <- maps:get(callbacks, Info), A =:= Arity,
                                              atom_to_binary(F, utf8) =:= Name]};
            type -> {type, [{N, T} || {_, {N, _, As} = T, _} <- maps:get(types, Info),
                                      length(As) =:= Arity, atom_to_binary(N, utf8) =:= Name]};
            _ -> {spec, [{F, S} || {{F, A}, S} <- maps:get(specs, Info), A =:= Arity,
                                   atom_to_binary(F, utf8) =:= Name]}
        end,
    [render_spec(Attr, F, S, Arity, Fmt) || {F, Ss} <- Found, S <- spec_list(Attr, Ss)].

spec_list(type, T) -> [T];
spec_list(_, Ss) -> Ss.

render_spec(Attr, F, Spec, Arity, elixir) ->
    safe(fun() ->
                 Quoted = case Attr of
                              type -> 'Elixir.Code.Typespec':type_to_quoted(Spec);
                              _ -> 'Elixir.Code.Typespec':spec_to_quoted(F, Spec)
                          end,
                 iolist_to_binary(["@", atom_to_list(Attr), " ",
                                   'Elixir.Macro':to_string(Quoted)])
         end,
         render_spec(Attr, F, Spec, Arity, erlang));
render_spec(type, _F, {N, T, As}, _Arity, _) ->
    erl_pp_attr({attribute, 0, type, {N, T, As}});
render_spec(Attr, F, Spec, Arity, _) ->
    erl_pp_attr({attribute, 0, Attr, {{F, Arity}, [Spec]}}).

erl_pp_attr(Form) ->
    safe(fun() -> string:trim(os_sup_lib_render:to_bin(erl_pp:attribute(Form))) end,
         <<"(spec could not be rendered)">>).

%%%===================================================================
%%% Private: source
%%%===================================================================

source_entries(#{module := M, kind := Kind} = T, Info, Fmt) ->
    Defs = [{case K of defmacro -> macro; defmacrop -> macro; _ -> function end,
             atom_to_binary(F, utf8), A, K, L, Cs} || {F, A, K, L, Cs} <- maps:get(defs, Info)],
    DefMembers = [{K, N, A} || {K, N, A, _, _, _} <- Defs],
    Typed = [{callback, atom_to_binary(F, utf8), A, callback, L, []}
             || {{F, A}, _, L} <- maps:get(callbacks, Info)]
        ++ [{type, atom_to_binary(N, utf8), length(As), type, L, []}
            || {_, {N, _, As}, L} <- maps:get(types, Info)],
    TypedMembers = [{K, N, A} || {K, N, A, _, _, _} <- Typed],
    Members = case maps:get(debug, Info) of
                  true -> DefMembers ++ TypedMembers;
                  false -> members(M, none, undefined)
              end,
    case select(T, Members) of
        [] when Kind =:= any, Defs =/= [] -> no_member(T, Members, Fmt);
        [] -> no_member(T, Members ++ members(M, none, undefined), Fmt);
        Found ->
            [case lists:keyfind(A, 3, [D || {K2, N2, _, _, _, _} = D <- Defs ++ Typed,
                                            K2 =:= K, N2 =:= N]) of
                 {_, _, _, DefKind, L, Cs} ->
                     #{name => label(M, K, N, A, Fmt), arity => A, kind => DefKind,
                       line => L, clauses => Cs};
                 false ->
                     #{name => label(M, K, N, A, Fmt), arity => A, kind => K,
                       line => undefined, clauses => []}
             end || {K, N, A} <- Found]
    end.

at(undefined, _) -> <<"(source file unknown)">>;
at(File, undefined) -> fmt("~ts (line unknown)", [File]);
at(File, Line) -> fmt("~ts:~b", [File, Line]).

clauses(Cs) when length(Cs) > 1 ->
    fmt(" (clauses at ~ts)", [join([integer_to_binary(L) || L <- Cs, is_integer(L)], <<", ">>)]);
clauses(_) -> <<>>.

%% Loaded with no object file (`Code.compile_file', `code:load_binary'): what `code:which/1'
%% says of a module loaded from memory.
loaded_from_memory(M) ->
    case code:which(M) of
        [] -> true;
        in_memory -> true;
        _ -> false
    end.

%% Where the running code of a module loaded from memory came from, and whether the .beam the
%% code path has of it holds the same code.
memory_note(M, File, Dir) ->
    Beam = case code:where_is_file(atom_to_list(M) ++ ".beam") of
               B when is_list(B) ->
                   Same = try beam_lib:md5(B) of
                              {ok, {_, Md5}} ->
                                  Md5 =:= safe(fun() -> M:module_info(md5) end, undefined);
                              _ -> false
                          catch _:_ -> false
                          end,
                   fmt("; the .beam ~ts holds ~ts code", [os_sup_code_beam:relative(B, Dir),
                                                          case Same of true -> "the same";
                                                              false -> "other" end]);
               _ -> <<"; no .beam of it is in the code path">>
           end,
    iolist_to_binary([fmt("the running code was loaded from memory, not from a .beam: compiled "
                          "from ~ts, its lines unknown", [case File of undefined -> <<"?">>;
                                                              _ -> File end]), Beam]).

notes(#{note := undefined}) -> [];
notes(#{note := Note}) -> [Note].

first_of([undefined | T]) -> first_of(T);
first_of([H | _]) -> H;
first_of([]) -> undefined.
