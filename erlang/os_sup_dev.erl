%%% @doc `os_sup_dev' supports the edit, compile, test loop inside a running
%%% Mix project node: the `recompile' tool. It reads the project, runs the
%%% steps and builds the reply; each step has its module:
%%% <ul>
%%%   <li>`os_sup_dev_compile': compile in a separate `elixir' OS process
%%%       (Mix's compiler, run in the node, would leave the modules of an
%%%       edited file unloaded while it compiles).</li>
%%%   <li>`os_sup_dev_load': compare the `.beam' files with the loaded
%%%       code; load what changed as new versions (soft purge, never
%%%       killing a process), delete what is gone.</li>
%%%   <li>`os_sup_dev_watch': a temporary `logger' handler and the started
%%%       applications, around the load; the verdict.</li>
%%% </ul>
%%%
%%% A compile error, or a compile that does not finish in time, leaves the
%%% node's code untouched. Runs in the helper's worker process, under the
%%% request's deadline; one recompile at a time per node (the worker
%%% registers itself as `os_sup_dev_recompile').
-module(os_sup_dev).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_bool/2]).
-import(os_sup_lib_reply, [error_reply/2, fail/3]).
-import(os_sup_lib_time, [now_ms/0]).

%% API
-export([recompile/1]).

-define(MAX_DIAGNOSTICS, 100).
-define(MAX_MESSAGE_BYTES, 2048).
%% the longest a crash extends the watch (os_sup_dev_watch's CRASH_WATCH_MS)
-define(CRASH_WATCH_MS, 1500).
%% time kept for loading and answering after the compile
-define(LOAD_BUDGET_MS, 2500).
%% log lines quoted in the text, and their length there
-define(TEXT_LOG_LINES, 10).
-define(TEXT_LINE_BYTES, 300).
-define(LOCK, os_sup_dev_recompile).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `recompile': args `force', `timeout_ms' (compile, load and watch together,
%% 1..120000), `watch_ms' (how long the applications are watched after the load, 0..10000).
-spec recompile(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
recompile(Args) ->
    case code:is_loaded('Elixir.Mix.Project') of
        {file, _} -> locked(Args);
        false -> fail(unavailable, "recompile needs a node started from a Mix project "
                      "(Mix is not running here)", [])
    end.

%%%===================================================================
%%% Private: the recompile
%%%===================================================================

%% One recompile at a time: two compiles would write the same _build.
locked(Args) ->
    try register(?LOCK, self()) of
        true ->
            try compile_and_load(options(Args))
            after
                try unregister(?LOCK) catch _:_ -> ok end
            end
    catch
        error:badarg ->
            error_reply(busy, <<"a recompile is already running on this node; wait for it">>)
    end.

options(Args) ->
    Timeout = arg_int(timeout_ms, Args, ?RECOMPILE_TIMEOUT_DEFAULT_MS, ?RECOMPILE_TIMEOUT_MS_MIN,
                      ?RECOMPILE_TIMEOUT_MS_MAX),
    Watch = arg_int(watch_ms, Args, ?RECOMPILE_WATCH_DEFAULT_MS, ?RECOMPILE_WATCH_MS_MIN,
                    ?RECOMPILE_WATCH_MS_MAX),
    T0 = now_ms(),
    #{force => arg_bool(force, Args),
      t0 => T0,
      deadline => T0 + Timeout,
      watch_ms => Watch}.

compile_and_load(#{t0 := T0, deadline := Deadline, watch_ms := Watch} = Opts) ->
    case project() of
        {ok, Project} ->
            Before = os_sup_dev_load:beams(maps:get(dirs, Project)),
            StartSec = os:system_time(second),
            ok = os_sup_dev_compile:backdate_manifests(maps:get(manifests, Project)),
            CompileDeadline = Deadline - Watch - ?CRASH_WATCH_MS - ?LOAD_BUDGET_MS,
            case os_sup_dev_compile:compile(Project, Opts, max(T0 + 1000, CompileDeadline)) of
                {ok, Status, Count, Diagnostics} ->
                    %% Errors first: since Elixir 1.18 a project's type warnings (of files
                    %% not touched) come before the error that failed the compile.
                    {Errors, Others} = lists:partition(fun is_error/1, Diagnostics),
                    Shown = lists:sublist(Errors ++ Others, ?MAX_DIAGNOSTICS),
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
            error_reply(unavailable, Message)
    end.

