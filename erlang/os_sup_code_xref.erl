%%% @doc `os_sup_code_xref' answers who calls a function, and what a function
%%% calls, for tool `callers'. It reads the call sites in the abstract code of
%%% `.beam' files (`os_sup_code_beam:calls/1', cached per module and read again
%%% when a file changes). No `xref' server: nothing is loaded or compiled.
%%%
%%% == Tools ==
%%% <ul>
%%%   <li>{@link callers/1}: the functions of the project's own
%%%       modules (`os_sup_code_beam:project/0': the Mix project's
%%%       applications, not deps, Elixir or OTP) that call the target
%%%       (`Mod.fun/arity', `Mod.fun' for any arity, `Mod' for any of its
%%%       functions), with file and lines. With `callees': what the target
%%%       calls instead, in any module with debug info.</li>
%%% </ul>
%%%
%%% == Limits ==
%%% A call the Elixir compiler inlines or rewrites (`Port.open/2' is in the
%%% BEAM as `:erlang.open_port/2') is found under either name.
%%% The scan stops after 2 s and says the result is partial (what was read
%%% is cached, so asking again goes further); at most `limit' functions
%%% (default 50, max 500) are listed. Calls the code makes through `apply'
%%% or a variable module are not call sites; macros are expanded when the
%%% caller is compiled, so their callers are not in any BEAM.
-module(os_sup_code_xref).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_bool/2, fmt_arg/1]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [fmt/2, join/2]).

%% API
-export([callers/1]).
%% for `diagnose' (os_sup_diagnose_crowd)
-export([sites/3]).

-define(BUDGET_MS, 2000).
-define(DEFAULT_LIMIT, ?CALLERS_LIMIT_DEFAULT).
-define(MAX_LIMIT, ?CALLERS_LIMIT_MAX).
-define(MAX_LINES, 20).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `callers': who calls `target' in the project (or, with `callees', what it
%% calls), at most `limit'.
-spec callers(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
callers(Args) ->
    Fmt = fmt_arg(Args),
    Limit = arg_int(limit, Args, ?DEFAULT_LIMIT, ?CALLERS_LIMIT_MIN, ?MAX_LIMIT),
    T = os_sup_code:target(Args),
    case maps:get(kind, T) of
        any -> ok;
        Kind -> fail(bad_args, "callers works on functions, not on a ~ts: give Mod.fun/arity", [Kind])
    end,
    check_function(T, Fmt),
    case arg_bool(callees, Args) of
        true -> callees(T, Limit, Fmt);
        false -> callers(compiled_as(T), Limit, Fmt)
    end.

%% @doc The project's call sites of `Module:Function' (any arity), `[{Caller, File, Line}]'
%% (the file relative to the project), read for at most `Ms' ms.
-spec sites(module(), atom(), non_neg_integer()) -> [{mfa(), binary(), non_neg_integer()}].
sites(Module, Function, Ms) ->
    T = #{module => Module, name => atom_to_binary(Function, utf8), arity => undefined},
    #{modules := Mods, dir := Dir} = os_sup_code_beam:project(),
    {All, _, _} = scan(Mods, T, erlang:monotonic_time(millisecond) + Ms, [], 0),
    [{{CM, F, A}, os_sup_code_beam:relative(File, Dir), Line}
     || {CM, {F, A}, File, Line} <- All, is_binary(File) orelse is_list(File)].

%%%===================================================================
%%% Private
%%%===================================================================

%% A named function must exist (exported, or defined when the debug info says so).
check_function(#{name := undefined}, _Fmt) -> ok;
check_function(#{module := M, name := Name, arity := Arity}, Fmt) ->
    Defined = [{atom_to_binary(F, utf8), A} || {F, A} <- os_sup_code_beam:exports(M)]
        ++ case os_sup_code_beam:info(M) of
               #{defs := Defs} -> [{atom_to_binary(F, utf8), A} || {F, A, _, _, _} <- Defs];
               _ -> []
           end,
    case [A || {N, A} <- Defined, N =:= Name, Arity =:= undefined orelse A =:= Arity] of
        [_ | _] -> ok;
        [] ->
            Same = [os_sup_code:label(M, function, N, A, Fmt) || {N, A} <- lists:usort(Defined),
                                                                N =:= Name],
            Near = [os_sup_code:label(M, function, N, undefined, Fmt)
                    || N <- os_sup_code:suggest(Name, lists:usort([N || {N, _} <- Defined]))],
            Hint = case Same ++ Near of
                       [] -> <<>>;
                       Found -> fmt("; did you mean ~ts?", [join(lists:sublist(Found, 3), <<", ">>)])
                   end,
            fail(not_found, "no function ~ts~ts",
                 [os_sup_code:label(M, function, Name, Arity, Fmt), Hint])
    end.

matches(#{module := M, name := Name, arity := Arity} = T, {CM, CF, CA} = Callee) ->
    (CM =:= M
     andalso (Name =:= undefined orelse atom_to_binary(CF, utf8) =:= Name)
     andalso (Arity =:= undefined orelse CA =:= Arity))
        orelse lists:member(Callee, maps:get(compiled_as, T, [])).

%% What the Elixir compiler turns a call of the target into, when it inlines or rewrites it
%% (`Port.open/2' is compiled to `:erlang.open_port/2', `String.to_atom/1' to
%% `:erlang.binary_to_atom/2'): call sites in a BEAM carry only that name. Asked of the
%% node's own compiler (`elixir_rewrite'), for each arity of the target.
compiled_as(#{module := M, name := Name, arity := Arity} = T) when is_binary(Name) ->
    Arities = case Arity of
                  undefined -> lists:usort([A || {F, A} <- exports(M),
                                                 atom_to_binary(F, utf8) =:= Name]);
                  _ -> [Arity]
              end,
    F = binary_to_atom(Name, utf8),
    T#{compiled_as => lists:usort([MFA || A <- Arities, MFA <- rewritten(M, F, A),
                                          MFA =/= {M, F, A}])};
