%%% @doc `os_sup_diagnose_focus' answers `diagnose' with `focus': the symptom the user names
%%% (`"Catalog.get/1 is slow"' → focus `Catalog.get/1'), explained over the window. The focus
%%% is a function (`Mod.fun/arity', `mod:fun/arity', `Mod.fun'), a module, a registered name
%%% or a pid. Over the window:
%%% <ul>
%%%   <li>a function's calls are traced (`os_sup_trace', at most ?MAX_CALLS calls, paired with
%%%       their returns): how many, how long (p50 and the longest), and the calls still out at
%%%       the end with how long they had waited;</li>
%%%   <li>the process that serves it (the one registered under the focus's name or module, or
%%%       the pid given) is sampled every ?SAMPLE_MS ms (`process_info' of its status, current
%%%       function and queue; its stack once for each state it is seen in, at most ?FRAMES):
%%%       where its time goes, in shares of the window, each read counting the time since the
%%%       last: garbage collection (the system monitor's pauses of it in the window: a read
%%%       waits a collection out), its own work in a function, a call it waits on (to whom, on
%%%       which member), a sleep, a receive, suspended, unable to answer, or idle; and the most
%%%       messages queued ahead of a caller.</li>
%%% </ul>
%%% The answer is one finding of kind `focus', first whatever else is found, with the next call
%%% that shows the cause: the state of a server that collects, the process it waits on, the
%%% code it runs.
%%%
%%% == Bounds and safety ==
%%% The trace is an `os_sup_trace' session (its limits, its refusal of dangerous modules and
%%% of foreign tracers; when it cannot run, the answer says why and the sampling still does);
%%% it ends with the window. The sampler reads one process, ?SAMPLE_MS apart, for the window
%%% only; nothing is sent to any process.
-module(os_sup_diagnose_focus).

-import(os_sup_lib_reply, [fail/3]).
-import(os_sup_lib_text, [fmt/2]).

%% API
-export([start/4, finding/2]).
%% Internal spawn target (the sampler). Not an API.
-export([sample/4]).

-define(SAMPLE_MS, 10).
-define(MAX_CALLS, 200).
%% setting trace flags on every process holds a larger node for most of a second
-define(TRACE_MAX_PROCESSES, 20000).
%% stack reads: one for each state the process is seen in, at most this many
-define(FRAMES, 12).
%% shares of the window under this are not said
-define(SHOWN_PCT, 5).
%% a share of the unusual (collections, a call waited on…) this large is the cause to show
-define(CAUSE_PCT, 10).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Starts watching the focus for `WindowMs' (`none' without one). A focus that names
%% nothing on this node fails the call (`not_found'), unless `Anywhere' (a cluster's members,
%% where it may be on some only): then there is no focus here.
-spec start(binary() | undefined, boolean(), pos_integer(), os_sup_lib_render:fmt()) -> none | map().
start(undefined, _Anywhere, _WindowMs, _Fmt) ->
    none;
start(Text, true, WindowMs, Fmt) ->
    try start(Text, false, WindowMs, Fmt)
    catch throw:{tool_error, not_found, _} -> none
    end;
start(Text, false, WindowMs, Fmt) ->
    {Function, Server} = resolve(Text),
    Trace = case Function of
                undefined -> {not_traced, <<>>};
                {ModText, FunText} -> trace(ModText, FunText, WindowMs, Fmt)
            end,
    Sampler = case Server of
                  undefined -> undefined;
                  Pid ->
                      Stalls = stalls_of(Pid),
                      {spawn_monitor(?MODULE, sample, [self(), Pid, WindowMs, Stalls]), Pid}
              end,
    #{text => Text, function => Function, trace => Trace, sampler => Sampler, fmt => Fmt}.

%% @doc The `focus' finding of what `start/4' watched (the window has ended).
-spec finding(none | map(), map()) -> [os_sup_diagnose:finding()].
finding(none, _Ctx) ->
    [];
