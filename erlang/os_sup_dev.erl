%%%-------------------------------------------------------------------
%%% @doc `os_sup_dev' supports the edit, compile, test loop inside a running
%%% Mix project node.
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link run/2} with `recompile': compile the project and hot-load
%%%       what changed without ever leaving a module of the running
%%%       application unloaded; report the modules added, changed, removed
%%%       and unchanged, the compiler's diagnostics, and whether the
%%%       application survived the reload.</li>
%%%   <li>{@link log/2}: the `logger' handler that watches the node while
%%%       the new code is loaded (installed and removed by `recompile').</li>
%%% </ul>
%%%
%%% == Why the compile runs in another OS process ==
%%% Mix's Elixir compiler (1.14, `Mix.Compilers.Elixir') purges and deletes
%%% (`code:purge/1', `code:delete/1') every module of a stale source file
%%% before compiling it again, and its parallel compiler loads each new
%%% module as soon as it is compiled. Run inside the application's node (as
%%% IEx's `recompile/0' does), that leaves every module of the edited file
%%% without current code for the length of the compile: busy processes hit
%%% `undef', their supervisors give up and the application exits. No
%%% compiler option avoids it. So the compile runs where it cannot touch
%%% the running code: a separate `elixir' OS process (the same Elixir
%%% installation, the node's environment, `MIX_ENV' and `MIX_TARGET')
%%% runs Mix's own `compile' task in the project directory, with Mix's
%%% dependency tracking, diagnostics and protocol consolidation, and
%%% writes the `.beam' files of `_build'. It reports its status and
%%% diagnostics as one marked line on its output; everything else it
%%% prints goes to the node's stdout (the sidecar's logs). It halts when
%%% its stdin closes, so a worker killed by its deadline takes it along.
%%% A compile error leaves the node's code untouched.
%%%
%%% == Loading ==
%%% Then, in the node, each `.beam' of the project's own applications and
%%% of its consolidated protocols is compared (MD5 of the code) with what
%%% is loaded: a changed module is loaded as the new version with
%%% `code:atomic_load/1' (all changed modules at once); processes running
%%% the previous version keep it until their next external call. Before
%%% that, each module's old-old code is soft-purged (retried for up to
%%% 1 s): a module a process still runs in its old-old code is not loaded
%%% and is reported (`not_loaded'), never killed. New modules are loaded;
%%% modules whose `.beam' is gone are soft-purged and deleted. Nothing is
%%% ever deleted and then loaded.
%%%
%%% == Watching ==
%%% Around the load, the started applications are compared and a
%%% temporary `logger' handler collects supervisor reports, crash reports
%%% and application exits for `watch_ms' (default 500 ms, longer once
%%% something crashed, to see whether a supervisor gives up). An
%%% application that stopped, a supervisor that gave up or a process that
%%% crashed makes the result an error that says so, with the log lines.
%%%
%%% Runs in the helper's worker process, under the request's deadline; one
%%% recompile at a time per node (the worker registers itself).
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_dev).

-export([run/2]).
%% logger handler callback
-export([log/2]).

-include_lib("kernel/include/file.hrl").

