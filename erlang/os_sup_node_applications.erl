%%% @doc `os_sup_node_applications' lists the node's applications for tool
%%% `applications'. It lists every running one with its version and description,
%%% or one loaded application's version, state and environment (its first 200
%%% keys, each value rendered to a bounded binary).
-module(os_sup_node_applications).

-import(os_sup_lib_args, [arg_text/2, fmt_arg/1]).
-import(os_sup_lib_proc, [name_atoms/1]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2]).

%% API
-export([applications/1]).

-define(TERM_BYTES, 1024).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Applications: no args for every running one, or `app' for one app's env.
-spec applications(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
applications(Args) ->
    Fmt = fmt_arg(Args),
    Running = try application:which_applications(2000)
              catch _:_ -> fail(timeout, "the application controller did not answer in 2 s", [])
              end,
    case arg_text(app, Args) of
        undefined ->
            Rows = [#{name => A, vsn => to_text(V), description => to_text(D)}
                    || {A, D, V} <- Running],
            ok_reply([fmt("~ts ~ts ~ts", [A, V, D]) || #{name := A, vsn := V, description := D}
                                                           <- Rows],
                     #{applications => Rows});
        Text ->
            Loaded = [A || {A, _, _} <- application:loaded_applications()],
            App = case [A || A <- name_atoms(Text), lists:member(A, Loaded)] of
                      [A | _] -> A;
                      [] -> fail(not_found, "no application ~ts is loaded (running: ~ts)",
                                 [Text, join([atom_to_binary(A, utf8) || {A, _, _} <- Running],
                                             <<", ">>)])
                  end,
            Vsn = case application:get_key(App, vsn) of {ok, V} -> to_text(V); _ -> undefined end,
            Desc = case application:get_key(App, description) of
                       {ok, D} -> to_text(D);
                       _ -> undefined
                   end,
            Env0 = application:get_all_env(App),
            Env = [#{key => os_sup_lib_render:term(K, Fmt, 256),
                     value => os_sup_lib_render:term(V, Fmt, ?TERM_BYTES)}
                   || {K, V} <- lists:sublist(lists:sort(Env0), 200)],
            IsRunning = lists:keymember(App, 1, Running),
            Head = fmt("~ts ~ts ~ts (~ts)", [App, to_text(Vsn), to_text(Desc),
                                            case IsRunning of true -> <<"running">>;
                                                false -> <<"loaded, not running">> end]),
            ok_reply([Head | [<<"  ", K/binary, " = ", V/binary>> || #{key := K, value := V} <- Env]],
                     #{name => App, vsn => Vsn, description => Desc, running => IsRunning,
                       env => Env, env_count => length(Env0)})
    end.
