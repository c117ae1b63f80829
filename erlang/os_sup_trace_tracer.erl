%%% @doc `os_sup_trace_tracer' is the tracer of one trace session (the
%%% `{tracer, Pid}' of its trace flags), spawned and armed by
%%% `os_sup_trace_session'. It stores each call (or message) as it arrives
%%% (1 KB a line) into the session's table, fills in a call's result,
%%% exception and duration when its return arrives, and counts: at
%%% `max_events' counted events, at `rate' a second, past 100 000 queued
%%% trace messages, when the duration passes or when the caller goes down,
%%% it removes every pattern and flag it set and exits (its queue goes with
%%% it). At `max_events' the call patterns go first and the returns of the
%%% counted calls still running are awaited for at most 1 s. It loops
%%% through `?MODULE:tracer_loop/1' and hibernates when idle (reload-safe).
-module(os_sup_trace_tracer).

-import(os_sup_lib_text, [fmt/2]).
-import(os_sup_lib_time, [now_ms/0, clock/1]).

%% API
-export([disarm/1]).

%% Internal entry points: spawn target and reload-safe loop. Not an API.
-export([tracer_init/1, tracer_loop/1]).

%% session limits
-define(LINE_BYTES, 1024).
-define(CALL_BYTES, 300).
-define(RESULT_BYTES, 160).
-define(DRAIN_MS, 1000).
-define(MAX_QUEUE, 100000).
-define(QUEUE_CHECK_EVERY, 256).
%% reading
%% system monitor

%%%===================================================================
%%% Internal entry points: tracer
%%%===================================================================

%% @doc Tracer entry: watches the manager and the caller, arms the duration timer, loops.
-spec tracer_init(map()) -> ok.
tracer_init(#{manager := Manager, caller := Caller, duration_ms := Duration} = Spec) ->
    MMon = erlang:monitor(process, Manager),
    CMon = case is_pid(Caller) of
               true -> erlang:monitor(process, Caller);
               false -> undefined
           end,
    TRef = erlang:start_timer(Duration, self(), duration),
    ?MODULE:tracer_loop(Spec#{mmon => MMon, cmon => CMon, timer => TRef, seq => 0,
                              counted => 0, pending => 0, stacks => #{}, seen => 0,
                              draining => false,
                              names => names(), names_at => now_ms(),
                              win_start => now_ms(), win_count => 0}).

