%%% @doc `os_sup_diagnose_mailbox' is the mailbox part of `diagnose'
%%% (`os_sup_diagnose'): any process whose queue is long or grew over the
%%% window, with what is queued, who sends it and why it stays. From the
%%% walks' reads of every process (`os_sup_proc_scan' notes the non-empty
%%% queues), the longest queues are read again; one of at least 1000
%%% messages, or one that grew by 100 to 100 or more, is a finding, which says:
%%% <ul>
%%%   <li>what is queued, by shape, with counts (`os_sup_proc_mailbox:shape/1'
%%%       on a copy of the queue, when it is not too large to copy; else the
%%%       shapes of the messages that arrive);</li>
%%%   <li>why it stays: the process waits in a `receive' of the application
%%%       (its file:line, from the debug info, `os_sup_code_msgs:receive_at/2')
%%%       none of whose clauses takes that shape; or it takes them (its receive,
%%%       or its `handle_info'/`handle_cast'/`handle_call' clauses) and runs
%%%       behind; or it is blocked in a call (its wait chain); or it waits
%%%       elsewhere (a sleep);</li>
%%%   <li>who sends it: a short trace of the sends to the holders names the
%%%       sending processes, and the project's code that sends that shape
%%%       (`os_sup_code_msgs:send_sites/2', their modules first) the function
%%%       and file:line; without a trace, the project's code alone.</li>
%%% </ul>
%%% Its next call is the code to change: the receive that leaves them, else
%%% the sender (or the wait chain, for a process blocked in a call).
%%%
%%% == Bounds and safety ==
%%% At most 5 queues read again and 2 findings; a queue is copied only when it
%%% holds at most 10 000 messages (100 000 in a process of at most 16 MB), by a
%%% throw-away process under a heap limit and a 500 ms deadline. The trace: `send' events filtered by a match spec
%%% to the holders, on every process (on a large node, the likeliest and new
%%% ones: `os_sup_diagnose_makers:targets/0') for at most 300 ms or 100 events,
%%% by a throw-away tracer with a heap limit that takes its flags off when done
%%% (those of another tracer stay); not run when a send trace pattern, a
%%% tracer of new processes or another `diagnose''s trace is there (the text
%%% says why). The project's code is searched for the senders for 1 s at most
%%% (`os_sup_code_msgs'). Nothing is sent to any process.
-module(os_sup_diagnose_mailbox).

-import(os_sup_lib_proc, [queue_len/1, pinfo_items/2]).
-import(os_sup_lib_text, [fmt/2]).

%% API
-export([mailboxes/4, long/1]).
%% run in throw-away processes
-export([queued/2, tracer/5]).

-define(BIG, 1000).
-define(GROWTH, 100).
-define(CANDIDATES, 5).
-define(HOLDERS, 2).
%% a queue is read (copied) when it holds at most this many messages, or at most ?READ_MAX_BIG
%% while its process takes at most ?READ_BYTES in all
-define(READ_MAX, 10000).
-define(READ_MAX_BIG, 100000).
-define(READ_BYTES, 16 * 1024 * 1024).
-define(READ_MS, 500).
-define(READ_HEAP, [{max_heap_size, #{size => 4000000, kill => true, error_logger => false}}]).
-define(TRACE_MS, 300).
-define(TRACE_EVENTS, 100).
-define(TRACE_HEAP, [{max_heap_size, #{size => 2000000, kill => true, error_logger => false}}]).
%% one trace at a time, with `os_sup_diagnose_makers''s
-define(LOCK, os_sup_makers_tracer).
-define(SHAPES_SHOWN, 2).
-define(SENDERS, 2).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The mailbox findings of a `diagnose' window: `G0' and `G1' its two walks
%% (`os_sup_proc_groups:snapshot/4', whose `waits' carry the non-empty queues), `Chains' the
%% wait chains of the first (a process in a deadlock is that finding's), `Ctx' the report's.
-spec mailboxes(map(), map(), [map()], map()) -> [map()].
mailboxes(G0, G1, Chains, #{secs := Secs} = Ctx) ->
    Before = maps:from_list([{P, Q} || {Q, P} <- queues(G0)]),
    Deadlocked = lists:usort([H || #{hops := Hs} = C <- Chains, os_sup_waits:deadlock(C),
                                   H <- Hs]),
    Longest = lists:sublist(lists:reverse(lists:usort(queues(G1))), ?CANDIDATES),
    Big = [{Q1, P, Q1 - maps:get(P, Before, 0)}
           || {_, P} <- Longest, node(P) =:= node(), not lists:member(P, Deadlocked),
              not os_sup_lib_label:helper_process(P), Q1 <- [queue_len(P)],
              Q1 >= ?BIG orelse (Q1 - maps:get(P, Before, 0) >= ?GROWTH andalso Q1 >= ?GROWTH)],
    case lists:sublist(lists:reverse(lists:sort(Big)), ?HOLDERS) of
        [] -> [];
        Holders ->
            Read = [{P, read_queue(P, maps:get(fmt, Ctx))} || {_, P, _} <- Holders],
            Sends = trace_sends([P || {_, P, _} <- Holders]),
            [finding(P, Q, round(G / Secs), proplists:get_value(P, Read), Sends, Chains, Ctx)
             || {Q, P, G} <- Holders]
    end.

%% @private The shapes of `Pid''s queue with their counts, most first, read when it holds
%% at most `Max' messages (a copy), or ?READ_MAX_BIG when the process is small;
%% `{skipped, Queued}' otherwise.
-spec queued(pid(), pos_integer()) -> {[{term(), pos_integer()}], non_neg_integer()}
                                          | {skipped, non_neg_integer()} | gone.
queued(Pid, Max) ->
    case pinfo_items(Pid, [message_queue_len, memory]) of
        [{_, Q}, {_, M}] when Q > Max, Q > ?READ_MAX_BIG orelse M > ?READ_BYTES -> {skipped, Q};
        [{_, _}, {_, _}] ->
            case pinfo_items(Pid, [messages]) of
                [{messages, Ms}] when is_list(Ms) ->
                    Counts = os_sup_lib_rank:count([os_sup_proc_mailbox:shape(M) || M <- Ms]),
                    {most_first(Counts), length(Ms)};
                _ -> gone
            end;
        undefined -> gone
    end.

%%%===================================================================
%%% The trace of the sends to the holders
%%%===================================================================

%% @private Traces the sends to the holders in every process for `Ms' or `Max' events
%% (`Names', each name a holder is sent to, its pid or its registered name, to its pid), sends
%% `{self(), [{Sender, Holder, Shape}]}' to `Caller', then takes its flags off and puts the
%% send pattern back.
-spec tracer(pid(), all | [pid() | new], #{term() => pid()}, pos_integer(), pos_integer()) -> ok.
tracer(Caller, Targets, Names, Ms, Max) ->
    try register(?LOCK, self()) of
        true ->
            try
                _ = erlang:trace_pattern(send, send_spec(Names), []),
                ok = os_sup_diagnose_makers:trace_flags(Targets, true, [send, {tracer, self()}]),
                Events = collect(erlang:monotonic_time(millisecond) + Ms, Max, Names, []),
                Caller ! {self(), Events},
                ok
            after
                %% its own flags off first (another tracer's stay), then the send pattern back
                %% to its default: no send of the node is traced to it in between
                ok = os_sup_diagnose_makers:trace_flags(Targets, false, [send, {tracer, self()}]),
                _ = try erlang:trace_pattern(send, true, []) catch _:_ -> 0 end
            end
    catch
        error:badarg -> Caller ! {self(), busy}, ok
    end.

send_spec(Names) ->
    [{[To, '_'], [], []} || To <- lists:sort(maps:keys(Names))].

%% The send pattern back to its default when a tracer killed before it could left it set.
put_back(Spec) ->
    case erlang:trace_info(send, match_spec) of
        {match_spec, Spec} -> _ = erlang:trace_pattern(send, true, []), ok;
        _ -> ok
    end.

names(H) ->
    case os_sup_lib_proc:reg_name(H) of
        undefined -> [];
        Name -> [Name, {Name, node()}]
    end.

collect(_Deadline, 0, _Names, Acc) ->
    Acc;
collect(Deadline, Left, Names, Acc) ->
    Wait = Deadline - erlang:monotonic_time(millisecond),
    receive
        {trace, From, send, Msg, To} when Wait > 0 ->
            case os_sup_lib_label:helper_process(From) of
                true -> collect(Deadline, Left, Names, Acc);
                false -> collect(Deadline, Left - 1, Names,
                                 [{From, maps:get(To, Names, To), os_sup_proc_mailbox:shape(Msg)}
                                  | Acc])
            end
    after max(0, Wait) ->
            Acc
    end.

%% `{ok, Events, Ms}' or `{none, Why}'.
trace_sends(Holders) ->
    Busy = case {erlang:trace_info(send, match_spec), erlang:trace_info(new_processes, tracer),
                 whereis(?LOCK)} of
               {{match_spec, true}, {tracer, []}, undefined} -> false;
               {_, _, Lock} when is_pid(Lock) -> {true, <<"another diagnose is tracing">>};
               _ -> {true, <<"a trace is set already (a trace session?)">>}
           end,
    case {Busy, os_sup_diagnose_budget:ms(?TRACE_MS)} of
        {{true, Why}, _} -> {none, Why};
        {false, skip} -> {none, <<"no time left in this answer">>};
        {false, {ok, TraceMs}} ->
            T0 = erlang:monotonic_time(millisecond),
            %% a send to a registered name names it, not the pid
            Names = maps:from_list([{To, H} || H <- Holders, To <- [H | names(H)]]),
            Targets = os_sup_diagnose_makers:targets(),
            {Tracer, Mon} = spawn_opt(?MODULE, tracer,
                                      [self(), Targets, Names, TraceMs, ?TRACE_EVENTS],
                                      [monitor | ?TRACE_HEAP]),
            receive
                {Tracer, busy} ->
                    erlang:demonitor(Mon, [flush]),
                    {none, <<"another diagnose is tracing">>};
                {Tracer, Events} ->
                    Ms = erlang:monotonic_time(millisecond) - T0,
                    receive {'DOWN', Mon, process, Tracer, _} -> ok
                    after 1000 -> erlang:demonitor(Mon, [flush])
                    end,
                    {ok, Events, Ms};
                {'DOWN', Mon, process, Tracer, Why} ->
                    put_back(send_spec(Names)),
                    {none, fmt("the trace ended early (~0p)", [Why])}
            after TraceMs + 1000 ->
                    exit(Tracer, kill),
                    receive {'DOWN', Mon, process, Tracer, _} -> ok
                    after 1000 -> erlang:demonitor(Mon, [flush])
                    end,
                    put_back(send_spec(Names)),
                    {none, <<"the trace did not answer in time">>}
            end
    end.

%% @doc Whether a queue of `Q' messages is a long mailbox, a finding of its own (the one
%% threshold: a server with one is that finding's, not a contention's).
-spec long(non_neg_integer()) -> boolean().
long(Q) ->
    Q >= ?BIG.

%%%===================================================================
%%% One finding
%%%===================================================================

finding(P, Q, Rate, Read, Sends, Chains, #{fmt := Fmt} = Ctx) ->
    Arriving = case Sends of
                   {ok, Events, _} -> [{From, S} || {From, To, S} <- Events, To =:= P];
                   _ -> []
               end,
    %% What is queued, by shape: the queue when it was read, else what arrives.
    {Shapes, ShapesText} =
        case Read of
            {[_ | _] = Counts, _} ->
                {[S || {S, _} <- Counts], [": ", shapes_text(Counts, Fmt)]};
            _ when Arriving =/= [] ->
                Counts = most_first(os_sup_lib_rank:count([S || {_, S} <- Arriving])),
                {[S || {S, _} <- Counts],
                 ["; arriving: ", shapes_text(Counts, Fmt)]};
            _ -> {[], []}
        end,
    {State, Frame, Next0} = state(P, Shapes, Chains, Ctx),
    {SentBy, SenderNext} = senders(P, Shapes, Arriving, Sends, Ctx),
    Next = case Next0 of
               undefined when SenderNext =/= undefined -> SenderNext;
               undefined -> {process_info, [{<<"pid">>, P}]};
               _ -> Next0
           end,
    %% the count the shapes add up to, when the queue was read
    Queued = case Read of {_, N} when is_integer(N), N > 0 -> N; _ -> Q end,
    Line = {[fmt("mailbox: ~ts has ~b msgs (~ts~b/s)",
                 [os_sup_lib_label:label(P, Fmt), Queued, sign(Rate), Rate]), ShapesText],
            [State, SentBy]},
    Found = os_sup_diagnose:finding(mailbox, Line, Next, P, Frame, Ctx),
    Found#{facts := #{queue => Queued, queue_per_s => Rate}}.

%% Why the messages stay: `{Text, Frame, Next | undefined}'.
state(P, Shapes, Chains, #{fmt := Fmt} = Ctx) ->
    Info = pinfo_items(P, [status, current_stacktrace]),
    Stack = case Info of [_, {_, S}] when is_list(S) -> S; _ -> [] end,
    Status = case Info of [{_, St}, _] -> St; _ -> undefined end,
    AppFrame = os_sup_proc_origin:app_frame(Stack),
    case blocked(P, Chains) of
        {true, Hops} ->
            Chain = lists:join(" → ", [[os_sup_lib_label:label(H, Fmt),
                                        os_sup_diagnose:frame_note(os_sup_proc_groups:app_frame(H), Fmt)]
                                       || H <- lists:sublist(Hops, 4)]),
            {["; blocked in a call, chain: ", Chain], AppFrame,
             {waits, [{<<"pid">>, P}]}};
        false ->
            case {Status, receive_of(Stack)} of
                {waiting, {MFA, #{} = R}} ->
                    Where = #{mfa => MFA, file => maps:get(file, R), line => maps:get(line, R)},
                    Source = {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]},
                    {receive_text(Where, R, Shapes, Fmt), Where, Source};
                _ ->
                    handled(P, Status, Stack, AppFrame, Shapes, Ctx)
            end
    end.

%% A process that waits in a call on another (not the last of its chain).
blocked(P, Chains) ->
    case [Hs || #{hops := Hs} <- Chains, lists:member(P, Hs), lists:last(Hs) =/= P] of
        [Hops | _] -> {true, lists:dropwhile(fun(H) -> H =/= P end, Hops)};
        [] -> false
    end.

%% The application's receive the top of the stack waits in, from the debug info.
receive_of([{M, F, A, Loc} | _]) when is_atom(M) ->
    Arity = case A of N when is_integer(N) -> N; L when is_list(L) -> length(L); _ -> 0 end,
    case os_sup_proc_origin:app_module(M) of
        true ->
            Line = proplists:get_value(line, Loc),
            try os_sup_code_msgs:receive_at({M, F, Arity}, Line) of
                #{} = R -> {{M, F, Arity}, R};
                _ -> undefined
            catch _:_ -> undefined
            end;
        false -> undefined
    end;
receive_of(_) ->
    undefined.

receive_text(Where, #{shapes := Taken, other := Other}, Shapes, Fmt) ->
    At = os_sup_proc_groups:frame_text(Where, Fmt),
    Takes = case Taken of
                [] -> "no shape";
                _ -> lists:join(", ", [code_shape_text(S, Fmt) || S <- Taken])
            end,
    Left = [S || S <- Shapes, takes(S, Taken) =:= false],
    case {Other, Left} of
        _ when Shapes =:= [] ->
            ["; waiting in its receive at ", At, " whose clauses take ", Takes];
        {any, _} ->
            ["; waiting in its receive at ", At, ", which takes any message: it runs behind"];
        {none, [_ | _]} ->
            ["; waiting in its receive at ", At, " whose clauses take ", Takes, ": none takes ",
             lists:join(", ", [shape_text(S, Fmt) || S <- lists:sublist(Left, 2)]),
             ", so they stay"];
        {some, [_ | _]} ->
            ["; waiting in its receive at ", At, " whose clauses take ", Takes,
             " and patterns of no shape: none of those takes ",
             lists:join(", ", [shape_text(S, Fmt) || S <- lists:sublist(Left, 2)]),
             " by shape"];
        {_, []} ->
            ["; waiting in its receive at ", At, ", which takes them (", Takes, ")"]
    end.

%% A process not waiting in a receive of the application's: its callbacks' clauses when it is
%% an OTP server, and where it is.
handled(P, Status, Stack, AppFrame, Shapes, #{fmt := Fmt}) ->
    Here = case Stack of
               [{M, F, A, _} | _] when is_atom(M) ->
                   os_sup_lib_render:mfa({M, F, case A of L when is_list(L) -> length(L); N -> N end}, Fmt);
               _ -> <<"?">>
           end,
    At = case AppFrame of
               undefined -> [];
               _ -> [" (in ", os_sup_proc_groups:frame_text(AppFrame, Fmt), ")"]
           end,
    Doing = case callbacks(P, Shapes, Fmt) of
                {taken, Callback} ->
                    [Callback, " takes them but falls behind: ", atom_to_binary(Status, utf8),
                     " in ", Here, At];
                {left, Callback} ->
                    [Callback, "; ", atom_to_binary(Status, utf8), " in ", Here, At];
                none ->
                    [loop_receive(Stack, Shapes, Fmt), "; ", atom_to_binary(Status, utf8), " in ",
                     Here, At]
            end,
    Next = case AppFrame of
               #{mfa := MFA} -> {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]};
               _ -> undefined
           end,
    {Doing, AppFrame, Next}.

%% A plain process busy between two receives: the receive of its loop (a function on its
%% stack that has one) and whether it takes the commonest shape.
loop_receive(Stack, [S | _], Fmt) ->
    Found = lists:foldl(fun(_, {_, _} = F) -> F;
                           (Frame, undefined) -> receive_of([Frame])
                        end, undefined, lists:sublist(Stack, 8)),
    case Found of
        {MFA, #{shapes := Taken, other := Other} = R} ->
            At = os_sup_proc_groups:frame_text(#{mfa => MFA, file => maps:get(file, R),
                                                  line => maps:get(line, R)}, Fmt),
            case {takes(S, Taken), Other} of
                {true, _} -> ["; its receive at ", At, " takes them but it falls behind"];
                {_, any} -> ["; its receive at ", At, " takes any message but it falls behind"];
                {false, none} -> ["; its receive at ", At, " takes none of ", shape_text(S, Fmt)];
                _ -> ["; its receive at ", At]
            end;
        undefined -> []
    end;
loop_receive(_Stack, [], _Fmt) ->
    [].

%% For a `gen_server' (a GenServer): whether its callback's clauses take the commonest shape.
callbacks(P, [S | _], Fmt) ->
    case {os_sup_proc_origin:initial_call(P), code_kind(S)} of
        {{Mod, init, 1}, {Kind, Shape}} when Shape =/= undefined ->
            try os_sup_code_beam:messages(Mod) of
                {_, #{handlers := #{Kind := {Taken, CatchAll}}}} ->
                    Callback = callback(Kind),
                    case lists:member(Shape, Taken) orelse CatchAll =/= undefined of
                        true -> {taken, fmt("; ~ts.~ts", [os_sup_lib_render:name(Mod, Fmt),
                                                           Callback])};
                        false -> {left, fmt("; no ~ts clause of ~ts takes ~ts",
                                            [Callback, os_sup_lib_render:name(Mod, Fmt),
                                             shape_text(S, Fmt)])}
                    end;
                _ -> none
            catch _:_ -> none
            end;
        _ -> none
    end;
callbacks(_P, [], _Fmt) ->
    none.

callback(info) -> "handle_info/2";
callback(cast) -> "handle_cast/2";
callback(call) -> "handle_call/3".

%% Who sends them: `{Text, Next | undefined}' (`Next' the sending function's code).
senders(P, Shapes, Arriving, Sends, #{fmt := Fmt}) ->
    Wanted = [K || S <- lists:sublist(Shapes, ?SHAPES_SHOWN), {_, Sh} = K <- [code_kind(S)],
                   Sh =/= undefined],
    Name = os_sup_lib_proc:reg_name(P),
    case {Arriving, Sends} of
        {[_ | _], {ok, _, Ms}} ->
            BySender = most_first(os_sup_lib_rank:count([From || {From, _} <- Arriving])),
            Top = lists:sublist(BySender, ?SENDERS),
            Near = lists:usort(lists:append([modules(From) || {From, _} <- Top])),
            {Sites, _} = sites(Wanted, Near),
            Mine = modules(P),
            Named = [{From, C, sender_site(From, Sites, Name, Mine)} || {From, C} <- Top],
            Parts = [[os_sup_lib_label:label(From, Fmt), " (",
                      case Site of
                          #{} -> site_text(Site, Fmt);
                          undefined -> where_text(From, Fmt)
                      end,
                      fmt(", ~b in ~ts)", [C, os_sup_lib_time:secs(Ms)])]
                     || {From, C, Site} <- Named],
            Next = case [Site || {_, _, #{} = Site} <- Named] of
                       [#{mfa := MFA} | _] ->
                           {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]};
                       [] -> undefined
                   end,
            {["; sent by ", lists:join(", ", Parts)], Next};
        _ ->
            Why = case Sends of
                      {none, W} -> ["not traced: ", W];
                      _ -> "none seen arriving"
                  end,
            {Sites, Complete} = sites(Wanted, []),
            ToIt = [S || #{to := To} = S <- Sites, To =:= Name orelse To =:= undefined],
            case lists:sublist(ToIt, ?SENDERS) of
                [] ->
                    {["; senders ", Why, case Complete of
                                            true -> ", and no send of that shape in the project's code";
                                            false -> ""
                                        end], undefined};
                [#{mfa := MFA} | _] = Shown ->
                    {["; sent (by the project's code) from ",
                      lists:join(", ", [site_text(S, Fmt) || S <- Shown]), " (", Why, ")"],
                     {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]}}
            end
    end.

sites([], _Near) -> {[], true};
sites(Wanted, Near) ->
    try os_sup_code_msgs:send_sites(Wanted, Near)
    catch _:_ -> {[], false}
    end.

%% The send site of the sender `From': one in the modules it runs (its stack, its initial
%% call), to the holder's name when one is; else, for a sender that runs none of the
%% project's sends of that shape (a library's: `timer_server'), one that asks it to send it to
%% the holder (to its name, to `self()' in the holder's own modules `Mine', or to a pid).
sender_site(From, Sites, Name, Mine) ->
    Mods = modules(From),
    Theirs = [S || #{mfa := {M, _, _}} = S <- Sites, lists:member(M, Mods)],
    ToIt = [S || #{to := To} = S <- Theirs, To =:= Name],
    Asked = [S || #{mfa := {M, _, _}, to := To} = S <- Sites,
                  To =:= Name orelse To =:= undefined orelse
                      (To =:= self andalso lists:member(M, Mine))],
    case ToIt ++ Theirs ++ Asked of
        [Site | _] -> Site;
        [] -> undefined
    end.

%% The application modules a process runs: its stack's and its initial call's.
modules(From) when is_pid(From), node(From) =:= node() ->
    Stack = case pinfo_items(From, [current_stacktrace]) of
                [{_, S}] when is_list(S) -> [M || {M, _, _, _} <- S, is_atom(M)];
                _ -> []
            end,
    Init = case os_sup_proc_origin:initial_call(From) of
               {M, _, _} -> [M];
               _ -> []
           end,
    lists:usort([M || M <- Init ++ Stack, os_sup_proc_origin:app_module(M)]);
modules(_) ->
    [].

where_text(From, Fmt) when is_pid(From), node(From) =:= node() ->
    case os_sup_proc_groups:app_frame(From) of
        undefined -> "no send of that shape in its code";
        Frame -> ["in ", os_sup_proc_groups:frame_text(Frame, Fmt)]
    end;
where_text(_From, _Fmt) ->
    "another node".

site_text(#{mfa := MFA, file := File, line := Line}, Fmt) ->
    fmt("~ts ~ts:~b", [os_sup_lib_render:mfa(MFA, Fmt), File, Line]).

%%%===================================================================
%%% Shapes
%%%===================================================================

%% The walk's non-empty queues, `[{Len, Pid}]'.
queues(#{waits := {_, Qs}}) when is_list(Qs) -> Qs;
queues(_) -> [].

read_queue(P, _Fmt) ->
    case os_sup_diagnose_budget:ms(?READ_MS) of
        {ok, Ms} ->
            case os_sup_lib_call:call_with_deadline({?MODULE, queued, [P, ?READ_MAX]}, Ms,
                                                    ?READ_HEAP) of
                {ok, Result} -> Result;
                _ -> undefined
            end;
        skip -> undefined
    end.

most_first(Counts) ->
    lists:reverse(lists:keysort(2, maps:to_list(Counts))).

shapes_text(Counts, Fmt) ->
    {Shown, Rest} = lists:split(min(?SHAPES_SHOWN, length(Counts)), Counts),
    [lists:join(", ", [fmt("~ts ×~b", [shape_text(S, Fmt), C]) || {S, C} <- Shown]),
     case Rest of
         [] -> "";
         _ -> fmt(" and ~b more of ~b other shapes", [lists:sum([C || {_, C} <- Rest]), length(Rest)])
     end].

shape_text(S, Fmt) -> os_sup_proc_mailbox:shape_text(S, Fmt).

%% A queued message's shape (`os_sup_proc_mailbox') as the code's (`os_sup_code_msgs'): how it
%% was sent and its shape, `undefined' when the code's shapes cannot say (a map, a binary).
code_kind({'$gen_cast', Inner}) -> {cast, code_shape(Inner)};
code_kind({'$gen_call', Inner}) -> {call, code_shape(Inner)};
code_kind(Inner) -> {info, code_shape(Inner)}.

code_shape({atom, A}) -> A;
code_shape({tuple, Tag, N}) when Tag =/= '_' -> {Tag, N};
code_shape(_) -> undefined.

%% Whether a receive's clauses take a queued shape: `unknown' when the code cannot say.
takes(S, Taken) ->
    case code_kind(S) of
        {info, undefined} -> unknown;
        {info, Shape} -> lists:member(Shape, Taken);
        %% a cast or a call wrapped by OTP: taken only by a clause of that shape (none written)
        {cast, _} -> lists:member({'$gen_cast', 2}, Taken);
        {call, _} -> lists:member({'$gen_call', 3}, Taken)
    end.

code_shape_text(Atom, Fmt) when is_atom(Atom) -> os_sup_lib_render:term(Atom, Fmt);
code_shape_text({Tag, N}, Fmt) -> shape_text({tuple, Tag, N}, Fmt).

sign(G) when G >= 0 -> "+";
sign(_) -> "".
