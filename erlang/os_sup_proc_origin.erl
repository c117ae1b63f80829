%%% @doc `os_sup_proc_origin' says where a process came from and where it is in
%%% the application's own code, for `process_info' and the health report. That
%%% is its parent (OTP 25+), its proc_lib initial call, its ancestors by name,
%%% and the top frame of its stack that belongs to the application rather than
%%% to OTP, Elixir or this helper.
%%%
%%% A module belongs to the application unless it is preloaded, one of
%%% this helper's, or part of an OTP or Elixir application (by the name of
%%% the application that holds it, so releases, which copy OTP's
%%% applications next to the user's, are judged the same way). Only
%%% `process_info' is used: nothing is sent to the process.
-module(os_sup_proc_origin).

-import(os_sup_lib_label, [system_apps/0]).
-import(os_sup_lib_proc, [pinfo_items/2, dict_initial_call/1, reg_name/1]).

%% API
-export([app_frame/1, entry_frame/1, app_module/1, initial_call/1, enclosing/1, describe_frame/2,
         origin/2]).

-define(MAX_ANCESTORS, 10).

-type frame() :: #{mfa := mfa(), file := binary() | undefined, line := integer() | undefined}.
-export_type([frame/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The first frame of `Stack' (as from `process_info(P, current_stacktrace)') in a
%% module of the application, `undefined' when there is none. `file' is relative to the
%% node's working directory (the project) when inside it.
-spec app_frame(term()) -> frame() | undefined.
app_frame(Stack) when is_list(Stack) ->
    case [F || {M, _, _, _} = F <- Stack, is_atom(M), app_module(M)] of
        [{M, F, A, Loc} | _] ->
            Arity = case A of
                        N when is_integer(N) -> N;
                        Args when is_list(Args) -> length(Args);
                        _ -> 0
                    end,
            #{mfa => enclosing({M, F, Arity}), file => file_of(M, Loc), line => line_of(Loc)};
        [] ->
            undefined
    end;
app_frame(_) ->
    undefined.

%% @doc The outermost application frame of a stack: where library code (a `gen_server''s
%% loop) called into the application, a callback such as `handle_call/3' (the innermost is
%% {@link app_frame/1}); `undefined' when no frame is the application's.
-spec entry_frame(term()) -> frame() | undefined.
entry_frame(Stack) when is_list(Stack) ->
    app_frame(lists:reverse(Stack));
entry_frame(_) ->
    undefined.

%% @doc What `Pid' was started with: its `proc_lib' initial call (a GenServer's `init/1')
%% when it has one, else its initial call; `undefined' when it is gone.
-spec initial_call(pid()) -> mfa() | undefined.
initial_call(Pid) ->
    case os_sup_lib_proc:dict_initial_call(os_sup_lib_proc:proc_dict(Pid)) of
        undefined ->
            case os_sup_lib_proc:pinfo_items(Pid, [initial_call]) of
                [{_, MFA}] -> MFA;
                _ -> undefined
            end;
        MFA -> MFA
    end.

%% @doc The function an anonymous function (or a comprehension) is defined in, which is what
%% an agent can look up: `'-rebuild/1-fun-1-'/2' is in `rebuild/1'.
-spec enclosing(mfa()) -> mfa().
enclosing({M, F, _} = MFA) ->
    case re:run(atom_to_binary(F, utf8), <<"^-(.+)/([0-9]+)-(?:fun|lc\\$|lbc\\$|blc\\$).*-$">>,
                [{capture, all_but_first, binary}, unicode]) of
        {match, [Name, Arity]} ->
            try {M, binary_to_existing_atom(Name, utf8), binary_to_integer(Arity)}
            catch error:badarg -> MFA
            end;
        _ -> MFA
    end.

%% @doc `Frame' as `Mod.fun/1 lib/x.ex:12' (the location left out when unknown).
-spec describe_frame(frame() | undefined, os_sup_lib_render:fmt()) -> binary().
describe_frame(undefined, _Fmt) ->
    <<"-">>;
