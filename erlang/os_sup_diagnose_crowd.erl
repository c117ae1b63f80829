%%% @doc `os_sup_diagnose_crowd' finds the `contention' findings of `diagnose':
%%% at least ?CONTENDED processes blocked in calls on one at both ends of the
%%% window, and says what that process does. That is the call it
%%% is itself blocked in, or the receive it waits in and the shapes of the
%%% queued messages that receive does not take, or what it runs; and how many of
%%% the calls queued at the start of the window it has taken by its end (so how
%%% long each takes).
%%%
%%% == Bounds and safety ==
%%% Nothing is sent to the process. Its queue is read (a copy) only when it
%%% holds at most 1000 messages, in a throw-away process under a 500 ms
%%% deadline and a heap limit.
-module(os_sup_diagnose_crowd).

-import(os_sup_lib_proc, [queue_len/1]).
-import(os_sup_lib_text, [fmt/2]).
-import(os_sup_lib_time, [secs/1]).

%% at least this many processes blocked on one at both ends of the window
-define(CONTENDED, 5).

%% API
-export([contention/5, crowded/1, queued_calls/1, served/2, doing/3]).
%% run under a deadline and a heap limit
-export([call_tags_now/1]).

%% a busy server is read this many times, this far apart, for what holds its callers
-define(DOING_READS, 5).
-define(DOING_GAP_MS, 20).
%% where the project calls `sys:suspend': read for at most this long
-define(SITES_MS, 300).

-define(SHAPES_MS, 500).
%% the heap limit of a process that reads a copy of a queue
-define(HEAP, [{max_heap_size, #{size => 2000000, kill => true, error_logger => false}}]).
-define(CALLS_READ, 1000).
%% what a crowded process does is read this many times, this far apart
-define(ACTIVITY_READS, 5).
-define(ACTIVITY_GAP_MS, 10).

%% @doc The `contention' findings (at most two): many processes blocked in calls on one, at the start and still at the end of the window.
%% A process in a deadlock, or behind one, is the deadlock's finding; a long queue, the
%% mailbox's.
-spec contention([tuple()], [map()], map(), map(), map()) -> [os_sup_diagnose:finding()].
contention(Crowds, Chains, Queues0, Calls0, #{fmt := Fmt, elapsed := Elapsed} = Ctx) ->
    Covered = lists:usort([H || #{hops := Hs, stop := S} <- Chains,
                                S =:= cycle orelse S =:= deadlocked, H <- Hs]),
    Crowded = [{N0, T, N, Now}
               || {N0, T, Ps} <- Crowds, N0 >= ?CONTENDED, not lists:member(T, Covered),
                  not long_queue(T, Queues0),
                  Now <- [os_sup_waits:still_waiting(T, Ps)], N <- [length(Now)],
                  N >= ?CONTENDED],
    [begin
         Local = is_pid(T) andalso node(T) =:= node(),
         %% Where the server's code was entered (its callback, what to change) and where it
         %% is now.
         {Entry, Now} = case Local andalso os_sup_lib_proc:pinfo_items(T, [current_stacktrace]) of
                            [{_, Stack}] -> {os_sup_proc_origin:entry_frame(Stack),
                                             os_sup_proc_origin:app_frame(Stack)};
                            _ -> {undefined, undefined}
                        end,
         %% What they wait for: a call on it, or a `:global' lock it holds.
         Waits = case [K || W <- lists:sublist(Waiters, 1),
                            {wait, #{kind := K}} <- [os_sup_waits:wait_of(W)]] of
                     [lock] -> lock;
                     _ -> call
                 end,
         On = case Waits of
                  lock -> " processes waiting for a :global lock held by ";
                  call -> " processes blocked in calls on "
              end,
         {Doing, Next, Cause} = case Local andalso os_sup_diagnose_crowd:doing(T, Waits, Fmt) of
                                    {Said, Then} -> {Said, Then, undefined};
                                    {_, _, _} = Found -> Found;
                                    false -> {[], {waits, []}, undefined}
                                end,
         Frame = case Entry of undefined -> Now; _ -> Entry end,
         Where = case {Entry, Now} of
                     {#{mfa := A}, #{mfa := B}} when A =/= B ->
                         [" (in ", os_sup_proc_groups:frame_text(Entry, Fmt), " → ",
                          os_sup_proc_groups:frame_text(Now, Fmt), ")"];
                     _ -> os_sup_diagnose:frame_note(Frame, Fmt)
                 end,
         Line = {[fmt("contention: ~b~ts", [N0, On]),
                  os_sup_lib_label:label(T, Fmt), Where,
                  fmt(", and ~ts still at the end of ~ts", [count_text(N), secs(Elapsed)])],
                 [os_sup_diagnose_crowd:served(maps:get(T, Calls0, undefined), T), Doing]},
         %% The server's own code is where its callers' wait is made: it is next rather than
         %% the chains, unless something more precise is; the innermost of it, where the time
         %% goes (a helper the callback calls, a logger handler it runs), not the callback.
         Next1 = case {Next, case Now of undefined -> Frame; _ -> Now end} of
                     {{waits, []}, #{mfa := MFA}} ->
                         {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]};
                     _ -> Next
                 end,
         %% The code to change: what holds it, when that is elsewhere, else its own.
         Site = case Cause of undefined -> Frame; _ -> Cause end,
         Contended = os_sup_diagnose:finding(contention, Line, Next1,
                             case Local of true -> T; false -> hd(Waiters) end, Site, Ctx),
         Contended#{facts := #{waiting => N0, waiting_at_end => N}}
     end || {N0, T, N, Waiters} <- lists:sublist(lists:reverse(lists:sort(Crowded)), 2)].

long_queue(T, Queues0) ->
    is_pid(T) andalso node(T) =:= node() andalso
        os_sup_diagnose_mailbox:long(max(maps:get(T, Queues0, 0), queue_len(T))).

%% `still_waiting' looks at 100 waiters or so: more is "100 or more".
count_text(N) when N >= 100 -> <<"100 or more">>;
count_text(N) -> integer_to_binary(N).

%% @doc The processes of the waits scan's crowds (`{Count, Target, Waiters}') that enough wait
%% on to be a contention, if they still are at the window's end.
-spec crowded([{non_neg_integer(), term(), [pid()]}]) -> [term()].
crowded(Crowds) ->
    [T || {N, T, _} <- Crowds, N >= ?CONTENDED].

%% @doc The calls queued to each process of this node among `Targets' at the start of a
%% window (their reply tags, hashed), to count at its end how many it has taken.
-spec queued_calls([pid() | term()]) -> #{pid() => {integer(), [integer()]}}.
queued_calls(Targets) ->
    maps:from_list([{T, {erlang:monotonic_time(millisecond), Tags}}
                    || T <- Targets, is_pid(T), node(T) =:= node(),
                       Tags <- [call_tags(T)], is_list(Tags)]).

call_tags(T) ->
    case os_sup_lib_call:call_with_deadline({?MODULE, call_tags_now, [T]}, ?SHAPES_MS, ?HEAP) of
        {ok, Tags} -> Tags;
        _ -> undefined
    end.

%% @private The `$gen_call' reply tags queued to `T' (hashed), when at most 1000 messages are.
-spec call_tags_now(pid()) -> [integer()] | undefined.
call_tags_now(T) ->
    case os_sup_lib_proc:pinfo_items(T, [message_queue_len]) of
        [{_, Q}] when Q =< ?CALLS_READ ->
            case os_sup_lib_proc:pinfo_items(T, [messages]) of
                [{_, Ms}] -> [erlang:phash2(From) || {'$gen_call', From, _} <- Ms];
                _ -> undefined
            end;
        _ -> undefined
    end.

%% @doc How many of the calls queued at the start the process took in the window, and so
%% how long each took (all of them: a bound), as text; [] when unknown.
-spec served({integer(), [integer()]} | undefined, pid()) -> iodata().
served({At, Tags0}, T) when Tags0 =/= [] ->
    case call_tags(T) of
        Tags1 when is_list(Tags1) ->
            Ms = erlang:monotonic_time(millisecond) - At,
            Left = maps:from_list([{Tag, true} || Tag <- Tags1]),
            Queued = length(Tags0),
            case length([Tag || Tag <- Tags0, not is_map_key(Tag, Left)]) of
                0 -> fmt("; it took none of its ~b queued calls in ~ts", [Queued, secs(Ms)]);
                Queued -> fmt("; it took all ~b queued calls in ~ts (~b ms each or less)",
                              [Queued, secs(Ms), Ms div Queued]);
                N -> fmt("; it took ~b of its ~b queued calls in ~ts (~~~b ms each)",
                         [N, Queued, secs(Ms), Ms div N])
            end;
        _ -> []
    end;
served(_, _) ->
    [].

%% @doc What a crowded process does, and the call to make next: the call it is itself blocked in,
%% or the receive it waits in and the queued messages that receive does not take (by shape;
%% next, `process_info' shows one of each; a sleep takes none by design), or what it runs,
%% each with its callers waiting behind each other. Otherwise the node's chains are next: the
%% callers with where they call from. An OTP server idle with an empty queue has taken the
%% calls and not answered them (a `handle_call' that returns `noreply'): what it holds them
%% for is in its state, next, unless the project sends it something none of its clauses takes
%% (the message that would answer them, lost), whose sender is next.
-spec doing(pid(), call | lock, os_sup_lib_render:fmt()) ->
          {iodata(), {atom(), list()}} | {iodata(), {atom(), list()}, map()}.
doing(T, Waits, Fmt) ->
    doing(T, Waits, Fmt, ?DOING_READS).

%% One read of a busy server catches it between two receives as often as not: up to `Reads'
%% reads, ?DOING_GAP_MS apart, until one tells what holds its callers (it is blocked itself,
%% waits for a message none of its queue matches, or is idle holding their calls).
doing(T, Waits, Fmt, Reads) ->
    case doing_once(T, Waits, Fmt) of
        {telling, Doing} -> Doing;
        {plain, Doing} when Reads =< 1 -> Doing;
        {plain, _} ->
            receive after ?DOING_GAP_MS -> ok end,
            doing(T, Waits, Fmt, Reads - 1)
    end.

doing_once(T, Waits, Fmt) ->
    Activity = activity(T),
    CF = case Activity of
             {Current, St} -> {os_sup_lib_render:mfa(Current, Fmt), St, sleep(Current)};
             undefined -> undefined
         end,
    Chains = {waits, []},
    Behind = case Waits of
                 call -> "; each call waits behind the others";
                 lock -> "; each waits until it lets the lock go"
             end,
    case {os_sup_waits:wait_of(T), os_sup_waits_of:unmatched(T), CF} of
        _ when is_tuple(Activity), element(1, element(1, Activity)) =:= sys,
               element(2, element(1, Activity)) =:= suspend_loop orelse
               element(2, element(1, Activity)) =:= suspend_loop_hib ->
            {telling, suspended(Fmt)};
        {{wait, #{kind := K, targets := [Next], confirmed := true}}, _, _} ->
            {telling, {[fmt("; it is blocked itself (~ts) on ", [K]), os_sup_lib_label:label(Next, Fmt),
                        fmt(", queue ~b", [queue_len(T)]), Behind], Chains}};
        {_, N, {F, _, false}} when N > 0 ->
            {telling, {[fmt("; it waits in ~ts for a message other than the ~b queued", [F, N]),
                        shapes(T, Fmt), Behind],
                       {process_info, [{<<"pid">>, T}]}}};
        {_, _, {F, waiting, _}} ->
            {Where, _} = Activity,
            case {os_sup_proc_otp:gen_server_idle(Where), queue_len(T)} of
                {true, 0} -> {telling, holding(T, F, Fmt)};
                {_, Q} -> {plain, {[fmt("; it waits in ~ts, queue ~b", [F, Q]), Behind], Chains}}
            end;
        {_, _, {F, _, _}} ->
            {plain, {[fmt("; it runs ~ts, queue ~b", [F, queue_len(T)]), Behind], Chains}};
        _ -> {plain, {[], Chains}}
    end.

%% A process suspended by `sys:suspend/1' takes nothing until `sys:resume/1': where the
%% project suspends processes is next.
suspended(Fmt) ->
    Text = "; it is suspended (:sys.suspend/1): it takes no message until :sys.resume/1",
    case xref_sites(sys, suspend) of
        [{MFA, File, Line} | More] ->
            {[Text, fmt(", called from ~ts ~ts:~b", [os_sup_lib_render:mfa(MFA, Fmt), File, Line]),
              case More of [] -> []; _ -> fmt(" (and ~b more)", [length(More)]) end],
             {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]},
             %% the code to change: where it is suspended
             #{mfa => MFA, file => File, line => Line}};
        [] -> {Text, {callers, [{<<"target">>, <<":sys.suspend">>}]}}
    end.

xref_sites(M, F) ->
    try os_sup_code_xref:sites(M, F, ?SITES_MS) catch _:_ -> [] end.

%% An idle server its callers wait on.
holding(T, F, Fmt) ->
    Idle = fmt("; it is idle in ~ts with an empty queue: it took their calls and has not "
               "answered them (a handle_call that returns :noreply holds its caller until a "
               "reply is sent)", [F]),
    Lost = case {os_sup_proc_origin:initial_call(T), os_sup_lib_proc:reg_name(T)} of
               {{Mod, init, 1}, Name} when is_atom(Name), Name =/= undefined ->
                   try os_sup_code_msgs:unhandled(Mod, [Name], Fmt)
                   catch _:_ -> undefined
                   end;
               _ -> undefined
           end,
    case Lost of
        #{text := Text, target := Target} ->
            {[Idle, "; ", Text], {source, [{<<"target">>, Target}]}};
        _ ->
            {[Idle, "; what it holds them for is in its state"],
             {get_state, [{<<"pid">>, T}]}}
    end.

%% The function the process is seen in most often over a few reads 10 ms apart, and whether it
%% waits there: one read catches a sleeping server runnable at the instant a call wakes it, so
%% a sleep or a receive is judged by the function and every read, never by one instant; it
%% `runs' only when it was running or runnable at each read of that function.
activity(T) ->
    Reads = [read_activity(T, I) || I <- lists:seq(1, ?ACTIVITY_READS)],
    case [R || {_, _} = R <- Reads] of
        [] -> undefined;
        Seen ->
            Counts = os_sup_lib_rank:count([F || {F, _} <- Seen]),
            {_, Current} = lists:max([{C, F} || {F, C} <- maps:to_list(Counts)]),
            Waits = sleep(Current) orelse lists:member({Current, waiting}, Seen),
            {Current, case Waits of true -> waiting; false -> running end}
    end.

read_activity(T, I) ->
    I > 1 andalso timer:sleep(?ACTIVITY_GAP_MS),
    case os_sup_lib_proc:pinfo_items(T, [current_function, status]) of
        [{_, Current}, {_, St}] -> {Current, St};
        _ -> undefined
    end.

sleep({'Elixir.Process', sleep, _}) -> true;
sleep({timer, sleep, _}) -> true;
sleep(_) -> false.

%% The queue's three commonest shapes (`os_sup_proc_mailbox:shapes/4', on a copy of at most 1000
%% messages, under a deadline and a heap limit).
shapes(T, Fmt) ->
    case os_sup_lib_call:call_with_deadline({os_sup_proc_mailbox, shapes, [T, 1000, 0, Fmt]}, ?SHAPES_MS,
                                       ?HEAP) of
        {ok, #{shapes := [_ | _] = Shapes}} ->
            [" (", lists:join(", ", [[S, " × ", integer_to_binary(C)]
                                     || #{shape := S, count := C} <- lists:sublist(Shapes, 3)]),
             ")"];
        _ -> []
    end.