-define(MAX_DIAGNOSTICS, 100).
-define(MAX_MESSAGE_BYTES, 2048).
%% output of the compiler kept (the rest is dropped, oldest first)
-define(MAX_OUTPUT_BYTES, 4194304).
%% lines of compiler output quoted when the compiler fails without a report
-define(TAIL_LINES, 30).
-define(DEFAULT_TIMEOUT_MS, 60000).
-define(DEFAULT_WATCH_MS, 500).
-define(MAX_WATCH_MS, 10000).
%% once a process crashed, watch at least this long after the first crash
-define(CRASH_WATCH_MS, 1500).
%% once a supervisor gave up, wait this long for its application's exit
-define(EXIT_WATCH_MS, 300).
%% time kept for loading and answering after the compile
-define(LOAD_BUDGET_MS, 2500).
%% soft purge: retries over this long for processes to leave old-old code
-define(PURGE_MS, 1000).
-define(PURGE_STEP_MS, 20).
%% logger events kept from the watch
-define(MAX_EVENTS, 200).
-define(MAX_LOG_LINES, 30).
-define(LINE_BYTES, 1024).
%% log lines quoted in the text, and their length there
-define(TEXT_LOG_LINES, 10).
-define(TEXT_LINE_BYTES, 300).
-define(WATCH_HANDLER, os_sup_dev_watch).
-define(LOCK, os_sup_dev_recompile).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Runs a development tool: `recompile' (args: `force', `timeout_ms', `watch_ms').
-spec run(atom(), map()) -> {ok, #{text := binary(), data := map()}}
                          | {error, #{kind := atom(), message := binary()}}.
run(recompile, Args) ->
    case code:is_loaded('Elixir.Mix.Project') of
        {file, _} -> locked(Args);
        false -> failure(unavailable, <<"recompile needs a node started from a Mix project "
                                      "(Mix is not running here)">>)
    end;
run(Tool, _Args) ->
    failure(unknown_tool, iolist_to_binary(io_lib:format("unknown tool ~tp", [Tool]))).

%% @doc `logger' handler: sends a summary of each supervisor report, crash report and
%% application exit (at most ?MAX_EVENTS) to the recompile that installed it; never fails.
-spec log(logger:log_event(), logger:handler_config()) -> ok.
log(#{meta := Meta} = Event, #{config := #{watcher := Pid, counter := Counter}}) ->
    try
        case maps:get(os_sup_eval, Meta, false) =/= true andalso summary(Event) of
            false ->
                ok;
            Summary ->
                counters:add(Counter, 1, 1),
                case counters:get(Counter, 1) =< ?MAX_EVENTS of
                    true ->
                        Line = line(Event),
                        _ = erlang:send(Pid, {?WATCH_HANDLER, Summary#{line => Line}},
                                        [noconnect, nosuspend]),
                        ok;
                    false ->
                        ok
                end
        end
    catch
        _:_ -> ok
    end;
log(_Event, _Config) ->
    ok.

%%%===================================================================
%%% Private: the recompile
%%%===================================================================

%% One recompile at a time: two compiles would write the same _build.
locked(Args) ->
    try register(?LOCK, self()) of
        true ->
            try recompile(options(Args))
            after
                catch unregister(?LOCK)
            end
    catch
        error:badarg ->
            failure(busy, <<"a recompile is already running on this node; wait for it">>)
    end.

options(Args) ->
    Timeout = case maps:get(timeout_ms, Args, ?DEFAULT_TIMEOUT_MS) of
                  T when is_integer(T), T > 0 -> T;
                  _ -> ?DEFAULT_TIMEOUT_MS
              end,
    Watch = case maps:get(watch_ms, Args, ?DEFAULT_WATCH_MS) of
                W when is_integer(W), W >= 0 -> min(W, ?MAX_WATCH_MS);
                _ -> ?DEFAULT_WATCH_MS
            end,
    T0 = now_ms(),
    #{force => maps:get(force, Args, false) =:= true,
      t0 => T0,
      deadline => T0 + Timeout,
      watch_ms => Watch}.

recompile(#{t0 := T0, deadline := Deadline, watch_ms := Watch} = Opts) ->
    case project() of
        {ok, Project} ->
            Before = beams(maps:get(dirs, Project)),
            StartSec = os:system_time(second),
            ok = backdate_manifests(maps:get(manifests, Project)),
            CompileDeadline = Deadline - Watch - ?CRASH_WATCH_MS - ?LOAD_BUDGET_MS,
            case compile(Project, Opts, max(T0 + 1000, CompileDeadline)) of
                {ok, Status, Count, Diagnostics} ->
                    Shown = lists:sublist(Diagnostics, ?MAX_DIAGNOSTICS),
                    Compiled = #{status => Status,
                                 diagnostics => [diagnostic(D) || D <- Shown],
                                 diagnostic_count => Count,
                                 compile_ms => now_ms() - T0},
                    case Status of
                        error -> reply(compile_failed(Compiled, T0));
                        _ -> reply(reload(Project, Before, StartSec, Compiled, Opts))
                    end;
                {error, _, _} = Error ->
                    compile_error(Error)
            end;
        {error, Message} ->
            failure(unavailable, Message)
    end.

%% Where the project lives and which directories hold its own modules.
project() ->
    try
        Config = 'Elixir.Mix.Project':config(),
        Dir = case catch 'Elixir.Mix.Project':project_file() of
                  File when is_binary(File) -> filename:dirname(chars(File));
                  _ -> element(2, file:get_cwd())
              end,
        %% {App, its source directories}
        Apps = case 'Elixir.Mix.Project':'umbrella?'(Config) of
                   true ->
                       [{App, [filename:join([Dir, chars(Path), "lib"])]}
                        || {App, Path} <- maps:to_list('Elixir.Mix.Project':apps_paths(Config))];
                   false ->
                       Paths = case proplists:get_value(elixirc_paths, Config) of
                                   L when is_list(L) -> L;
                                   _ -> [<<"lib">>]
                               end,
                       [{proplists:get_value(app, Config),
                         [filename:join(Dir, chars(P)) || P <- Paths]}]
               end,
        Ebins = [Ebin || {App, _} <- Apps, is_atom(App), Ebin <- [ebin(App)], Ebin =/= false],
        Manifests = [{filename:join([filename:dirname(Ebin), ".mix", "compile.elixir"]), Srcs}
                     || {App, Srcs} <- Apps, is_atom(App), Ebin <- [ebin(App)],
                        Ebin =/= false],
        Consolidated = case lists:keyfind(consolidate_protocols, 1, Config) of
                           {_, false} -> [];
                           _ -> [chars('Elixir.Mix.Project':consolidation_path(Config))]
                       end,
        {ok, #{dir => Dir, ebins => Ebins, consolidated => Consolidated, manifests => Manifests,
               dirs => Ebins ++ [D || D <- Consolidated, filelib:is_dir(D)],
               env => atom_to_list('Elixir.Mix':env()),
               target => atom_to_list('Elixir.Mix':target())}}
    catch
        Class:Reason ->
            {error, iolist_to_binary(
                      io_lib:format("cannot read the Mix project of this node (~tp); recompile "
                                    "needs a node started from a Mix project: ~ts",
                                    [Class, os_sup_render:term(Reason, erlang, 512)]))}
    end.