%% @doc Tracer loop: formats and counts trace messages, stops itself at a limit.
-spec tracer_loop(map()) -> ok.
tracer_loop(#{mmon := MMon, cmon := CMon, timer := TRef} = S) ->
    receive
        Msg when element(1, Msg) =:= trace_ts ->
            case tracer_event(Msg, S) of
                {stop, Reason, Detail, S1} -> tracer_stop(Reason, Detail, S1);
                S1 -> ?MODULE:tracer_loop(S1)
            end;
        {timeout, TRef, duration} ->
            tracer_stop(duration, os_sup_trace_session:duration_detail(S), S);
        {timeout, _, drained} ->
            tracer_stop(max_events, os_sup_trace_session:max_events_detail(S), S);
        {'DOWN', CMon, process, _, Why} ->
            tracer_stop(caller_down, os_sup_trace_session:caller_down_detail(Why), S);
        {'DOWN', MMon, process, _, _} ->
            tracer_stop(error, <<"error (the trace manager went down)">>, S);
        _Other ->
            ?MODULE:tracer_loop(S)
    after 0 ->
            erlang:hibernate(?MODULE, tracer_loop, [S])
    end.

%% @doc Removes every trace pattern and flag a session set; idempotent, never raises.
-spec disarm(map()) -> ok.
disarm(#{patterns := Patterns, target := Target, flags := Flags} = S) ->
    _ = [untrace_pattern(P, local) || P <- Patterns],
    _ = [untrace_pattern(P, global) || P <- Patterns],
    _ = try erlang:trace(Target, false, Flags) catch _:_ -> 0 end,
    _ = [try erlang:trace(P, false, [arity]) catch _:_ -> 0 end || P <- maps:get(heavy, S, [])],
    ok;
disarm(_) ->
    ok.

%%%===================================================================
%%% Private: tracer
%%%===================================================================

tracer_stop(Reason, Detail, #{manager := Manager, id := Id} = S) ->
    disarm(S),
    Manager ! {trace_stopped, self(), Id, Reason, Detail},
    ok.

tracer_event(Msg, #{seen := Seen} = S0) ->
    S = S0#{seen => Seen + 1},
    case Seen rem ?QUEUE_CHECK_EVERY of
        0 ->
            case erlang:process_info(self(), message_queue_len) of
                {message_queue_len, Q} when Q > ?MAX_QUEUE ->
                    {stop, rate, fmt("rate (the tracer fell behind: ~b trace messages queued; "
                                     "trace something narrower or set a lower rate)", [Q]), S};
                _ -> classify(Msg, S)
            end;
        _ -> classify(Msg, S)
    end.


classify({trace_ts, Pid, call, MFArgs, TS}, S) ->
    classify({trace_ts, Pid, call, MFArgs, undefined, TS}, S);
classify({trace_ts, Pid, call, {M, F, Args} = MFArgs, Caller, TS}, S) ->
    case matches(M, F, arity(Args), S) of
        true -> call_event(Pid, MFArgs, TS, S#{caller_mfa => Caller});
        false -> S
    end;
classify({trace_ts, Pid, return_from, {M, F, A} = MFA, Result, TS}, S) ->
    case matches(M, F, A, S) of
        true -> finished(Pid, MFA, {returned, Result}, TS, S);
        false -> S
    end;
classify({trace_ts, Pid, exception_from, {M, F, A} = MFA, {Class, Value}, TS}, S) ->
    case matches(M, F, A, S) of
        true -> finished(Pid, MFA, {raised, Class, Value}, TS, S);
        false -> S
    end;
classify({trace_ts, Pid, send, Msg, To, TS}, #{type := messages, target := Pid} = S) ->
    message_event(Pid, send, {Msg, To}, TS, S);
classify({trace_ts, Pid, send_to_non_existing_process, Msg, To, TS},
         #{type := messages, target := Pid} = S) ->
    message_event(Pid, send, {Msg, To, dead}, TS, S);
classify({trace_ts, Pid, 'receive', Msg, TS}, #{type := messages, target := Pid} = S) ->
    message_event(Pid, 'receive', Msg, TS, S);
classify(_Other, S) ->
    S.

matches(M, F, A, #{type := calls, module := Mod, function := Fun, arity := Arity}) ->
    (Mod =:= '_' orelse Mod =:= M) andalso (Fun =:= '_' orelse Fun =:= F)
        andalso (Arity =:= '_' orelse Arity =:= A);
matches(_, _, _, _) ->
    false.

%% Whether one more counted event (a call, send or receive) may be recorded: `skip' once
%% max_events is reached (calls still queued are only tracked, so their returns pair up),
%% a stop when the rate is exceeded.
admit(#{draining := true} = S) ->
    {skip, S};
admit(S0) ->
    case rate_ok(S0) of
        {false, #{rate := Rate, type := Type} = S1} ->
            {stop, rate, fmt("rate (more than ~b ~ts in one second)", [Rate, os_sup_trace_session:unit(Type)]), S1};
        {true, #{counted := C} = S1} ->
            {ok, S1#{counted => C + 1}}
    end.

message_event(Pid, Kind, Event, TS, S0) ->
    case admit(S0) of
        {ok, S1} -> at_limit(store(Pid, Kind, Event, TS, S1));
        {skip, S1} -> S1;
        Stop -> Stop
    end.

%% A call: recorded (status running until its return or exception arrives) and pushed on
%% its process's stack of calls still out; past the limit only pushed.
call_event(Pid, MFArgs, TS, S0) ->
    case admit(S0) of
        {ok, S1} ->
            {Seq, S2} = store_call(Pid, MFArgs, TS, S1),
            at_limit(push(Pid, Seq, MFArgs, TS, S2));
        {skip, S1} ->
            push(Pid, skip, MFArgs, TS, S1);
        Stop ->
            Stop
    end.

rate_ok(#{rate := undefined} = S) ->
    {true, S};
rate_ok(#{rate := Rate, win_start := Start, win_count := N} = S) ->
    Now = now_ms(),
    case Now - Start >= 1000 of
        true -> {true, S#{win_start => Now, win_count => 1}};
        false when N + 1 > Rate -> {false, S};
        false -> {true, S#{win_count => N + 1}}
    end.

at_limit(#{counted := C, max_events := Max} = S) when C >= Max ->
    limit_reached(S);
at_limit(S) ->
    S.

%% At max_events: stop now, or (paired calls still out) remove the call patterns so no new
%% call is traced, and wait up to ?DRAIN_MS for the pending returns.
limit_reached(#{type := calls, paired := true, pending := P} = S) when P > 0 ->
    _ = [untrace_pattern(Pat, local) || Pat <- maps:get(patterns, S)],
    _ = erlang:start_timer(?DRAIN_MS, self(), drained),
    S#{draining => true};
limit_reached(S) ->
    {stop, max_events, os_sup_trace_session:max_events_detail(S), S}.

drained(#{draining := true, pending := 0} = S) ->
    {stop, max_events, os_sup_trace_session:max_events_detail(S), S};
drained(S) ->
    S.

%% Per process, the calls still out, innermost first: {Seq | skip, MFA, CallUs, Depth}. A
%% heavy process's calls (their arity only) are not: their results are not traced.
push(_Pid, _Seq, {_, _, A}, _TS, S) when is_integer(A) ->
    S;
push(Pid, Seq, {M, F, Args}, TS, #{paired := true, stacks := Stacks, pending := P} = S) ->
    Stack = maps:get(Pid, Stacks, []),
    Frame = {Seq, {M, F, arity(Args)}, ts_us(TS), depth(Stack)},
    S#{stacks => Stacks#{Pid => [Frame | Stack]},
       pending => case Seq of
                      skip -> P;
                      _ -> P + 1
                  end};
push(_Pid, _Seq, _MFArgs, _TS, S) ->
    S.

%% How many calls of the process are still out (its nesting level).
depth([]) -> 0;
depth([{_, _, _, D} | _]) -> D + 1.

%% A return or exception: pairs with the innermost call of that function still out in that
%% process (the top of its stack, unless a frame was lost), and completes its record.
finished(Pid, MFA, Outcome, TS, #{stacks := Stacks, pending := P} = S) ->
    case take(MFA, maps:get(Pid, Stacks, []), []) of
        none ->
            S;
        {{Seq, _, CallUs, _}, Rest} ->
            S1 = S#{stacks => case Rest of
                                  [] -> maps:remove(Pid, Stacks);
                                  _ -> Stacks#{Pid => Rest}
                              end},
            case Seq of
                skip ->
                    S1;
                _ ->
                    complete(Seq, Outcome, ts_us(TS) - CallUs, S1),
                    drained(S1#{pending => max(0, P - 1)})
            end
    end.

take(_MFA, [], _Above) ->
    none;
take(MFA, [{_, MFA, _, _} = Frame | Rest], Above) ->
    {Frame, lists:reverse(Above, Rest)};
take(MFA, [Other | Rest], Above) ->
    take(MFA, Rest, [Other | Above]).

store_call(Pid, {M, F, Args} = MFArgs, TS, #{table := Tab, seq := Seq0, fmt := Fmt,
                                              stacks := Stacks, paired := Paired} = S) ->
    Seq = Seq0 + 1,
    Us = ts_us(TS),
    S1 = names_fresh(Pid, S),
    LeftOut = is_integer(Args),
    Call = case LeftOut of
               true -> fmt("~ts (arguments and result left out)",
                           [os_sup_lib_render:mfa({M, F, Args}, Fmt)]);
               false -> os_sup_lib_render:call(MFArgs, Fmt, ?CALL_BYTES)
           end,
    ets:insert(Tab, {Seq, #{seq => Seq, time => clock(Us), time_us => Us,
                            pid => os_sup_lib_render:pid(Pid, Fmt),
                            name => registered_name(Pid, S1), kind => call,
                            mfa => os_sup_lib_render:mfa({M, F, arity(Args)}, Fmt),
                            depth => depth(maps:get(Pid, Stacks, [])),
                            call => Call, left_out => LeftOut,
                            %% (a callback's caller, OTP's behaviour loop, goes without saying)
                            from => case maps:get(caller_mfa, S, undefined) of
                                        {CM, CF, CA} when is_atom(CM), is_atom(CF),
                                                          is_integer(CA) ->
                                            case lists:member(CM, [gen_server, gen_statem,
                                                                   gen_event, gen, proc_lib]) of
                                                true -> undefined;
                                                false -> os_sup_lib_render:mfa({CM, CF, CA}, Fmt)
                                            end;
                                        _ -> undefined
                                    end,
                            status => case Paired andalso not LeftOut of
                                          true -> running;
                                          false -> called
                                      end,
                            result => undefined, exception => undefined,
                            duration_us => undefined}}),
    {Seq, S1#{seq => Seq}}.

complete(Seq, Outcome, DurUs, #{table := Tab, fmt := Fmt}) ->
    case ets:lookup(Tab, Seq) of
        [{Seq, Call}] ->
            Done = case Outcome of
                       {returned, Result} ->
                           Call#{status => returned,
                                 result => os_sup_lib_render:shape(Result, Fmt, ?RESULT_BYTES)};
                       {raised, Class, Value} ->
                           Call#{status => raised,
                                 exception => <<(atom_to_binary(Class, utf8))/binary, ": ",
                                                (os_sup_lib_render:shape(Value, Fmt,
                                                                     ?RESULT_BYTES))/binary>>}
                   end,
            ets:insert(Tab, {Seq, Done#{duration_us => max(0, DurUs)}});
        [] ->
            true
    end.

registered_name(Pid, #{names := Names, fmt := Fmt}) ->
    case Names of
        #{Pid := N} -> os_sup_lib_render:name(N, Fmt);
        _ -> undefined
    end.

%% A send or receive, stored with its line.
store(Pid, Kind, Event, TS, #{table := Tab, seq := Seq0, fmt := Fmt} = S) ->
    Seq = Seq0 + 1,
    Us = ts_us(TS),
    PidBin = os_sup_lib_render:pid(Pid, Fmt),
    S1 = names_fresh(Pid, S),
    Names = maps:get(names, S1),
    Name = registered_name(Pid, S1),
    Time = clock(Us),
    Text = event_text(Kind, Event, Names, Fmt),
    Line = os_sup_lib_render:bound(iolist_to_binary([Time, " ", PidBin,
                                                 case Name of
                                                     undefined -> [];
                                                     _ -> [" (", Name, ")"]
                                                 end, " ", Text]), ?LINE_BYTES),
    ets:insert(Tab, {Seq, #{seq => Seq, time => Time, time_us => Us, pid => PidBin,
                            name => Name, kind => Kind, text => Text, line => Line}}),
    S1#{seq => Seq}.

%% Registered names by pid, from `registered()' and `whereis/1' (no signal to any process:
%% `process_info' on a busy traced process would make the tracer wait behind its own queue);
%% refreshed at most once a second, when an unknown pid shows up.
names_fresh(Pid, #{names := Names} = S) when is_map_key(Pid, Names) ->
    S;
names_fresh(_Pid, #{names_at := At} = S) ->
    Now = now_ms(),
    case Now - At >= 1000 of
        true -> S#{names => names(), names_at => Now};
        false -> S
    end.

names() ->
    maps:from_list([{P, N} || N <- lists:sublist(registered(), 10000),
                              P <- [whereis(N)], is_pid(P)]).

event_text(send, {Msg, To}, Names, Fmt) ->
    <<">> ", (os_sup_lib_render:term(Msg, Fmt, ?LINE_BYTES - 200))/binary, " to ",
      (dest_text(To, Names, Fmt))/binary>>;
event_text(send, {Msg, To, dead}, Names, Fmt) ->
    <<">> ", (os_sup_lib_render:term(Msg, Fmt, ?LINE_BYTES - 220))/binary, " to ",
      (dest_text(To, Names, Fmt))/binary, " (no such process)">>;
event_text('receive', Msg, _Names, Fmt) ->
    <<"<< ", (os_sup_lib_render:term(Msg, Fmt, ?LINE_BYTES - 100))/binary>>.

dest_text(To, Names, Fmt) when is_pid(To) ->
    case Names of
        #{To := N} ->
            <<(os_sup_lib_render:pid(To, Fmt))/binary, " (", (os_sup_lib_render:name(N, Fmt))/binary, ")">>;
        _ -> os_sup_lib_render:pid(To, Fmt)
    end;
dest_text(To, _Names, Fmt) when is_atom(To) ->
    os_sup_lib_render:name(To, Fmt);
dest_text(To, _Names, Fmt) ->
    os_sup_lib_render:term(To, Fmt, 200).

%%%===================================================================
%%% Private: small helpers
%%%===================================================================

%% A call's arguments, or its arity alone (a heavy process's call: the `arity' flag).
arity(Arity) when is_integer(Arity) -> Arity;
arity(Args) -> length(Args).

ts_us({Mega, Sec, Micro}) ->
    (Mega * 1000000 + Sec) * 1000000 + Micro;
ts_us(_) ->
    os:system_time(microsecond).

%% Takes off the `Scope' trace pattern `P'; never raises.
untrace_pattern(P, Scope) ->
    try erlang:trace_pattern(P, false, [Scope]) catch _:_ -> 0 end.
