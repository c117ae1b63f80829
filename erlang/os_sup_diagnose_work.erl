%%% @doc `os_sup_diagnose_work' says what drives a process whose work keeps
%%% rising, for `diagnose': the messages it receives over a short window,
%%% counted by shape, and the reductions each one cost. More messages of one
%%% shape (intervals that pile up, a subscriber per visit) and messages that
%%% cost more each (a list walked on every tick) are told apart.
%%%
%%% == Bounds and safety ==
%%% The processes (a few) are traced for `receive' only, for at most ?MAX_MS
%%% and ?MAX_EVENTS messages in all, by a throw-away tracer with a heap limit that counts
%%% shapes as they come (no message is kept) and whose flags go with it.
%%% A process traced already (a trace session of the agent's, the user's
%%% `dbg') is not traced and is left out of the answer. Nothing is
%%% sent to the process.
-module(os_sup_diagnose_work).

-import(os_sup_lib_text, [fmt/2]).
-import(os_sup_lib_time, [secs/1]).

%% API
-export([received/3]).
%% the tracer's entry point
-export([tracer/4]).

-define(MAX_MS, 1000).
-define(MAX_EVENTS, 500).
-define(SHOWN, 3).
-define(HEAP, [{max_heap_size, #{size => 1000000, kill => true, error_logger => false}}]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc What each of `Pids' received over `Ms' (at most ?MAX_MS), by shape, and the
%% reductions each message cost: `#{Pid => #{text, messages}}' (`received 450 messages in
%% 0.5 s ({:refresh, _} ×441, :visit ×9), ~20 reductions each'); a process already traced
%% (or gone, or of another node) is left out.
-spec received([pid()], pos_integer(), os_sup_lib_render:fmt()) -> #{pid() => map()}.
received(Pids0, Ms0, Fmt) ->
    Pids = [P || P <- lists:usort(Pids0), is_pid(P), node(P) =:= node(),
                 erlang:trace_info(P, tracer) =:= {tracer, []}],
    case {Pids, os_sup_diagnose_budget:ms(min(Ms0, ?MAX_MS))} of
        {[], _} -> #{};
        {_, skip} -> #{};
        {_, {ok, Ms}} ->
            Reds0 = [{P, reductions(P)} || P <- Pids],
            {Tracer, Mon} = spawn_opt(?MODULE, tracer, [self(), Pids, Ms, Fmt],
                                      [monitor | ?HEAP]),
            receive
                {Tracer, Seen, Elapsed} ->
                    erlang:demonitor(Mon, [flush]),
                    maps:from_list(
                      [{P, text(P, maps:get(P, Seen, {#{}, 0}), Elapsed, reductions(P) - R0, Fmt)}
                       || {P, R0} <- Reds0]);
                {'DOWN', Mon, process, Tracer, _} -> #{}
            after Ms + 1000 ->
                    exit(Tracer, kill),
                    erlang:demonitor(Mon, [flush]),
                    #{}
            end
    end.

%%%===================================================================
%%% The tracer
%%%===================================================================

%% @private Traces what `Pids' receive for `Ms' or ?MAX_EVENTS messages in all and sends
%% `Caller' the shapes counted and the messages seen per process, and the time taken.
-spec tracer(pid(), [pid()], pos_integer(), os_sup_lib_render:fmt()) -> ok.
tracer(Caller, Pids, Ms, Fmt) ->
    T0 = erlang:monotonic_time(millisecond),
    Traced = [P || P <- Pids, trace(P, true, ['receive', {tracer, self()}]) =:= 1],
    Seen = collect(T0 + Ms, ?MAX_EVENTS, Fmt, #{}),
    _ = [trace(P, false, ['receive']) || P <- Traced],
    Caller ! {self(), Seen, erlang:monotonic_time(millisecond) - T0},
    ok.

%% erlang:trace/3, 0 when it raises (a process gone).
trace(P, How, Flags) ->
    try erlang:trace(P, How, Flags) catch _:_ -> 0 end.

collect(_Deadline, 0, _Fmt, Seen) ->
    Seen;
collect(Deadline, Left, Fmt, Seen) ->
    Wait = Deadline - erlang:monotonic_time(millisecond),
    receive
        {trace, Pid, 'receive', Msg} when Wait > 0 ->
            Shape = os_sup_proc_mailbox:message_shape(Msg, Fmt),
            {Counts, N} = maps:get(Pid, Seen, {#{}, 0}),
            Counts1 = maps:update_with(Shape, fun(C) -> C + 1 end, 1, Counts),
            collect(Deadline, Left - 1, Fmt, Seen#{Pid => {Counts1, N + 1}})
    after max(0, Wait) ->
            Seen
    end.

%%%===================================================================
%%% Private
%%%===================================================================

text(_P, {_Counts, 0}, Elapsed, Reds, _Fmt) ->
    #{text => fmt("it received no message in ~ts and ran ~b reductions", [secs(Elapsed), Reds]),
      messages => 0};
text(P, {Counts, N}, Elapsed, Reds, Fmt) ->
    Top = lists:sublist(lists:reverse(lists:keysort(2, maps:to_list(Counts))), ?SHOWN),
    Shapes = lists:join(", ", [fmt("~ts ×~b", [S, C]) || {S, C} <- Top]),
    Text = #{text => fmt("it received ~b messages in ~ts (~ts), ~ts reductions each",
                         [N, secs(Elapsed), Shapes, per(Reds / N)]),
             messages => N},
    %% Its work is its messages: the callback of its module that takes the commonest is
    %% where to read what each does (and what sends more of them).
    case {os_sup_proc_origin:initial_call(P), Top} of
        {{M, init, 1}, [{Shape, _} | _]} when is_atom(M) ->
            {F, A} = case Shape of
                         <<"$gen_call", _/binary>> -> {handle_call, 3};
                         <<"$gen_cast", _/binary>> -> {handle_cast, 2};
                         _ -> {handle_info, 2}
                     end,
            case erlang:function_exported(M, F, A) of
                true -> Text#{target => os_sup_lib_render:mfa({M, F, A}, Fmt)};
                false -> Text
            end;
        _ -> Text
    end.

per(R) when R >= 1000 -> fmt("~~~.1f k", [R / 1000]);
per(R) -> fmt("~~~b", [round(R)]).

reductions(Pid) ->
    case erlang:process_info(Pid, reductions) of
        {reductions, R} -> R;
        _ -> 0
    end.
