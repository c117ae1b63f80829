%%% @doc `os_sup_dev_load' loads what a `recompile' (`os_sup_dev') changed
%%% into the running node, without ever leaving a module of the running
%%% application unloaded.
%%%
%%% Each `.beam' of the project's own applications and of its
%%% consolidated protocols is compared (MD5 of the code) with what is
%%% loaded: a changed module is loaded as the new version with
%%% `code:atomic_load/1' (all changed modules at once); processes running
%%% the previous version keep it until their next external call. Before
%%% that, each module's old-old code is soft-purged (retried for up to
%%% 1 s): a module a process still runs in its old-old code is not loaded
%%% and is reported (`not_loaded'), never killed. New modules are loaded;
%%% modules whose `.beam' is gone are soft-purged and deleted. Nothing is
%%% ever deleted and then loaded.
%%%
%%% Runs in the recompile's worker process; starts no process.
-module(os_sup_dev_load).

%% API
-import(os_sup_lib_time, [now_ms/0]).

-export([beams/1, plan/5, load/1, remove/1]).

-include_lib("kernel/include/file.hrl").

%% soft purge: retries over this long for processes to leave old-old code
-define(PURGE_MS, 1000).
-define(PURGE_STEP_MS, 20).

-type beams() :: #{module() => file:filename()}.
-type entry() :: {module(), file:filename(), binary()}.
-export_type([beams/0, entry/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Module => .beam path, for every .beam in `Dirs'.
-spec beams([file:filename()]) -> beams().
beams(Dirs) ->
    maps:from_list(
      [{list_to_atom(filename:rootname(F)), filename:join(Dir, F)}
       || Dir <- Dirs, {ok, Files} <- [file:list_dir(Dir)], F <- Files,
          filename:extension(F) =:= ".beam"]).

%% @doc What to load and what to remove, from the .beam files `Before' and `After' the
%% compile (started at `StartSec', posix seconds) in `Dirs':
%%   changed   loaded, and its .beam has other code: load it;
%%   added     a .beam that was not there before the compile, not loaded: load it;
%%   unchanged rewritten by this compile with the same code (`Consolidated' protocols aside);
%%   removed   its .beam is gone: delete it if loaded.
%% A module that is not loaded and was there before is left to be loaded on its first call.
-spec plan(beams(), beams(), integer(), [file:filename()], [file:filename()]) ->
          #{changed := [module()], added := [module()], unchanged := [module()],
            removed := [module()], load := [entry()], remove := [module()]}.
plan(Before, After, StartSec, Dirs, Consolidated) ->
    Entries = maps:fold(
                fun(M, Path, Acc) ->
                        case classify(M, Path, Before, StartSec, Consolidated) of
                            skip -> Acc;
                            Entry -> [Entry | Acc]
                        end
                end, [], After),
    Gone = [M || M <- maps:keys(Before), not maps:is_key(M, After)]
        ++ [M || {M, Path} <- os_sup_code_beam:loaded(), is_list(Path), not maps:is_key(M, After),
                 not maps:is_key(M, Before), in_dirs(Path, Dirs)],
    Removed = lists:usort(Gone),
    Of = fun(Kind) -> lists:sort([M || {K, M, _, _} <- Entries, K =:= Kind]) end,
    #{changed => Of(changed), added => Of(added), unchanged => Of(unchanged),
      removed => Removed,
      load => lists:sort([{M, Path, Bin} || {K, M, Path, Bin} <- Entries,
                                            K =:= changed orelse K =:= added]),
      remove => [M || M <- Removed, code:is_loaded(M) =/= false]}.

%% @doc Loads the modules as new versions, all at once when possible; a module whose old-old
%% code a process still runs is not loaded (soft purge) and is reported, with the reason.
-spec load([entry()]) -> {Loaded :: [module()], NotLoaded :: [{module(), binary()}]}.
load([]) ->
    {[], []};
load(Modules) ->
    {Purged, Busy} = soft_purge([M || {M, _, _} <- Modules]),
    Loadable = [Entry || {M, _, _} = Entry <- Modules, lists:member(M, Purged)],
    NotPurged = [{M, <<"a process still runs its old code (not purged; the node keeps the "
                      "current version): recompile again once it is done">>} || M <- Busy],
    case Loadable of
        [] ->
            {[], NotPurged};
        _ ->
            case code:atomic_load(Loadable) of
                ok ->
                    {[M || {M, _, _} <- Loadable], NotPurged};
                {error, _} ->
                    %% e.g. an -on_load module: one at a time.
                    lists:foldr(fun(Entry, {Ok, Failed}) ->
                                        case load_one(Entry) of
                                            ok -> {[element(1, Entry) | Ok], Failed};
                                            {error, Why} -> {Ok, [{element(1, Entry), Why}
                                                                  | Failed]}
                                        end
                                end, {[], NotPurged}, Loadable)
            end
    end.

%% @doc Deletes modules whose .beam is gone (their processes keep running the old code);
%% returns those deleted (a module a process still runs in its old code is left).
-spec remove([module()]) -> [module()].
remove(Modules) ->
    {Purged, _Busy} = soft_purge(Modules),
    [M || M <- Purged, code:delete(M)].

%%%===================================================================
%%% Private
%%%===================================================================

classify(M, Path, Before, StartSec, Consolidated) ->
    case code:is_loaded(M) of
        {file, _} ->
            case file:read_file(Path) of
                {ok, Bin} ->
                    case {md5(Bin), loaded_md5(M)} of
                        {Same, Same} when Same =/= undefined ->
                            case touched(Path, StartSec)
                                andalso not in_dirs(Path, Consolidated) of
                                true -> {unchanged, M, Path, none};
                                false -> skip
                            end;
                        {undefined, _} -> skip;
                        _ -> {changed, M, Path, Bin}
                    end;
                _ ->
                    skip
            end;
        false ->
            case maps:is_key(M, Before) of
                true -> skip;
                false ->
                    case file:read_file(Path) of
                        {ok, Bin} -> {added, M, Path, Bin};
                        _ -> skip
                    end
            end
    end.

md5(Bin) ->
    try beam_lib:md5(Bin) of
        {ok, {_, Md5}} -> Md5;
        _ -> undefined
    catch _:_ -> undefined
    end.

loaded_md5(M) ->
    try M:module_info(md5) catch _:_ -> undefined end.

%% Written by this compile (Mix stamps the .beam files it writes with its start time).
touched(Path, StartSec) ->
    case file:read_file_info(Path, [{time, posix}]) of
        {ok, #file_info{mtime = Mtime}} -> Mtime >= StartSec;
        _ -> false
    end.

in_dirs(Path, Dirs) ->
    lists:member(filename:dirname(Path), Dirs).

load_one({M, Path, Bin}) ->
    case code:soft_purge(M) of
        false ->
            {error, <<"a process still runs its old code (not purged)">>};
        true ->
            case code:load_binary(M, Path, Bin) of
                {module, M} -> ok;
                {error, Reason} ->
                    {error, iolist_to_binary(io_lib:format("load failed: ~tp", [Reason]))}
            end
    end.

%% Soft-purges each module, retrying for up to ?PURGE_MS; returns {Purged, StillBusy}.
soft_purge(Modules) ->
    soft_purge(Modules, [], now_ms() + ?PURGE_MS).

soft_purge(Modules, Purged, Until) ->
    {Ok, Busy} = lists:partition(fun code:soft_purge/1, Modules),
    case Busy =/= [] andalso now_ms() < Until of
        true ->
            timer:sleep(?PURGE_STEP_MS),
            soft_purge(Busy, Ok ++ Purged, Until);
        false ->
            {Ok ++ Purged, Busy}
    end.
