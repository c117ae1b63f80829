%%% @doc `os_sup_code_beam' reads what a module's `.beam' file knows about
%%% its code, for the code tools (`os_sup_code', `os_sup_code_xref',
%%% `os_sup_code_find'), without loading anything. The file is found with
%%% `code:which/1' (loaded or only in the code path) and read with
%%% `beam_lib'. Nothing is compiled, nothing is loaded.
%%%
%%% == Modules ==
%%% <ul>
%%%   <li>{@link module_atom/1}: the module a name spells (`Enum',
%%%       `Elixir.Enum', `:lists', `lists'), when it is loaded or in the
%%%       code path; an atom is made only for a module file that exists.</li>
%%%   <li>{@link beam_file/1}, {@link exports/1}: its object file and
%%%       exports (from the loaded code, else from the file).</li>
%%%   <li>{@link project/0}: the project's own modules (the Mix project's
%%%       applications; on another node, code path directories outside
%%%       the OTP root and Elixir) and its directory.</li>
%%%   <li>{@link relative/2}: a source path relative to the project.</li>
%%%   <li>{@link loaded/0}, {@link not_loaded/0}: the loaded modules and where
%%%       from, the code path's modules not loaded; as `code:all_loaded/0' and
%%%       `code:all_available/0' give them, `code_server' left as it was.</li>
%%% </ul>
%%%
%%% == Debug info ==
%%% <ul>
%%%   <li>{@link info/1}: language, source file, module line, definitions
%%%       (each clause's first line), specs, callbacks and types; from the
%%%       `debug_info' chunk (Elixir's own form for Elixir modules, the
%%%       abstract code for Erlang ones).</li>
%%%   <li>{@link calls/1}: every call site (`{Caller, Callee, Line}') from
%%%       the abstract code, for callers and callees.</li>
%%%   <li>{@link messages/1}: what its receives take and its sends send, by
%%%       shape (`os_sup_code_msgs').</li>
%%%   <li>{@link docs_chunk/1}: the EEP-48 docs chunk, never generated.</li>
%%% </ul>
%%%
%%% == Cache ==
%%% Reading the debug info of a large module costs milliseconds (Enum:
%%% ~20 ms), so what is read is kept in an ETS table owned by a small
%%% process (`os_sup_code_cache', started on demand, gone with the
%%% helper), keyed by module and checked against the file's size and
%%% mtime on every use: a recompiled module is read again.
-module(os_sup_code_beam).

-import(os_sup_lib_call, [ensure_started/3, call_with_deadline/2, safe/2]).

%% API
-export([module_atom/1, beam_file/1, exports/1, project/0, project_dir/0, relative/2,
         loaded/0, not_loaded/0,
         info/1, calls/1, messages/1, messages/2, docs_chunk/1, docs_chunk_file/1]).
%% What is read from a file, kept while it is unchanged (os_sup_diagnose_code)
-export([cached/4, cached_as/5]).

%% Internal entry points (the cache owner). Not an API.
-export([cache_init/2, cache_loop/1, mix_apps/0]).

-define(CACHE, os_sup_code_cache).
-define(MAX_CACHED, 20000).
-define(MAX_PROJECT_MODULES, 5000).
-define(MIX_MS, 1000).

-type info() :: #{lang := elixir | erlang, debug := boolean(),
                  source := binary() | undefined, line := non_neg_integer() | undefined,
                  defs := [{atom(), arity(), atom(), pos_integer() | undefined, [pos_integer()]}],
                  ends := #{{atom(), arity()} => pos_integer()},
                  specs := [{{atom(), arity()}, list()}],
                  callbacks := [{{atom(), arity()}, list(), non_neg_integer()}],
                  types := [{atom(), {atom(), term(), list()}, non_neg_integer()}]}.
-export_type([info/0]).

%%%===================================================================
%%% Modules
%%%===================================================================

%% @doc `code:all_loaded/0', and `code_server' made to collect after it: on OTP 25 it builds
%% the whole list in its own heap, which grows by megabytes and stays grown until the server
%% next collects (a growth of a system process that the helper would have made). One call to
%% the server, not one per module: a node whose schedulers are all busy answers one sooner.
-spec loaded() -> [{module(), file:filename() | atom()}].
loaded() ->
    Loaded = code:all_loaded(),
    collect_code_server(),
    Loaded.