compiled_as(T) ->
    T.

rewritten(M, F, A) ->
    case erlang:module_loaded(elixir_rewrite) of
        false -> [];
        true ->
            Vars = [{list_to_atom([$x | integer_to_list(I)]), [], nil} || I <- lists:seq(1, A)],
            Inlined = try elixir_rewrite:inline(M, F, A) of
                          {IM, IF} when is_atom(IM), is_atom(IF) -> [{IM, IF, A}];
                          _ -> []
                      catch _:_ -> []
                      end,
            Rewritten = try elixir_rewrite:rewrite(M, [], F, [], Vars) of
                            {{'.', _, [RM, RF]}, _, RArgs} when is_atom(RM), is_atom(RF),
                                                               is_list(RArgs) ->
                                [{RM, RF, length(RArgs)}];
                            _ -> []
                        catch _:_ -> []
                        end,
            Inlined ++ Rewritten
    end.

exports(M) ->
    try M:module_info(exports) catch _:_ -> [] end.

callers(T, Limit, Fmt) ->
    T0 = erlang:monotonic_time(millisecond),
    #{modules := Mods, scope := Scope, dir := Dir} = os_sup_code_beam:project(),
    {All, Scanned, Partial} = scan(Mods, T, T0 + ?BUDGET_MS, [], 0),
    %% The target calling itself (recursion, or one clause of it another) is no caller of it.
    {Own, Sites} = lists:partition(fun({CM, {F, A}, _, _}) -> matches(T, {CM, F, A}) end, All),
    Grouped = group([{{CM, F, A}, File, Line} || {CM, {F, A}, File, Line} <- Sites]),
    Rows = [row(os_sup_code:label(CM, function, atom_to_binary(F, utf8), A, Fmt), File, Lines, Dir)
            || {{CM, F, A}, File, Lines} <- Grouped],
    Target = case maps:get(compiled_as, T, []) of
                 [] -> target_label(T, Fmt);
                 As -> iolist_to_binary([target_label(T, Fmt), " (compiled as ",
                                         lists:join(", ", [os_sup_lib_render:mfa(A, Fmt)
                                                           || A <- As]), ")"])
             end,
    Head = fmt("~b call sites of ~ts in ~b functions of ~ts (~b of ~b modules scanned~ts)~ts",
               [length(Sites), Target, length(Rows), Scope, Scanned, length(Mods),
                case Partial of true -> <<", PARTIAL: the 2 s budget ran out; ask again, "
                                         "what was read is cached">>; false -> <<>> end,
                itself(Own, Dir)]),
    reply(Head, callers, Target, Rows, Limit,
          #{scope => Scope, modules_scanned => Scanned, modules_total => length(Mods),
            partial => Partial, call_sites => length(Sites), own_call_sites => length(Own)}).

%% Where the target calls itself, said after the count and not listed.
itself([], _Dir) ->
    <<>>;
