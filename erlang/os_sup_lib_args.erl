%%% @doc `os_sup_lib_args' reads a tool's arguments. They come as a map
%%% with atom keys (text as binaries, numbers as integers, either spelled
%%% as text too); a number is clamped into its range or refused outside
%%% it, a choice is one of a list of atoms, and a bad value ends the tool
%%% with a `bad_args' error (`os_sup_lib_reply:fail/3'). No atom is ever
%%% made from an argument.
-module(os_sup_lib_args).

-import(os_sup_lib_reply, [fail/3]).

%% API
-export([arg_int/5, arg_range/5, arg_text/2, arg_text_only/2, arg_choice/4, arg_bool/2, arg_bool/3,
         fmt_arg/1, caller_arg/1, clamp/3]).

-type args() :: #{atom() => term()}.
-export_type([args/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Integer argument `Key' clamped to `Lo..Hi' (text is parsed); `Default' when absent.
-spec arg_int(atom(), args(), term(), integer(), integer()) -> term().
arg_int(Key, Args, Default, Lo, Hi) ->
    case maps:get(Key, Args, undefined) of
        undefined -> Default;
        V when is_integer(V) -> clamp(V, Lo, Hi);
        V when is_binary(V) ->
            case parse_int(V) of
                I when is_integer(I) -> clamp(I, Lo, Hi);
                _ -> fail(bad_args, "~ts must be an integer, got ~tp", [Key, V])
            end;
        V -> fail(bad_args, "~ts must be an integer, got ~tP", [Key, V, 5])
    end.

%% @doc Integer argument `Key' in `Lo..Hi', refused (not clamped) outside it; `Default' when
%% absent (the tracing tools' convention: a limit the agent set is never silently changed).
-spec arg_range(atom(), args(), term(), integer(), integer()) -> term().
arg_range(Key, Args, Default, Lo, Hi) ->
    case maps:get(Key, Args, undefined) of
        V when V =:= undefined; V =:= nil; V =:= null -> Default;
        V when is_integer(V), V >= Lo, V =< Hi -> V;
        V when is_integer(V) -> fail(bad_args, "~ts must be in ~b..~b, got ~b", [Key, Lo, Hi, V]);
        V when is_binary(V) ->
            case parse_int(V) of
                I when is_integer(I) -> arg_range(Key, Args#{Key => I}, Default, Lo, Hi);
                _ -> fail(bad_args, "~ts must be an integer, got ~tp", [Key, V])
            end;
        V -> fail(bad_args, "~ts must be an integer, got ~tP", [Key, V, 5])
    end.

%% @doc Text argument `Key' trimmed (atoms and integers spelled out); `undefined' when absent.
-spec arg_text(atom(), args()) -> binary() | pid() | undefined.
arg_text(Key, Args) ->
    case maps:get(Key, Args, undefined) of
        undefined -> undefined;
        null -> undefined;
        nil -> undefined;
        <<>> -> undefined;
        V when is_binary(V) -> string:trim(V);
        V when is_atom(V) -> atom_to_binary(V, utf8);
        V when is_integer(V) -> integer_to_binary(V);
        V when is_pid(V) -> V;
        V when is_list(V) ->
            case to_binary(V) of
                B when is_binary(B) -> string:trim(B);
                _ -> fail(bad_args, "~ts must be text", [Key])
            end;
        V -> fail(bad_args, "~ts must be text, got ~tP", [Key, V, 5])
    end.

%% @doc Text argument `Key' like {@link arg_text/2}, but a number is refused (the tracing
%% tools' convention).
-spec arg_text_only(atom(), args()) -> binary() | pid() | undefined.
arg_text_only(Key, Args) ->
    case maps:get(Key, Args, undefined) of
        V when is_integer(V) -> fail(bad_args, "~ts must be text, got ~tP", [Key, V, 5]);
        _ -> arg_text(Key, Args)
    end.

%% @doc Argument `Key', one of the atoms `Choices' (given as atom or text); `Default' when absent.
-spec arg_choice(atom(), args(), [atom()], term()) -> term().
arg_choice(Key, Args, Choices, Default) ->
    case maps:get(Key, Args, undefined) of
        undefined -> Default;
        V when is_atom(V) -> check_choice(Key, V, Choices);
        V when is_binary(V) ->
            case [C || C <- Choices, atom_to_binary(C, utf8) =:= string:trim(V)] of
                [C] -> C;
                [] -> check_choice(Key, V, Choices)
            end;
        V -> check_choice(Key, V, Choices)
    end.

%% @doc Boolean argument `Key' (default false).
-spec arg_bool(atom(), args()) -> boolean().
arg_bool(Key, Args) ->
    arg_bool(Key, Args, false).

%% @doc Boolean argument `Key' (`true'/`false' or their text); `Default' when absent.
-spec arg_bool(atom(), args(), boolean()) -> boolean().
arg_bool(Key, Args, Default) ->
    case maps:get(Key, Args, Default) of
        B when is_boolean(B) -> B;
        V when V =:= undefined; V =:= nil; V =:= null -> Default;
        <<"true">> -> true;
        <<"false">> -> false;
        V -> fail(bad_args, "~ts must be true or false, got ~tP", [Key, V, 5])
    end.

%% @doc The rendering format asked for (`format' argument, default auto).
-spec fmt_arg(args()) -> elixir | erlang.
fmt_arg(Args) ->
    os_sup_lib_render:format(maps:get(format, Args, auto)).

%% @doc The server process that asked (set by the helper), or `undefined'.
-spec caller_arg(args()) -> pid() | undefined.
caller_arg(Args) ->
    case maps:get(caller, Args, undefined) of
        Pid when is_pid(Pid) -> Pid;
        _ -> undefined
    end.

%% @doc `V' limited to `Lo..Hi'.
-spec clamp(integer(), integer(), integer()) -> integer().
clamp(V, Lo, Hi) -> max(Lo, min(Hi, V)).

%%%===================================================================
%%% Private
%%%===================================================================

%% The integer a text spells (blanks around it allowed), `error' when it spells none.
parse_int(V) ->
    try binary_to_integer(string:trim(V)) catch _:_ -> error end.

%% unicode:characters_to_binary/1, `error' when it raises (not chardata).
to_binary(V) ->
    try unicode:characters_to_binary(V) catch _:_ -> error end.

check_choice(Key, V, Choices) ->
    case lists:member(V, Choices) of
        true -> V;
        false -> fail(bad_args, "~ts must be one of ~ts, got ~tP",
                      [Key, os_sup_lib_text:join([atom_to_binary(C, utf8) || C <- Choices],
                                                 <<", ">>), V, 5])
    end.