ebin(App) ->
    case code:lib_dir(App, ebin) of
        Dir when is_list(Dir) -> Dir;
        _ -> false
    end.

%%%===================================================================
%%% Private: compiling in a separate OS process
%%%===================================================================

%% Mix's Elixir compiler sees a source as changed when its size differs, or when its mtime
%% (in seconds) is after the manifest's (the previous compile's start) and its digest differs.
%% A same-size edit saved in the same second as the previous compile started would be missed
%% (`noop', the old code kept). Where a source's mtime is not before the manifest's, the
%% manifest is dated one second back, so that Mix compares the digests of those sources.
backdate_manifests(Manifests) ->
    lists:foreach(fun backdate_manifest/1, Manifests).

backdate_manifest({Manifest, Srcs}) ->
    case file:read_file_info(Manifest, [{time, posix}]) of
        {ok, #file_info{mtime = M, atime = A}} ->
            Ambiguous = fun(_, true) -> true;
                           (F, false) -> mtime(F) >= M
                        end,
            Same = lists:foldl(fun(Src, Found) ->
                                       filelib:fold_files(Src, "\\.ex$", true, Ambiguous, Found)
                               end, false, Srcs),
            _ = Same andalso file:write_file_info(Manifest, #file_info{mtime = M - 1, atime = A},
                                                 [{time, posix}]),
            ok;
        _ ->
            ok
    end.

mtime(File) ->
    case file:read_file_info(File, [{time, posix}]) of
        {ok, #file_info{mtime = M}} -> M;
        _ -> 0
    end.

%% Runs Mix's `compile' task in a separate `elixir' process; returns its status and
%% diagnostics, or `{error, Kind, Message}'.
compile(#{dir := Dir, env := Env, target := Target}, #{force := Force}, Deadline) ->
    case elixir_executable() of
        false ->
            {error, unavailable, <<"cannot find the `elixir' executable of this node's Elixir">>};
        Elixir ->
            Marker = marker(),
            Flags = ["--return-errors", "--no-deps-check"] ++ ["--force" || Force],
            Env1 = [{"MIX_ENV", Env}, {"MIX_TARGET", Target},
                    {"OS_SUP_RECOMPILE_MARKER", binary_to_list(Marker)}],
            try open_port({spawn_executable, Elixir},
                          [{args, ["-e", driver(), "--" | Flags]}, {cd, Dir}, {env, Env1},
                           binary, exit_status, stderr_to_stdout, use_stdio, hide]) of
                Port ->
                    collect(Port, Marker, Deadline, [], 0)
            catch
                error:Reason ->
                    {error, unavailable,
                     iolist_to_binary(io_lib:format("cannot start ~ts to compile: ~tp",
                                                    [Elixir, Reason]))}
            end
    end.

%% The `elixir' of the Elixir this node runs, else the first one on the PATH.
elixir_executable() ->
    Beside = case code:lib_dir(elixir) of
                 Lib when is_list(Lib) -> filename:join([Lib, "..", "..", "bin", "elixir"]);
                 _ -> ""
             end,
    case filelib:is_regular(Beside) of
        true -> Beside;
        false -> os:find_executable("elixir")
    end.

marker() ->
    iolist_to_binary(io_lib:format("#os_sup_recompile:~b:~b:",
                                   [erlang:unique_integer([positive]), rand:uniform(1 bsl 48)])).

%% Reads the compiler's output until it exits or the deadline passes.
collect(Port, Marker, Deadline, Acc, Size) ->
    receive
        {Port, {data, Data}} ->
            {Acc1, Size1} = keep([Data | Acc], Size + byte_size(Data)),
            collect(Port, Marker, Deadline, Acc1, Size1);
        {Port, {exit_status, Status}} ->
            Output = iolist_to_binary(lists:reverse(Acc)),
            report(Marker, Status, Output)
    after max(0, Deadline - now_ms()) ->
            catch port_close(Port),
            Output = iolist_to_binary(lists:reverse(Acc)),
            forward(Output),
            {error, timeout,
             iolist_to_binary(["the compile did not finish in time and was stopped (raise "
                               "timeout_ms); the node keeps its previous code",
                               quote(Output)])}
    end.

%% Keeps the newest ?MAX_OUTPUT_BYTES of output (the report comes last).
keep(Acc, Size) when Size =< ?MAX_OUTPUT_BYTES ->
    {Acc, Size};
keep(Acc, Size) ->
    Bin = iolist_to_binary(lists:reverse(Acc)),
    Keep = ?MAX_OUTPUT_BYTES div 2,
    {[binary:part(Bin, Size - Keep, Keep)], Keep}.

report(Marker, Status, Output) ->
    case binary:split(Output, <<"\n", Marker/binary>>) of
        [Printed, Rest] ->
            forward(Printed),
            [Encoded | _] = binary:split(Rest, <<"\n">>),
            try binary_to_term(base64:decode(string:trim(Encoded)), [safe]) of
                {S, Count, Ds} when (S =:= ok orelse S =:= noop orelse S =:= error),
                                    is_integer(Count), is_list(Ds) ->
                    {ok, S, Count, Ds}
            catch
                _:_ -> {error, compile_failed, <<"the compiler's report could not be read">>}
            end;
        [_] ->
            forward(Output),
            {error, compile_failed,
             iolist_to_binary([io_lib:format("the compiler exited with status ~b without a "
                                             "report; the node keeps its previous code",
                                             [Status]),
                               quote(Output)])}
    end.

%% The compiler's output goes to the node's stdout, as a compile in the node would print it.
forward(<<>>) ->
    ok;
forward(Output) ->
    _ = (catch io:put_chars(user, Output)),
    ok.

quote(Output) ->
    Lines = [L || L <- binary:split(Output, <<"\n">>, [global]), L =/= <<>>],
    case lists:nthtail(max(0, length(Lines) - ?TAIL_LINES), Lines) of
        [] -> [];
        Tail -> [":\n", os_sup_render:bound(iolist_to_binary(lists:join("\n", Tail)), 8192)]
    end.

%% Elixir code run by the compiling `elixir': what `mix compile' does (Mix.CLI), with the
%% result of the `compile' task printed as one marked line. Halts when its stdin closes.
driver() ->
    "marker = System.fetch_env!(\"OS_SUP_RECOMPILE_MARKER\")\n"
    "System.delete_env(\"OS_SUP_RECOMPILE_MARKER\")\n"
    "spawn(fn -> IO.read(:stdio, :line); System.halt(2) end)\n"
    "{status, ds} =\n"
    "  try do\n"
    "    Mix.start()\n"
    "    Mix.Local.append_archives()\n"
    "    Mix.Local.append_paths()\n"
    "    file = System.get_env(\"MIX_EXS\") || \"mix.exs\"\n"
    "    old = Code.get_compiler_option(:no_warn_undefined)\n"
    "    Code.put_compiler_option(:no_warn_undefined, :all)\n"
    "    Code.compile_file(file)\n"
    "    Code.put_compiler_option(:no_warn_undefined, old)\n"
    "    Mix.Task.run(\"loadconfig\")\n"
    "    case Mix.Task.run(\"compile\", System.argv()) do\n"
    "      {status, ds} when is_list(ds) -> {status, ds}\n"
    "      status when status in [:ok, :noop] -> {status, []}\n"
    "      other -> {:error, [%{severity: :error, message: inspect(other)}]}\n"
    "    end\n"
    "  catch\n"
    "    kind, reason ->\n"
    "      {:error, [%{severity: :error, message: Exception.format(kind, reason, __STACKTRACE__)}]}\n"
    "  end\n"
    "status = if status in [:ok, :noop, :error], do: status, else: :error\n"
    "text = fn t -> t = if is_binary(t), do: t, else: inspect(t); String.slice(t, 0, 4000) end\n"
    "shown =\n"
    "  for d <- Enum.take(ds, 100) do\n"
    "    d = if is_map(d), do: d, else: %{message: d}\n"
    "    position = case Map.get(d, :position) do\n"
    "      l when is_integer(l) -> l\n"
    "      {l, c} when is_integer(l) and is_integer(c) -> {l, c}\n"
    "      _ -> 0\n"
    "    end\n"
    "    severity = if Map.get(d, :severity) in [:error, :warning, :information, :hint],\n"
    "      do: d.severity, else: :error\n"
    "    %{severity: severity, file: text.(Map.get(d, :file) || \"\"), position: position,\n"
    "      message: text.(Map.get(d, :message))}\n"
    "  end\n"
    "payload = Base.encode64(:erlang.term_to_binary({status, length(ds), shown}))\n"
    "IO.write([\"\\n\", marker, payload, \"\\n\"])\n"
    "System.halt(0)\n".

%%%===================================================================
%%% Private: loading what changed
%%%===================================================================

%% Compares the .beam files with the loaded code, loads the changes while watching the
%% node, and builds the result.
reload(#{dirs := Dirs, consolidated := Consolidated}, Before, StartSec, Compiled, Opts) ->
    After = beams(Dirs),
    Plan = plan(Before, After, StartSec, Dirs, Consolidated),
    #{load := Load, remove := Remove} = Plan,
    T1 = now_ms(),
    Base = maps:merge(Compiled, #{added => names(maps:get(added, Plan)),
                                  changed => names(maps:get(changed, Plan)),
                                  removed => names(maps:get(removed, Plan)),
                                  unchanged => names(maps:get(unchanged, Plan))}),
    case Load =:= [] andalso Remove =:= [] of
        true ->
            Base#{status => maps:get(status, Compiled), reloaded => [], not_loaded => [],
                  applications_stopped => [], crashes => [], log => [], load_ms => 0,
                  watch_ms => 0, t0 => maps:get(t0, Opts)};
        false ->
            Watch = watch_start(),
            {Loaded, NotLoaded} = load(Load),
            Deleted = remove(Remove),
            LoadMs = now_ms() - T1,
            {Events, Lost, Stopped, WatchMs} = watch_end(Watch, Opts),
            Status = case Loaded =/= [] orelse Deleted =/= [] of
                         true -> ok;
                         false -> maps:get(status, Compiled)
                     end,
            Base1 = Base#{status => Status, reloaded => names(Loaded),
                          not_loaded => [#{module => name(M), reason => R}
                                         || {M, R} <- NotLoaded],
                          deleted => names(Deleted),
                          load_ms => LoadMs, watch_ms => WatchMs, t0 => maps:get(t0, Opts)},
            verdict(Base1, Events, Lost, Stopped, NotLoaded)
    end.

%% Module => .beam path, for every .beam in `Dirs'.
beams(Dirs) ->
    maps:from_list(
      [{list_to_atom(filename:rootname(F)), filename:join(Dir, F)}
       || Dir <- Dirs, {ok, Files} <- [file:list_dir(Dir)], F <- Files,
          filename:extension(F) =:= ".beam"]).

%% What to load and what to remove:
%%   changed   loaded, and its .beam has other code: load it;
%%   added     a .beam that was not there before the compile, not loaded: load it;
%%   unchanged rewritten by this compile with the same code (consolidated protocols aside);
%%   removed   its .beam is gone: delete it if loaded.
%% A module that is not loaded and was there before is left to be loaded on its first call.
plan(Before, After, StartSec, Dirs, Consolidated) ->
    Entries = maps:fold(
                fun(M, Path, Acc) ->
                        case classify(M, Path, Before, StartSec, Consolidated) of
                            skip -> Acc;
                            Entry -> [Entry | Acc]
                        end
                end, [], After),
    Gone = [M || M <- maps:keys(Before), not maps:is_key(M, After)]
        ++ [M || {M, Path} <- code:all_loaded(), is_list(Path), not maps:is_key(M, After),
                 not maps:is_key(M, Before), in_dirs(Path, Dirs)],
    Removed = lists:usort(Gone),
    Of = fun(Kind) -> lists:sort([M || {K, M, _, _} <- Entries, K =:= Kind]) end,
    #{changed => Of(changed), added => Of(added), unchanged => Of(unchanged),
      removed => Removed,
      load => lists:sort([{M, Path, Bin} || {K, M, Path, Bin} <- Entries,
                                            K =:= changed orelse K =:= added]),
      remove => [M || M <- Removed, code:is_loaded(M) =/= false]}.

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
    case catch beam_lib:md5(Bin) of
        {ok, {_, Md5}} -> Md5;
        _ -> undefined
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

