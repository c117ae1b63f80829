%%% @doc `os_sup_diagnose_code' is the code part of `diagnose' (`os_sup_diagnose'):
%%% the modules of the node's own applications (not OTP's, not Elixir's, not this
%%% helper's) whose loaded code is not their `.beam' on disk.
%%% <ul>
%%%   <li>{@link scan/0} reads every such module once: its loaded MD5
%%%       (`erlang:get_module_info/2'), where it was loaded from
%%%       (`code:all_loaded/0'), and the MD5 of the `.beam' it should run (its
%%%       application's ebin, else the file it was loaded from).</li>
%%%   <li>{@link findings/2}: the `code' finding, one for all the modules that
%%%       differ, the most telling first:
%%%       loaded from memory (`Code.compile_file', `Code.compile_string',
%%%       `code:load_binary') over a module that has a `.beam' with other code;
%%%       loaded from a `.beam' outside the code path while its application's
%%%       has other code; loaded from its `.beam', which has changed since
%%%       (compiled and not loaded, or a binary loaded under that path); loaded
%%%       from a `.beam' that is gone; loaded from memory with no `.beam'
%%%       anywhere, compiled from source (not a script's: `mix.exs', tests,
%%%       `.exs' files are compiled in memory by design; not one generated from
%%%       forms at run time, with no source, as libraries such as `mochiglobal'
%%%       make to hold values).</li>
%%%   <li>{@link facts/2}: what `diagnose' of a cluster compares across
%%%       members: a short hash of each module's MD5 and where it came from.</li>
%%% </ul>
%%% What this server does is not the application's: its own modules (`os_sup_*',
%%% loaded from memory) are never looked at, and a module defined by its `eval'
%%% (compiled from the file name `eval') with no `.beam' is its own scratch. A
%%% module defined by `eval' over one that has a `.beam' is code that differs,
%%% and is said to come from an `eval'. `recompile' loads the `.beam' files it
%%% wrote (`os_sup_dev_load'), so what it loaded is the disk's; a module it
%%% could not load (a process still ran its old code) runs older code than its
%%% `.beam', and is said so.
%%%
%%% == Bounds and safety ==
%%% No process is sent anything but `code_server' (the loaded modules, one call, and
%%% a collection after it: `os_sup_code_beam:loaded/0'). One pass over the loaded
%%% modules (an MD5 and a filter per module, and a `read_file_info' of its `.beam');
%%% the `.beam' files are read (one `file:read_file/1' each, the newest first) for at
%%% most 250 ms and 5000 modules, what is left said in `checked'/`count'. What was read
%%% is kept while the file is unchanged (`os_sup_code_beam:cached_as/5'), so the next
%%% diagnosis reads the rest. `code:where_is_file/1' (which walks the code path) for at
%%% most 10 modules loaded from memory that no application lists.
-module(os_sup_diagnose_code).

-include_lib("kernel/include/file.hrl").

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([scan/0, findings/2, facts/2]).

-define(READ_MS, 250).
-define(MAX_READ, 5000).
-define(MAX_WHERE_IS, 10).
%% modules whose hashes are sent to the cluster comparison (those that differ first)
-define(MAX_FACTS, 200).
%% modules named in one finding's line
-define(NAMED, 4).

-type odd() :: #{module := module(), how := memory | elsewhere | changed | gone | new,
                 loaded := string() | memory, beam := string() | undefined,
                 source := string() | undefined, mtime := integer() | undefined}.
-type scan() :: #{modules := [{module(), binary(), string() | memory}], odd := [odd()],
                  checked := non_neg_integer(), total := non_neg_integer(),
                  started := integer()}.
-export_type([scan/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The node's own modules (of the applications that are not OTP's or Elixir's, and
%% those of no application loaded from the project or from memory), with their MD5 and
%% where they were loaded from, and those whose loaded code is not their `.beam''s.
-spec scan() -> scan().
scan() ->
    {ModApp, Ebins} = apps(),
    Lib = os_sup_lib_label:lib_modules(),
    {ok, Cwd} = file:get_cwd(),
    Path = maps:from_list([{filename:absname(D), true} || D <- code:get_path()]),
    Own = [{M, Md5, L} || {M, Loaded} <- os_sup_code_beam:loaded(), is_atom(M),
                          L <- [loaded(Loaded)], L =/= skip, not is_map_key(M, Lib),
                          own_module(M, L, ModApp, Cwd),
                          Md5 <- [md5_loaded(M)], is_binary(Md5)],
    Ref = fun(M, L) -> reference(M, L, ModApp, Ebins) end,
    %% Loaded from memory: what the .beam would be (a few looked for in the code path).
    {Memory, Files} = lists:partition(fun({_, _, L}) -> L =:= memory end, Own),
    {MemoryOdd, _} = lists:foldl(
                       fun({M, Md5, _}, {Acc, N}) ->
                               Listed = Ref(M, memory),
                               {Beam, N1} = case Listed =/= undefined andalso exists(Listed) of
                                                true -> {Listed, N};
                                                false when N < ?MAX_WHERE_IS ->
                                                    {where_is(M), N + 1};
                                                false -> {undefined, N}
                                            end,
                               {memory_odd(M, Md5, Beam) ++ Acc, N1}
                       end, {[], 0}, Memory),
    %% Loaded from a file: its .beam's MD5, the newest files first, within the budget.
    Stat = [{Mtime, M, Md5, L, B, Id}
            || {M, Md5, L} <- lists:sublist(Files, ?MAX_READ),
               {Mtime, B, Id} <- [stat(Ref(M, L), L)]],
    Deadline = erlang:monotonic_time(millisecond) + ?READ_MS,
    {FileOdd, Checked} = check(lists:reverse(lists:sort(Stat)), Path, Deadline, [], 0),
    #{modules => Own, odd => order(MemoryOdd ++ FileOdd),
      checked => Checked + length(Memory), total => length(Own),
      started => node_started()}.

%% @doc The `code' finding of a {@link scan/0}: the modules whose loaded code is not their
%% `.beam''s, the most telling first, with where each came from; none when all are.
-spec findings(scan(), map()) -> [map()].
findings(#{odd := []}, _Ctx) ->
    [];
findings(#{odd := [First | Rest], started := Started}, #{fmt := Fmt} = Ctx) ->
    {ok, Cwd} = file:get_cwd(),
    Name = os_sup_lib_render:name(maps:get(module, First), Fmt),
    Others = [[os_sup_lib_render:name(M, Fmt), " (", short(O), ")"]
              || #{module := M} = O <- lists:sublist(Rest, ?NAMED - 1)],
    More = case length(Rest) - (?NAMED - 1) of
               N when N > 0 -> fmt(", +~b more", [N]);
               _ -> <<>>
           end,
    Also = case Others of
               [] -> [];
               _ -> ["; also ", lists:join(", ", Others), More]
           end,
    %% Who loaded it from memory (`os_sup_code_loads'), when the helper saw it: the cause,
    %% whose code the next call shows.
    Loader = case maps:get(how, First) of
                 How when How =:= memory; How =:= new; How =:= changed ->
                     os_sup_code_loads:loaded_by(maps:get(module, First));
                 _ -> undefined
             end,
    Found = os_sup_diagnose:finding(code, {["code: ", describe(First, Name, Started, Cwd),
                                            loader_text(Loader, Fmt)], Also},
                                    {source, [{<<"target">>, loader_target(Loader, Name, Fmt)}]},
                                    undefined, {Name, undefined}, Ctx),
    [Found#{facts := #{modules => 1 + length(Rest)}}].

%% @doc What `diagnose' of a cluster compares: `#{count, listed, checked, modules, dirs}'
%% (`checked': how many were compared with their `.beam' in time), `modules' mapping
%% each module (those that differ first, at most 200) to `[Hash, Where]', the hash a short one
%% of its MD5 and `Where' the index in `dirs' of the directory it was loaded from, or a text
%% when it was not loaded from its `.beam' (`memory, compiled from lib/x.ex') followed by
%% whether it was loaded from memory (`[Hash, Text, true]': the reader decides on that, not
%% on the text).
-spec facts(scan(), os_sup_lib_render:fmt()) -> map().
facts(#{modules := Modules, odd := Odd, total := Total} = Scan, Fmt) ->
    {ok, Cwd} = file:get_cwd(),
    OddMap = maps:from_list([{M, O} || #{module := M} = O <- Odd]),
    %% Modules defined by this server's evals alone are its own, not the cluster's.
    Shown = [E || {M, _, L} = E <- Modules,
                  not (L =:= memory andalso not maps:is_key(M, OddMap))],
    {First, Plain} = lists:partition(fun({M, _, _}) -> maps:is_key(M, OddMap) end, Shown),
    Listed = lists:sublist(First ++ lists:sort(Plain), ?MAX_FACTS),
    Dirs = lists:usort([filename:dirname(L) || {M, _, L} <- Listed, is_list(L),
                                               not maps:is_key(M, OddMap)]),
    Index = maps:from_list(lists:zip(Dirs, lists:seq(0, length(Dirs) - 1))),
    #{count => Total, listed => length(Listed), checked => maps:get(checked, Scan),
      dirs => [rel(D, Cwd) || D <- Dirs],
      modules => maps:from_list(
                   [{os_sup_lib_render:name(M, Fmt),
                     case OddMap of
                         #{M := O} -> [erlang:phash2(Md5),
                                       unicode:characters_to_binary(where(O, Cwd)),
                                       L =:= memory];
                         _ -> [erlang:phash2(Md5), maps:get(filename:dirname(L), Index)]
                     end}
                    || {M, Md5, L} <- Listed])}.

%%%===================================================================
%%% Private: which modules are the node's own
%%%===================================================================

%% Module => application, for the loaded applications that are not OTP's or Elixir's, and
%% each one's ebin.
apps() ->
    System = os_sup_lib_label:system_apps(),
    Apps = [A || {A, _, _} <- catch_list(fun application:loaded_applications/0),
                 not lists:member(A, System)],
    ModApp = maps:from_list([{M, A} || A <- Apps, M <- app_modules(A), is_atom(M)]),
    Ebins = maps:from_list([{A, D} || A <- Apps, D <- [ebin(A)], is_list(D)]),
    {ModApp, Ebins}.

app_modules(A) ->
    try application:get_key(A, modules) of
        {ok, Ms} when is_list(Ms) -> Ms;
        _ -> []
    catch _:_ -> []
    end.

%% The application's ebin directory (`code:lib_dir(App, ebin)', deprecated since OTP 26),
%% `undefined' when the application is not known.
ebin(App) ->
    try code:lib_dir(App) of
        Dir when is_list(Dir) -> filename:join(Dir, "ebin");
        _ -> undefined
    catch _:_ -> undefined
    end.

%% Where a module was loaded from: a file, memory, or `skip' (preloaded, cover compiled).
loaded(Path) when is_list(Path), Path =/= [] ->
    %% A name given to `code:load_binary/3' that is not a path (the code path's are absolute).
    case filename:pathtype(Path) of
        absolute -> Path;
        _ -> memory
    end;
loaded([]) -> memory;
loaded(in_memory) -> memory;
loaded(_) -> skip.

%% The node's own (OTP's and Elixir's modules left out before): not this helper's, not
%% Elixir's scratch modules (`elixir_compiler_0'),
%% of an application that is not OTP's or Elixir's, or of none and loaded from the project
%% or from memory (but not from a script: `.exs' files are compiled in memory by design).
own_module(M, Loaded, ModApp, Cwd) ->
    Name = atom_to_list(M),
    case lists:prefix("os_sup_", Name) orelse lists:prefix("elixir_compiler_", Name) of
        true -> false;
        false when is_map_key(M, ModApp) -> true;
        false when Loaded =:= memory ->
            case source(M) of
                undefined -> true;
                Source -> filename:extension(Source) =/= ".exs"
            end;
        false ->
            not system_path(Loaded) andalso lists:prefix(Cwd ++ "/", Loaded)
    end.

system_path(Path) ->
    lists:prefix(code:root_dir() ++ "/", Path).

%%%===================================================================
%%% Private: the .beam each module should run
%%%===================================================================

%% Its application's ebin's `.beam' (whether it is there is seen when it is read), else the
%% file it was loaded from.
reference(M, Loaded, ModApp, Ebins) ->
    case {ModApp, Loaded} of
        {#{M := App}, _} when is_map_key(App, Ebins) ->
            filename:join(maps:get(App, Ebins), atom_to_list(M) ++ ".beam");
        {_, memory} -> undefined;
        _ -> Loaded
    end.

where_is(M) ->
    case code:where_is_file(atom_to_list(M) ++ ".beam") of
        File when is_list(File) -> File;
        _ -> undefined
    end.

%% A module loaded from memory: odd when its .beam has other code, or when there is none and
%% it was compiled from source (a file or a string), but not by this server's `eval' (its
%% scratch). One made from forms at run time, with no source (a library's generated module,
%% as `mochiglobal' makes to hold a value), is how that library works.
memory_odd(M, _Md5, undefined) ->
    Source = source(M),
    case Source =:= undefined orelse eval_source(Source) of
        true -> [];
        false -> [odd(M, new, memory, undefined, Source, undefined)]
    end;
memory_odd(M, Md5, Beam) ->
    case md5_file(Beam) of
        Md5 -> [];
        undefined -> [];
        _ -> [odd(M, memory, memory, Beam, source(M), mtime(Beam))]
    end.

%% Files loaded from, newest first, compared with their .beam until the deadline.
check([], _Path, _Deadline, Acc, N) ->
    {Acc, N};
check(_, _Path, _Deadline, Acc, N) when N >= ?MAX_READ ->
    {Acc, N};
check([{Mtime, M, Md5, Loaded, Beam, Id} | Rest], Path, Deadline, Acc, N) ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> {Acc, N};
        false ->
            Odd = case {Mtime, md5_cached(M, Beam, Id)} of
                      {undefined, _} ->
                          [odd(M, gone, Loaded, Beam, source(M), undefined)];
                      {_, Md5} -> [];
                      %% unreadable: nothing to compare with
                      {_, undefined} -> [];
                      {_, _} when Beam =/= Loaded ->
                          %% Loaded from another file than its application's .beam: the same
                          %% code as that file, from a directory of the code path (consolidated
                          %% protocols), is how the node runs.
                          case md5_file(Loaded) =:= Md5 andalso
                              is_map_key(filename:dirname(filename:absname(Loaded)), Path) of
                              true -> [];
                              false -> [odd(M, elsewhere, Loaded, Beam, source(M), Mtime)]
                          end;
                      {_, _} ->
                          [odd(M, changed, Loaded, Beam, source(M), Mtime)]
                  end,
            check(Rest, Path, Deadline, Odd ++ Acc, N + 1)
    end.

odd(M, How, Loaded, Beam, Source, Mtime) ->
    #{module => M, how => How, loaded => Loaded, beam => Beam, source => Source,
      mtime => Mtime}.

%% The most telling first: code loaded from memory over a .beam, then from elsewhere, then
%% changed on disk, gone, and modules with no .beam at all.
order(Odd) ->
    Rank = fun(#{how := H}) ->
                   length(lists:takewhile(fun(K) -> K =/= H end,
                                          [memory, elsewhere, changed, gone, new]))
           end,
    lists:sort(fun(A, B) -> {Rank(A), maps:get(module, A)} =< {Rank(B), maps:get(module, B)} end,
               Odd).

%%%===================================================================
%%% Private: reading code
%%%===================================================================

md5_loaded(M) ->
    try erlang:get_module_info(M, md5) catch _:_ -> undefined end.

%% The MD5 of a .beam's code, as the loader computes it (a file in an archive too).
md5_file(undefined) ->
    undefined;
md5_file(File) ->
    Bin = case file:read_file(File) of
              {ok, B} -> B;
              _ ->
                  try erl_prim_loader:get_file(File) of
                      {ok, B, _} -> B;
                      _ -> undefined
                  catch _:_ -> undefined
                  end
          end,
    try beam_lib:md5(Bin) of
        {ok, {_, Md5}} -> Md5;
        _ -> undefined
    catch
        _:_ -> undefined
    end.

%% The MD5 of a .beam, read again only once the file changed (a diagnosis that ran out of time
%% reads the rest the next time).
md5_cached(M, File, Id) ->
    os_sup_code_beam:cached_as(beam_md5, M, File, Id, fun(_, F) -> md5_file(F) end).

%% `{Mtime, File, Id}' of the .beam a module loaded from `Loaded' should run: `Beam', else
%% `Loaded' (`Id' as `os_sup_code_beam:cached_as/5' keeps it); an `undefined' mtime when
%% neither is there.
stat(Beam, Loaded) ->
    case file:read_file_info(Beam, [{time, posix}]) of
        {ok, #file_info{mtime = T} = FI} -> {T, Beam, {Beam, element(2, FI), T}};
        _ when Beam =/= Loaded -> stat(Loaded, Loaded);
        _ -> {mtime(Beam), Beam, undefined}
    end.

%% Modification time (posix seconds), `undefined' when the file is not there.
mtime(undefined) ->
    undefined;
mtime(File) ->
    case file:read_file_info(File, [{time, posix}]) of
        {ok, #file_info{mtime = T}} -> T;
        _ ->
            try erl_prim_loader:read_file_info(File) of
                {ok, #file_info{}} -> 0;
                _ -> undefined
            catch _:_ -> undefined
            end
    end.

exists(File) ->
    mtime(File) =/= undefined.

%% The source file the loaded code was compiled from.
source(M) ->
    try proplists:get_value(source, erlang:get_module_info(M, compile)) of
        S when is_list(S) -> S;
        _ -> undefined
    catch _:_ -> undefined
    end.

%% Compiled by this server's `eval' (Elixir's `Code.eval_string' with file `eval').
eval_source(Source) ->
    is_list(Source) andalso filename:basename(Source) =:= "eval".

node_started() ->
    erlang:convert_time_unit(erlang:system_info(start_time) + erlang:time_offset(), native,
                             second).

catch_list(F) ->
    try F() of
        L when is_list(L) -> L;
        _ -> []
    catch
        _:_ -> []
    end.

%%%===================================================================
%%% Private: text
%%%===================================================================

describe(#{how := memory, beam := Beam} = O, Name, _Started, Cwd) ->
    [Name, " runs code loaded from memory, not its .beam: ", compiled(O, Cwd),
     "; its .beam ", rel(Beam, Cwd), " has other code", exports(O)];
describe(#{how := elsewhere, loaded := Loaded, beam := Beam} = O, Name, _Started, Cwd) ->
    [Name, " was loaded from ", rel(Loaded, Cwd), ", outside the code path, not from its "
     "application's .beam ", rel(Beam, Cwd), ", which has other code", exports(O)];
describe(#{how := changed, beam := Beam, mtime := Mtime} = O, Name, Started, Cwd) ->
    %% Both in whole seconds: a .beam written in the second the node started (a compile
    %% right after a fast boot) was written after it as likely as not, and a binary loaded
    %% under the path of a .beam that new is the rarer story.
    Why = case is_integer(Mtime) andalso Mtime >= Started of
              true ->
                  fmt(", written ~ts ago, after the node started: compiled since and not loaded "
                      "(`recompile` loads it; a `recompile` that could not purge its old code "
                      "leaves it so)", [ago(Mtime)]);
              false ->
                  <<", older than the node: a binary was loaded under its path "
                    "(code:load_binary)">>
          end,
    [Name, " runs code that differs from its .beam ", rel(Beam, Cwd), Why, exports(O)];
describe(#{how := gone, loaded := Loaded}, Name, _Started, Cwd) ->
    [Name, " runs code whose .beam ", rel(Loaded, Cwd), " is gone (deleted since it was loaded:"
     " the module was removed or renamed by a compile)"];
describe(#{how := new} = O, Name, _Started, Cwd) ->
    [Name, " was loaded from memory and has no .beam: ", compiled(O, Cwd)].

%% `; loaded 3 min ago by Hotfix.push/3 lib/hotfix.ex:12 (#PID<0.1.0>, an rpc from a@h)'.
loader_text(undefined, _Fmt) ->
    [];
loader_text(#{at_ms := At, pid := Pid, frame := Frame, from_node := From}, Fmt) ->
    Who = case Frame of
              undefined -> os_sup_lib_label:label(Pid, Fmt);
              _ -> [os_sup_proc_groups:frame_text(Frame, Fmt), " (",
                    os_sup_lib_render:pid(Pid, Fmt), ")"]
          end,
    ["; loaded ", ago(At div 1000), " ago by ", Who,
     case From of
         undefined -> [];
         _ -> [", an rpc from ", atom_to_binary(From, utf8)]
     end].

loader_target(#{frame := #{mfa := MFA}}, _Name, Fmt) -> os_sup_lib_render:mfa(MFA, Fmt);
loader_target(_, Name, _Fmt) -> Name.

%% Where the loaded code came from, for the finding's line and for the cluster's.
compiled(#{source := undefined}, _Cwd) ->
    <<"no source recorded (code:load_binary of a binary)">>;
compiled(#{source := Source}, Cwd) ->
    case filename:basename(Source) of
        "nofile" -> <<"compiled from a string (Code.compile_string or the like)">>;
        "eval" -> <<"defined by an `eval` of this server">>;
        _ -> ["compiled from ", rel(Source, Cwd),
              case exists(Source) of true -> ""; false -> " (not on this machine)" end]
    end.

%% What the loaded code exports that its .beam does not, and the reverse.
exports(#{module := M, beam := Beam}) when is_list(Beam) ->
    Loaded = try lists:sort(M:module_info(exports)) catch _:_ -> undefined end,
    Disk = try beam_lib:chunks(Beam, [exports]) of
               {ok, {_, [{exports, E}]}} -> lists:sort(E);
               _ -> undefined
           catch _:_ -> undefined
           end,
    case is_list(Loaded) andalso is_list(Disk) of
        false -> [];
        true ->
            Fa = fun(L) -> lists:join(", ", [fmt("~ts/~b", [F, A])
                                              || {F, A} <- lists:sublist(L, 3)]) end,
            Added = Loaded -- Disk,
            Removed = Disk -- Loaded,
            case {Added, Removed} of
                {[], []} -> " (the same exports)";
                _ -> [" (exports",
                      case Added of [] -> ""; _ -> [" +", Fa(Added)] end,
                      case Removed of [] -> ""; _ -> [" -", Fa(Removed)] end, ")"]
            end
    end;
exports(_) ->
    [].

short(#{how := memory}) -> <<"loaded from memory">>;
short(#{how := elsewhere, loaded := L}) -> ["loaded from ", filename:dirname(L)];
short(#{how := changed}) -> <<"differs from its .beam">>;
short(#{how := gone}) -> <<"its .beam is gone">>;
short(#{how := new}) -> <<"from memory, no .beam">>.

%% Where a module that differs came from, for the cluster's comparison.
where(#{how := How} = O, Cwd) when How =:= memory; How =:= new ->
    ["memory, ", compiled(O, Cwd)];
where(#{how := elsewhere, loaded := L}, Cwd) ->
    ["a .beam outside the code path, ", rel(L, Cwd)];
where(#{how := changed, beam := B}, Cwd) ->
    ["its .beam before it changed, ", rel(filename:dirname(B), Cwd)];
where(#{how := gone, loaded := L}, Cwd) ->
    ["a .beam now gone, ", rel(L, Cwd)].

rel(Path, Cwd) ->
    os_sup_code_beam:relative(Path, Cwd).

ago(Mtime) ->
    case max(0, os:system_time(second) - Mtime) of
        S when S < 120 -> fmt("~b s", [S]);
        S when S < 7200 -> fmt("~b min", [S div 60]);
        S -> fmt("~b h", [S div 3600])
    end.
