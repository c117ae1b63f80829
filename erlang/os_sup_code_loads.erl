%%% @doc `os_sup_code_loads' remembers who loaded code from memory, so that a module whose
%%% running code is not its `.beam' (`os_sup_diagnose_code') is told with the function that
%%% loaded it, not only that it differs. Its process, registered as `os_sup_code_loads' and
%%% started with the helper at boot, is the meta tracer of the two ways code is loaded from a
%%% binary: `code:load_binary/3' (Elixir's `Code.compile_file', `Code.compile_string', IEx's
%%% `r', an rpc that pushes a module) and `erlang:load_module/2'. For each load by a process
%%% other than the code server (whose loads are from disk) it keeps: the module, when, the
%%% process, its stack (read as the event arrives: the loader still waits for the load; its
%%% application frame is found when asked), and the node it was asked from when its group leader is
%%% on another node (an rpc).
%%%
%%% == Bounds and safety ==
%%% A meta trace pattern on two functions (no process trace flag: nothing else is traced, and
%%% a `trace' session or `dbg' is not disturbed); a function that already has a meta tracer is
%%% left alone. One stack read a load; the last ?KEPT loads in its protected table. Loads are
%%% rare: a node that loads thousands (a test run) costs a message each. Its heap is small; it
%%% hibernates between events and loops through `?MODULE:loop/0' (reload-safe). `stop/0'
%%% removes the patterns.
-module(os_sup_code_loads).

%% API
-export([watch/0, stop/0, loaded_by/1]).
%% Internal entry points: spawn target and reload-safe loop. Not an API.
-export([init/2, loop/0]).

-define(WATCHER, os_sup_code_loads).
-define(KEPT, 50).
-define(PATTERNS, [{code, load_binary, 3}, {erlang, load_module, 2}]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Starts the watcher (one `whereis' when it runs).
-spec watch() -> ok.
watch() ->
    _ = os_sup_lib_call:ensure_started(?WATCHER, ?MODULE, init),
    ok.

%% @doc Ends the watcher and removes its patterns (the server detaches).
-spec stop() -> ok.
stop() ->
    case whereis(?WATCHER) of
        undefined -> ok;
        Pid -> Pid ! {?MODULE, stop}, ok
    end.

%% @doc The newest load of `M' from memory seen: `#{at_ms, pid, frame, from_node}' (system
%% time ms; `frame' the loader's application frame or `undefined'; `from_node' the node an rpc
%% came from, or `undefined'), or `undefined'.
-spec loaded_by(module()) -> map() | undefined.
loaded_by(M) ->
    try ets:lookup(?WATCHER, M) of
        [{M, #{stack := Stack} = Load}] ->
            (maps:remove(stack, Load))#{frame => os_sup_proc_origin:app_frame(Stack)};
        [] -> undefined
    catch _:_ -> undefined
    end.

%%%===================================================================
%%% Internal entry points
%%%===================================================================

%% @doc Watcher entry: registers, sets the meta patterns on itself, loops.
-spec init(pid(), reference()) -> ok.
init(Parent, Ref) ->
    case try register(?WATCHER, self()) catch _:_ -> false end of
        true ->
            ?WATCHER = ets:new(?WATCHER, [set, protected, named_table]),
            Set = [P || P <- ?PATTERNS, free(P), meta(P, true) =:= 1],
            put(patterns, Set),
            Parent ! {Ref, started},
            ?MODULE:loop();
        _ ->
            Parent ! {Ref, exists},
            ok
    end.

%% @doc The watcher's loop: one load at a time.
-spec loop() -> ok.
loop() ->
    receive
        {trace_ts, Pid, call, {_, _, [M | _]}, _Ts} when is_atom(M) -> seen(Pid, M), ?MODULE:loop();
        {trace, Pid, call, {_, _, [M | _]}} when is_atom(M) -> seen(Pid, M), ?MODULE:loop();
        {?MODULE, stop} ->
            _ = [meta(P, false) || P <- get(patterns)],
            ok;
        _ -> ?MODULE:loop()
    after 1000 ->
            erlang:hibernate(?MODULE, loop, [])
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% No meta tracer of another's on it.
free(P) ->
    try erlang:trace_info(P, meta) of
        {meta, false} -> true;
        _ -> false
    catch _:_ -> false
    end.

%% Sets (`true') or removes (`false') this process's meta pattern on `P': how many functions
%% it matched, 0 when it could not.
meta(P, true) ->
    try erlang:trace_pattern(P, true, [{meta, self()}]) catch _:_ -> 0 end;
meta(P, false) ->
    try erlang:trace_pattern(P, false, [meta]) catch _:_ -> 0 end.

seen(Pid, M) ->
    case Pid =:= whereis(code_server) of
        true -> ok;
        false ->
            %% The stack as it is (the modules that name its application frame may not be
            %% loaded yet at boot); the frame is found when asked.
            Stack = case erlang:process_info(Pid, current_stacktrace) of
                        {current_stacktrace, S} -> S;
                        _ -> []
                    end,
            From = case erlang:process_info(Pid, group_leader) of
                       {group_leader, GL} when node(GL) =/= node() -> node(GL);
                       _ -> undefined
                   end,
            _ = ets:insert(?WATCHER, {M, #{at_ms => os:system_time(millisecond), pid => Pid,
                                           stack => Stack, from_node => From}}),
            case ets:info(?WATCHER, size) > ?KEPT of
                true -> oldest_out();
                false -> ok
            end
    end.

oldest_out() ->
    {_, M} = lists:min([{At, M} || {M, #{at_ms := At}} <- ets:tab2list(?WATCHER)]),
    ets:delete(?WATCHER, M).