finding(#{text := Text, function := Function, trace := Trace, sampler := Sampler, fmt := Fmt},
        Ctx) ->
    Calls = calls(Trace),
    Served = served(Sampler, Fmt),
    %% A process focus has no calls of its own to time: what serves them is the answer.
    {Head, Detail, Next, Pid, Frame} =
        case {Function, Served} of
            {_, undefined} ->
                {fmt("focus ~ts: ~ts", [Text, calls_text(Calls, Fmt)]), <<>>,
                 trace_next(Function), undefined, undefined};
            {undefined, #{text := S, next := N, pid := P, frame := F}} ->
                {fmt("focus ~ts: ~ts", [Text, S]), <<>>, N, P, F};
            {_, #{text := S, next := N, pid := P, frame := F}} ->
                {fmt("focus ~ts: ~ts", [Text, calls_text(Calls, Fmt)]), ["; ", S], N, P, F}
        end,
    %% Where the code is: the frame the server's time went to, else the focus's function.
    Site = case {Frame, Function} of
               {undefined, {ModText, FunText}} -> {ModText, FunText};
               _ -> Frame
           end,
    Found = os_sup_diagnose:finding(focus, {Head, Detail}, Next, Pid, Site, Ctx),
    [Found#{facts := maps:merge(maps:get(facts, Calls, #{}),
                                case Served of
                                    undefined -> #{};
                                    #{facts := SF} -> SF
                                end)}].

%%%===================================================================
%%% The focus
%%%===================================================================

