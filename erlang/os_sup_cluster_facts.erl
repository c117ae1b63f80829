%%% @doc `os_sup_cluster_facts' lists what a member of a cluster holds that its
%%% peers are expected to hold too, for `diagnose' of a cluster (the server
%%% compares the members' lists). They are its processes in each `pg' group of
%%% each scope, the registered names of the application's processes, the
%%% `global' names it sees, the application's processes counted by initial call,
%%% and the application env of the applications that are not OTP's or Elixir's
%%% (a hash of each value, not the value: env holds secrets), and a hash of the
%%% code of each of the application's modules.
%%%
%%% == Bounds and safety ==
%%% Only ETS reads (`pg', the application env), `registered/0' and
%%% `global:registered_names/0';
%%% nothing is sent to any process. At most 200 of each kind, as text.
-module(os_sup_cluster_facts).

%% API
-export([facts/3]).

-define(MAX, 200).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc `#{pg, names, global, initial_calls, env}': `pg' maps `"scope group"' to this node's
%% members of that group, `{Count, What}' (`What' names the first: its registered name, else
%% the module it was started in); `names' and `global' are lists of names; `initial_calls' maps an
%% initial call to its process count (from `Groups', an `os_sup_proc_groups' snapshot's groups by
%% origin); `env' lists `[App, Key, Hash]'; `code' is the application's modules with a
%% hash of each one's MD5 and where it came from (`os_sup_diagnose_code:facts/2', from
%% `Code', its scan). Empty on a node that is not distributed.
-spec facts(map(), os_sup_diagnose_code:scan(), os_sup_lib_render:fmt()) -> map().
facts(Groups, Code, Fmt) ->
    case node() of
        nonode@nohost -> #{};
        _ ->
            #{pg => pg_members(Fmt),
              names => cut([os_sup_lib_render:name(N, Fmt) || N <- lists:sort(registered()),
                                                        apps(N)]),
              global => cut([os_sup_lib_render:term(N, Fmt, 80)
                             || N <- lists:sort(catch_list(fun global:registered_names/0))]),
              initial_calls => initial_calls(Groups, Fmt),
              env => env(Fmt),
              code => os_sup_diagnose_code:facts(Code, Fmt)}
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% Each scope (a registered process running `pg') and its groups, with this node's members.
pg_members(Fmt) ->
    Scopes = [N || N <- registered(), is_pg_scope(N)],
    Pairs = [{iolist_to_binary([os_sup_lib_render:name(S, Fmt), " ", os_sup_lib_render:term(G, Fmt, 80)]),
              {length(Members), what(Members, Fmt)}}
             || S <- Scopes, G <- lists:sublist(catch_list(fun() -> pg:which_groups(S) end), ?MAX),
                Members <- [catch_list(fun() -> pg:get_local_members(S, G) end)]],
    maps:from_list(lists:sublist(Pairs, ?MAX)).

%% The first member of a group by its registered name, else the module it was started in.
what([P | _], Fmt) when is_pid(P) ->
    case os_sup_lib_proc:reg_name(P) of
        Name when is_atom(Name), Name =/= undefined, Name =/= [] -> os_sup_lib_render:name(Name, Fmt);
        _ ->
            case os_sup_proc_origin:initial_call(P) of
                {M, _, _} when is_atom(M) -> os_sup_lib_render:name(M, Fmt);
                _ -> undefined
            end
    end;
what(_, _Fmt) ->
    undefined.

is_pg_scope(Name) ->
    case erlang:whereis(Name) of
        Pid when is_pid(Pid) ->
            case os_sup_lib_proc:dict_initial_call(os_sup_lib_proc:proc_dict(Pid)) of
                {pg, init, 1} -> true;
                %% OTP 29's pg runs on data_publisher
                {data_publisher, init, 1} -> true;
                _ -> false
            end;
        _ -> false
    end.

initial_calls(Groups, Fmt) ->
    Counts = maps:fold(fun({{M, F, A}, _, _}, #{count := C}, Acc) when is_atom(M) ->
                               case os_sup_proc_origin:app_module(M) of
                                   true -> maps:update_with({M, F, A}, fun(N) -> N + C end, C,
                                                            Acc);
                                   false -> Acc
                               end;
                          (_, _, Acc) -> Acc
                       end, #{}, Groups),
    Top = os_sup_lib_rank:top(?MAX, 2, maps:to_list(Counts)),
    maps:from_list([{os_sup_lib_render:mfa(MFA, Fmt), C} || {MFA, C} <- Top]).

%% `[App, Key, Hash]' of each key of the env of each loaded application that is not OTP's or
%% Elixir's, sorted; its value hashed, as the peers' are, so values are compared, not sent.
env(Fmt) ->
    Apps = lists:sort([A || {A, _, _} <- application:loaded_applications(),
                            not lists:member(A, os_sup_lib_label:system_apps())]),
    cut([[os_sup_lib_render:term(A, Fmt, 80), os_sup_lib_render:term(K, Fmt, 80), erlang:phash2(V)]
         || A <- Apps, {K, V} <- lists:sort(application:get_all_env(A)),
            K =/= included_applications]).

%% A name of the application's: its process runs the application's code (its `proc_lib'
%% initial call, or its initial call), not OTP's (`inet_gethost_native' starts on one member
%% and not another) nor the helper's.
apps(Name) ->
    case erlang:whereis(Name) of
        Pid when is_pid(Pid) ->
            case os_sup_proc_origin:initial_call(Pid) of
                {M, _, _} when is_atom(M) -> os_sup_proc_origin:app_module(M);
                _ -> false
            end;
        _ -> false
    end.

catch_list(F) ->
    try F() of
        L when is_list(L) -> L;
        _ -> []
    catch
        _:_ -> []
    end.

cut(L) -> lists:sublist(L, ?MAX).