itself(Own, Dir) ->
    Where = [[os_sup_code_beam:relative(File, Dir), ":",
              join([integer_to_binary(L) || L <- lists:sublist(Lines, ?MAX_LINES)], <<",">>)]
             || {_, File, Lines} <- group([{File, File, Line} || {_, _, File, Line} <- Own])],
    fmt("; it calls itself at ~ts (not listed)", [lists:join(", ", Where)]).

scan([], _T, _Deadline, Acc, N) ->
    {lists:reverse(Acc), N, false};
scan([{CM, _File} | Rest], T, Deadline, Acc, N) ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> {lists:reverse(Acc), N, true};
        false ->
            Found = case os_sup_code_beam:calls(CM) of
                        {Source, Calls} -> [{CM, FA, Source, Line} || {FA, Callee, Line} <- Calls,
                                                                     matches(T, Callee)];
                        undefined -> []
                    end,
            scan(Rest, T, Deadline, lists:reverse(Found, Acc), N + 1)
    end.

callees(#{module := M, name := Name, arity := Arity} = T, Limit, Fmt) ->
    {Source, Calls} = case os_sup_code_beam:calls(M) of
                          undefined -> fail(not_found, "~ts has no debug info (compiled without "
                                            "debug_info, or preloaded): its calls are unknown",
                                            [os_sup_lib_render:name(M, Fmt)]);
                          C -> C
                      end,
    Dir = os_sup_code_beam:project_dir(),
    Mine = [{Callee, Source, Line} || {{F, A}, Callee, Line} <- Calls,
                                      Name =:= undefined orelse atom_to_binary(F, utf8) =:= Name,
                                      Arity =:= undefined orelse A =:= Arity,
                                      %% a module's callees: what it calls elsewhere
                                      Name =/= undefined orelse element(1, Callee) =/= M],
    Rows = [row(os_sup_lib_render:mfa(Callee, Fmt), File, Lines, Dir)
            || {Callee, File, Lines} <- group(Mine)],
    Target = target_label(T, Fmt),
    Head = fmt("~ts calls ~b functions (~b call sites)", [Target, length(Rows), length(Mine)]),
    reply(Head, callees, Target, Rows, Limit,
          #{scope => undefined, modules_scanned => 1, modules_total => 1, partial => false,
            call_sites => length(Mine)}).

target_label(#{module := M, name := Name, arity := Arity}, Fmt) ->
    os_sup_code:label(M, function, Name, Arity, Fmt).

%% `[{Key, File, Line}]' as `[{Key, File, [Line]}]', sorted by key.
group(Sites) ->
    Map = lists:foldl(fun({Key, File, Line}, Acc) ->
                              maps:update_with(Key, fun({F, Ls}) -> {F, [Line | Ls]} end,
                                               {File, [Line]}, Acc)
                      end, #{}, Sites),
    [{Key, File, lists:usort(Lines)} || {Key, {File, Lines}} <- lists:sort(maps:to_list(Map))].

row(Function, File, Lines, Dir) ->
    #{function => Function, file => os_sup_code_beam:relative(File, Dir),
      lines => lists:sublist(Lines, ?MAX_LINES), line_count => length(Lines)}.

reply(Head, Direction, Target, Rows, Limit, Extra) ->
    Shown = lists:sublist(Rows, Limit),
    %% Line 0: a call a macro generated (a Phoenix pipeline's `plug'), no line recorded.
    Lines = [fmt("~ts  ~ts~ts", [F, case File of undefined -> <<"?">>; _ -> File end,
                                 case [L || L <- Ls, L > 0] of
                                     [] -> <<" (no line: code a macro generated)">>;
                                     Known -> [":", join([integer_to_binary(L) || L <- Known],
                                                         <<",">>)]
                                 end])
             || #{function := F, file := File, lines := Ls} <- Shown],
    More = case length(Rows) - length(Shown) of
               0 -> [];
               N -> [fmt("... ~b more (raise limit, max ~b)", [N, ?MAX_LIMIT])]
           end,
    Empty = case {Rows, Direction} of
                {[], callers} -> [<<"no callers found (calls through apply/3 or a variable "
                                    "module are not seen; macros are expanded at compile time)">>];
                _ -> []
            end,
    ok_reply([Head | Lines ++ More ++ Empty],
             Extra#{target => Target, direction => Direction, rows => Shown,
                    truncated => length(Shown) < length(Rows)}).
