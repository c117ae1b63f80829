%%%-------------------------------------------------------------------
%%% @doc `os_sup_dev' supports the edit, compile, test loop inside a running
%%% Mix project node.
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link run/2} with `recompile': recompile the project in the node
%%%       (as IEx's `recompile/0' does) and report the modules that changed
%%%       and the compiler's diagnostics. A compile error leaves the node
%%%       running with its previous code: the compiler purges the modules it
%%%       recompiles, so their previous object code is kept beforehand and
%%%       loaded again when the compile fails.</li>
%%% </ul>
%%%
%%% Runs in the helper's worker process, under the request's deadline. The
%%% compiler's own output goes to the node's stdout (the sidecar logs it);
%%% the reply carries the structured diagnostics, bounded.
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_dev).

-export([run/2]).

-define(MAX_DIAGNOSTICS, 100).
-define(MAX_MESSAGE_BYTES, 2048).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Runs a development tool: `recompile'.
-spec run(atom(), map()) -> {ok, #{text := binary(), data := map()}}
                          | {error, #{kind := atom(), message := binary()}}.
run(recompile, Args) ->
    case code:is_loaded('Elixir.Mix.Project') of
        {file, _} -> recompile(maps:get(force, Args, false) =:= true);
        false -> failure(unavailable, <<"recompile needs a node started from a Mix project "
                                      "(Mix is not running here)">>)
    end;
run(Tool, _Args) ->
    failure(unknown_tool, iolist_to_binary(io_lib:format("unknown tool ~tp", [Tool]))).

%%%===================================================================
%%% Private
%%%===================================================================

recompile(Force) ->
    Config = 'Elixir.Mix.Project':config(),
    Before = project_modules(),
    Previous = [{M, code:get_object_code(M)} || {M, _} <- Before],
    T0 = erlang:monotonic_time(millisecond),
    reenable_tasks(Config),
    Consolidation = 'Elixir.Mix.Project':consolidation_path(Config),
    Flags = [<<"--purge-consolidation-path-if-stale">>, <<"--return-errors">>, Consolidation],
    Args = case Force of
               true -> [<<"--force">> | Flags];
               false -> Flags
           end,
    {Status, Diagnostics} =
        case 'Elixir.Mix.Task':run(<<"compile">>, Args) of
            {S, Ds} when is_list(Ds) -> {S, Ds};
            S when is_atom(S) -> {S, []};
            Other -> {error, [Other]}
        end,
    Restored = case Status of
                   error -> restore(Previous);
                   _ -> []
               end,
    After = project_modules(),
    Changed = lists:sort([M || {M, Md5} <- After, proplists:get_value(M, Before) =/= Md5]),
    Shown = [diagnostic(D) || D <- lists:sublist(Diagnostics, ?MAX_DIAGNOSTICS)],
    Data = #{status => Status,
             reloaded => [os_sup_render:name(M, elixir) || M <- Changed],
             diagnostics => Shown,
             diagnostic_count => length(Diagnostics),
             restored => [os_sup_render:name(M, elixir) || M <- Restored],
             duration_ms => erlang:monotonic_time(millisecond) - T0},
    {ok, #{text => text(Data), data => Data}}.

%% Loads the previous code of modules a failed compile left unloaded; returns them.
restore(Previous) ->
    [M || {M, {M, Bin, File}} <- Previous,
          code:is_loaded(M) =:= false,
          element(1, code:load_binary(M, File, Bin)) =:= module].

%% The tasks IEx's recompile/0 re-enables so that `compile' runs again in this VM.
reenable_tasks(Config) ->
    Compilers = case proplists:get_value(compilers, Config) of
                    L when is_list(L) -> L;
                    _ -> 'Elixir.Mix':compilers()
                end,
    Tasks = [<<"compile">>, <<"compile.all">>]
        ++ [<<"compile.", (atom_to_binary(C))/binary>> || C <- Compilers],
    lists:foreach(fun(T) -> 'Elixir.Mix.Task':reenable(T) end, Tasks).

%% {Module, Md5} of every loaded module that lives in the project's build directory.
project_modules() ->
    Build = binary_to_list(iolist_to_binary('Elixir.Mix.Project':build_path())),
    [{M, md5(M)} || {M, Path} <- code:all_loaded(), is_list(Path), lists:prefix(Build, Path)].

md5(M) ->
    try M:module_info(md5) catch _:_ -> undefined end.

diagnostic(D) when is_map(D) ->
    Line = case maps:get(position, D, undefined) of
               L when is_integer(L) -> L;
               {L, _Col} when is_integer(L) -> L;
               _ -> 0
           end,
    #{severity => maps:get(severity, D, error),
      file => to_bin(maps:get(file, D, <<>>)),
      line => Line,
      message => os_sup_render:bound(to_bin(maps:get(message, D, <<>>)), ?MAX_MESSAGE_BYTES)};
diagnostic(Other) ->
    #{severity => error, file => <<>>, line => 0,
      message => os_sup_render:term(Other, erlang, ?MAX_MESSAGE_BYTES)}.

text(#{status := Status, reloaded := Reloaded, restored := Restored, diagnostics := Ds,
       duration_ms := Ms}) ->
    Head = io_lib:format("~ts in ~b ms: ~b module(s) reloaded~ts", [Status, Ms, length(Reloaded),
                         case Reloaded of
                             [] -> "";
                             _ -> [" (", lists:join(", ", Reloaded), ")"]
                         end]),
    Kept = case Restored of
               [] -> [];
               _ -> [io_lib:format("previous code kept for ~ts", [lists:join(", ", Restored)])]
           end,
    Lines = [io_lib:format("~ts ~ts:~b: ~ts", [Sev, F, L, M])
             || #{severity := Sev, file := F, line := L, message := M} <- Ds],
    iolist_to_binary(lists:join("\n", [Head | Kept ++ Lines])).

to_bin(B) when is_binary(B) -> B;
to_bin(L) when is_list(L) -> unicode:characters_to_binary(L);
to_bin(A) when is_atom(A) -> atom_to_binary(A);
to_bin(Other) -> os_sup_render:term(Other, erlang, ?MAX_MESSAGE_BYTES).

failure(Kind, Message) ->
    {error, #{kind => Kind, message => Message}}.
