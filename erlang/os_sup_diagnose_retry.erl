%%% @doc `os_sup_diagnose_retry' says what a process that retries repeats: while
%%% `os_sup_diagnose_boot' reads a stuck process ?READS times, the calls its looping function
%%% makes (the call sites the module's debug info lists in that function, `os_sup_code_beam')
%%% are traced in that one process, each paired with what came back, so the finding says
%%% `each time it calls Application.get_env(:app, :key) → nil' rather than only that it loops.
%%%
%%% == Bounds and safety ==
%%% One process, at most ?MAX_FUNCTIONS functions, at most ?MAX_EVENTS trace messages kept,
%%% for as long as the reads take (400 ms). Nothing is traced when the process already has a
%%% tracer (a `trace' session, `dbg'), and a function that already has a trace pattern is left
%%% alone; sleeps, logging and the VM's own functions are never traced. The flags and
%%% patterns set are removed when the reads end, also when they fail.
-module(os_sup_diagnose_retry).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([watch/2, repeated/2]).

-define(MAX_FUNCTIONS, 4).
-define(MAX_EVENTS, 40).
-define(ARGS_BYTES, 160).
-define(RESULT_BYTES, 120).
%% never traced: the loop's own pause, its logging, the VM
-define(SKIPPED, [erlang, erts_internal, timer, 'Elixir.Process', logger, 'Elixir.Logger',
                  io, io_lib, lists, maps, 'Elixir.Enum', 'Elixir.Map', 'Elixir.Kernel']).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Starts tracing, in `Pid' only, the calls the function of `Frame' makes (`none' when
%% there is nothing to trace or tracing is taken).
-spec watch(pid(), map() | undefined) -> none | {pid(), [mfa()]}.
watch(Pid, #{mfa := {M, F, A}}) ->
    Callees = callees(M, {F, A}),
    case Callees =/= [] andalso erlang:trace_info(Pid, tracer) =:= {tracer, []} of
        false -> none;
        true ->
            Set = [MFA || MFA <- Callees,
                          erlang:trace_info(MFA, traced) =:= {traced, false},
                          set_pattern(MFA)],
            case Set of
                [] -> none;
                _ ->
                    case trace(Pid, true, [call, {tracer, self()}]) of
                        1 -> {Pid, Set};
                        _ -> unset(Set), none
                    end
            end
    end;
watch(_Pid, _Frame) ->
    none.

%% @doc Ends the trace and says what the process repeated: `; each time it calls … → …'
%% (empty when nothing was seen).
-spec repeated(none | {pid(), [mfa()]}, os_sup_lib_render:fmt()) -> iodata().
repeated(none, _Fmt) ->
    [];
repeated({Pid, Set}, Fmt) ->
    _ = trace(Pid, false, [call]),
    unset(Set),
    Events = collect(Pid, ?MAX_EVENTS, []),
    case pairs(Events, #{}, []) of
        [] -> [];
        Pairs ->
            Counted = lists:reverse(lists:keysort(2, count(Pairs, Fmt))),
            Shown = [fmt("~ts → ~ts~ts", [Call, Result, times(N)])
                     || {{Call, Result}, N} <- lists:sublist(Counted, 2)],
            ["; each time it calls ", lists:join(<<", then ">>, Shown)]
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% The functions `{F, A}' of `M' calls (its debug info), that may be traced.
callees(M, FA) ->
    case try os_sup_code_beam:calls(M) catch _:_ -> undefined end of
        {_Source, Sites} when is_list(Sites) ->
            {F, A} = FA,
            lists:sublist(lists:usort([C || {From, {CM, _, _} = C, _Line} <- Sites, From =:= FA,
                                            C =/= {M, F, A}, not lists:member(CM, ?SKIPPED),
                                            not lists:prefix("os_sup_", atom_to_list(CM)),
                                            code:is_loaded(CM) =/= false]),
                          ?MAX_FUNCTIONS);
        _ -> []
    end.

set_pattern(MFA) ->
    try erlang:trace_pattern(MFA, [{'_', [], [{return_trace}]}], [local]) of
        N -> N > 0
    catch _:_ -> false
    end.

unset(Set) ->
    _ = [try erlang:trace_pattern(MFA, false, [local]) catch _:_ -> 0 end || MFA <- Set],
    ok.

%% `erlang:trace/3' that never raises (the process may be gone): how many it set, else 0.
trace(Pid, How, Flags) ->
    try erlang:trace(Pid, How, Flags) catch _:_ -> 0 end.

%% The trace messages of `Pid' already delivered (the flags are off: no more come).
collect(_Pid, 0, Acc) ->
    flush_rest(),
    lists:reverse(Acc);
collect(Pid, N, Acc) ->
    receive
        {trace, Pid, call, {M, F, Args}} -> collect(Pid, N - 1, [{call, {M, F, Args}} | Acc]);
        {trace, Pid, return_from, MFA, Result} -> collect(Pid, N - 1, [{return, MFA, Result} | Acc])
    after 0 ->
            lists:reverse(Acc)
    end.

flush_rest() ->
    receive
        {trace, _, _, _} -> flush_rest();
        {trace, _, _, _, _} -> flush_rest()
    after 0 -> ok
    end.

%% Calls paired with their returns: `[{CallText, ResultText}]'. Calls are not nested here
%% (one frame's direct callees), so a return closes the open call of its function.
pairs([], _Open, Acc) ->
    lists:reverse(Acc);
pairs([{call, {M, F, Args}} | Rest], Open, Acc) ->
    pairs(Rest, Open#{{M, F, length(Args)} => {M, F, Args}}, Acc);
pairs([{return, MFA, Result} | Rest], Open, Acc) ->
    case maps:take(MFA, Open) of
        {Call, Open1} -> pairs(Rest, Open1, [{Call, Result} | Acc]);
        error -> pairs(Rest, Open, Acc)
    end.

count(Pairs, Fmt) ->
    maps:to_list(lists:foldl(
                   fun({Call, Result}, Acc) ->
                           Key = {os_sup_lib_render:call(Call, Fmt, ?ARGS_BYTES),
                                  os_sup_lib_render:shape(Result, Fmt, ?RESULT_BYTES)},
                           maps:update_with(Key, fun(N) -> N + 1 end, 1, Acc)
                   end, #{}, Pairs)).

times(1) -> <<>>;
times(N) -> fmt(" (~b× in the reads)", [N]).
