%%%-------------------------------------------------------------------
%%% @doc `os_sup_procs' looks at processes the way `recon' does: the top
%%% N by an attribute, one process in detail with its mailbox counted by
%%% message shape, and an OTP process's state. Scans skip processes that
%%% die mid-way; `sys:get_state/2' goes only to processes `os_sup_proc_otp'
%%% shows to run an OTP behaviour loop, always with a timeout.
%%%
%%% == Tools ==
%%% <ul>
%%%   <li>{@link processes/1} (tool `processes'): top N processes by an
%%%       attribute, absolute or over a window (like `recon:proc_count/2'
%%%       and `proc_window/3').</li>
%%%   <li>{@link process_info/1} (tool `process_info'): one process in
%%%       detail, its mailbox counted by message shape
%%%       ({@link mailbox/4}).</li>
%%%   <li>{@link get_state/1} (tool `get_state'): an OTP process's state.</li>
%%% </ul>
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_procs).

%% The ranges (and defaults) the sidecar holds the arguments to: src/bounds.rs.
-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text/2, arg_choice/4, fmt_arg/1]).
-import(os_sup_lib_call, [call_with_deadline/3]).
-import(os_sup_lib_proc, [resolve_pid/1, pinfo_items/2, dict_initial_call/1, proc_dict/1]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2, render_opt_name/2, bytes/1]).

%% API
-export([processes/1, process_info/1, get_state/1, mailbox/4]).

-define(TERM_BYTES, 1024).
-define(GROUPS_SCAN_MS, 2000).
-define(STATE_BYTES, 16384).
%% A state larger than STATE_BYTES is shown by its largest parts first, then its start.
-define(BIG_STATE_START_BYTES, 4096).
-define(MAX_PARTS, 10).
%% Past this many keys (or elements) a map (or tuple) is a collection, not named parts.
-define(MAX_PART_KEYS, 64).
-define(MAX_LIST, 50).
%% entries of a list shown in the text (data has up to ?MAX_LIST)
-define(TEXT_LIST, 3).
%% process_info mailbox: read (copy) the queue only up to this many messages (the caller
%% may raise it to MAX), in a reader with its own heap limit and deadline.
-define(MAILBOX_DEFAULT, ?PROCESS_MAX_MESSAGES_DEFAULT).
-define(MAILBOX_MAX, ?PROCESS_MAX_MESSAGES_MAX).
-define(MAILBOX_HEAP_WORDS, 8000000).
-define(MAILBOX_MS, 2000).
-define(MAILBOX_SHAPES, 1000).
-define(MAILBOX_SHOWN, 10).

%%%===================================================================
%%% API: the processes tool
%%%===================================================================
%% @doc Top processes: args `sort_by', `limit' (10, 1..100), `window_ms' (1..10000), `filter';
%% with `group_by' (`initial_call', `current_function', `parent', `name_prefix') groups of
%% processes instead, ranked by `count' (default; its change over the window when there is
%% one), `memory' or `message_queue_len'.
-spec processes(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
processes(Args) ->
    case arg_choice(group_by, Args, [initial_call, current_function, parent, name_prefix],
                    undefined) of
        undefined -> top(Args);
        By -> groups(By, Args)
    end.

top(Args) ->
    Fmt = fmt_arg(Args),
    case maps:get(sort_by, Args, undefined) of
        C when C =:= count; C =:= <<"count">> ->
            fail(bad_args, "sort_by count ranks process groups: pass group_by too", []);
        _ -> ok
    end,
    SortBy = arg_choice(sort_by, Args,
                        [memory, reductions, message_queue_len, binary_memory, heap_size], memory),
    Limit = arg_int(limit, Args, 10, ?PROCESSES_LIMIT_MIN, ?PROCESSES_LIMIT_MAX),
    Window = case maps:get(window_ms, Args, undefined) of
                 undefined -> undefined;
                 _ -> arg_int(window_ms, Args, 1000, ?PROCESSES_WINDOW_MS_MIN, ?PROCESSES_WINDOW_MS_MAX)
             end,
    Filter = case arg_text(filter, Args) of
                 undefined -> undefined;
                 F -> string:lowercase(F)
             end,
    T0 = erlang:monotonic_time(microsecond),
    Pids = [P || P <- erlang:processes(), P =/= self(), matches(P, Filter)],
    Ranked = case Window of
                 undefined ->
                     [{V, P} || {P, V} <- snapshot(Pids, SortBy)];
                 W ->
                     Before = maps:from_list(snapshot(Pids, SortBy)),
                     timer:sleep(W),
                     After = [S || S = {P, _} <- snapshot(erlang:processes(), SortBy),
                                   P =/= self(), is_map_key(P, Before) orelse matches(P, Filter)],
                     [{V - maps:get(P, Before, 0), P} || {P, V} <- After]
             end,
    Top = top_not_own(lists:reverse(lists:sort(Ranked)), Limit),
    Rows = [R || {V, P} <- Top, R <- [proc_row(P, V, Fmt)], R =/= undefined],
    Us = erlang:monotonic_time(microsecond) - T0,
    Total = erlang:system_info(process_count),
    Lines = [row_line(R, SortBy, Window) || R <- Rows],
    ok_reply(Lines, #{rows => Rows, sort_by => SortBy, window_ms => Window,
                      total => Total, scanned => length(Pids), duration_us => Us}).

%% The first `N' of `Ranked' that are the node's: the helper's own left out (own/1), not an eval's.
top_not_own([{_, P} = R | Rest], N) when N > 0 ->
    case own(erlang:process_info(P, initial_call)) of true -> top_not_own(Rest, N); false -> [R | top_not_own(Rest, N - 1)] end;
top_not_own(_, _) -> [].
own({initial_call, {M, _, _} = MFA}) -> M =/= os_sup_eval andalso os_sup_lib_label:own(MFA);
own(_) -> false.

%% Processes grouped by `By' (os_sup_proc_groups), ranked by count (its change over the window
%% when there is one), total memory or total queue.
groups(By, Args) ->
    Fmt = fmt_arg(Args),
    SortBy = case arg_choice(sort_by, Args, [count, memory, message_queue_len, reductions,
                                             binary_memory, heap_size], count) of
                 S when S =:= count; S =:= memory; S =:= message_queue_len -> S;
                 S -> fail(bad_args, "with group_by, sort_by is count, memory or "
                           "message_queue_len, not ~ts", [S])
             end,
    Limit = arg_int(limit, Args, 10, ?PROCESSES_LIMIT_MIN, ?PROCESSES_LIMIT_MAX),
    Window = case maps:get(window_ms, Args, undefined) of
                 undefined -> undefined;
                 _ -> arg_int(window_ms, Args, 1000, ?PROCESSES_WINDOW_MS_MIN, ?PROCESSES_WINDOW_MS_MAX)
             end,
    T0 = erlang:monotonic_time(microsecond),
    Skip = fun(Init) -> own({initial_call, Init}) end,
    Deadline = fun() -> erlang:monotonic_time(millisecond) + ?GROUPS_SCAN_MS end,
    Before = case Window of
                 undefined -> undefined;
                 W ->
                     G0 = os_sup_proc_groups:snapshot(By, Skip, Deadline()),
                     timer:sleep(max(0, maps:get(at_ms, G0) + W
                                     - erlang:monotonic_time(millisecond))),
                     G0
             end,
    After = os_sup_proc_groups:snapshot(By, Skip, Deadline()),
    Rank = case {SortBy, Window} of
               {count, W1} when W1 =/= undefined -> growth;
               _ -> SortBy
           end,
    Ranked = os_sup_proc_groups:compare(Before, After, Rank),
    Rows = [group_row(By, G, Fmt) || G <- lists:sublist(Ranked, Limit)],
    Truncated = maps:get(truncated, After),
    Head = fmt("~b groups of ~b processes by ~ts~ts~ts", [length(Ranked), maps:get(scanned, After),
                                                         By, window_note(Window),
                                                         case Truncated of
                                                             true -> " (scan TRUNCATED at 2 s)";
                                                             false -> ""
                                                         end]),
    ok_reply([Head | [group_line(R) || R <- Rows]],
             #{rows => [], groups => Rows, group_by => By, sort_by => SortBy,
               window_ms => Window, total => erlang:system_info(process_count),
               scanned => maps:get(scanned, After), truncated => Truncated,
               duration_us => erlang:monotonic_time(microsecond) - T0}).

window_note(undefined) -> <<>>;
window_note(W) -> fmt(", change over ~b ms", [W]).

group_row(By, #{count := C, delta := D, per_s := PerS, memory := M, queue := Q, links := L,
                sample := S} = G, Fmt) ->
    #{group => os_sup_proc_groups:describe(By, G, Fmt), count => C, change => D, per_s => PerS,
      memory => M, message_queue_len => Q, links => L,
      sample => case is_pid(S) of true -> os_sup_lib_render:pid(S, Fmt); false -> undefined end}.

group_line(#{group := G, count := C, change := D, per_s := PerS, memory := M,
             message_queue_len := Q, sample := S}) ->
    Change = case D of
                 undefined -> <<>>;
                 _ -> fmt("~ts~b (~ts~b/s) ", [sign(D), D, sign(D), PerS])
             end,
    fmt("~ts~b procs ~ts mq ~b  ~ts  sample ~ts", [Change, C, bytes(M), Q, G, to_text(S)]).

sign(D) when D >= 0 -> "+";
sign(_) -> "".

snapshot(Pids, binary_memory) ->
    [{P, V} || P <- Pids, V <- [binary_memory(P)], V =/= undefined];
snapshot(Pids, Item) ->
    [{P, V} || P <- Pids, {_, V} <- [catch erlang:process_info(P, Item)], is_integer(V)].

binary_memory(P) ->
    case catch erlang:process_info(P, binary) of
        {binary, Bins} when is_list(Bins) -> lists:sum([S || {_, S, _} <- Bins]);
        _ -> undefined
    end.

matches(_P, undefined) -> true;
matches(P, Filter) ->
    case pinfo_items(P, [registered_name, initial_call, current_function]) of
        undefined -> false;
        Items ->
            Texts = [term_text(V) || {_, V} <- Items, V =/= []],
            lists:any(fun(T) -> contains(T, Filter) end, Texts) orelse
                case dict_initial_call(proc_dict(P)) of
                    undefined -> false;
                    MFA -> contains(term_text(MFA), Filter)
                end
    end.

term_text(A) when is_atom(A) -> atom_to_binary(A, utf8);
term_text({M, F, A}) ->
    iolist_to_binary([term_text(M), ":", term_text(F), "/", term_text(A)]);
term_text(I) when is_integer(I) -> integer_to_binary(I);
term_text(_) -> <<>>.

contains(Text, Filter) ->
    binary:match(string:lowercase(Text), Filter) =/= nomatch.

proc_row(P, V, Fmt) ->
    case pinfo_items(P, [registered_name, initial_call, current_function,
                         message_queue_len, memory, dictionary]) of
        undefined -> undefined;
        Items ->
            Get = fun(K) -> proplists:get_value(K, Items) end,
            Name = case Get(registered_name) of
                       N when is_atom(N), N =/= [], N =/= undefined -> os_sup_lib_render:name(N, Fmt);
                       _ ->
                           case dict_initial_call(Get(dictionary)) of
                               undefined -> os_sup_lib_render:mfa(Get(initial_call), Fmt);
                               MFA -> os_sup_lib_render:mfa(MFA, Fmt)
                           end
                   end,
            #{pid => os_sup_lib_render:pid(P, Fmt), name => Name,
              current_function => os_sup_lib_render:mfa(Get(current_function), Fmt),
              value => V, memory => Get(memory),
              message_queue_len => Get(message_queue_len)}
    end.

row_line(#{pid := Pid, name := Name, current_function := CF, value := V,
           message_queue_len := Q}, SortBy, Window) ->
    Value = case Window of
                undefined -> fmt("~ts=~ts", [SortBy, human(SortBy, V)]);
                _ -> fmt("~ts_delta=~ts", [SortBy, human(SortBy, V)])
            end,
    join([Pid, Name, Value, fmt("mq=~b", [Q]), <<"in ", CF/binary>>], <<" ">>).

human(K, V) when (K =:= memory orelse K =:= binary_memory), is_integer(V) -> bytes(V);
human(_, V) -> fmt("~tp", [V]).


%%%===================================================================
%%% Private: process_info
%%%===================================================================

-define(PINFO_ITEMS, [registered_name, status, initial_call, current_stacktrace, links,
                      monitors, monitored_by, memory, reductions, message_queue_len, trap_exit,
                      heap_size, total_heap_size, group_leader, dictionary, binary,
                      garbage_collection_info]).

%% @doc One process in detail: args `pid', `messages' (sample, 5, 0..20), `max_messages'
%% (10000, 1..100000: the mailbox is read and counted by shape only when at most this many
%% messages are queued).
-spec process_info(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
process_info(Args) ->
    Fmt = fmt_arg(Args),
    Pid = resolve_pid(arg_text(pid, Args)),
    Sample = arg_int(messages, Args, 5, ?PROCESS_MESSAGES_MIN, ?PROCESS_MESSAGES_MAX),
    MaxMessages = arg_int(max_messages, Args, ?MAILBOX_DEFAULT, ?PROCESS_MAX_MESSAGES_MIN, ?MAILBOX_MAX),
    Items = case pinfo_items(Pid, ?PINFO_ITEMS) of
                undefined -> fail(not_found, "process ~ts exited", [os_sup_lib_render:pid(Pid, Fmt)]);
                I -> I
            end,
    Get = fun(K) -> proplists:get_value(K, Items) end,
    Dict = case Get(dictionary) of D when is_list(D) -> D; _ -> [] end,
    Qlen = Get(message_queue_len),
    {Messages, MsgNote, Mailbox} = read_mailbox(Pid, Qlen, Sample, MaxMessages, Fmt),
    Links = Get(links),
    Monitors = Get(monitors),
    MonitoredBy = case Get(monitored_by) of MB when is_list(MB) -> MB; _ -> [] end,
    Profile = os_sup_proc_profile:of_process(Pid, arg_int(profile_ms, Args, 0, ?PROCESS_PROFILE_MS_MIN,
                                   ?PROCESS_PROFILE_MS_MAX), Fmt),
    Bins = case Get(binary) of B when is_list(B) -> B; _ -> [] end,
    GC = case Get(garbage_collection_info) of G when is_list(G) -> G; _ -> [] end,
    %% The virtual binary heaps count what the list may miss (binaries built by appending are
    %% listed only after a full GC).
    RefcBytes = max(lists:sum([Size || {_, Size, _} <- Bins]),
                    erlang:system_info(wordsize) * (proplists:get_value(bin_vheap_size, GC, 0)
                                                    + proplists:get_value(bin_old_vheap_size, GC, 0))),
    Origin = case os_sup_proc_origin:origin(Pid, Fmt) of
                 undefined -> #{parent => undefined, app_frame => undefined, ancestors => []};
                 O -> O
             end,
    Data = #{pid => os_sup_lib_render:pid(Pid, Fmt),
             registered_name => render_opt_name(case Get(registered_name) of
                                                    [] -> undefined;
                                                    N -> N
                                                end, Fmt),
             status => Get(status),
             unmatched_messages => os_sup_waits_of:unmatched(Pid),
             initial_call => os_sup_lib_render:mfa(Get(initial_call), Fmt),
             proc_lib_initial_call => case dict_initial_call(Dict) of
                                          undefined -> undefined;
                                          MFA -> os_sup_lib_render:mfa(MFA, Fmt)
                                      end,
             current_stacktrace => render_stack(Get(current_stacktrace), Fmt),
             parent => maps:get(parent, Origin),
             app_frame => maps:get(app_frame, Origin),
             ancestors => maps:get(ancestors, Origin),
             links => os_sup_lib_render:grouped([render_ref(L, Fmt) || L <- Links], ?MAX_LIST),
             link_count => length(Links),
             monitors => os_sup_lib_render:grouped([render_monitor(M, Fmt) || M <- Monitors], ?MAX_LIST),
             monitor_count => length(Monitors),
             monitored_by => os_sup_lib_render:grouped([render_ref(M, Fmt) || M <- MonitoredBy], ?MAX_LIST),
             monitored_by_count => length(MonitoredBy),
             memory => Get(memory),
             refc_binaries => #{count => length(Bins), referenced_bytes => RefcBytes},
             reductions => Get(reductions),
             message_queue_len => Qlen,
             messages => Messages,
             messages_note => MsgNote,
             mailbox => Mailbox,
             dictionary_keys => [os_sup_lib_render:term(K, Fmt, 256)
                                 || {K, _} <- lists:sublist(Dict, ?MAX_LIST)],
             trap_exit => Get(trap_exit),
             heap_size => Get(heap_size),
             total_heap_size => Get(total_heap_size),
             group_leader => os_sup_lib_render:pid(Get(group_leader), Fmt)},
    Lines = [fmt("~ts: ~ts", [K, line_value(maps:get(K, Data))]) || K <- [pid, registered_name]] ++
        [status_line(Data)] ++
        [fmt("~ts: ~ts", [K, line_value(maps:get(K, Data))])
         || K <- [initial_call, proc_lib_initial_call, parent, ancestors, app_frame, memory]] ++
        [fmt("refc_binaries: ~b listed, ~ts referenced (not in memory above)",
             [length(Bins), bytes(RefcBytes)]),
         fmt("link_count: ~b, monitor_count: ~b, monitored_by_count: ~b",
             [length(Links), length(Monitors), length(MonitoredBy)])] ++
        [fmt("~ts: ~ts", [K, line_value(maps:get(K, Data))])
         || K <- [reductions, message_queue_len, heap_size,
                  total_heap_size, trap_exit, group_leader]] ++
        [fmt("~ts: ~ts", [K, short_list(maps:get(K, Data), N)]) || {K, N} <- [{links, length(Links)},
            {monitors, length(Monitors)}, {monitored_by, length(MonitoredBy)}, {dictionary_keys, 0}]] ++
        os_sup_proc_profile:lines(Profile) ++
        [<<"current_stacktrace:">> | [<<"  ", F/binary>> || F <- stack_lines(Data)]] ++
        mailbox_lines(Mailbox) ++
        [<<"messages:", (case MsgNote of undefined -> <<>>;
                                         _ -> <<" ", MsgNote/binary>> end)/binary>>
         | [<<"  ", M/binary>> || M <- Messages]],
    ok_reply(Lines, case Profile of
                        undefined -> Data;
                        _ -> Data#{profile => Profile}
                    end).


%% -> {Sample, SampleNote, Mailbox}: the first `Sample' messages rendered and the
%% queue counted by shape, both from one read of the queue when it holds at most
%% `Max' messages; a note saying how to raise `Max' otherwise.
read_mailbox(_Pid, 0, _Sample, _Max, _Fmt) ->
    {[], undefined, undefined};
read_mailbox(_Pid, Qlen, _Sample, Max, _Fmt) when Qlen > Max ->
    Note = case Qlen > ?MAILBOX_MAX of
               true ->
                   fmt("not read: ~b messages queued, more than the ~b process_info reads at "
                       "most (reading copies the whole queue); watch it with processes "
                       "(window_ms) or see what arrives with trace_messages", [Qlen, ?MAILBOX_MAX]);
               false ->
                   fmt("not read: ~b messages queued, more than max_messages ~b (reading copies "
                       "the whole queue); pass max_messages: ~b (at most ~b) to count them by "
                       "shape", [Qlen, Max, min(?MAILBOX_MAX, (Qlen * 5 div 4) div 1000 * 1000 + 1000),
                                 ?MAILBOX_MAX])
           end,
    {[], <<"sample skipped (see mailbox)">>, #{queued => Qlen, read => 0, note => Note,
                                              shapes => []}};
read_mailbox(Pid, Qlen, Sample, Max, Fmt) ->
    Heap = [{max_heap_size, #{size => ?MAILBOX_HEAP_WORDS, kill => true,
                              error_logger => false}}],
    case call_with_deadline({?MODULE, mailbox, [Pid, Max, Sample, Fmt]}, ?MAILBOX_MS, Heap) of
        {ok, #{sample := Msgs, read := Read} = Box} ->
            Note = case Read > length(Msgs) of
                       true -> fmt("~b of ~b, the first of each shape first", [length(Msgs), Read]);
                       false -> undefined
                   end,
            {Msgs, Note, maps:remove(sample, Box)};
        {ok, {skipped, Queued}} ->
            read_mailbox(Pid, Queued, Sample, min(Max, Queued - 1), Fmt);
        {ok, gone} ->
            {[], undefined, undefined};
        timeout ->
            {[], undefined, #{queued => Qlen, read => 0, shapes => [],
                              note => fmt("not read: counting took over ~b ms", [?MAILBOX_MS])}};
        {error, _} ->
            {[], undefined, #{queued => Qlen, read => 0, shapes => [],
                              note => fmt("not read: the queue takes over ~b MB in memory",
                                          [?MAILBOX_HEAP_WORDS * erlang:system_info(wordsize)
                                           div 1000000])}}
    end.

