%%% @doc `os_sup_helper_ready' tells the sidecar, on the control socket, when
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
%%%   <li>{@link ready_watch/2}, {@link app_watch/1}.</li>
%%% </ul>
-module(os_sup_helper_ready).

%% Internal entry points: the watch loops. Not an API.
-export([ready_watch/2, app_watch/1]).

-define(READY_WATCH_MS, 600000).
-define(READY_WATCH_POLL_MS, 10).
-define(READY_WATCH_QUICK_MS, 1500).
-define(READY_WATCH_SLOW_POLL_MS, 50).
-define(APP_WATCH_MS, 500).
-define(REASON_BYTES, 200).

-type ready_mode() :: boot | mix_app.

%% @doc Announces `ready' on the control socket once the node meets its readiness mode (booted;
%% or the Mix project's applications started), checked here every ?READY_WATCH_POLL_MS until
%% `Until', so the sidecar learns it at once without polling over distribution. The
%% applications it names then are watched (`app_watch/1').
-spec ready_watch(ready_mode(), integer()) -> ok.
ready_watch(Mode, Until) ->
    case os_sup_helper_status:readiness(Mode) of
        {true, _} ->
            %% the rest of the helper's modules, now that the boot no longer needs the code server
            _ = spawn(os_sup_helper, load_rest, []),
            ready(Mode);
        _ ->
            not_ready(Mode, Until)
    end.

ready(Mode) ->
    case Mode of
        mix_app ->
            case os_sup_helper_status:probe_mix_raw() of
                {ok, Apps, true} ->
                    _ = [os_sup_helper:announce(<<"note ", Note/binary, "\n">>)
                         || Note <- os_sup_helper_status:idle_endpoints(Apps)],
                    os_sup_helper:announce(apps_line(<<"ready ">>, Apps)),
                    ?MODULE:app_watch({project, Apps});
                _ ->
                    os_sup_helper:announce(<<"ready\n">>)
            end;
        _ ->
            Apps = user_apps(case catch application:which_applications(?APP_WATCH_MS) of
                                 Started when is_list(Started) -> [A || {A, _, _} <- Started];
                                 _ -> []
                             end),
            os_sup_helper:announce(case Apps of
                         [] -> <<"ready\n">>;
                         _ -> apps_line(<<"ready ">>, Apps)
                     end),
            ?MODULE:app_watch({user, Apps})
    end.

not_ready(Mode, Until) ->
    Now = erlang:monotonic_time(millisecond),
    case Now < Until of
        true ->
            %% Every 10 ms while a boot is quick; slower once it is not (a loaded machine
            %% booting many nodes), so the checks do not add to the load.
            Quick = ?READY_WATCH_MS - (Until - Now) < ?READY_WATCH_QUICK_MS,
            Poll = case Quick of
                       true -> ?READY_WATCH_POLL_MS;
                       false -> ?READY_WATCH_SLOW_POLL_MS
                   end,
            receive after Poll -> ok end,
            ?MODULE:ready_watch(Mode, Until);
        false ->
            os_sup_helper:load_rest()
    end.

%% @doc After `ready': announces `app_exited APPS REASON' once some of the watched applications
%% are no longer started while the VM lives on (Mix and `application:start/1' start them
%% temporary, so nothing else ends the node), then stops watching. REASON is the one its
%% application master ended with, when that exit was seen. `{project, Apps}': the Mix project's
%% applications. `{user, Apps}': on a node without Mix (a release, an `erl' command), the
%% applications that are not OTP's or Elixir's, including those started after boot (each new
%% set is announced as `apps APPS'). A check that cannot answer in time proves nothing and is
%% skipped.
-spec app_watch({project | user, [atom()]}) -> ok.
app_watch({Kind, Apps}) ->
    %% An application's master ends with it: its exit is seen at once, not at the next check.
    Monitors = [erlang:monitor(process, M) || A <- Apps,
                                              M <- [catch application_controller:get_master(A)],
                                              is_pid(M)],
    Why = receive
              %% (the application controller takes it off the started list a moment later)
              {'DOWN', _, process, _, noproc} -> receive after 50 -> unknown end;
              {'DOWN', _, process, _, Reason} -> receive after 50 -> {exited, Reason} end
          after ?APP_WATCH_MS -> unknown
          end,
    _ = [erlang:demonitor(R, [flush]) || R <- Monitors],
    case catch application:which_applications(?APP_WATCH_MS) of
        Started when is_list(Started) ->
            Running = [A || {A, _, _} <- Started],
            case Apps -- Running of
                [] when Kind =:= user ->
                    Seen = lists:usort(Apps ++ user_apps(Running)),
                    _ = Seen =:= Apps orelse os_sup_helper:announce(apps_line(<<"apps ">>, Seen)),
                    ?MODULE:app_watch({Kind, Seen});
                [] ->
                    ?MODULE:app_watch({Kind, Apps});
                Gone ->
                    Line = apps_line(<<"app_exited ">>, Gone),
                    os_sup_helper:announce(with_reason(Line, Why))
            end;
        _ ->
            ?MODULE:app_watch({Kind, Apps})
    end.

%% `app_exited APPS REASON': the reason the application's master ended with, as the node's own
%% `Application X exited: REASON' report says it, so the sidecar need not wait for that report.
with_reason(Line, unknown) ->
    Line;
with_reason(Line, {exited, Reason}) ->
    Text = case os_sup_lib_render:elixir_loaded() of
               true -> catch 'Elixir.Exception':format_exit(Reason);
               false -> os_sup_lib_render:term(Reason, erlang, ?REASON_BYTES)
           end,
    case is_binary(Text) of
        true ->
            OneLine = re:replace(first(Text, 2 * ?REASON_BYTES), <<"\\s+">>, <<" ">>,
                                 [global, unicode, {return, binary}]),
            iolist_to_binary([string:trim(Line, trailing), <<" ">>,
                              first(OneLine, ?REASON_BYTES), <<"\n">>]);
        false ->
            Line
    end.

first(Bin, Max) ->
    os_sup_lib_render:utf8_trim(binary:part(Bin, 0, min(Max, byte_size(Bin)))).

apps_line(Prefix, Apps) ->
    iolist_to_binary([Prefix, lists:join(",", [atom_to_binary(A, utf8) || A <- Apps]), "\n"]).

%% The running applications that are the user's: not OTP's, Elixir's or their build tools'.
user_apps(Running) ->
    lists:usort([A || A <- Running, not lists:member(A, os_sup_lib_label:system_apps())]).
