%%% @doc `os_sup_helper_status' answers the helper's `status' request and says
%%% whether the node is ready, for the boot announcements of `os_sup_helper'
%%% (`ready', `app_exited'). Calls that may block (Mix agents, the
%%% application controller during boot) run in a throw-away process with a
%%% deadline.
-module(os_sup_helper_status).

-import(os_sup_lib_call, [safe/2]).
-import(os_sup_lib_reply, [reply/3]).

%% API
-export([status_worker/3, readiness/1, probe_mix_raw/0, idle_endpoints/1]).

%% Internal spawn target (deadline-bounded Mix probe). Not an API.
-export([mix_probe/1]).

-define(MIX_PROBE_MS, 1500).

-type ready_mode() :: boot | mix_app.

%%%===================================================================
%%% API
%%%===================================================================

%% @doc `{Ready, App}': whether the node meets readiness mode `Mode', and the project's app
%% when there is exactly one.
-spec readiness(ready_mode()) -> {boolean(), atom()}.
readiness(boot) ->
    {init_status() =:= started, undefined};
readiness(mix_app) ->
    case code:is_loaded('Elixir.Mix.Project') of
        {file, _} -> probe_mix();
        false -> {false, undefined}
    end.

%% @doc `{ok, ProjectApps, AllStarted} | error' (also on a timeout).
-spec probe_mix_raw() -> {ok, [atom()], boolean()} | error.
probe_mix_raw() ->
    try spawn_monitor(?MODULE, mix_probe, [self()]) of
        {Pid, MRef} -> probe_mix_wait(Pid, MRef)
    catch
        _:_ -> error
    end.

%% @doc The Phoenix endpoints of `Apps' that run without their HTTP server: Phoenix serves
%% an endpoint only with `server: true' in its config or under `mix phx.server' (which sets
%% `:phoenix, :serve_endpoints'), so `mix run --no-halt' starts an app that answers nothing.
%% Read from the applications' environment (no call into the app); one line each.
-spec idle_endpoints([atom()]) -> [binary()].
idle_endpoints(Apps) ->
    ServeAll = safe(fun() -> application:get_env(phoenix, serve_endpoints, false) end, false),
    [iolist_to_binary(
       [os_sup_lib_render:name(Mod, elixir),
        " does not serve HTTP (server: false; Phoenix serves endpoints under `mix phx.server` "
        "or with `server: true` in their config): start with command [\"mix\", \"phx.server\"] "
        "or set `server: true`"])
     || ServeAll =/= true,
        App <- Apps,
        {Mod, Config} <- safe(fun() -> application:get_all_env(App) end, []),
        is_atom(Mod), is_list(Config), phoenix_endpoint(Mod),
        safe(fun() -> proplists:get_value(server, Config) end, undefined) =/= true].

%%%===================================================================
%%% Internal entry points
%%%===================================================================

%% @doc Computes the `status' reply and sends it to `From'.
-spec status_worker(term(), pid(), ready_mode()) -> ok.
status_worker(Ref, From, Mode) ->
    reply(From, Ref, {ok, status(Mode)}).

%% @doc Reports the Mix project's app(s) and whether they are all started to `Parent'.
-spec mix_probe(pid()) -> ok.
mix_probe(Parent) ->
    Result =
        try
            Apps = mix_project_apps(),
            Started = [A || {A, _, _} <- application:which_applications(1000)],
            {ok, Apps, Apps =/= [] andalso lists:all(fun(A) -> lists:member(A, Started) end, Apps)}
        catch
            _:_ -> error
        end,
    Parent ! {mix_probe, self(), Result},
    ok.

%%%===================================================================
%%% Private
%%%===================================================================

status(Mode) ->
    {Ready, App} = readiness(Mode),
    #{node => node(),
      os_pid => safe(fun() -> list_to_binary(os:getpid()) end, <<>>),
      otp_release => safe(fun() -> list_to_binary(erlang:system_info(otp_release)) end, <<>>),
      erts_version => safe(fun() -> list_to_binary(erlang:system_info(version)) end, <<>>),
      elixir_version => elixir_version(),
      uptime_ms => safe(fun() -> element(1, erlang:statistics(wall_clock)) end, 0),
      process_count => erlang:system_info(process_count),
      memory_total => safe(fun() -> erlang:memory(total) end, 0),
      helper_version => os_sup_helper:version(),
      ready => Ready,
      app => App,
      init_status => init_status(),
      started => started(),
      app_restarts => app_restarts()}.

%% The applications running now: started, and their master still alive (an application
%% whose top supervisor was just killed is gone before the controller has taken it off).
started() ->
    safe(fun() ->
                 [A || {A, _, _} <- application:which_applications(1000),
                       M <- [application_controller:get_master(A)], is_pid(M),
                       erlang:is_process_alive(M)]
         end, undefined).

%% The restarts the node's supervisors made (os_sup_log_stats), with the latest one.
app_restarts() ->
    #{restarts := #{total := Total, last_5m := Recent, children := Children}} =
        os_sup_log_stats:summary(os_sup_lib_render:format(auto)),
    Last = case lists:reverse(lists:keysort(2, [{C, maps:get(last_at_ms, C)} || C <- Children])) of
               [{#{supervisor := Sup, child := Child, last_reason := Reason,
                   last_at_ms := At}, _} | _] ->
                   #{supervisor => Sup, child => Child, reason => Reason, at_ms => At};
               [] ->
                   undefined
           end,
    #{total => Total, last_5m => Recent, last => Last}.

%% A loaded module built with `use Phoenix.Endpoint' (its socket table and server info).
phoenix_endpoint(Mod) ->
    erlang:function_exported(Mod, '__sockets__', 0)
        andalso erlang:function_exported(Mod, server_info, 1).

init_status() ->
    safe(fun() -> element(1, init:get_status()) end, undefined).

elixir_version() ->
    case code:is_loaded('Elixir.System') of
        {file, _} ->
            safe(fun() -> iolist_to_binary('Elixir.System':version()) end, undefined);
        false ->
            undefined
    end.

%% Mix calls go through agents and the application controller may be busy
%% during boot: ask in a throw-away process with a deadline.
probe_mix() ->
    case probe_mix_raw() of
        {ok, [App], Ready} -> {Ready, App};
        {ok, _, Ready} -> {Ready, undefined};
        error -> {false, undefined}
    end.

probe_mix_wait(Pid, MRef) ->
    receive
        {mix_probe, Pid, Result} ->
            erlang:demonitor(MRef, [flush]),
            Result;
        {'DOWN', MRef, process, Pid, _} ->
            error
    after ?MIX_PROBE_MS ->
            exit(Pid, kill),
            erlang:demonitor(MRef, [flush]),
            error
    end.

%% The project's app, or the apps of an umbrella; [] when not known yet.
mix_project_apps() ->
    Config = 'Elixir.Mix.Project':config(),
    case proplists:get_value(app, Config) of
        App when is_atom(App), App =/= nil, App =/= undefined ->
            [App];
        _ ->
            case 'Elixir.Mix.Project':apps_paths() of
                Paths when is_map(Paths) -> lists:sort(maps:keys(Paths));
                _ -> []
            end
    end.