%% @doc The names of the modules in the code path that are not loaded (`code:all_available/0'
%% with `false'), `code_server' collected after it as after loaded/0.
-spec not_loaded() -> [string()].
not_loaded() ->
    Available = code:all_available(),
    collect_code_server(),
    [Name || {Name, _, false} <- Available].

%% A full sweep of `code_server''s heap, waited for at most a second.
collect_code_server() ->
    case whereis(code_server) of
        Pid when is_pid(Pid) ->
            Ref = make_ref(),
            erlang:garbage_collect(Pid, [{async, Ref}]),
            receive {garbage_collect, Ref, _} -> ok after 1000 -> ok end;
        _ ->
            ok
    end.

%% @doc The module `Text' names, loaded or in the code path; `error' when there is none. An
%% atom is created only for a module whose `.beam' file exists.
-spec module_atom(binary()) -> {ok, module()} | error.
module_atom(Text) when byte_size(Text) > 255 ->
    error;
module_atom(Text) ->
    %% A name, never a path: `code:where_is_file/1' would follow `../'.
    Names = [N || N <- candidates(Text), N =/= <<>>,
                  binary:match(N, [<<"/">>, <<"\\">>, <<0>>]) =:= nomatch],
    Atoms = [A || N <- Names, A <- [existing(N)], A =/= undefined],
    %% Loaded first: searching the code path for a name costs milliseconds.
    Found = case [A || A <- Atoms, code:is_loaded(A) =/= false] of
                [] -> [A || A <- Atoms, code:which(A) =/= non_existing];
                Loaded -> Loaded
            end,
    case Found of
        [M | _] -> {ok, M};
        [] ->
            case [N || N <- Names, is_list(code:where_is_file(binary_to_list(N) ++ ".beam"))] of
                %% A file of that name is on the code path: bounded by the files on disk.
                [N | _] -> {ok, binary_to_atom(N, utf8)};
                [] -> error
            end
    end.

candidates(<<":", R/binary>>) ->
    candidates(R);
candidates(<<Q, R/binary>>) when (Q =:= $' orelse Q =:= $"), byte_size(R) > 0 ->
    candidates(binary:part(R, 0, byte_size(R) - 1));
candidates(Text) ->
    case Text of
        <<"Elixir.", _/binary>> -> [Text];
        <<C, _/binary>> when C >= $A, C =< $Z -> [<<"Elixir.", Text/binary>>, Text];
        _ -> [Text]
    end.

existing(B) ->
    try binary_to_existing_atom(B, utf8) catch _:_ -> undefined end.

%% @doc The module's object file, or `undefined' (preloaded, not found).
-spec beam_file(module()) -> string() | undefined.
beam_file(M) ->
    case code:which(M) of
        File when is_list(File) -> File;
        cover_compiled ->
            case code:where_is_file(atom_to_list(M) ++ ".beam") of
                File when is_list(File) -> File;
                _ -> undefined
            end;
        _ -> undefined
    end.

%% @doc `[{Name, Arity}]' exported by `M' (loaded code first, else its file).
-spec exports(module()) -> [{atom(), arity()}].
exports(M) ->
    case code:is_loaded(M) of
        {file, _} -> safe(fun() -> M:module_info(exports) end, []);
        false ->
            case beam_file(M) of
                undefined -> [];
                File ->
                    case beam_lib:chunks(File, [exports]) of
                        {ok, {_, [{exports, Exports}]}} -> Exports;
                        _ -> []
                    end
            end
    end.

%% @doc The project: its directory, how its modules were found, and `[{Module, BeamFile}]'
%% (at most 5000).
-spec project() -> #{dir := string(), scope := binary(), modules := [{module(), string()}]}.
project() ->
    {ok, Cwd} = file:get_cwd(),
    case mix_project() of
        {ok, Dir, Apps} ->
            Ebins = [E || A <- Apps, E <- [lib_ebin(A)], is_list(E)],
            Scope = iolist_to_binary(["the Mix project's applications (",
                                      lists:join(", ", [atom_to_list(A) || A <- Apps]), ")"]),
            #{dir => Dir, scope => Scope, modules => beams_in(Ebins)};
        error ->
            Root = code:root_dir(),
            Skip = [Root | elixir_root() ++ helper_dir()],
            Dirs = [D || D <- code:get_path(), D =/= ".",
                         not lists:any(fun(S) -> lists:prefix(S, D) end, Skip)],
            #{dir => Cwd, scope => <<"code path directories outside the OTP and Elixir installs">>,
              modules => beams_in(Dirs)}
    end.

%% @doc The project's directory: the Mix project's, else the node's working directory.
-spec project_dir() -> string().
project_dir() ->
    case mix_project() of
        {ok, Dir, _} -> Dir;
        error -> element(2, file:get_cwd())
    end.

%% The Mix project's directory and applications (the umbrella's), asked under a deadline:
%% Mix answers through an agent.
mix_project() ->
    case code:is_loaded('Elixir.Mix.Project') of
        false -> error;
        _ ->
            case call_with_deadline({?MODULE, mix_apps, []}, ?MIX_MS) of
                {ok, {Dir, [_ | _] = Apps}} -> {ok, Dir, Apps};
                _ -> error
            end
    end.

%% @doc The Mix project's directory and applications (runs under a deadline).
-spec mix_apps() -> {string(), [atom()]}.
mix_apps() ->
    Config = 'Elixir.Mix.Project':config(),
    Dir = try 'Elixir.Mix.Project':project_file() of
              File when is_binary(File) -> filename:dirname(binary_to_list(File));
              _ -> element(2, file:get_cwd())
          catch _:_ -> element(2, file:get_cwd())
          end,
    Apps = case proplists:get_value(app, Config) of
               App when is_atom(App), App =/= nil, App =/= undefined -> [App];
               _ ->
                   try 'Elixir.Mix.Project':apps_paths(Config) of
                       Paths when is_map(Paths) -> lists:sort(maps:keys(Paths));
                       _ -> []
                   catch _:_ -> []
                   end
           end,
    {Dir, Apps}.

%% `code:lib_dir(App, ebin)' (deprecated since OTP 26): `{error, bad_name}' for an unknown App.
lib_ebin(App) when is_atom(App) ->
    case code:lib_dir(App) of
        Dir when is_list(Dir) -> filename:join(Dir, "ebin");
        Error -> Error
    end.

elixir_root() ->
    case code:lib_dir(elixir) of
        Dir when is_list(Dir) -> [filename:dirname(Dir)];
        _ -> []
    end.

helper_dir() ->
    case code:which(os_sup_helper) of
        File when is_list(File) -> [filename:dirname(File)];
        _ -> []
    end.

beams_in(Dirs) ->
    Files = lists:append([filelib:wildcard(filename:join(D, "*.beam")) || D <- Dirs]),
    %% Module names from files on disk (bounded by them), not from input.
    [{list_to_atom(filename:basename(F, ".beam")), F}
     || F <- lists:sublist(Files, ?MAX_PROJECT_MODULES)].

%% @doc `Path' relative to `Dir' when inside it, as a binary.
-spec relative(string() | binary() | undefined, string()) -> binary() | undefined.
relative(undefined, _Dir) -> undefined;
relative(Path0, Dir) ->
    Path = unicode:characters_to_list(Path0),
    Prefix = filename:join(Dir, "") ++ "/",
    Rel = case lists:prefix(Prefix, Path) of
              true -> lists:nthtail(length(Prefix), Path);
              false -> Path
          end,
    unicode:characters_to_binary(Rel).

%%%===================================================================
%%% Debug info
%%%===================================================================

%% @doc What the debug info of `M' says (cached); `undefined' when there is no file.
-spec info(module()) -> info() | undefined.
info(M) ->
    cached(info, M, fun read_info/2).

%% @doc The source file of `M' and every call site in it:
%% `{Source, [{{F, A}, {CalleeM, CalleeF, CalleeA}, Line}]}' (cached); `undefined' without
%% debug info.
-spec calls(module()) -> {binary() | undefined, [{{atom(), arity()}, mfa(), non_neg_integer()}]}
                         | undefined.
calls(M) ->
    cached(calls, M, fun read_calls/2).

%% @doc The source file of `M', the shapes of the messages each function's receives take and
%% the messages it sends (`os_sup_code_msgs:read/1'), cached; `undefined' without debug info.
-spec messages(module()) -> {binary() | undefined, map()} | undefined.
messages(M) ->
    cached(messages, M, fun read_messages/2).

%% @doc {@link messages/1} of a module whose object file is known (`project/0''s), without
%% looking for it in the code path.
-spec messages(module(), string()) -> {binary() | undefined, map()} | undefined.
messages(M, File) ->
    cached(messages, M, File, fun read_messages/2).

%% @doc The module's EEP-48 docs chunk (`{docs_v1, ...}') from its file or its
%% application's `doc/chunks'; never generated from the code (that is what `code:get_doc/1'
%% does without one, slowly). `none' when there is none.
-spec docs_chunk(module()) -> tuple() | none.
docs_chunk(M) ->
    case beam_file(M) of
        undefined -> none;
        File -> docs_chunk_file(File)
    end.

%% @doc {@link docs_chunk/1} of the module in `File'.
-spec docs_chunk_file(string()) -> tuple() | none.
docs_chunk_file(File) ->
    case beam_lib:chunks(File, ["Docs"]) of
        {ok, {_, [{"Docs", Bin}]}} -> safe(fun() -> binary_to_term(Bin) end, none);
        _ ->
            Chunk = filename:join([filename:dirname(filename:dirname(File)), "doc", "chunks",
                                   filename:basename(File, ".beam") ++ ".chunk"]),
            case file:read_file(Chunk) of
                {ok, Bin} -> safe(fun() -> binary_to_term(Bin) end, none);
                _ -> none
            end
    end.

read_info(M, File) ->
    case debug_info(M, File) of
        {elixir, Map, Specs} ->
            Definitions = maps:get(definitions, Map, []),
            Defs = [{F, A, Kind, meta_line(Meta), [meta_line(CM) || {CM, _, _, _} <- Clauses]}
                    || {{F, A}, Kind, Meta, Clauses} <- Definitions],
            typespecs(Specs, #{lang => elixir, debug => true,
                               source => to_bin(maps:get(file, Map, undefined)),
                               line => module_line(Map),
                               defs => lists:sort(Defs),
                               ends => maps:from_list([{FA, last_line(Clauses, fun meta_max/2)}
                                                       || {FA, _, _, Clauses} <- Definitions])});
        {erlang, Forms} ->
            Defs = [{F, A, def, line(Anno), [line(element(2, C)) || C <- Clauses]}
                    || {function, Anno, F, A, Clauses} <- Forms],
            Base = #{lang => erlang, debug => true,
                     source => case first([S || {attribute, _, file, {S, _}} <- Forms]) of
                                   S when is_list(S) -> absolute_source(S, M, File);
                                   _ -> compile_source(M, File)
                               end,
                     line => first([line(L) || {attribute, L, module, _} <- Forms]),
                     defs => lists:sort(Defs),
                     ends => maps:from_list([{{F, A}, last_line(Clauses, fun anno_max/2)}
                                             || {function, _, F, A, Clauses} <- Forms])},
            typespecs(Forms, Base);
        none ->
            #{lang => lang_of(M), debug => false, source => compile_source(M, File),
              line => undefined, defs => [], ends => #{}, specs => [], callbacks => [],
              types => []}
    end.

%% The line of `defmodule' in Elixir's debug info: `line' up to Elixir 1.14, an `anno' since.
module_line(#{line := Line}) when is_integer(Line) -> Line;
module_line(#{anno := Anno}) -> line(Anno);
module_line(_) -> undefined.

typespecs(Forms, Base) ->
    Base#{specs => [{FA, S} || {attribute, _, spec, {FA, S}} <- Forms, is_tuple(FA),
                               tuple_size(FA) =:= 2],
          callbacks => [{FA, S, line(L)} || {attribute, L, callback, {FA, S}} <- Forms],
          types => [{K, T, line(L)} || {attribute, L, K, {_, _, _} = T} <- Forms,
                                       K =:= type orelse K =:= opaque]}.

read_calls(M, File) ->
    case erlang_forms(M, File) of
        undefined -> undefined;
        Forms ->
            {source(Forms),
             lists:append([calls_in(Clauses, M, {F, A}, [])
                           || {function, _, F, A, Clauses} <- Forms])}
    end.

source(Forms) ->
    first([to_bin(S) || {attribute, _, file, {S, _}} <- Forms]).

read_messages(M, File) ->
    case erlang_forms(M, File) of
        undefined -> undefined;
        Forms ->
            {source(Forms), os_sup_code_msgs:read(Forms)}
    end.

%% The debug info as `{elixir, Map, Specs}' (Elixir's own form: no translation),
%% `{erlang, Forms}' or `none'.
debug_info(M, File) ->
    case chunks(File, [debug_info]) of
        {ok, {_, [{debug_info, {debug_info_v1, elixir_erl, {elixir_v1, Map, Specs}}}]}}
          when is_map(Map) ->
            {elixir, Map, Specs};
        {ok, {_, [{debug_info, {debug_info_v1, erl_abstract_code, {Forms, _}}}]}}
          when is_list(Forms) ->
            {erlang, Forms};
        {ok, {_, [{debug_info, {debug_info_v1, Backend, Data}}]}} ->
            try Backend:debug_info(erlang_v1, M, Data, []) of
                {ok, Forms} when is_list(Forms) -> {erlang, Forms};
                _ -> none
            catch _:_ -> none
            end;
        _ ->
            case chunks(File, [abstract_code]) of
                {ok, {_, [{abstract_code, {raw_abstract_v1, Forms}}]}} -> {erlang, Forms};
                _ -> none
            end
    end.

%% Erlang abstract code for any module with debug info (Elixir's translated).
erlang_forms(M, File) ->
    case chunks(File, [debug_info]) of
        {ok, {_, [{debug_info, {debug_info_v1, erl_abstract_code, {Forms, _}}}]}}
          when is_list(Forms) ->
            Forms;
        {ok, {_, [{debug_info, {debug_info_v1, Backend, Data}}]}} ->
            try Backend:debug_info(erlang_v1, M, Data, []) of
                {ok, Forms} when is_list(Forms) -> Forms;
                _ -> undefined
            catch _:_ -> undefined
            end;
        _ ->
            case chunks(File, [abstract_code]) of
                {ok, {_, [{abstract_code, {raw_abstract_v1, Forms}}]}} -> Forms;
                _ -> undefined
            end
    end.

%% beam_lib:chunks/2, `error' when it raises (a file that is not a .beam).
chunks(File, Chunks) ->
    try beam_lib:chunks(File, Chunks) catch _:_ -> error end.

%% Call sites in a function body: remote and local calls, and `fun M:F/A' captures.
calls_in({call, Anno, {remote, _, {atom, _, CM}, {atom, _, CF}}, Args}, M, FA, Acc) ->
    calls_in(Args, M, FA, [{FA, {CM, CF, length(Args)}, line(Anno)} | Acc]);
calls_in({call, Anno, {atom, _, CF}, Args}, M, FA, Acc) ->
    Arity = length(Args),
    Callee = case erl_internal:bif(CF, Arity) of
                 true -> {erlang, CF, Arity};
                 false -> {M, CF, Arity}
             end,
    calls_in(Args, M, FA, [{FA, Callee, line(Anno)} | Acc]);
calls_in({'fun', Anno, {function, {atom, _, CM}, {atom, _, CF}, {integer, _, CA}}}, _M, FA, Acc) ->
    [{FA, {CM, CF, CA}, line(Anno)} | Acc];
calls_in({'fun', Anno, {function, CF, CA}}, M, FA, Acc) when is_atom(CF) ->
    [{FA, {M, CF, CA}, line(Anno)} | Acc];
calls_in(T, M, FA, Acc) when is_tuple(T) ->
    calls_in(tuple_to_list(T), M, FA, Acc);
calls_in([H | T], M, FA, Acc) ->
    calls_in(T, M, FA, calls_in(H, M, FA, Acc));
calls_in(_, _M, _FA, Acc) ->
    Acc.

%% The `-file' of the abstract code is as given to the compiler (`lists.erl' for OTP's):
%% the compile info's absolute source when it is relative.
absolute_source(S, M, File) ->
    case filename:pathtype(S) of
        absolute -> to_bin(S);
        _ -> case compile_source(M, File) of
                 undefined -> to_bin(S);
                 Abs -> Abs
             end
    end.

compile_source(M, File) ->
    Compile = case code:is_loaded(M) of
                  {file, _} -> safe(fun() -> M:module_info(compile) end, []);
                  false ->
                      case chunks(File, [compile_info]) of
                          {ok, {_, [{compile_info, C}]}} -> C;
                          _ -> []
                      end
              end,
    to_bin(proplists:get_value(source, Compile)).

lang_of(M) ->
    case atom_to_binary(M, utf8) of
        <<"Elixir.", _/binary>> -> elixir;
        _ -> erlang
    end.

meta_line(Meta) when is_list(Meta) ->
    case lists:keyfind(line, 1, Meta) of
        {line, L} when is_integer(L) -> L;
        _ -> undefined
    end;
meta_line(_) -> undefined.

line(Anno) -> safe(fun() -> erl_anno:line(Anno) end, 0).

%% The last line a definition's code is on: the largest line its clauses mention.
last_line(Clauses, Max) ->
    safe(fun() -> Max(Clauses, 0) end, 0).

%% Elixir's AST: every `line: N' of a node's metadata.
meta_max({line, L}, Acc) when is_integer(L) -> max(L, Acc);
meta_max(T, Acc) when is_tuple(T) -> meta_max(tuple_to_list(T), Acc);
meta_max([H | T], Acc) -> meta_max(T, meta_max(H, Acc));
meta_max(_, Acc) -> Acc.

%% Erlang's abstract format: the annotation in second place of each node (not looked into:
%% its column is no line).
anno_max(T, Acc) when is_tuple(T), tuple_size(T) >= 2 ->
    [Tag, Anno | Rest] = tuple_to_list(T),
    case erl_anno:is_anno(Anno) of
        true -> anno_max([Tag | Rest], max(Acc, line(Anno)));
        false -> anno_max([Tag, Anno | Rest], Acc)
    end;
anno_max([H | T], Acc) -> anno_max(T, anno_max(H, Acc));
anno_max(_, Acc) -> Acc.

first([X | _]) -> X;
first([]) -> undefined.

to_bin(undefined) -> undefined;
to_bin(B) when is_binary(B) -> B;
to_bin(L) when is_list(L) -> safe(fun() -> unicode:characters_to_binary(L) end, undefined);
to_bin(_) -> undefined.

%%%===================================================================
%%% Cache
%%%===================================================================

%% `Read(M, File)' for `M''s file, kept while the file's size and mtime stay the same.
cached(Kind, M, Read) ->
    cached(Kind, M, beam_file(M), Read).

%% @doc `Read(M, File)', kept (under `{Kind, M}') while `File' keeps its modification time and
%% size; `undefined' for no file.
-spec cached(atom(), module(), string() | undefined, fun((module(), string()) -> term())) ->
          term().
cached(Kind, M, File, Read) ->
    case File of
        undefined -> undefined;
        File ->
            Id = case file:read_file_info(File, [{time, posix}]) of
                     {ok, FI} -> {File, element(2, FI), element(6, FI)};
                     _ -> undefined
                 end,
            cached_as(Kind, M, File, Id, Read)
    end.

%% @doc {@link cached/4} of a file whose `{File, Size, Mtime}' the caller read (`undefined':
%% not kept).
-spec cached_as(atom(), module(), string(), term(), fun((module(), string()) -> term())) ->
          term().
cached_as(Kind, M, File, Id, Read) ->
    Key = {Kind, M},
    case lookup(Key) of
        {Id, Value} when Id =/= undefined -> Value;
        _ ->
            Value = Read(M, File),
            store(Key, {Id, Value}),
            Value
    end.

lookup(Key) ->
    try ets:lookup(?CACHE, Key) of
        [{_, Entry}] -> Entry;
        _ -> undefined
    catch _:_ -> undefined
    end.

store(Key, Entry) ->
    case ensure_started(?CACHE, ?MODULE, cache_init) of
        Pid when is_pid(Pid) ->
            _ = try
                    case ets:info(?CACHE, size) of
                        N when is_integer(N), N >= ?MAX_CACHED -> ets:delete_all_objects(?CACHE);
                        _ -> true
                    end
                catch _:_ -> false
                end,
            _ = try ets:insert(?CACHE, {Key, Entry}) catch _:_ -> false end,
            ok;
        _ -> ok
    end.

%% @doc The cache owner: registers, creates the table and waits for the helper to go away
%% (a detach, or the helper killed), then exits with it.
-spec cache_init(pid(), reference()) -> ok.
cache_init(Parent, Ref) ->
    try register(?CACHE, self()) of
        true ->
            _ = ets:new(?CACHE, [named_table, public, set, {read_concurrency, true}]),
            MRef = case whereis(os_sup_helper) of
                       Helper when is_pid(Helper) -> erlang:monitor(process, Helper);
                       undefined -> undefined
                   end,
            Parent ! {Ref, started},
            %% Without a helper (run by hand) it stays until killed.
            ?MODULE:cache_loop(MRef)
    catch
        error:badarg -> Parent ! {Ref, exists}, ok
    end.

%% @doc Waits, hibernated (reload-safe), until the helper is down.
-spec cache_loop(reference() | undefined) -> ok.
cache_loop(MRef) ->
    receive
        {'DOWN', MRef, _, _, _} -> ok;
        _ -> ?MODULE:cache_loop(MRef)
    after 0 ->
            erlang:hibernate(?MODULE, cache_loop, [MRef])
    end.
