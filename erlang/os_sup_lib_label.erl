%%% @doc `os_sup_lib_label' says who a process is and whose code a module
%%% is, for every tool that names them. A process is named as a person
%%% would: its registered name, or its pid with its `global' name or the
%%% module it was started in. A module is the application's unless it is
%%% library code: OTP's, Elixir's, their build tools' or this helper's.
%%%
%%% == Processes ==
%%% <ul>
%%%   <li>{@link label/2}: a process (or `{Name, Node}') as a person would
%%%       name it.</li>
%%%   <li>{@link helper_process/1}: whether a process is one of the
%%%       helper's own.</li>
%%% </ul>
%%%
%%% == Code ==
%%% <ul>
%%%   <li>{@link system_apps/0}: the applications whose code is not the
%%%       user's.</li>
%%%   <li>{@link lib_modules/0}, {@link library/2}: whether a module is
%%%       library code (the modules computed once per scan).</li>
%%%   <li>{@link own/1}: whether a function is the helper's own.</li>
%%% </ul>
%%% Only `process_info' is read: nothing is sent to a process.
-module(os_sup_lib_label).

-import(os_sup_lib_proc, [pinfo_items/2]).

%% Processes
-export([label/2, started_by/1, helper_process/1]).
%% Code
-export([system_apps/0, lib_modules/0, library/2, own/1]).

%%%===================================================================
%%% Processes
%%%===================================================================

%% @doc A process as a person would name it: its registered name, or its pid with its
%% `global' name or the module it was started in; a process of another node with its node.
-spec label(term(), os_sup_lib_render:fmt()) -> binary().
label(P, Fmt) when is_pid(P) ->
    case node(P) =:= node() of
        false -> iolist_to_binary([remote_pid(P, Fmt), global_name(P, Fmt), " on ",
                                   atom_to_binary(node(P), utf8)]);
        true ->
            case pinfo_items(P, [registered_name, initial_call]) of
                [{_, N}, _] when is_atom(N), N =/= [] -> os_sup_lib_render:name(N, Fmt);
                [_, {_, Init}] ->
                    case global_name(P, Fmt) of
                        [] -> started_label(P, Init, Fmt);
                        Global -> iolist_to_binary([os_sup_lib_render:pid(P, Fmt), Global])
                    end;
                _ -> os_sup_lib_render:pid(P, Fmt)
            end
    end;
label({Name, Node}, Fmt) ->
    case Node =:= node() of
        true -> iolist_to_binary([os_sup_lib_render:name(Name, Fmt), " (not registered)"]);
        false -> iolist_to_binary([os_sup_lib_render:name(Name, Fmt), " on ",
                                   atom_to_binary(Node, utf8)])
    end;
label(Other, Fmt) ->
    os_sup_lib_render:term(Other, Fmt, 128).

%% @doc Whether `Pid' is one of this helper's own processes (spawned from an `os_sup_' module):
%% not the node's, so never named as a holder or a culprit.
-spec helper_process(pid()) -> boolean().
helper_process(Pid) ->
    case erlang:process_info(Pid, initial_call) of
        {initial_call, MFA} -> own(MFA);
        _ -> false
    end.

%%%===================================================================
%%% Code
%%%===================================================================

%% @doc The applications that ship with OTP and Elixir, and their build tools: code in them is
%% never the user's (an application frame, a tree root, a waiting caller).
-spec system_apps() -> [atom()].
system_apps() ->
    [kernel, stdlib, sasl, compiler, crypto, ssl, public_key, inets, asn1, runtime_tools, tools,
     observer, mnesia, os_mon, syntax_tools, parsetools, xmerl, erts, eunit, common_test,
     debugger, wx, et, reltool, edoc, erl_interface, ftp, tftp, snmp, ssh, diameter, eldap,
     megaco, odbc, dialyzer, erl_docgen, jinterface, otp_mibs, hipe, inviso,
     elixir, logger, mix, iex, eex, ex_unit,
     hex, rebar, rebar3, relx].

%% @doc Modules of OTP and Elixir (their applications' module lists, and preloaded
%% modules): a frame in one of them is not the user's code.
-spec lib_modules() -> #{module() => true}.
lib_modules() ->
    Loaded = try [A || {A, _, _} <- application:loaded_applications()] catch _:_ -> [] end,
    Mods = lists:append([try application:get_key(A, modules) of
                             {ok, Ms} when is_list(Ms) -> Ms;
                             _ -> []
                         catch _:_ -> []
                         end || A <- system_apps(), lists:member(A, Loaded)]),
    maps:from_list([{M, true} || M <- Mods ++ erlang:pre_loaded(), is_atom(M)]).

%% @doc True when `M' is library (or helper) code for the context's `lib' map
%% (see {@link lib_modules/0}).
-spec library(module(), #{lib := #{module() => true}, atom() => term()}) -> boolean().
library(M, #{lib := Lib}) ->
    is_map_key(M, Lib) orelse own({M, x, 0}).

%% @doc True for a function of the helper's own modules, all named `os_sup_*' (never a
%% user's wait).
-spec own(term()) -> boolean().
own({M, _, _}) when is_atom(M) ->
    lists:prefix("os_sup_", atom_to_list(M));
own(_) -> false.

%%%===================================================================
%%% Private
%%%===================================================================

%% An unregistered process by its pid and the module it was started in.
started_label(P, Init, Fmt) ->
    case started_by(P, Init) of
        undefined -> os_sup_lib_render:pid(P, Fmt);
        M -> iolist_to_binary([os_sup_lib_render:pid(P, Fmt), " (", os_sup_lib_render:name(M, Fmt), ")"])
    end.

%% @doc The module a local process was started by (proc_lib's initial call, else its own), or
%% `undefined' when that says nothing (`proc_lib', `erlang', a process that is gone).
-spec started_by(pid()) -> module() | undefined.
started_by(P) ->
    case pinfo_items(P, [initial_call]) of
        [{initial_call, Init}] -> started_by(P, Init);
        _ -> undefined
    end.

started_by(P, Init) ->
    Started = case os_sup_lib_proc:dict_initial_call(os_sup_lib_proc:proc_dict(P)) of
                  undefined -> Init;
                  MFA -> MFA
              end,
    case Started of
        {M, _, _} when is_atom(M), M =/= proc_lib, M =/= erlang -> M;
        _ -> undefined
    end.

%% A pid of another node as that node writes it (`<0.174.0>`), so it can be asked there.
remote_pid(P, Fmt) ->
    case string:lexemes(pid_to_list(P), "<.>") of
        [_, Id, Serial] ->
            Local = ["<0.", Id, ".", Serial, ">"],
            case Fmt of elixir -> ["#PID", Local]; _ -> Local end;
        _ -> os_sup_lib_render:pid(P, Fmt)
    end.

%% ` (global NAME)' when `P' holds a `global' name (the first 1000 names looked at).
global_name(P, Fmt) ->
    Names = try lists:sublist(global:registered_names(), 1000) catch _:_ -> [] end,
    case [N || N <- Names, global:whereis_name(N) =:= P] of
        [N | _] -> [" (global ", os_sup_lib_render:name(N, Fmt), ")"];
        [] -> []
    end.
