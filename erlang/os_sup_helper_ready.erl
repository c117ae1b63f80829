%%% @doc `os_sup_helper_ready' tells the server, on the control socket, when
%%% the node it booted is ready and whether its applications stay up. It says
%%% `ready' or `ready APPS' once the node meets its readiness mode (booted; or
%%% the Mix project's applications started), `note TEXT' for what is wrong while
%%% it runs (a Phoenix endpoint that serves no HTTP), `apps APPS' when more
%%% applications are watched, and `app_exited APPS REASON' once some stop while the VM
%%% lives on. Both loops run in a process of their own (spawned by
%%% `os_sup_helper' when it announces `up'), through `?MODULE:' calls
%%% (reload-safe), with a timeout on every call.
%%%
%%% == Internal entry points ==
%%% <ul>
%%%   <li>{@link watch/2}, {@link ready_watch/2}, {@link app_watch/1}.</li>
%%%   <li>{@link app_started/0}, for the log keeper.</li>
%%% </ul>
-module(os_sup_helper_ready).

%% Internal entry points: the watch loops. Not an API.
-export([watch/2, ready_watch/2, app_watch/1]).
%% For the log keeper: an application has started.
-export([app_started/0]).

-define(WATCHER, os_sup_helper_ready_watch).
-define(READY_WATCH_MS, 600000).
-define(READY_WATCH_POLL_MS, 10).
-define(READY_WATCH_QUICK_MS, 1500).
-define(READY_WATCH_SLOW_POLL_MS, 50).
%% Between checks once applications' start reports are seen to arrive: only a safety net.
-define(READY_WATCH_WOKEN_POLL_MS, 250).
-define(APP_WATCH_MS, 500).
-define(REASON_BYTES, 200).

-type ready_mode() :: boot | mix_app.

%% @doc Announces `ready' on the control socket once the node meets its readiness mode (booted;
%% or the Mix project's applications started), so the server learns it at once without
%% polling over distribution; the applications it names then are watched (`app_watch/1').
%% Registered as the readiness watcher until then: each application's start report wakes it
%% ({@link app_started/0}). For a Mix project, once one has and while the logger lets such
%% reports through, it checks only every ?READY_WATCH_WOKEN_POLL_MS besides; else every
%% ?READY_WATCH_POLL_MS (?READY_WATCH_SLOW_POLL_MS once the boot is slow). Each check is a
%% few calls into the node, and a storm of boots on a small machine pays for every one.
-spec watch(ready_mode(), integer()) -> ok.
watch(Mode, Until) ->
    _ = try register(?WATCHER, self()) catch _:_ -> false end,
    ?MODULE:ready_watch(Mode, Until).

%% @doc One check of `watch/2'; the loop goes on through here (reload-safe).
-spec ready_watch(ready_mode(), integer()) -> ok.
ready_watch(Mode, Until) ->
    case check(Mode) of
        {ready, Apps} ->
            _ = try unregister(?WATCHER) catch _:_ -> false end,
            %% the rest of the helper's modules, now that the boot no longer needs the code
            %% server; what the node refused is said before `ready', so `start' says it
            _ = case os_sup_helper:load_rest() of
                    none -> ok;
                    Refused -> os_sup_helper:announce(<<"note ", Refused/binary, "\n">>)
                end,
            ready(Mode, Apps);
        not_ready ->
            not_ready(Mode, Until)
    end.

%% @doc Wakes the readiness watcher, if one runs: an application has started (its start
%% report reached the log keeper). Never fails, never blocks.
-spec app_started() -> ok.
app_started() ->
    _ = try erlang:send(?WATCHER, app_started, [noconnect, nosuspend]) catch _:_ -> ok end,
    ok.

%% `{ready, Apps}' with the applications that made it so (a Mix project's, all started), or
%% `not_ready'. The apps are those of this one check: asking Mix again after the rest of the
%% helper has loaded could time out on a busy machine and announce a project without them.
check(boot) ->
    case os_sup_helper_status:readiness(boot) of
        {true, _} -> {ready, []};
        _ -> not_ready
    end;
check(mix_app) ->
    case code:is_loaded('Elixir.Mix.Project') =/= false
        andalso os_sup_helper_status:probe_mix_raw() of
        {ok, Apps, true} -> {ready, Apps};
        _ -> not_ready
    end.

ready(mix_app, Apps) ->
    _ = [os_sup_helper:announce(<<"note ", Note/binary, "\n">>)
         || Note <- os_sup_helper_status:idle_endpoints(Apps)],
    os_sup_helper:announce(apps_line(<<"ready ">>, Apps)),
    ?MODULE:app_watch({project, Apps});
ready(boot, _) ->
    Apps = user_apps(case started() of
                         Started when is_list(Started) -> [A || {A, _, _} <- Started];
                         _ -> []
                     end),
    os_sup_helper:announce(case Apps of
                               [] -> <<"ready\n">>;
                               _ -> apps_line(<<"ready ">>, Apps)
                           end),
    ?MODULE:app_watch({user, Apps}).

not_ready(Mode, Until) ->
    Now = erlang:monotonic_time(millisecond),
    case Now < Until of
        true ->
            Poll = poll_ms(Mode, get(woken) =:= true, ?READY_WATCH_MS - (Until - Now)),
            receive app_started -> put(woken, true) after Poll -> ok end,
            ?MODULE:ready_watch(Mode, Until);
        false ->
            _ = os_sup_helper:load_rest(),
            ok
    end.

%% The Mix project is ready when its last application has started: start reports wake the
%% watcher then (it has seen one arrive, so they do, while the logger lets them through), and
%% polls are a safety net. Otherwise (and a boot ends a moment after its last start) every
%% 10 ms while a boot is quick, slower once it is not (a loaded machine booting many nodes).
poll_ms(Mode, Woken, Elapsed) ->
    Reported = Mode =:= mix_app andalso Woken andalso
        try logger:allow(info, application_controller) =:= true catch _:_ -> false end,
    if
        Reported -> ?READY_WATCH_WOKEN_POLL_MS;
        Elapsed < ?READY_WATCH_QUICK_MS -> ?READY_WATCH_POLL_MS;
        true -> ?READY_WATCH_SLOW_POLL_MS
    end.

%% @doc After `ready': announces `app_exited APPS REASON' once some of the watched applications
%% are no longer started while the VM lives on (Mix and `application:start/1' start them
%% temporary, so nothing else ends the node), then stops watching. REASON is the one its
%% application master ended with, when that exit was seen. `{project, Apps}': the Mix project's
%% applications. `{user, Apps}': on a node without Mix (a release, an `erl' command), the
%% applications that are not OTP's or Elixir's, including those started after boot (each new
%% set is announced as `apps APPS'). A check that cannot answer in time proves nothing and is
%% skipped.
%% The names of the applications' top supervisors are noted once per set (`Tops'): one
%% killed logs nothing, and the application's exit (`killed') is then all that tells of it.
-spec app_watch({project | user, [atom()]} | {project | user, [atom()], [{pid(), atom()}]}) -> ok.
app_watch({Kind, Apps}) ->
    ?MODULE:app_watch({Kind, Apps, tops(Apps)});
app_watch({Kind, Apps, Tops}) ->
    %% An application's master ends with it: its exit is seen at once, not at the next check.
    Monitors = [erlang:monitor(process, M) || A <- Apps,
                                              M <- [master(A)], is_pid(M)],
    Why = receive
              %% (the application controller takes it off the started list a moment later)
              {'DOWN', _, process, _, noproc} -> receive after 50 -> unknown end;
              {'DOWN', _, process, M, Reason} ->
                  receive after 50 -> {exited, Reason, proplists:get_value(M, Tops)} end
          after ?APP_WATCH_MS -> unknown
          end,
    _ = [erlang:demonitor(R, [flush]) || R <- Monitors],
    case started() of
        Started when is_list(Started) ->
            Running = [A || {A, _, _} <- Started],
            case Apps -- Running of
                [] when Kind =:= user ->
                    Seen = lists:usort(Apps ++ user_apps(Running)),
                    _ = Seen =:= Apps orelse os_sup_helper:announce(apps_line(<<"apps ">>, Seen)),
                    ?MODULE:app_watch({Kind, Seen});
                [] ->
                    ?MODULE:app_watch({Kind, Apps, Tops});
                Gone ->
                    Line = apps_line(<<"app_exited ">>, Gone),
                    os_sup_helper:announce(with_reason(Line, Why))
            end;
        _ ->
            ?MODULE:app_watch({Kind, Apps, Tops})
    end.

%% Each application's master and the registered name of its top supervisor (those that have
%% one and answer in time).
tops(Apps) ->
    [{M, Name} || A <- Apps,
                  M <- [master(A)], is_pid(M),
                  {ok, {Top, _Mod}} <- [os_sup_lib_call:call_with_deadline(
                                          {application_master, get_child, [M]}, ?APP_WATCH_MS)],
                  is_pid(Top),
                  {registered_name, Name} <- [try process_info(Top, registered_name)
                                              catch _:_ -> undefined
                                              end]].

%% The started applications, `undefined' when the application controller does not answer in
%% time.
started() ->
    try application:which_applications(?APP_WATCH_MS) catch _:_ -> undefined end.

%% The application's master, `undefined' when it has none (or the call fails).
master(A) ->
    try application_controller:get_master(A) catch _:_ -> undefined end.

%% `app_exited APPS REASON': the reason the application's master ended with, as the node's own
%% `Application X exited: REASON' report says it, so the server need not wait for that report.
with_reason(Line, unknown) ->
    Line;
with_reason(Line, {exited, killed, Top}) when is_atom(Top), Top =/= undefined ->
    %% Its top supervisor was killed: the first to die, though it logged nothing.
    Name = os_sup_lib_render:name(Top, os_sup_lib_render:format(auto)),
    iolist_to_binary([string:trim(Line, trailing), " killed: its top supervisor ", Name,
                      " was killed, the first to die\n"]);
with_reason(Line, {exited, Reason, _Top}) ->
    Text = case os_sup_lib_render:elixir_loaded() of
               true -> try 'Elixir.Exception':format_exit(Reason) catch _:_ -> undefined end;
               false -> os_sup_lib_render:term(Reason, erlang, ?REASON_BYTES)
           end,
    case is_binary(Text) of
        true ->
            OneLine = re:replace(Text, <<"\\s+">>, <<" ">>, [global, unicode, {return, binary}]),
            iolist_to_binary([string:trim(Line, trailing), <<" ">>,
                              os_sup_lib_text:cut_bin(OneLine, ?REASON_BYTES), <<"\n">>]);
        false ->
            Line
    end.

apps_line(Prefix, Apps) ->
    iolist_to_binary([Prefix, lists:join(",", [atom_to_binary(A, utf8) || A <- Apps]), "\n"]).

%% The running applications that are the user's: not OTP's, Elixir's or their build tools'.
user_apps(Running) ->
    lists:usort([A || A <- Running, not lists:member(A, os_sup_lib_label:system_apps())]).