%% Loads the modules as new versions, all at once when possible; a module whose old-old
%% code a process still runs is not loaded (soft purge) and is reported.
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

%% Deletes modules whose .beam is gone (their processes keep running the old code).
remove(Modules) ->
    {Purged, _Busy} = soft_purge(Modules),
    [M || M <- Purged, code:delete(M)].

%%%===================================================================
%%% Private: watching the node around the load
%%%===================================================================

watch_start() ->
    Counter = counters:new(1, []),
    _ = (catch logger:remove_handler(?WATCH_HANDLER)),
    Installed = (catch logger:add_handler(?WATCH_HANDLER, ?MODULE,
                                          #{level => notice,
                                            config => #{watcher => self(),
                                                        counter => Counter}})) =:= ok,
    #{apps => started_apps(), counter => Counter, installed => Installed,
      loaded_at => now_ms()}.

%% Collects the handler's events for the watch window (longer once something crashed),
%% removes the handler, and compares the started applications.
watch_end(#{apps := Apps0, counter := Counter, installed := Installed}, Opts) ->
    #{watch_ms := WatchMs, deadline := Deadline} = Opts,
    Start = now_ms(),
    Limit = Deadline - 200,
    Events = collect_events(min(Start + WatchMs, Limit), Limit, false, []),
    _ = Installed andalso (catch logger:remove_handler(?WATCH_HANDLER)),
    Late = flush_events([]),
    All = Events ++ Late,
    Apps1 = started_apps(),
    Stopped = case {Apps0, Apps1} of
                  {L0, L1} when is_list(L0), is_list(L1) -> [A || A <- L0, not lists:member(A, L1)];
                  _ -> []
              end,
    Lost = max(0, counters:get(Counter, 1) - ?MAX_EVENTS),
    {All, Lost, Stopped, now_ms() - Start}.

%% Waits until `Until'; a crash pushes it to ?CRASH_WATCH_MS after the crash, a supervisor
%% giving up shortens it to ?EXIT_WATCH_MS after that (its application's exit comes next),
%% an application exit ends it; never beyond `Limit'.
collect_events(Until, Limit, GaveUp, Acc) ->
    receive
        {?WATCH_HANDLER, Event} ->
            Now = now_ms(),
            {Until1, GaveUp1} =
                case maps:get(kind, Event) of
                    app_exit -> {Now, GaveUp};
                    gave_up -> {min(Until, Now + ?EXIT_WATCH_MS), true};
                    crash when not GaveUp -> {max(Until, Now + ?CRASH_WATCH_MS), GaveUp};
                    _ -> {Until, GaveUp}
                end,
            collect_events(min(Until1, Limit), Limit, GaveUp1, [Event | Acc])
    after max(0, Until - now_ms()) ->
            lists:reverse(Acc)
    end.

flush_events(Acc) ->
    receive
        {?WATCH_HANDLER, Event} -> flush_events([Event | Acc])
    after 0 ->
            lists:reverse(Acc)
    end.

started_apps() ->
    try [A || {A, _, _} <- application:which_applications(2000)]
    catch _:_ -> unknown
    end.

%% A summary of the events the watch cares about, or false.
summary(#{msg := {report, #{label := {supervisor, Context}, report := Report}}})
  when is_list(Report) ->
    Offender = proplists:get_value(offender, Report, []),
    Who = child_name(Offender),
    Reason = proplists:get_value(reason, Report),
    Sup = sup_name(proplists:get_value(supervisor, Report)),
    case Context of
        shutdown -> #{kind => gave_up, who => Sup, child => Who, why => why(Reason)};
        child_terminated -> #{kind => crash, who => Who, why => why(Reason)};
        start_error -> #{kind => crash, who => Who, why => why(Reason)};
        _ -> #{kind => other, who => Sup, why => why(Reason)}
    end;
summary(#{msg := {report, #{label := {application_controller, exit}, report := Report}}})
  when is_list(Report) ->
    #{kind => app_exit, who => app_name(proplists:get_value(application, Report)),
      why => why(proplists:get_value(exited, Report))};
summary(#{msg := {report, #{label := {proc_lib, crash}, report := [Info | _]}}})
  when is_list(Info) ->
    Who = case proplists:get_value(registered_name, Info, []) of
              [] -> os_sup_render:pid(proplists:get_value(pid, Info), elixir);
              Name -> name(Name)
          end,
    Why = case proplists:get_value(error_info, Info) of
              {_Class, Reason, Stack} -> why({Reason, Stack});
              Other -> why(Other)
          end,
    #{kind => crash, who => Who, why => Why};
summary(#{level := Level, meta := #{error_logger := #{emulator := true}},
          msg := {_Format, [Pid, Reason | _]}})
  when Level =:= error; Level =:= critical; Level =:= alert; Level =:= emergency ->
    #{kind => crash, who => os_sup_render:pid(Pid, elixir), why => why(Reason)};
summary(_) ->
    false.

child_name(Offender) when is_list(Offender) ->
    case proplists:get_value(id, Offender) of
        undefined -> os_sup_render:pid(proplists:get_value(pid, Offender), elixir);
        Id -> name(Id)
    end;
child_name(_) ->
    <<"?">>.

sup_name({local, Name}) -> name(Name);
sup_name({global, Name}) -> name(Name);
sup_name(Pid) when is_pid(Pid) -> os_sup_render:pid(Pid, elixir);
sup_name(Other) -> name(Other).

%% A short reason: `undef Shop.Ledger.start_link/1', `** (RuntimeError) boom in M.f/2'.
why({undef, [{M, F, A, _} | _]}) ->
    <<"undef ", (os_sup_render:mfa({M, F, A}, elixir))/binary>>;
why({#{'__exception__' := true, '__struct__' := Struct} = E, Stack}) when is_list(Stack) ->
    Message = try 'Elixir.Exception':message(E) of
                  B when is_binary(B) -> B
              catch _:_ -> os_sup_render:term(E, elixir, 300)
              end,
    os_sup_render:bound(iolist_to_binary(["** (", name(Struct), ") ", Message, where(Stack)]),
                        ?LINE_BYTES);
why({Reason, [{_, _, _, _} | _] = Stack}) ->
    os_sup_render:bound(iolist_to_binary([os_sup_render:term(Reason, elixir, 300),
                                          where(Stack)]), ?LINE_BYTES);
why({shutdown, Reason}) ->
    why(Reason);
why(Reason) when is_atom(Reason) ->
    atom_to_binary(Reason);
why(Reason) ->
    os_sup_render:term(Reason, elixir, 300).

where([{M, F, A, _} | _]) -> [" in ", os_sup_render:mfa({M, F, A}, elixir)];
where(_) -> [].

line(#{meta := Meta} = Event) ->
    Where = case Meta of
                #{pid := Pid} when is_pid(Pid) -> [pid_to_list(Pid), " "];
                _ -> []
            end,
    Text = logger_formatter:format(Event, #{single_line => true, template => [msg],
                                            max_size => ?LINE_BYTES, depth => 20,
                                            chars_limit => ?LINE_BYTES}),
    os_sup_render:bound(os_sup_render:to_bin([Where, Text]), ?LINE_BYTES).

%% An error when an application stopped, a supervisor gave up, a process crashed or a
%% module could not be loaded; otherwise the compile's status.
verdict(Data, Events, Lost, Stopped, NotLoaded) ->
    Exits = [E || #{kind := app_exit} = E <- Events],
    GaveUp = [E || #{kind := gave_up} = E <- Events],
    Crashes = dedup([E || #{kind := crash} = E <- Events]),
    StoppedNames = lists:usort([app_name(A) || A <- Stopped]
                               ++ [W || #{who := W} <- Exits]),
    Problem =
        case {StoppedNames, GaveUp, Crashes, NotLoaded} of
            {[_ | _], _, _, _} ->
                [io_lib:format("application `~ts` exited during recompile: ~ts",
                               [App, exit_reason(App, Exits, GaveUp, Crashes)])
                 || App <- StoppedNames];
            {[], [_ | _], _, _} ->
                [io_lib:format("supervisor `~ts` gave up during recompile: ~ts",
                               [Sup, gave_up_reason(G, Crashes)])
                 || #{who := Sup} = G <- GaveUp];
            {[], [], [_ | _], _} ->
                [io_lib:format("~b process(es) crashed after the reload: ~ts",
                               [length(Crashes),
                                lists:join("; ", [[W, ": ", Y] || #{who := W, why := Y}
                                                                      <- lists:sublist(Crashes, 5)])])];
            {[], [], [], [_ | _]} ->
                [io_lib:format("~b module(s) could not be loaded: ~ts",
                               [length(NotLoaded),
                                lists:join(", ", [name(M) || {M, _} <- NotLoaded])])];
            _ ->
                []
        end,
    Lines = [L || #{line := L} <- lists:sublist(Events, ?MAX_LOG_LINES)]
        ++ [iolist_to_binary(io_lib:format("...(~b more log events)", [Lost]))
            || Lost > 0],
    Data1 = Data#{applications_stopped => StoppedNames,
                  crashes => [iolist_to_binary([W, ": ", Y]) || #{who := W, why := Y} <- Crashes],
                  log => Lines},
    case Problem of
        [] ->
            Data1;
        _ ->
            Data1#{status => error, error => iolist_to_binary(lists:join("; ", Problem))}
    end.

exit_reason(App, Exits, GaveUp, Crashes) ->
    case GaveUp of
        [G | _] ->
            gave_up_reason(G, Crashes);
        [] ->
            case [W || #{who := A, why := W} <- Exits, A =:= App] ++ crash_detail(Crashes) of
                [] -> <<"stopped">>;
                Parts -> lists:join(" ", Parts)
            end
    end.

gave_up_reason(#{why := Why} = G, Crashes) ->
    Child = maps:get(child, G, undefined),
    Detail = case [C || #{who := W} = C <- Crashes, W =:= Child] of
                 [#{why := CW} | _] -> [" (", Child, ": ", CW, ")"];
                 [] -> crash_detail(Crashes)
             end,
    iolist_to_binary([Why | Detail]).

crash_detail([#{who := W, why := Y} | _]) -> [iolist_to_binary([" (", W, ": ", Y, ")"])];
crash_detail([]) -> [].

%% The first crash of each process.
dedup(Crashes) ->
    lists:reverse(
      lists:foldl(fun(#{who := W} = C, Acc) ->
                          case lists:any(fun(#{who := X}) -> X =:= W end, Acc) of
                              true -> Acc;
                              false -> [C | Acc]
                          end
                  end, [], Crashes)).

%%%===================================================================
%%% Private: the reply
%%%===================================================================

reply(#{t0 := T0} = Data0) ->
    Data = maps:remove(t0, Data0#{duration_ms => now_ms() - T0}),
    {ok, #{text => text(Data), data => Data}}.

compile_failed(Compiled, T0) ->
    Compiled#{error => <<"the compile failed; the node keeps its previous code">>,
              reloaded => [], added => [], changed => [], removed => [], unchanged => [],
              not_loaded => [], applications_stopped => [], crashes => [], log => [],
              load_ms => 0, watch_ms => 0, t0 => T0}.

compile_error({error, Kind, Message}) ->
    failure(Kind, Message).

text(#{status := Status, reloaded := Reloaded, diagnostics := Ds, duration_ms := Ms} = D) ->
    Head = io_lib:format("~ts in ~b ms (compile ~b ms): ~b module(s) reloaded~ts",
                         [Status, Ms, maps:get(compile_ms, D, 0), length(Reloaded),
                          case Reloaded of
                              [] -> "";
                              _ -> [" (", lists:join(", ", Reloaded), ")"]
                          end]),
    Error = case D of
                #{error := E} -> [["error: ", E]];
                _ -> []
            end,
    Lists = [io_lib:format("~ts: ~ts", [Label, lists:join(", ", Names)])
             || {Label, Key} <- [{"added", added}, {"changed", changed}, {"removed", removed},
                                 {"unchanged", unchanged}, {"applications stopped",
                                                             applications_stopped}],
                Names <- [maps:get(Key, D, [])], Names =/= []]
        ++ [io_lib:format("not loaded: ~ts (~ts)", [M, R])
            || #{module := M, reason := R} <- maps:get(not_loaded, D, [])],
    Diagnostics = [io_lib:format("~ts ~ts:~b: ~ts", [Sev, F, L, M])
                   || #{severity := Sev, file := F, line := L, message := M} <- Ds],
    Log = case maps:get(log, D, []) of
              [] -> [];
              Lines when Status =:= error ->
                  ["log during the reload (first lines; all in `log`):"
                   | [["  ", os_sup_render:bound(L, ?TEXT_LINE_BYTES)]
                      || L <- lists:sublist(Lines, ?TEXT_LOG_LINES)]];
              _ -> []
          end,
    iolist_to_binary(lists:join("\n", [Head | Error ++ Lists ++ Diagnostics ++ Log])).

diagnostic(D) when is_map(D) ->
    Line = case maps:get(position, D, undefined) of
               L when is_integer(L) -> L;
               {L, _Col} when is_integer(L) -> L;
               _ -> 0
           end,
    #{severity => maps:get(severity, D, error),
      file => to_bin(maps:get(file, D, <<>>)),
      line => Line,
      message => os_sup_render:bound(to_bin(maps:get(message, D, <<>>)), ?MAX_MESSAGE_BYTES)};
diagnostic(Other) ->
    #{severity => error, file => <<>>, line => 0,
      message => os_sup_render:term(Other, erlang, ?MAX_MESSAGE_BYTES)}.

names(Modules) ->
    [name(M) || M <- Modules].

name(M) ->
    os_sup_render:name(M, elixir).

app_name(A) when is_atom(A) -> atom_to_binary(A);
app_name(Other) -> os_sup_render:term(Other, elixir, 256).

chars(B) when is_binary(B) -> unicode:characters_to_list(B);
chars(L) when is_list(L) -> L.

to_bin(B) when is_binary(B) -> B;
to_bin(L) when is_list(L) -> unicode:characters_to_binary(L);
to_bin(A) when is_atom(A) -> atom_to_binary(A);
to_bin(Other) -> os_sup_render:term(Other, erlang, ?MAX_MESSAGE_BYTES).

now_ms() ->
    erlang:monotonic_time(millisecond).

failure(Kind, Message) ->
    {error, #{kind => Kind, message => Message}}.
