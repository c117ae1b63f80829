%%% @doc `os_sup_trace_read' reads what the trace sessions caught, for the
%%% tools `trace_results', `trace_stop' and `traces' of `os_sup_trace'
%%% (which routes them here). It asks the session manager
%%% (`os_sup_trace_session') and reads a session's event table; it holds no
%%% state and starts no process.
-module(os_sup_trace_read).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_range/5, arg_text_only/2]).
-import(os_sup_lib_reply, [ok_reply/3, error_reply/2, fail/3]).
-import(os_sup_lib_text, [fmt/2]).

-export([trace_results/1, trace_stop/1, traces/1]).

%% session limits
-define(KEEP_FINISHED, 8).
-define(LINE_BYTES, 1024).
-define(MAX_INDENT, 8).
%% reading
-define(DEFAULT_LIMIT, 100).
-define(MAX_LIMIT, ?TRACE_RESULTS_LIMIT_MAX).
-define(TEXT_BYTES, 65536).
%% system monitor

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `trace_results': `session' (default the running or latest one), `since' (1; pass
%% back `next_seq' to page), `limit' (100, 1..1000).
-spec trace_results(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
trace_results(Args) ->
    Id0 = session_arg(Args),
    Since = arg_range(since, Args, 1, 0, 1 bsl 40),
    Limit = arg_range(limit, Args, ?DEFAULT_LIMIT, ?TRACE_RESULTS_LIMIT_MIN, ?MAX_LIMIT),
    Info = case os_sup_trace_session:call({info, Id0}) of
               {ok, I} -> I;
               {error, Kind, Msg} -> throw({tool_error, Kind, Msg})
           end,
    #{table := Tab, session := Id, type := Type, state := State, unit := Unit} = Info,
    {Events, Tally} = try {read_events(Tab, Since, Limit), tally(Type, Tab)}
                      catch _:_ -> fail(not_found, "session ~ts was just discarded (only the "
                                        "last ~b finished sessions are kept)",
                                        [Id, ?KEEP_FINISHED])
                      end,
    Next = case Events of
               [] -> max(Since, 1);
               _ -> maps:get(seq, lists:last(Events)) + 1
           end,
    Count = maps:get(count, Info),
    More = case Events of
               [] -> 0;
               _ -> max(0, last_seq(Tab) - Next + 1)
           end,
    Shown = [shown(E, State) || E <- Events],
    Callers = by_caller(Type, Tab),
    Header = fmt("trace ~ts (~ts): ~ts; ~ts~ts~ts~ts",
                 [Id, maps:get(pattern, Info), state_text(Info), os_sup_trace_session:count_text(Count, Unit),
                  tally_text(Tally, State, maps:get(heavy, Info, undefined)), callers_text(Callers),
                  case Since > 1 of
                      true -> fmt(", showing from seq ~b", [Since]);
                      false -> <<>>
                  end]),
    Lines = by_process(Shown),
    Tail = case More of
               0 -> [];
               _ -> [fmt("... ~b more; call again with since=~b", [More, Next])]
           end,
    Key = case Type of
              calls -> calls;
              messages -> events
          end,
    Data = maps:without([table], maps:merge(Info, Tally#{by_caller => Callers})),
    ok_reply([Header | Lines] ++ Tail,
             Data#{Key => [maps:without([line], E) || E <- Shown], next_seq => Next}, ?TEXT_BYTES).

%% @doc Tool `trace_stop': `session' (default the running one).
-spec trace_stop(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
trace_stop(Args) ->
    Id = case arg_text_only(session, Args) of
             undefined -> active;
             Text -> Text
         end,
    case os_sup_trace_session:call({stop, Id}) of
        {ok, #{session := S, count := Count, stop_detail := Detail, unit := Unit} = Info} ->
            Line = case maps:get(already, Info, false) of
                       true -> fmt("trace ~ts had already stopped: ~ts; ~ts",
                                   [S, Detail, os_sup_trace_session:count_text(Count, Unit)]);
                       false -> fmt("trace ~ts stopped: ~ts; ~ts; every pattern and flag is "
                                    "removed", [S, Detail, os_sup_trace_session:count_text(Count, Unit)])
                   end,
            ok_reply([Line], maps:without([table, already], Info), ?TEXT_BYTES);
        {error, Kind, Msg} ->
            error_reply(Kind, Msg)
    end.

%% @doc Tool `traces': every session kept, running or finished, newest first.
-spec traces(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
traces(_Args) ->
    case os_sup_trace_session:call(list) of
        {ok, #{sessions := Sessions}} ->
            Lines = case Sessions of
                        [] -> [<<"no trace sessions (start one with trace or trace_messages)">>];
                        _ -> [fmt("~ts ~ts: ~ts; ~ts", [Id, P, state_text(I), os_sup_trace_session:count_text(C, U)])
                              || #{session := Id, pattern := P, count := C, unit := U} = I
                                     <- Sessions]
                    end,
            ok_reply(Lines, #{sessions => [maps:without([table], I) || I <- Sessions]}, ?TEXT_BYTES);
        {error, Kind, Msg} ->
            error_reply(Kind, Msg)
    end.

%%%===================================================================
%%% Private: trace_results, trace_stop, traces (run in the worker)
%%%===================================================================

%% `running (stops at ...)' or `stopped: <the one stop reason>'.
state_text(#{state := running, max_events := Max, unit := Unit, duration_ms := Dur,
             rate := Rate}) ->
    RateText = case Rate of
                   undefined -> <<>>;
                   _ -> fmt(" or over ~b ~ts a second", [Rate, Unit])
               end,
    fmt("running (stops at ~ts, after ~b ms~ts)", [os_sup_trace_session:count_text(Max, Unit), Dur, RateText]);
state_text(#{state := State, stop_detail := Detail}) ->
    fmt("~ts: ~ts", [State, Detail]).

%% How the calls of a session ended so far (nothing for message sessions).
tally(calls, Tab) ->
    ets:foldl(fun({_, #{status := St} = E}, #{returned := R, raised := X, not_returned := N,
                                              left_out := L} = T0) ->
                      T = case maps:get(left_out, E, false) of
                              true -> T0#{left_out => L + 1};
                              false -> T0
                          end,
                      case St of
                          returned -> T#{returned => R + 1};
                          raised -> T#{raised => X + 1};
                          running -> T#{not_returned => N + 1};
                          _ -> T
                      end;
                 (_, T) -> T
              end, #{returned => 0, raised => 0, not_returned => 0, left_out => 0}, Tab);
tally(messages, _Tab) ->
    #{}.

%% The functions the traced calls came from, most calls first (the top 5): who makes the
%% atoms, opens the files, sends the messages.
by_caller(calls, Tab) ->
    Counts = ets:foldl(fun({_, #{kind := call} = E}, Acc) ->
                               case maps:get(from, E, undefined) of
                                   undefined -> Acc;
                                   From -> Acc#{From => maps:get(From, Acc, 0) + 1}
                               end;
                          (_, Acc) -> Acc
                       end, #{}, Tab),
    Top = os_sup_lib_rank:top(5, 2, maps:to_list(Counts)),
    [#{from => From, calls => N} || {From, N} <- Top];
by_caller(messages, _Tab) ->
    [].

callers_text([]) -> <<>>;
callers_text(Callers) ->
    ["; by caller: ", lists:join(", ", [[From, fmt(" ~b", [N])]
                                        || #{from := From, calls := N} <- Callers])].

tally_text(#{returned := R, raised := X, not_returned := N, left_out := L}, State, Heavy) ->
    Parts = [fmt("~b returned", [R]) || R > 0]
        ++ [fmt("~b raised", [X]) || X > 0]
        ++ [case State of
                running -> fmt("~b still running", [N]);
                _ -> fmt("~b had not returned when the trace stopped", [N])
            end || N > 0]
        %% (a heavy process's: copying them would grow the node by their size each)
        ++ [fmt("~b without arguments and result (their process's heap is over ~b MB~ts)",
                [L, os_sup_trace_session:heavy_bytes() div 1048576,
                 case Heavy of
                     undefined -> <<>>;
                     _ -> [<<"; ">>, Heavy]
                 end])
            || L > 0],
    case Parts of
        [] -> <<>>;
        _ -> iolist_to_binary([": ", lists:join(<<", ">>, Parts)])
    end;
tally_text(_, _State, _Heavy) ->
    <<>>.

%% A stored event as read: a call gets its text and line from its outcome so far.
shown(#{kind := call, status := Status0, call := Call, time := Time, pid := Pid,
        name := Name, depth := Depth} = E, State) ->
    Status = case {Status0, State} of
                 {running, running} -> running;
                 {running, _} -> unfinished;
                 _ -> Status0
             end,
    Outcome = case Status of
                  returned -> [" -> ", maps:get(result, E), duration_text(E)];
                  raised -> [" raised ", maps:get(exception, E), duration_text(E)];
                  running -> <<" ... (running, no return yet)">>;
                  unfinished -> <<" ... (had not returned when the trace stopped)">>;
                  called -> <<>>
              end,
    From = case maps:get(from, E, undefined) of
               undefined -> <<>>;
               Caller -> [" from ", Caller]
           end,
    Text = os_sup_lib_render:bound(iolist_to_binary([Call, Outcome, From]), ?LINE_BYTES),
    Indent = binary:copy(<<"  ">>, min(Depth, ?MAX_INDENT)),
    Line = os_sup_lib_render:bound(iolist_to_binary([Time, " ", Pid,
                                                 case Name of
                                                     undefined -> [];
                                                     _ -> [" (", Name, ")"]
                                                 end, " ", Indent, Text]), ?LINE_BYTES),
    E#{status => Status, text => Text, line => Line};
shown(E, _State) ->
    E.

%% The lines of the events. A call of the process the line above named shows `·' for it and
%% its time to the millisecond.
by_process(Events) ->
    {Lines, _} = lists:mapfoldl(
                   fun(#{kind := call, pid := P, time := T, text := Text, depth := D}, P) ->
                           Indent = binary:copy(<<"  ">>, min(D, ?MAX_INDENT)),
                           {iolist_to_binary([string:slice(T, 0, 12), <<" · "/utf8>>, Indent, Text]),
                            P};
                      (#{line := Line, pid := P}, _) ->
                           {Line, P}
                   end, undefined, Events),
    Lines.

duration_text(#{duration_us := Us}) when is_integer(Us) ->
    [" (", duration(Us), ")"];
duration_text(_) ->
    [].

%% 12 µs, 3.4 ms, 1.25 s.
duration(Us) when Us < 1000 ->
    <<(integer_to_binary(Us))/binary, " µs"/utf8>>;
duration(Us) when Us < 1000000 ->
    fmt("~.1f ms", [Us / 1000]);
duration(Us) ->
    fmt("~.2f s", [Us / 1000000]).

session_arg(Args) ->
    case arg_text_only(session, Args) of
        undefined -> latest;
        Id when is_binary(Id) -> Id;
        _ -> fail(bad_args, "session must be text like t1", [])
    end.

read_events(Tab, Since, Limit) ->
    First = case ets:member(Tab, Since) of
                true -> Since;
                false -> ets:next(Tab, Since)
            end,
    read_events(Tab, First, Limit, []).

read_events(_Tab, Key, Limit, Acc) when not is_integer(Key); Limit =< 0 ->
    lists:reverse(Acc);
read_events(Tab, Key, Limit, Acc) ->
    case ets:lookup(Tab, Key) of
        [{Key, E}] -> read_events(Tab, ets:next(Tab, Key), Limit - 1, [E | Acc]);
        [] -> read_events(Tab, ets:next(Tab, Key), Limit, Acc)
    end.

last_seq(Tab) ->
    case ets:last(Tab) of
        K when is_integer(K) -> K;
        _ -> 0
    end.