%% @doc The mailbox of `Pid' counted by message shape (`$gen_cast {:post, _, _}',
%% `$gen_call :balance', `{:DOWN, _, _, _, _}'...), most frequent first, and its first
%% `Sample' messages rendered; reads the queue (a copy) only when it holds at most `Max'
%% messages: `{skipped, Queued}' otherwise, `gone' when the process exited. Meant to run
%% in a process with a heap limit.
-spec mailbox(pid(), pos_integer(), non_neg_integer(), os_sup_lib_render:fmt()) ->
          #{queued := non_neg_integer(), read := non_neg_integer(),
            shapes := [#{shape := binary(), count := pos_integer()}],
            other_shapes := non_neg_integer(), sample := [binary()],
            duration_us := non_neg_integer()}
              | {skipped, non_neg_integer()} | gone.
mailbox(Pid, Max, Sample, Fmt) ->
    T0 = erlang:monotonic_time(microsecond),
    case pinfo_items(Pid, [message_queue_len]) of
        undefined -> gone;
        [{_, Q}] when Q > Max -> {skipped, Q};
        [{_, _}] ->
            case pinfo_items(Pid, [messages]) of
                [{messages, Ms}] when is_list(Ms) ->
                    Counts = count_shapes(Ms, 1, #{}),
                    Sorted = lists:reverse(lists:keysort(2, [{S, C} || {S, {C, _}}
                                                                    <- maps:to_list(Counts)])),
                    {Shown, Rest} = lists:split(min(?MAILBOX_SHOWN, length(Sorted)), Sorted),
                    #{queued => length(Ms), read => length(Ms),
                      shapes => [#{shape => shape_text(S, Fmt), count => C} || {S, C} <- Shown],
                      other_shapes => length(Rest),
                      other_count => lists:sum([C || {_, C} <- Rest]),
                      sample => [os_sup_lib_render:term(M, Fmt, ?TERM_BYTES)
                                 || M <- sample_messages(Ms, Counts, Sample)],
                      duration_us => erlang:monotonic_time(microsecond) - T0};
                _ -> gone
            end
    end.

%% The first message of each shape (its place kept by count_shapes/3), then the next ones, in
%% queue order: a sample shows every kind of message queued, not the first few of the most
%% common one.
sample_messages(Ms, Counts, N) ->
    Firsts = lists:sublist(lists:sort([First || {_, First} <- maps:values(Counts)]), N),
    Fill = lists:sublist([I || I <- lists:seq(1, min(length(Ms), 2 * N)),
                               not lists:member(I, Firsts)], N - length(Firsts)),
    pick(Ms, 1, lists:sort(Firsts ++ Fill)).

pick(_, _, []) -> [];
pick([M | Ms], I, [I | Is]) -> [M | pick(Ms, I + 1, Is)];
pick([_ | Ms], I, Is) -> pick(Ms, I + 1, Is);
pick([], _, _) -> [].

%% Shape => {Count, the place of its first message}; past ?MAILBOX_SHAPES shapes, `other'.
count_shapes([], _I, Acc) ->
    Acc;
count_shapes([M | Rest], I, Acc) ->
    S0 = shape(M),
    S = case map_size(Acc) < ?MAILBOX_SHAPES orelse is_map_key(S0, Acc) of
            true -> S0;
            false -> other
        end,
    Counted = case Acc of
                  #{S := {C, First}} -> {C + 1, First};
                  _ -> {1, I}
              end,
    count_shapes(Rest, I + 1, Acc#{S => Counted}).

%% A message's shape: OTP envelopes kept, one level of the payload (a tuple's tag and
%% arity, an atom, a struct's name, otherwise the type).
shape({'$gen_cast', Msg}) -> {'$gen_cast', inner(Msg)};
shape({'$gen_call', _From, Req}) -> {'$gen_call', inner(Req)};
shape({system, _From, Req}) -> {system, inner(Req)};
shape(M) -> inner(M).

inner(A) when is_atom(A) -> {atom, A};
inner(T) when is_tuple(T), tuple_size(T) > 0, is_atom(element(1, T)) ->
    {tuple, element(1, T), tuple_size(T)};
inner(T) when is_tuple(T) -> {tuple, '_', tuple_size(T)};
inner(#{'__struct__' := S}) when is_atom(S) -> {struct, S};
inner(M) when is_map(M) -> map;
inner(B) when is_binary(B) -> binary;
inner(L) when is_list(L) -> list;
inner(I) when is_integer(I) -> integer;
inner(F) when is_float(F) -> float;
inner(P) when is_pid(P) -> pid;
inner(R) when is_reference(R) -> reference;
inner(F) when is_function(F) -> 'fun';
inner(P) when is_port(P) -> port;
inner(_) -> term.

shape_text(other, _Fmt) -> <<"(other shapes)">>;
shape_text({Envelope, Inner}, Fmt) when Envelope =:= '$gen_cast'; Envelope =:= '$gen_call';
                                        Envelope =:= system ->
    <<(atom_to_binary(Envelope, utf8))/binary, " ", (shape_text(Inner, Fmt))/binary>>;
shape_text({atom, A}, Fmt) -> os_sup_lib_render:term(A, Fmt, 256);
shape_text({tuple, Tag, N}, Fmt) ->
    Head = case Tag of
               '_' -> <<"_">>;
               _ -> os_sup_lib_render:term(Tag, Fmt, 256)
           end,
    Sep = case Fmt of elixir -> <<", ">>; _ -> <<",">> end,
    iolist_to_binary([<<"{">>, lists:join(Sep, [Head | lists:duplicate(N - 1, <<"_">>)]),
                      <<"}">>]);
shape_text({struct, S}, elixir) -> <<"%", (os_sup_lib_render:name(S, elixir))/binary, "{}">>;
shape_text({struct, S}, Fmt) -> <<"#{'__struct__' => ", (os_sup_lib_render:name(S, Fmt))/binary, "}">>;
shape_text(map, elixir) -> <<"%{...}">>;
shape_text(map, _) -> <<"#{...}">>;
shape_text(binary, elixir) -> <<"\"...\"">>;
shape_text(binary, _) -> <<"<<...>>">>;
shape_text(list, _) -> <<"[...]">>;
shape_text(Type, elixir) -> <<"<", (atom_to_binary(Type, utf8))/binary, ">">>;
shape_text(Type, _) -> <<(atom_to_binary(Type, utf8))/binary, "()">>.

mailbox_lines(undefined) ->
    [];
mailbox_lines(#{note := Note}) ->
    [<<"mailbox: ", Note/binary>>];
mailbox_lines(#{read := Read, shapes := Shapes, other_shapes := OtherN,
                other_count := OtherC, duration_us := Us}) ->
    [fmt("mailbox by shape (~b messages read in ~b ms):", [Read, Us div 1000])
     | [<<"  ", S/binary, " × "/utf8, (integer_to_binary(C))/binary>>
        || #{shape := S, count := C} <- Shapes]] ++
        case OtherN of
            0 -> [];
            _ -> [fmt("  ~b other shapes × ~b", [OtherN, OtherC])]
        end.

render_ref(P, Fmt) when is_pid(P) -> os_sup_lib_render:pid(P, Fmt);
render_ref(A, Fmt) when is_atom(A) -> os_sup_lib_render:name(A, Fmt);
render_ref(X, Fmt) -> os_sup_lib_render:term(X, Fmt, 256).

render_monitor({process, P}, Fmt) -> render_ref(P, Fmt);
render_monitor({port, P}, Fmt) -> os_sup_lib_render:term(P, Fmt, 256);
render_monitor(X, Fmt) -> os_sup_lib_render:term(X, Fmt, 256).

render_stack(Stack, Fmt) when is_list(Stack) ->
    os_sup_lib_render:bound(join([frame(F, Fmt) || F <- lists:sublist(Stack, 30)], <<"\n">>),
                        4096);
render_stack(_, _) ->
    <<>>.

frame({M, F, A, Loc}, Fmt) ->
    Where = case {proplists:get_value(file, Loc), proplists:get_value(line, Loc)} of
                {File, Line} when is_list(File), is_integer(Line) ->
                    fmt(" (~ts:~b)", [File, Line]);
                _ -> <<>>
            end,
    <<(os_sup_lib_render:mfa({M, F, A}, Fmt))/binary, Where/binary>>;
frame(X, Fmt) ->
    os_sup_lib_render:term(X, Fmt, 256).

stack_lines(#{current_stacktrace := <<>>}) -> [];
stack_lines(#{current_stacktrace := S}) -> binary:split(S, <<"\n">>, [global]).

status_line(#{status := St, unmatched_messages := N}) when N > 0 ->
    fmt("status: ~ts (for a message other than the ~b queued)", [St, N]);
status_line(#{status := St}) ->
    fmt("status: ~ts", [St]).

%% A list in the text: its first entries (`X × N' stands for N), the rest counted of `Total'.
short_list(L, Total) when length(L) > ?TEXT_LIST ->
    Shown = lists:sublist(L, ?TEXT_LIST),
    Stands = lists:sum([case is_binary(X) andalso binary:split(X, <<" × "/utf8>>) of
                            [_, N] -> binary_to_integer(N); _ -> 1 end || X <- Shown]),
    All = max(Total, length(L)),
    fmt("[~ts, … ~b more of ~b]", [join([to_text(X) || X <- Shown], <<", ">>), All - Stands, All]);
short_list(L, _Total) -> line_value(L).

line_value(undefined) -> <<"-">>;
line_value(L) when is_list(L) -> fmt("[~ts]", [join([to_text(X) || X <- L], <<", ">>)]);
line_value(V) -> to_text(V).

%%%===================================================================
%%% Private: get_state
%%%===================================================================
%% A term's size on a heap, in bytes (binaries counted by their reference only).
term_bytes(Term) ->
    try erts_debug:flat_size(Term) * erlang:system_info(wordsize) catch _:_ -> 0 end.

%% The largest parts of a state, most bytes first: a map's (or struct's) values by key, a
%% small tuple's (a record's) elements by position; each `{Data, Line}'.
state_parts(State, Fmt) ->
    Named = if
                is_map(State), map_size(State) =< ?MAX_PART_KEYS ->
                    [{os_sup_lib_render:term(K, Fmt, 80), V} || {K, V} <- maps:to_list(State),
                                                            K =/= '__struct__'];
                is_tuple(State), tuple_size(State) =< ?MAX_PART_KEYS ->
                    [{fmt("element ~b", [I]), element(I, State)}
                     || I <- lists:seq(1, tuple_size(State))];
                true -> []
            end,
    Sized = lists:reverse(lists:sort([{term_bytes(V), Name, V} || {Name, V} <- Named])),
    [{#{part => Name, bytes => B, shape => size_of(V, Fmt)},
      fmt("  ~ts: ~ts, ~ts", [Name, size_of(V, Fmt), bytes(B)])}
     || {B, Name, V} <- lists:sublist(Sized, ?MAX_PARTS)].

%% What a value is, by its size (`list of 7320', `map of 2 keys', `binary of 90 bytes'), or
%% a small one itself.
size_of(V, _Fmt) when is_list(V) -> try fmt("list of ~b", [length(V)]) catch _:_ -> <<"improper list">> end;
size_of(V, _Fmt) when is_map(V) -> fmt("map of ~b keys", [map_size(V)]);
size_of(V, _Fmt) when is_binary(V), byte_size(V) > 40 -> fmt("binary of ~b bytes", [byte_size(V)]);
size_of(V, _Fmt) when is_tuple(V) -> fmt("tuple of ~b", [tuple_size(V)]);
size_of(V, Fmt) -> os_sup_lib_render:term(V, Fmt, 40).

%% @doc State of an OTP process: args `pid', `timeout_ms' (2000, 1..10000).
-spec get_state(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
get_state(Args) ->
    Fmt = fmt_arg(Args),
    Pid = resolve_pid(arg_text(pid, Args)),
    Timeout = arg_int(timeout_ms, Args, ?GET_STATE_TIMEOUT_DEFAULT_MS, ?GET_STATE_TIMEOUT_MS_MIN,
                      ?GET_STATE_TIMEOUT_MS_MAX),
    PidText = os_sup_lib_render:pid(Pid, Fmt),
    %% Nothing is sent unless the process is known to answer system messages.
    Otp = case os_sup_proc_otp:otp_behaviour(Pid) of
              {ok, Info} -> Info;
              {no, Kind, Detail} -> os_sup_proc_otp:not_otp(PidText, Kind, Detail, Fmt);
              gone -> fail(not_found, "process ~ts exited", [PidText])
          end,
    case pinfo_items(Pid, [status]) of
        undefined -> fail(not_found, "process ~ts exited", [PidText]);
        [{status, suspended}] ->
            fail(timeout, "~ts is suspended (erlang:suspend_process): it cannot answer "
                 "sys:get_state; use process_info instead", [PidText]);
        _ -> ok
    end,
    T0 = erlang:monotonic_time(microsecond),
    State = try sys:get_state(Pid, Timeout) of
                S -> S
            catch
                exit:{timeout, _} ->
                    fail(timeout, "~ts did not answer sys:get_state within ~b ms: it is busy "
                         "(in a callback, or still in init); its message queue and stacktrace "
                         "are in process_info",
                         [PidText, Timeout]);
                exit:{noproc, _} ->
                    fail(not_found, "process ~ts exited", [PidText]);
                exit:{Reason, _} ->
                    fail(not_otp, "sys:get_state failed for ~ts: ~ts",
                         [PidText, os_sup_lib_render:term(Reason, Fmt, 512)])
            end,
    Us = erlang:monotonic_time(microsecond) - T0,
    {Module, Behaviour} = case State of
                              #{'__struct__' := 'Elixir.DynamicSupervisor'} ->
                                  {'Elixir.DynamicSupervisor', 'Elixir.DynamicSupervisor'};
                              _ -> {maps:get(module, Otp), maps:get(behaviour, Otp)}
                          end,
    Bytes = term_bytes(State),
    {Parts, Budget} = case Bytes > ?STATE_BYTES of
                          true -> {state_parts(State, Fmt), ?BIG_STATE_START_BYTES};
                          false -> {[], ?STATE_BYTES}
                      end,
    Rendered = os_sup_lib_render:pretty(State, Fmt, Budget),
    Data = #{pid => PidText, module => render_opt_name(Module, Fmt),
             behaviour => render_opt_name(Behaviour, Fmt), state => Rendered,
             state_bytes => Bytes, parts => [P || {P, _} <- Parts], duration_us => Us},
    Head = join([to_text(X) || X <- [PidText, maps:get(module, Data), maps:get(behaviour, Data)],
                               X =/= undefined], <<" ">>),
    Summary = case Parts of
                  [] -> [];
                  _ -> [fmt("state: ~ts; largest parts first:", [bytes(Bytes)])
                        | [Line || {_, Line} <- Parts]]
                        ++ [fmt("state, its first ~ts:", [bytes(Budget)])]
              end,
    ok_reply([Head | Summary ++ binary:split(Rendered, <<"\n">>, [global])], Data).