describe_frame(#{mfa := MFA, file := File, line := Line}, Fmt) ->
    Call = os_sup_lib_render:mfa(MFA, Fmt),
    case {File, Line} of
        {F, L} when is_binary(F), is_integer(L), L > 0 ->
            <<Call/binary, " ", F/binary, ":", (integer_to_binary(L))/binary>>;
        {F, _} when is_binary(F) -> <<Call/binary, " ", F/binary>>;
        _ -> Call
    end.

%% @doc Where `Pid' came from, rendered: `parent' (the process that spawned it, with its
%% registered name or initial call), `initial_call' (proc_lib's when there is one),
%% `ancestors' (by registered name where they have one) and `app_frame' (see
%% {@link app_frame/1}); `undefined' when the process is gone.
-spec origin(pid(), os_sup_lib_render:fmt()) ->
          #{parent := binary() | undefined, initial_call := binary(), ancestors := [binary()],
            app_frame := binary() | undefined} | undefined.
origin(Pid, Fmt) ->
    case pinfo_items(Pid, [initial_call, current_stacktrace, dictionary]) of
        undefined ->
            undefined;
        Items ->
            Dict = case proplists:get_value(dictionary, Items) of
                       D when is_list(D) -> D;
                       _ -> []
                   end,
            Initial = case dict_initial_call(Dict) of
                          undefined -> proplists:get_value(initial_call, Items);
                          MFA -> MFA
                      end,
            Frame = app_frame(proplists:get_value(current_stacktrace, Items)),
            #{parent => case parent(Pid) of
                            undefined -> undefined;
                            Parent -> describe_process(Parent, Fmt)
                        end,
              initial_call => os_sup_lib_render:mfa(Initial, Fmt),
              ancestors => [ancestor(A, Fmt) || A <- ancestors(Dict)],
              app_frame => case Frame of
                               undefined -> undefined;
                               _ -> describe_frame(Frame, Fmt)
                           end}
    end.

%% @doc Whether `M' is the application's code: not OTP's, Elixir's, a build tool's or the
%% helper's.
-spec app_module(module()) -> boolean().
app_module(M) ->
    case atom_to_binary(M, utf8) of
        <<"os_sup_", _/binary>> -> false;
        _ ->
            case code:which(M) of
                preloaded -> false;
                non_existing -> false;
                _ ->
                    case application:get_application(M) of
                        {ok, App} -> not lists:member(App, system_apps());
                        undefined -> not under_otp(M)
                    end
            end
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% OTP 25+ knows every process's parent; older releases do not have the item.
parent(Pid) ->
    try erlang:process_info(Pid, parent) of
        {parent, P} when is_pid(P) -> P;
        _ -> undefined
    catch _:_ -> undefined
    end.

%% `<0.230.0> (Shop.Ledger)': the pid with its registered name, else its initial call.
describe_process(Pid, Fmt) ->
    PidText = os_sup_lib_render:pid(Pid, Fmt),
    case reg_name(Pid) of
        Name when is_atom(Name), Name =/= undefined ->
            <<PidText/binary, " (", (os_sup_lib_render:name(Name, Fmt))/binary, ")">>;
        _ ->
            case pinfo_items(Pid, [initial_call, dictionary]) of
                undefined ->
                    <<PidText/binary, " (exited)">>;
                Items ->
                    MFA = case dict_initial_call(proplists:get_value(dictionary, Items, [])) of
                              undefined -> proplists:get_value(initial_call, Items);
                              M -> M
                          end,
                    <<PidText/binary, " (", (os_sup_lib_render:mfa(MFA, Fmt))/binary, ")">>
            end
    end.

ancestors(Dict) ->
    case lists:keyfind('$ancestors', 1, Dict) of
        {_, L} when is_list(L) -> lists:sublist(L, ?MAX_ANCESTORS);
        _ -> []
    end.

ancestor(A, Fmt) when is_atom(A) -> os_sup_lib_render:name(A, Fmt);
ancestor(P, Fmt) when is_pid(P) ->
    case reg_name(P) of
        Name when is_atom(Name), Name =/= undefined -> os_sup_lib_render:name(Name, Fmt);
        _ -> os_sup_lib_render:pid(P, Fmt)
    end;
ancestor(X, Fmt) ->
    os_sup_lib_render:term(X, Fmt, 256).

%% A module outside every application: OTP's own when its code is under OTP's root.
under_otp(M) ->
    case code:which(M) of
        Path when is_list(Path) -> lists:prefix(code:root_dir() ++ "/", Path);
        _ -> true
    end.

file_of(M, Loc) ->
    File = case proplists:get_value(file, Loc) of
               F when is_list(F) -> F;
               _ ->
                   try proplists:get_value(source, M:module_info(compile)) of
                       S when is_list(S) -> S;
                       _ -> undefined
                   catch _:_ -> undefined
                   end
           end,
    case File of
        undefined -> undefined;
        _ -> unicode:characters_to_binary(relative(File))
    end.

line_of(Loc) ->
    case proplists:get_value(line, Loc) of
        L when is_integer(L) -> L;
        _ -> undefined
    end.

%% `File' relative to the working directory (the project) when inside it.
relative(File) ->
    case {filename:pathtype(File), file:get_cwd()} of
        {absolute, {ok, Cwd}} ->
            case lists:prefix(Cwd ++ "/", File) of
                true -> lists:nthtail(length(Cwd) + 1, File);
                false -> File
            end;
        _ ->
            File
    end.
