%%% @doc `os_sup_trace_session' is the trace session manager, registered
%%% as `os_sup_trace' and started on demand. It owns at most one running
%%% session (OTP 25 has one tracer per traced process) and keeps the last 8
%%% finished ones (at most 40 000 events in all) for reading; it owns each
%%% session's event table (an ETS `ordered_set' keyed by sequence number) so
%%% events survive the tracer (`os_sup_trace_tracer'), which it spawns and arms.
%%% It stops a session on `trace_stop', when the duration passes and when
%%% the caller goes down; its mailbox never holds trace messages. Spawned
%%% with `spawn(?MODULE, F, A)', looping through `?MODULE:manager_loop/1'
%%% and hibernating when idle, it survives code reloads.
%%%
%%% == Stop reasons ==
%%% <ul>
%%%   <li>{@link unit/1}, {@link count_text/2}: what `max_events'
%%%       counts.</li>
%%%   <li>{@link max_events_detail/1}, {@link duration_detail/1},
%%%       {@link caller_down_detail/1}: a session's one stop reason as
%%%       text starting with the reason's name.</li>
%%% </ul>
-module(os_sup_trace_session).

-import(os_sup_lib_text, [fmt/2]).
-import(os_sup_lib_time, [clock/1]).

%% API
-export([call/1, heavy_bytes/0]).
%% Stop reasons
-export([unit/1, count_text/2, max_events_detail/1, duration_detail/1, caller_down_detail/1]).

%% Internal entry points: spawn target and reload-safe loop. Not an API.
-export([manager_init/2, manager_loop/1]).

-define(MANAGER, os_sup_trace).
-define(SYSMON, os_sup_trace_sysmon).
-define(ID_KEY, {os_sup_trace, session_ids}).

%% session limits
-define(KEEP_FINISHED, 8).
-define(KEEP_FINISHED_EVENTS, 40000).
-define(TRACER_HEAP_WORDS, 8000000).
%% A process whose heap is larger is heavy: its traced calls carry their arity, not their
%% arguments, and their results are not traced (each would be a copy of that size into the
%% tracer, and a state of 168 MB copied on every call grows the node by gigabytes); its state
%% is read in place (os_sup_proc_state). Below it
%% a state is still shown by its shape (a cache of a few MB is common and worth seeing; a
%% heap holds two to three times its live data).
-define(HEAVY_BYTES, 8388608).
%% at most this many heavy processes are named in the match spec (more: every call of the
%% session is traced without its arguments and result)
-define(MAX_HEAVY, 64).
-define(SCAN_PROCESSES, 500000).
%% reading
%% system monitor

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The heap size over which a process is heavy: its traced calls go without their
%% arguments and results, and `get_state' reads its state in place (os_sup_proc_state).
-spec heavy_bytes() -> pos_integer().
heavy_bytes() ->
    ?HEAVY_BYTES.

%% @doc Sends `Request' to the session manager (started if needed) and waits (3 s) for its
%% reply; `{error, Kind, Message}' when it cannot answer.
-spec call(term()) -> term().
call(Request) ->
    os_sup_lib_call:server_call(os_sup_lib_call:ensure_started(?MANAGER, ?MODULE, manager_init),
                           ?MODULE, Request).

%% @doc What max_events counts: calls for `trace', sends and receives for `trace_messages'.
-spec unit(atom()) -> binary().
unit(calls) -> <<"calls">>;
unit(_) -> <<"events">>.

%% @doc `1 call', `12 calls'.
-spec count_text(non_neg_integer(), binary()) -> binary().
count_text(1, Unit) ->
    <<"1 ", (binary:part(Unit, 0, byte_size(Unit) - 1))/binary>>;
count_text(N, Unit) ->
    fmt("~b ~ts", [N, Unit]).

%% The one stop reason of a session, as text starting with the reason's name.
%% @doc Stop reason `max_events' as text.
-spec max_events_detail(map()) -> binary().
max_events_detail(#{max_events := Max, type := Type}) ->
    fmt("max_events (~ts) reached", [count_text(Max, unit(Type))]).

%% @doc Stop reason `duration' as text.
-spec duration_detail(map()) -> binary().
duration_detail(#{duration_ms := Dur}) ->
    fmt("duration (~b ms) passed", [Dur]).

%% @doc Stop reason `caller_down' as text.
-spec caller_down_detail(term()) -> binary().
caller_down_detail(Why) ->
    fmt("caller_down (the MCP server that started it went away: ~tP)", [Why, 5]).

%%%===================================================================
%%% Internal entry points: session manager
%%%===================================================================

%% @doc Session manager entry: registers as `os_sup_trace' (or exits if taken) and loops.
-spec manager_init(pid(), reference()) -> ok.
manager_init(Parent, Ref) ->
    Registered = try register(?MANAGER, self()) catch _:_ -> false end,
    case Registered of
        true ->
            Parent ! {Ref, started},
            ?MODULE:manager_loop(#{sessions => #{}, finished => [], active => undefined});
        _ ->
            Parent ! {Ref, exists},
            ok
    end.

%% @doc Session manager loop: requests, tracer reports, timers, monitors; hibernates when idle.
-spec manager_loop(map()) -> ok.
manager_loop(S) ->
    receive
        {?MODULE, Ref, From, Request} when is_pid(From) ->
            {Reply, S1} = try manager_handle(Request, S)
                          catch C:R ->
                                  {{error, internal,
                                    fmt("trace manager failed: ~tp:~tP", [C, R, 10])}, S}
                          end,
            From ! {Ref, Reply},
            ?MODULE:manager_loop(S1);
        Other ->
            S1 = try manager_info(Other, S) catch _:_ -> S end,
            ?MODULE:manager_loop(S1)
    after 0 ->
            erlang:hibernate(?MODULE, manager_loop, [S])
    end.

%%%===================================================================
%%% Private: session manager
%%%===================================================================

manager_handle({start, _Spec}, #{active := Active} = S) when Active =/= undefined ->
    #{Active := #{description := Desc}} = maps:get(sessions, S),
    {{error, busy, fmt("trace ~ts is running (~ts); this node has one tracer, so end it "
                       "first (trace_results with stop: true) or wait for it to end", [Active, Desc])}, S};
manager_handle({start, Spec}, S) ->
    Id = <<"t", (integer_to_binary(next_id()))/binary>>,
    Tab = ets:new(os_sup_trace_events, [ordered_set, public]),
    Session0 = with_heavy(Spec#{id => Id, table => Tab, manager => self()}),
    Tracer = spawn_opt(os_sup_trace_tracer, tracer_init, [Session0],
                       [{message_queue_data, off_heap}, {priority, normal},
                        {max_heap_size, #{size => ?TRACER_HEAP_WORDS, kill => true,
                                          error_logger => false}}]),
    TMon = erlang:monitor(process, Tracer),
    case arm(Session0, Tracer) of
        ok ->
            Caller = maps:get(caller, Spec),
            CMon = case is_pid(Caller) of
                       true -> erlang:monitor(process, Caller);
                       false -> undefined
                   end,
            TRef = erlang:start_timer(maps:get(duration_ms, Spec), self(), {duration, Id}),
            Session = Session0#{tracer => Tracer, tmon => TMon, cmon => CMon, timer => TRef,
                                state => running, stop_reason => undefined,
                                stop_detail => undefined, started_at => os:system_time(microsecond),
                                stopped_at => undefined},
            S1 = S#{active => Id,
                    sessions => maps:put(Id, Session, maps:get(sessions, S))},
            {{ok, summary(Session)}, S1};
        {error, Kind, Msg} ->
            os_sup_trace_tracer:disarm(Session0),
            erlang:demonitor(TMon, [flush]),
            exit(Tracer, kill),
            ets:delete(Tab),
            {{error, Kind, Msg}, S}
    end;
manager_handle({info, latest}, #{active := undefined, finished := []} = S) ->
    {{error, not_found, <<"no trace session yet (start one with trace or trace_messages)">>}, S};
manager_handle({info, latest}, #{active := undefined, finished := [Id | _]} = S) ->
    manager_handle({info, Id}, S);
manager_handle({info, latest}, #{active := Id} = S) ->
    manager_handle({info, Id}, S);
manager_handle({info, Id}, S) ->
    case find(Id, S) of
        {ok, Session} -> {{ok, summary(Session)}, S};
        error -> {unknown_session(Id, S), S}
    end;
manager_handle({stop, active}, #{active := undefined} = S) ->
    {{error, not_found, <<"no trace is running (traces lists the sessions kept)">>}, S};
manager_handle({stop, active}, #{active := Id} = S) ->
    manager_handle({stop, Id}, S);
manager_handle({stop, Id}, S) ->
    case find(Id, S) of
        {ok, #{state := running}} ->
            S1 = stop_session(Id, stopped, <<"manual (trace_results stop)">>, S),
            {ok, Session} = find(Id, S1),
            {{ok, summary(Session)}, S1};
        {ok, Session} ->
            {{ok, (summary(Session))#{already => true}}, S};
        error ->
            {unknown_session(Id, S), S}
    end;
manager_handle(list, #{sessions := Sessions, active := Active} = S) ->
    Ordered = lists:sort(fun(#{started_at := A}, #{started_at := B}) -> A >= B end,
                         maps:values(Sessions)),
    Tracers = [T || #{state := running, tracer := T} <- Ordered],
    {{ok, #{sessions => [summary(X) || X <- Ordered], active => Active, tracers => Tracers}},
     S};
manager_handle(_Other, S) ->
    {{error, bad_args, <<"unknown trace manager request">>}, S}.

manager_info({trace_stopped, Tracer, Id, Reason, Detail}, S) ->
    case find(Id, S) of
        {ok, #{state := running, tracer := Tracer}} -> stop_session(Id, Reason, Detail, S);
        _ -> S
    end;
manager_info({timeout, _TRef, {duration, Id}}, S) ->
    case find(Id, S) of
        {ok, #{state := running} = Session} ->
            stop_session(Id, duration, duration_detail(Session), S);
        _ -> S
    end;
manager_info({'DOWN', MRef, process, _Pid, Why}, #{active := Id} = S) when Id =/= undefined ->
    case find(Id, S) of
        {ok, #{tmon := MRef}} when Why =:= killed ->
            %% Its heap limit: every trace message carries a copy of the call's arguments.
            stop_session(Id, error,
                         fmt("error (the tracer reached its heap limit, ~b MB: the traced "
                             "calls' arguments or results are too large to copy, e.g. a "
                             "GenServer callback's state; see that with get_state, or trace "
                             "a function with smaller arguments)",
                             [?TRACER_HEAP_WORDS * erlang:system_info(wordsize) div 1048576]),
                         S);
        {ok, #{tmon := MRef}} ->
            stop_session(Id, error, fmt("error (the tracer exited: ~tP)", [Why, 5]), S);
        {ok, #{cmon := MRef}} ->
            stop_session(Id, caller_down, caller_down_detail(Why), S);
        _ -> S
    end;
manager_info(_Other, S) ->
    S.

%% Disarms a running session, ends its tracer, and files it with the finished ones.
stop_session(Id, Reason, Detail, #{sessions := Sessions, finished := Finished} = S) ->
    #{Id := Session} = Sessions,
    os_sup_trace_tracer:disarm(Session),
    #{tracer := Tracer, tmon := TMon, cmon := CMon, timer := TRef} = Session,
    erlang:demonitor(TMon, [flush]),
    case CMon of
        undefined -> ok;
        _ -> erlang:demonitor(CMon, [flush])
    end,
    _ = erlang:cancel_timer(TRef),
    exit(Tracer, kill),
    Done = Session#{state => stopped, stop_reason => Reason, stop_detail => Detail,
                    stopped_at => os:system_time(microsecond)},
    Active = case maps:get(active, S) of
                 Id -> undefined;
                 Other -> Other
             end,
    evict(S#{sessions => Sessions#{Id => Done}, finished => [Id | Finished -- [Id]],
             active => Active}).

%% Keeps the newest finished sessions within ?KEEP_FINISHED and ?KEEP_FINISHED_EVENTS.
evict(#{sessions := Sessions, finished := Finished} = S) ->
    {Keep, Drop, _} =
        lists:foldl(fun(Id, {K, D, Events}) ->
                            #{Id := #{table := Tab}} = Sessions,
                            Size = case ets:info(Tab, size) of N when is_integer(N) -> N; _ -> 0 end,
                            case length(K) < ?KEEP_FINISHED
                                andalso (K =:= [] orelse Events + Size =< ?KEEP_FINISHED_EVENTS) of
                                true -> {[Id | K], D, Events + Size};
                                false -> {K, [Id | D], Events}
                            end
                    end, {[], [], 0}, Finished),
    _ = [try ets:delete(maps:get(table, maps:get(Id, Sessions))) catch _:_ -> false end
         || Id <- Drop],
    S#{sessions => maps:without(Drop, Sessions), finished => lists:reverse(Keep)}.

%% Session numbers unique for the node's life (a restarted manager does not reuse `t1'):
%% an atomics counter kept in a persistent term that is written once.
next_id() ->
    Ref = case persistent_term:get(?ID_KEY, undefined) of
              undefined ->
                  R = atomics:new(1, [{signed, false}]),
                  persistent_term:put(?ID_KEY, R),
                  R;
              R -> R
          end,
    atomics:add_get(Ref, 1, 1).

find(Id, #{sessions := Sessions}) ->
    maps:find(Id, Sessions).

unknown_session(Id, #{sessions := Sessions}) ->
    Known = lists:sort(maps:keys(Sessions)),
    {error, not_found, fmt("no trace session ~ts (kept: ~ts)",
                           [Id, case Known of
                                    [] -> <<"none">>;
                                    _ -> lists:join(<<", ">>, Known)
                                end])}.

summary(#{id := Id, type := Type, description := Desc, table := Tab, state := State,
          stop_reason := Reason, stop_detail := Detail, started_at := Started,
          stopped_at := Stopped, max_events := Max, duration_ms := Dur, rate := Rate} = Session) ->
    Count = try ets:info(Tab, size) of N when is_integer(N) -> N; _ -> 0 catch _:_ -> 0 end,
    End = case Stopped of undefined -> os:system_time(microsecond); _ -> Stopped end,
    #{session => Id, type => Type, pattern => Desc, state => State, stop_reason => Reason,
      stop_detail => Detail, count => Count, unit => unit(Type), started_at => clock(Started),
      elapsed_ms => (End - Started) div 1000, max_events => Max, duration_ms => Dur,
      rate => Rate, table => Tab, heavy => maps:get(heavy_note, Session, undefined)}.

%% Sets the session's patterns and flags with `Tracer' as the tracer.
arm(#{type := Type, target := Target, flags := Flags} = Spec, Tracer) ->
    try
        case Type of
            calls ->
                [Pattern] = maps:get(patterns, Spec),
                MatchSpec = light_only(maps:get(match_spec, Spec), maps:get(heavy, Spec)),
                case erlang:trace_pattern(Pattern, MatchSpec, [local]) of
                    0 -> throw({arm, not_found, <<"no function matches the pattern">>});
                    _ -> ok
                end;
            messages ->
                ok
        end,
        case erlang:trace(Target, true, [{tracer, Tracer} | Flags]) of
            0 when Target =/= all ->
                throw({arm, busy, <<"the process could not be traced">>});
            _ -> ok
        end,
        %% a heavy process's calls carry their arity, not their arguments
        _ = [try erlang:trace(P, true, [arity, {tracer, Tracer}]) catch _:_ -> 0 end
             || P <- maps:get(heavy, Spec)],
        %% never trace the tracing machinery itself (it calls stdlib and os_sup_lib_render)
        case Target of
            all ->
                _ = [try erlang:trace(P, false, Flags) catch _:_ -> 0 end
                     || P <- [Tracer, self(), whereis(?SYSMON)], is_pid(P)],
                ok;
            _ -> ok
        end,
        ok
    catch
        throw:{arm, Kind, Msg} -> {error, Kind, Msg};
        error:badarg -> {error, not_found, <<"the process to trace exited">>};
        C:R -> {error, internal, fmt("setting the trace failed: ~tp:~tP", [C, R, 8])}
    end.

%% The processes a `calls' session traces whose heap is over ?HEAVY_BYTES, with their heap's
%% bytes (at most ?MAX_HEAVY + 1: more means too many to name), read once at its start; `[]'
%% for others.
heavy(#{type := calls, target := Target}) ->
    Procs = case Target of
                all -> os_sup_lib_proc:first_processes(?SCAN_PROCESSES);
                Pid -> [Pid]
            end,
    Wordsize = erlang:system_info(wordsize),
    lists:sublist([{P, W * Wordsize} || P <- Procs, P =/= self(),
                                        {total_heap_size, W} <- [heap_words(P)],
                                        W * Wordsize > ?HEAVY_BYTES], ?MAX_HEAVY + 1);
heavy(_) ->
    [].

%% The heaviest of them, for the session's head: `Ailments.Catalog: 190.7MB' (and how many
%% more); `undefined' when none.
heavy_note([], _Fmt) ->
    undefined;
heavy_note(Heavy, Fmt) ->
    [{P, Bytes} | Rest] = lists:reverse(lists:keysort(2, Heavy)),
    fmt("~ts: ~ts~ts", [os_sup_lib_label:label(P, Fmt), os_sup_lib_text:bytes(Bytes),
                        case length(Rest) of
                            0 -> <<>>;
                            N -> fmt(" and ~b more", [N])
                        end]).

heap_words(P) ->
    try erlang:process_info(P, total_heap_size) catch _:_ -> undefined end.

%% `Spec' with its heavy processes; past ?MAX_HEAVY of them, every traced process's calls
%% carry their arity only, and no result is traced.
with_heavy(#{flags := Flags, fmt := Fmt} = Spec) ->
    case heavy(Spec) of
        Heavy when length(Heavy) > ?MAX_HEAVY ->
            Spec#{heavy => [], flags => [arity | Flags], paired => false,
                  match_spec => [{'_', [], [{message, {caller}}]}],
                  heavy_note => fmt("over ~b processes", [?MAX_HEAVY])};
        Heavy ->
            Spec#{heavy => [P || {P, _} <- Heavy], heavy_note => heavy_note(Heavy, Fmt)}
    end.

%% The session's match spec with a first clause for each heavy process: its calls are traced
%% without their results (`return_trace' would copy each).
light_only(MatchSpec, Heavy) ->
    [{'_', [{'=:=', {self}, P}], [{message, {caller}}]} || P <- Heavy] ++ MatchSpec.