%% Where the project lives and which directories hold its own modules.
project() ->
    try
        Config = 'Elixir.Mix.Project':config(),
        Dir = try 'Elixir.Mix.Project':project_file() of
                  File when is_binary(File) -> filename:dirname(chars(File));
                  _ -> element(2, file:get_cwd())
              catch _:_ -> element(2, file:get_cwd())
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
                                    [Class, os_sup_lib_render:term(Reason, erlang, 512)]))}
    end.

ebin(App) ->
    case code:lib_dir(App) of
        Dir when is_list(Dir) -> filename:join(Dir, "ebin");
        _ -> false
    end.

%%%===================================================================
%%% Private: loading what changed, watched
%%%===================================================================

%% Compares the .beam files with the loaded code, loads the changes while watching the
%% node, and builds the result.
reload(#{dirs := Dirs, consolidated := Consolidated}, Before, StartSec, Compiled, Opts) ->
    After = os_sup_dev_load:beams(Dirs),
    Plan = os_sup_dev_load:plan(Before, After, StartSec, Dirs, Consolidated),
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
            Watch = os_sup_dev_watch:start(),
            {Loaded, NotLoaded} = os_sup_dev_load:load(Load),
            Deleted = os_sup_dev_load:remove(Remove),
            LoadMs = now_ms() - T1,
            {Events, Lost, Stopped, WatchMs} = os_sup_dev_watch:stop(Watch, Opts),
            Status = case Loaded =/= [] orelse Deleted =/= [] of
                         true -> ok;
                         false -> maps:get(status, Compiled)
                     end,
            Base1 = Base#{status => Status, reloaded => names(Loaded),
                          not_loaded => [#{module => name(M), reason => R}
                                         || {M, R} <- NotLoaded],
                          deleted => names(Deleted),
                          load_ms => LoadMs, watch_ms => WatchMs, t0 => maps:get(t0, Opts)},
            os_sup_dev_watch:verdict(Base1, Events, Lost, Stopped, NotLoaded)
    end.

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
    error_reply(Kind, Message).

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
                   | [["  ", os_sup_lib_render:bound(L, ?TEXT_LINE_BYTES)]
                      || L <- lists:sublist(Lines, ?TEXT_LOG_LINES)]];
              _ -> []
          end,
    %% characters, not bytes: a message may hold any Unicode (Elixir 1.16+ draws its compile
    %% errors with box-drawing characters)
    unicode:characters_to_binary(lists:join("\n", [Head | Error ++ Lists ++ Diagnostics ++ Log])).

diagnostic(D) when is_map(D) ->
    Line = case maps:get(position, D, undefined) of
               L when is_integer(L) -> L;
               {L, _Col} when is_integer(L) -> L;
               _ -> 0
           end,
    #{severity => maps:get(severity, D, error),
      file => to_bin(maps:get(file, D, <<>>)),
      line => Line,
      message => os_sup_lib_render:bound(to_bin(maps:get(message, D, <<>>)), ?MAX_MESSAGE_BYTES)};
diagnostic(Other) ->
    #{severity => error, file => <<>>, line => 0,
      message => os_sup_lib_render:term(Other, erlang, ?MAX_MESSAGE_BYTES)}.

is_error(D) when is_map(D) -> maps:get(severity, D, error) =:= error;
is_error(_) -> true.

names(Modules) ->
    [name(M) || M <- Modules].

name(M) ->
    os_sup_lib_render:name(M, elixir).

chars(B) when is_binary(B) -> unicode:characters_to_list(B);
chars(L) when is_list(L) -> L.

to_bin(B) when is_binary(B) -> B;
to_bin(L) when is_list(L) -> unicode:characters_to_binary(L);
to_bin(A) when is_atom(A) -> atom_to_binary(A);
to_bin(Other) -> os_sup_lib_render:term(Other, erlang, ?MAX_MESSAGE_BYTES).