%% `{Function, Server}': the function to trace (`{ModText, FunText}' or `undefined') and the
%% process that serves it (or `undefined').
resolve(Text) ->
    case os_sup_lib_proc:named_process(Text) of
        %% a pid or a registered name: its calls are no one function's.
        {ok, Pid} -> {undefined, Pid};
        error -> function(Text)
    end.

function(Text) ->
    Bare = hd(string:split(Text, <<"/">>)),
    case os_sup_code_beam:module_atom(Bare) of
        {ok, M} -> {undefined, server_of(M, Text)};
        error ->
            case split_function(Text) of
                {ModText, FunText} ->
                    case os_sup_code_beam:module_atom(ModText) of
                        {ok, M} -> {{ModText, FunText}, registered(M)};
                        error -> unknown(Text)
                    end;
                error -> unknown(Text)
            end
    end.

%% `Mod.fun/1' or `mod:fun/1' → {<<"Mod">>, <<"fun/1">>}.
split_function(Text) ->
    case string:split(Text, <<":">>, trailing) of
        [M, F] when M =/= <<>>, F =/= <<>> -> {M, F};
        _ ->
            case string:split(hd(string:split(Text, <<"/">>)), <<".">>, trailing) of
                [M, _] when M =/= <<>> ->
                    {M, binary:part(Text, byte_size(M) + 1, byte_size(Text) - byte_size(M) - 1)};
                _ -> error
            end
    end.

server_of(M, Text) ->
    case registered(M) of
        undefined -> fail(not_found, "focus ~ts: no process is registered under that module; "
                          "give one of its functions (~ts.fun/arity) or a pid", [Text, Text]);
        Pid -> Pid
    end.

registered(M) ->
    case whereis(M) of
        Pid when is_pid(Pid) -> Pid;
        _ -> undefined
    end.

unknown(Text) ->
    fail(not_found, "focus ~ts names no function, module, registered name or process of this "
         "node: give Mod.fun/arity (MyApp.Cache.get/1), a module, a registered name or a pid",
         [Text]).

%%%===================================================================
%%% The calls (a trace of the window)
%%%===================================================================

%% A function the module lacks fails the call; a trace that cannot run (another tracer, a
%% module too hot to trace, a node too large to set trace flags on every process) is said.
trace(ModText, FunText, WindowMs, Fmt) ->
    Args = #{module => ModText, function => FunText, max_events => ?MAX_CALLS,
             duration_ms => WindowMs, format => Fmt, caller => self()},
    Count = erlang:system_info(process_count),
    try Count =< ?TRACE_MAX_PROCESSES andalso os_sup_trace:trace(Args) of
        false -> {not_traced, fmt("a trace of every process of ~b would hold the node; the "
                                  "trace tool with a pid times one caller", [Count])};
        {ok, #{data := #{session := Id}}} -> {traced, Id};
        {error, #{message := Why}} -> {not_traced, Why}
    catch
        throw:{tool_error, not_found, Why} -> fail(not_found, "focus: ~ts", [Why]);
        throw:{tool_error, _Kind, Why} -> {not_traced, Why}
    end.

%% `#{count, durations_us, out_us, facts}' of the trace, or `#{why}' when none ran.
calls({not_traced, Why}) ->
    #{why => Why};
calls({traced, Id}) ->
    _ = session({stop, Id}),
    case session({info, Id}) of
        {ok, #{table := Tab}} ->
            Now = os:system_time(microsecond),
            Events = [E || {_, E} <- ets:tab2list(Tab)],
            Done = lists:sort([D || #{duration_us := D} <- Events, is_integer(D)]),
            Out = lists:sort([Now - T || #{duration_us := undefined, time_us := T} <- Events,
                                         is_integer(T)]),
            #{count => length(Events), done => Done, out => Out,
              facts => maps:merge(#{calls => length(Events), calls_out => length(Out)},
                                  case Done of
                                      [] -> #{};
                                      _ -> #{call_p50_ms => nth(0.5, Done) div 1000,
                                             call_max_ms => lists:last(Done) div 1000}
                                  end)};
        _ -> #{why => <<"its trace was discarded">>}
    end.

%% The trace session manager's answer, or `error' (it may be gone).
session(Request) ->
    try os_sup_trace_session:call(Request) catch _:_ -> error end.

calls_text(#{why := Why}, _Fmt) ->
    fmt("its calls were not timed (~ts)", [Why]);
calls_text(#{count := 0}, _Fmt) ->
    <<"no call in the window">>;
calls_text(#{count := N, done := Done, out := Out}, _Fmt) ->
    Timed = case Done of
                [] -> <<>>;
                _ -> fmt(", ~b returned in ~ts (p50) to ~ts", [length(Done), ms(nth(0.5, Done)),
                                                                ms(lists:last(Done))])
            end,
    Waiting = case Out of
                  [] -> <<>>;
                  _ -> fmt(", ~b still waiting at the end (the longest for ~ts)",
                           [length(Out), ms(lists:last(Out))])
              end,
    fmt("~b call~ts in the window~ts~ts~ts", [N, plural(N), case N >= ?MAX_CALLS of
                                                             true -> <<" (the first counted)">>;
                                                             false -> <<>>
                                                         end, Timed, Waiting]).

%% With no process to sample, the next call is a longer trace of the function.
trace_next({ModText, FunText}) ->
    {trace, [{<<"module">>, ModText}, {<<"function">>, FunText}, {<<"max_events">>, 50}]};
trace_next(undefined) ->
    {processes, []}.

%%%===================================================================
%%% The process that serves it (sampled over the window)
%%%===================================================================

%% @doc The sampler: reads `Pid' every ?SAMPLE_MS ms for `WindowMs', then sends the tally:
%% the milliseconds of each `{Class, CurrentFunction}' (each read counts the time since the
%% last), `unanswered' the time reads waited on a process that could not answer (a signal
%% waits out a collection or a schedule that does not yield), the first application frame of
%% each (at most ?FRAMES stack reads), the most messages queued.
-spec sample(pid(), pid(), pos_integer(), list()) -> ok.
sample(Parent, Pid, WindowMs, Stalls0) ->
    Now = erlang:monotonic_time(millisecond),
    Tally = sample_loop(Pid, Now, Now + WindowMs, #{ms => #{}, frames => #{}, queue_max => 0}),
    Parent ! {?MODULE, self(), Tally#{stalls_before => Stalls0, stalls_after => stalls_of(Pid)}},
    ok.

sample_loop(_Pid, Last, Deadline, Tally) when Last >= Deadline ->
    Tally#{total_ms => max(1, lists:sum(maps:values(maps:get(ms, Tally))))};
sample_loop(Pid, Last, Deadline, #{ms := Ms, frames := Frames, queue_max := QMax} = Tally) ->
    Asked = erlang:monotonic_time(millisecond),
    case erlang:process_info(Pid, [status, current_function, message_queue_len]) of
        undefined ->
            sample_loop(Pid, Deadline, Deadline, Tally#{gone => true});
        [{status, Status}, {current_function, CF}, {message_queue_len, Q}] ->
            Answered = erlang:monotonic_time(millisecond),
            Key = {class(Status, CF), CF},
            %% The time up to the read is the state read; a slow answer is its own.
            Waited = Answered - Asked,
            Ms1 = add(Key, Asked - Last, case Waited > 2 of
                                             true -> add(unanswered, Waited, Ms);
                                             false -> add(Key, Waited, Ms)
                                         end),
            Frames1 = case maps:is_key(Key, Frames) orelse map_size(Frames) >= ?FRAMES
                          orelse not framed(element(1, Key)) of
                          true -> Frames;
                          false -> Frames#{Key => os_sup_proc_groups:app_frame(Pid)}
                      end,
            receive after ?SAMPLE_MS -> ok end,
            sample_loop(Pid, Answered, Deadline,
                        Tally#{ms := Ms1, frames := Frames1, queue_max := max(Q, QMax)})
    end.

add(Key, Ms, Map) ->
    maps:update_with(Key, fun(X) -> X + Ms end, Ms, Map).

framed(Class) ->
    lists:member(Class, [work, sleep, call, 'receive']).

class(garbage_collecting, _) -> gc;
class(suspended, _) -> suspended;
class(exiting, _) -> gone;
class(S, _) when S =:= running; S =:= runnable -> work;
class(waiting, {timer, sleep, _}) -> sleep;
class(waiting, {'Elixir.Process', sleep, _}) -> sleep;
class(waiting, {gen, do_call, _}) -> call;
class(waiting, {erpc, _, _}) -> call;
class(waiting, {M, _, _}) when M =:= gen_server; M =:= gen_statem; M =:= gen_event;
                               M =:= proc_lib; M =:= erlang -> idle;
class(waiting, _) -> 'receive'.

%% The system monitor's pauses of `Pid' so far: `[{Kind, Count, SumMs, MaxMs}]'.
stalls_of(Pid) ->
    [{K, C, Sum, Max} || {{P, K}, C, Sum, Max, _, _, _, _, _} <- os_sup_trace_sysmon:stalls(),
                         P =:= Pid].

served(undefined, _Fmt) ->
    undefined;
served({{Sampler, MRef}, Pid}, Fmt) ->
    receive
        {?MODULE, Sampler, Tally} ->
            erlang:demonitor(MRef, [flush]),
            describe(Pid, Tally, Fmt);
        {'DOWN', MRef, process, Sampler, _} -> undefined
    after 2000 ->
            exit(Sampler, kill),
            undefined
    end.

describe(Pid, #{ms := Ms, frames := Frames, queue_max := Q, total_ms := Total} = Tally, Fmt) ->
    {Pauses, PausedMs} = pauses(Tally),
    Shares = shares(Ms, Frames, PausedMs, Total),
    Top = cause(Shares),
    Parts = [share_text(Pct, What, Pid, {Pauses, PausedMs}, Fmt)
             || {Pct, What} <- Shares, Pct >= ?SHOWN_PCT],
    Text = fmt("served by ~ts: its time in the window: ~ts~ts~ts",
               [os_sup_lib_label:label(Pid, Fmt),
                case Parts of
                    [] -> <<"idle">>;
                    _ -> lists:join(<<", ">>, Parts)
                end,
                case Q of
                    0 -> <<>>;
                    _ -> fmt("; up to ~b messages queued ahead of a caller", [Q])
                end,
                case maps:get(gone, Tally, false) of
                    true -> <<"; it exited during the window">>;
                    false -> <<>>
                end]),
    Facts = #{queue_max => Q, gc_pct => pct(gc, Shares), work_pct => pct(work, Shares),
              wait_pct => pct(call, Shares), pauses => Pauses, paused_ms => PausedMs},
    #{text => Text, next => next(Top, Pid, Fmt), pid => Pid, frame => frame_of(Top),
      facts => Facts}.

%% `[{Pct, What}]', the largest first: `What' is `gc', `unanswered', `suspended', `idle',
%% `gone', or `{Class, Frame, CurrentFunction}'. The pauses the system monitor saw in the
%% window are collections whatever the reads saw (a read waits a collection out); the rest of
%% the time reads waited is `unanswered'.
shares(Ms, Frames, PausedMs, Total0) ->
    Unanswered = max(0, maps:get(unanswered, Ms, 0) - PausedMs),
    Read = maps:to_list(maps:remove(unanswered, Ms)),
    Total = max(Total0, PausedMs + Unanswered + lists:sum([T || {_, T} <- Read])),
    Parts = [{gc, PausedMs}, {unanswered, Unanswered}]
        ++ [{what(K, Frames), T} || {K, T} <- Read],
    Merged = lists:foldl(fun({W, T}, Acc) -> add(W, T, Acc) end, #{}, Parts),
    lists:reverse(lists:sort([{round(T * 100 / Total), W} || {W, T} <- maps:to_list(Merged),
                                                             T > 0])).

%% What the next call should show: the largest share that is not the process's usual course
%% (collections, unable to answer, suspended, waiting on a call) when it is ?CAUSE_PCT or
%% more, else the largest share of anything but idling.
cause(Shares) ->
    Unusual = [W || {P, W} <- Shares, P >= ?CAUSE_PCT,
                    lists:member(W, [gc, unanswered, suspended]) orelse
                        (is_tuple(W) andalso element(1, W) =:= call)],
    Busy = [W || {_, W} <- Shares, W =/= idle, W =/= gone],
    case Unusual ++ Busy of
        [W | _] -> W;
        [] -> idle
    end.

what({Class, CF} = Key, Frames) ->
    case framed(Class) of
        true -> {Class, maps:get(Key, Frames, undefined), CF};
        false -> Class
    end.

pct(Class, Shares) ->
    lists:sum([P || {P, W} <- Shares, W =:= Class orelse (is_tuple(W) andalso element(1, W) =:= Class)]).

%% `{Count, SumMs}' of the system monitor's long collections of the process in the window.
pauses(#{stalls_before := B, stalls_after := A}) ->
    {C0, S0} = case lists:keyfind(long_gc, 1, B) of
                   {_, C, S, _} -> {C, S};
                   false -> {0, 0}
               end,
    case lists:keyfind(long_gc, 1, A) of
        {_, C1, S1, _} when C1 > C0 -> {C1 - C0, S1 - S0};
        _ -> {0, 0}
    end.

share_text(Pct, gc, _Pid, {0, _}, _Fmt) ->
    fmt("~b % garbage collection", [Pct]);
share_text(Pct, gc, _Pid, {C, Sum}, _Fmt) ->
    fmt("~b % garbage collection (~b pause~ts of ~b ms in all)", [Pct, C, plural(C), Sum]);
share_text(Pct, unanswered, _Pid, _, _Fmt) ->
    fmt("~b % unable to answer (a schedule or a native call that does not yield)", [Pct]);
share_text(Pct, suspended, _Pid, _, _Fmt) ->
    fmt("~b % suspended", [Pct]);
share_text(Pct, idle, _Pid, _, _Fmt) ->
    fmt("~b % idle", [Pct]);
share_text(Pct, gone, _Pid, _, _Fmt) ->
    fmt("~b % exiting", [Pct]);
share_text(Pct, {Class, Frame, CF}, Pid, _, Fmt) ->
    Where = case Frame of
                undefined -> os_sup_lib_render:mfa(CF, Fmt);
                _ -> os_sup_proc_groups:frame_text(Frame, Fmt)
            end,
    case Class of
        work -> fmt("~b % its own work in ~ts", [Pct, Where]);
        sleep -> fmt("~b % asleep in ~ts", [Pct, Where]);
        'receive' -> fmt("~b % waiting in a receive in ~ts", [Pct, Where]);
        call -> fmt("~b % waiting on ~ts (a call in ~ts)", [Pct, callee_text(Pid, Fmt), Where])
    end.

%% Whom the process waits on now, with its member when remote.
callee_text(Pid, Fmt) ->
    case callee(Pid) of
        undefined -> <<"another process">>;
        Callee when node(Callee) =/= node() ->
            fmt("~ts on ~ts", [os_sup_lib_render:pid(Callee, Fmt), atom_to_binary(node(Callee), utf8)]);
        Callee -> os_sup_lib_label:label(Callee, Fmt)
    end.

%% What the process waits on, as `waits' decides it (`os_sup_waits:wait_of/1'), not its
%% first monitor (a server monitors its clients too).
callee(Pid) ->
    case os_sup_waits:wait_of(Pid) of
        {wait, #{targets := [T | _]}} when is_pid(T) -> T;
        _ -> undefined
    end.

frame_of({_, Frame, _}) when is_map(Frame) -> Frame;
frame_of(_) -> undefined.

%% What shows the cause: a collecting server's state, the process it waits on, the code it runs.
next(gc, Pid, _Fmt) -> {get_state, [{<<"pid">>, Pid}]};
next(suspended, Pid, _Fmt) -> {process_info, [{<<"pid">>, Pid}]};
next({call, _, _}, Pid, _Fmt) ->
    case callee(Pid) of
        Callee when is_pid(Callee), node(Callee) =:= node() -> {process_info, [{<<"pid">>, Callee}]};
        _ -> {waits, [{<<"pid">>, Pid}]}
    end;
next({_, #{mfa := {M, F, A}}, _}, _Pid, Fmt) ->
    {source, [{<<"target">>, os_sup_lib_render:mfa({M, F, A}, Fmt)}]};
next(_, Pid, _Fmt) -> {process_info, [{<<"pid">>, Pid}]}.

%%%===================================================================
%%% Text
%%%===================================================================

nth(P, Sorted) ->
    lists:nth(max(1, min(length(Sorted), round(P * length(Sorted)))), Sorted).

ms(Us) when Us >= 10000 -> fmt("~b ms", [Us div 1000]);
ms(Us) -> fmt("~.1f ms", [Us / 1000]).

plural(1) -> <<>>;
plural(_) -> <<"s">>.
