%%% @doc `os_sup_proc_info' shows one process in detail for tool
%%% `process_info'. Its state of run, where it came from
%%% (`os_sup_proc_origin'), its stack, links and monitors grouped by
%%% target, memory and refc binaries, its mailbox counted by message shape
%%% (`os_sup_proc_mailbox') with a sample of messages, and, when asked, a
%%% profile of where it spends its time (`os_sup_proc_profile'). Only
%%% `process_info' is read; the queue is copied only when it is short
%%% enough, by a reader under a heap limit and a deadline.
-module(os_sup_proc_info).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text/2, fmt_arg/1]).
-import(os_sup_lib_call, [call_with_deadline/3]).
-import(os_sup_lib_proc, [resolve_pid/1, pinfo_items/2, dict_initial_call/1]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2, render_opt_name/2, bytes/1]).

%% API
-export([process_info/1]).

-define(MAX_LIST, 50).
%% entries of a list shown in the text (data has up to ?MAX_LIST)
-define(TEXT_LIST, 3).
%% the mailbox: read (copy) the queue only up to this many messages (the caller may raise it
%% to MAX), in a reader with its own heap limit and deadline.
-define(MAILBOX_DEFAULT, ?PROCESS_MAX_MESSAGES_DEFAULT).
-define(MAILBOX_MAX, ?PROCESS_MAX_MESSAGES_MAX).
-define(MAILBOX_HEAP_WORDS, 8000000).
-define(MAILBOX_MS, 2000).
-define(PINFO_ITEMS, [registered_name, status, initial_call, current_stacktrace, links,
                      monitors, monitored_by, memory, reductions, message_queue_len, trap_exit,
                      heap_size, total_heap_size, group_leader, dictionary, binary,
                      garbage_collection_info]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc One process in detail: args `pid', `messages' (sample, 0..20; by default one message
%% of each shape, at most 5), `max_messages'
%% (10000, 1..100000: the mailbox is read and counted by shape only when at most this many
%% messages are queued).
-spec process_info(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
process_info(Args) ->
    Fmt = fmt_arg(Args),
    Pid = resolve_pid(arg_text(pid, Args)),
    Sample = arg_int(messages, Args, {each_shape, 5}, ?PROCESS_MESSAGES_MIN, ?PROCESS_MESSAGES_MAX),
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
             links => os_sup_lib_render:grouped(Links, fun(L) -> render_ref(L, Fmt) end, ?MAX_LIST),
             link_count => length(Links),
             monitors => os_sup_lib_render:grouped(Monitors, fun(M) -> render_monitor(M, Fmt) end, ?MAX_LIST),
             monitor_count => length(Monitors),
             monitored_by => os_sup_lib_render:grouped(MonitoredBy, fun(M) -> render_ref(M, Fmt) end, ?MAX_LIST),
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
        [fmt("~ts: ~ts", [K, short_list(maps:get(K, Data), Stands, N)])
         || {K, Stands, N} <- [{links, stands(Links), length(Links)},
                               {monitors, stands(Monitors), length(Monitors)},
                               {monitored_by, stands(MonitoredBy), length(MonitoredBy)},
                               {dictionary_keys, [], 0}]] ++
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

%%%===================================================================
%%% Private
%%%===================================================================

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
    case call_with_deadline({os_sup_proc_mailbox, shapes, [Pid, Max, Sample, Fmt]}, ?MAILBOX_MS, Heap) of
        {ok, #{sample := Msgs, read := Read} = Box} ->
            Note = case {Read > length(Msgs), Sample} of
                       {false, _} -> undefined;
                       {true, {each_shape, _}} ->
                           fmt("~b of ~b, one of each shape (pass messages: N for more)",
                               [length(Msgs), Read]);
                       {true, _} ->
                           fmt("~b of ~b, the first of each shape first", [length(Msgs), Read])
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

%% How many of the list each entry `os_sup_lib_render:grouped/3' makes of `Targets' stands for
%% (`X × 3' for 3), counted on the terms.
stands(Targets) -> [N || {_, N} <- os_sup_lib_render:counted(Targets)].

%% A list in the text: its first entries, the rest counted of `Total'; `Stands', how many each
%% entry stands for (an entry past its end, one).
short_list(L, Stands, Total) when length(L) > ?TEXT_LIST ->
    Shown = lists:sublist(L, ?TEXT_LIST),
    Stood = lists:sum(lists:sublist(Stands ++ lists:duplicate(?TEXT_LIST, 1), length(Shown))),
    All = max(Total, length(L)),
    fmt("[~ts, … ~b more of ~b]", [join([to_text(X) || X <- Shown], <<", ">>), All - Stood, All]);
short_list(L, _Stands, _Total) -> line_value(L).

line_value(undefined) -> <<"-">>;
line_value(L) when is_list(L) -> fmt("[~ts]", [join([to_text(X) || X <- L], <<", ">>)]);
line_value(V) -> to_text(V).
