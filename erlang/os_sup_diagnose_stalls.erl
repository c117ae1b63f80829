%%% @doc `os_sup_diagnose_stalls' is the pauses part of `diagnose' (`os_sup_diagnose'): the
%%% processes the VM paused, from what the system monitor saw in the last 10 minutes
%%% (`os_sup_trace_sysmon', which watches all the time). A process whose garbage collections
%%% or schedules paused it again and again, while they go on (the last in the last 2
%%% minutes), is a `stall' finding, with its pauses, its heap, the function it was in, what
%%% it receives and the callers waiting on it; a port whose being busy suspended its senders
%%% again and again is one too. A GC of a small heap that took long was the OS's pause of the
%%% scheduler, not the process's: it counts only from a heap of ?GC_HEAP_BYTES.
%%%
%%% == Bounds and safety ==
%%% It reads one table of at most 1000 rows; the only trace is of what the stalled process
%%% receives (`os_sup_diagnose_work:received/3', within the report's budget).
-module(os_sup_diagnose_stalls).

-import(os_sup_lib_text, [fmt/2, bytes/1]).

%% API
-export([stalls/2, watched/1]).

%% a GC of a heap this large can take 50 ms; a smaller one that did was a pause of the OS's
-define(GC_HEAP_BYTES, 4194304).
%% a process paused this often, or once this long, is a finding
-define(PAUSES, 3).
-define(SCHEDULE_PAUSES, 5).
-define(LONG_PAUSE_MS, 200).
%% pauses that ended longer ago are a past step, not a finding
-define(RECENT_MS, 120000).
%% a port that suspended its senders this often is a finding
-define(BUSY_SENDS, 20).
-define(SHOWN, 2).
-define(RECEIVED_MS, 500).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The `stall' findings (at most two processes and one port), the processes blocked in
%% calls (`Crowds', `{N, Target, Pids}' of the first walk) counted as the callers waiting.
-spec stalls([tuple()], map()) -> [os_sup_diagnose:finding()].
stalls(Crowds, #{fmt := Fmt} = Ctx) ->
    Rows = os_sup_trace_sysmon:stalls(),
    Now = os_sup_lib_time:now_ms(),
    Paused = [R || {{P, K}, C, _, Max, _, _, Last, Info, _} = R <- Rows, is_pid(P),
                   node(P) =:= node(), Now - Last =< ?RECENT_MS, paused(K, C, Max, Info),
                   is_process_alive(P),
                   not os_sup_lib_label:helper_process(P)],
    %% One finding a process, its longest kind of pause.
    ByPid = lists:ukeysort(1, [{P, R} || {{P, _}, _, _, _, _, _, _, _, _} = R
                                             <- lists:reverse(lists:keysort(3, Paused))]),
    Top = lists:sublist(lists:reverse(lists:sort([{element(3, R), R} || {_, R} <- ByPid])),
                        ?SHOWN),
    [process_stall(R, Crowds, Now, Ctx) || {_, R} <- Top] ++ port_stall(Rows, Now, Fmt, Ctx).

%% @doc The figure `stalls_watched': `true', or why the pauses are not watched (the VM has one
%% system monitor, and another process may have taken it).
-spec watched(os_sup_lib_render:fmt()) -> true | binary().
watched(Fmt) ->
    Watcher = whereis(os_sup_trace_sysmon),
    case erlang:system_monitor() of
        {Watcher, _} when is_pid(Watcher) -> true;
        {Other, _} -> fmt("the system monitor is ~ts's", [os_sup_lib_label:label(Other, Fmt)]);
        _ -> <<"the system monitor is off">>
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% One pause is no pattern (a large cache built at boot pauses its builder once): a finding
%% pauses again.
paused(long_gc, C, Max, Info) ->
    heap_bytes(Info) >= ?GC_HEAP_BYTES andalso
        (C >= ?PAUSES orelse (C >= 2 andalso Max >= ?LONG_PAUSE_MS));
paused(long_schedule, C, Max, _Info) ->
    C >= ?SCHEDULE_PAUSES orelse (C >= 2 andalso Max >= 5 * ?LONG_PAUSE_MS);
paused(_, _, _, _) ->
    false.

heap_bytes(Info) when is_list(Info) ->
    Words = lists:sum([V || {K, V} <- Info, is_integer(V),
                            lists:member(K, [heap_block_size, old_heap_block_size, mbuf_size])]),
    Words * erlang:system_info(wordsize);
heap_bytes(_) ->
    0.

process_stall({{P, Kind}, C, Sum, Max, Min, First, Last, Info, {Frame, MFA}}, Crowds, Now,
              #{fmt := Fmt} = Ctx) ->
    Heap = heap_bytes(Info),
    Callers = lists:sum([N || {N, T, _} <- Crowds, T =:= P]),
    Ago = os_sup_lib_time:secs(Now - Last),
    Head = case C of
               1 -> fmt("stall: ~ts paused once by ~ts of ~b ms, ~ts ago",
                        [os_sup_lib_label:label(P, Fmt), what(Kind, one), Max, Ago]);
               _ -> fmt("stall: ~ts paused ~b times in ~ts by ~ts of ~ts ms (~ts in all, the "
                        "last ~ts ago)",
                        [os_sup_lib_label:label(P, Fmt), C,
                         os_sup_lib_time:secs(max(1000, Now - First)), what(Kind, many),
                         range(Min, Max), os_sup_lib_time:secs(Sum), Ago])
           end,
    Received = case os_sup_diagnose_work:received([P], ?RECEIVED_MS, Fmt) of
                   #{P := #{text := R}} -> ["; ", R];
                   _ -> []
               end,
    Detail = [case Kind of
                  long_gc -> fmt("; heap ~ts", [bytes(Heap)]);
                  long_schedule -> schedule_text(Info, Fmt)
              end,
              case Frame of
                  undefined when MFA =/= undefined -> ["; in ", os_sup_lib_render:mfa(MFA, Fmt)];
                  undefined -> [];
                  _ -> ["; in ", os_sup_proc_groups:frame_text(Frame, Fmt)]
              end,
              Received,
              [fmt("; ~b callers wait on it", [Callers]) || Callers > 0]],
    %% A process never caught in its own code is told by what it was started with.
    Site = case {Frame, os_sup_proc_origin:initial_call(P)} of
               {undefined, {_, _, _} = Init} -> #{mfa => Init, file => undefined, line => undefined};
               _ -> Frame
           end,
    Found = os_sup_diagnose:finding(stall, {Head, Detail}, {get_state, [{<<"pid">>, P}]}, P,
                                    Site, Ctx),
    Facts = #{pauses => C, pause_max_ms => Max, pause_min_ms => Min, pause_total_ms => Sum,
              age_ms => Now - First, callers => Callers},
    Found#{keys := os_sup_diagnose:named(P),
           facts := case Kind of
                        long_gc -> Facts#{heap_bytes => Heap};
                        long_schedule -> Facts
                    end}.

what(long_gc, one) -> <<"a garbage collection">>;
what(long_gc, many) -> <<"garbage collections">>;
what(long_schedule, one) -> <<"a schedule that did not yield">>;
what(long_schedule, many) -> <<"schedules that did not yield">>.

range(Min, Max) when Min =:= Max -> integer_to_binary(Max);
range(Min, Max) -> fmt("~b–~b", [Min, Max]).

schedule_text(Info, Fmt) when is_list(Info) ->
    case proplists:get_value(out, Info) of
        {_, _, _} = MFA -> ["; the last out in ", os_sup_lib_render:mfa(MFA, Fmt)];
        _ -> []
    end;
schedule_text(_, _) ->
    [].

%% The port whose being busy suspended the most sends, with who sent the most.
port_stall(Rows, Now, Fmt, Ctx) ->
    Busy = [{Port, K, P, C, First} || {{P, K}, C, _, _, _, First, Last, Port, _} <- Rows,
                                      K =:= busy_port orelse K =:= busy_dist_port, is_port(Port),
                                      Now - Last =< ?RECENT_MS],
    Ports = lists:foldl(fun({Port, K, P, C, First}, Acc) ->
                                {K, N, F, Senders} = maps:get(Port, Acc, {K, 0, First, []}),
                                Acc#{Port => {K, N + C, min(F, First), [{C, P} | Senders]}}
                        end, #{}, Busy),
    case lists:reverse(lists:sort([{N, Port, K, F, S} || {Port, {K, N, F, S}} <- maps:to_list(Ports),
                                                       N >= ?BUSY_SENDS])) of
        [] -> [];
        [{N, Port, K, F, Senders} | _] ->
            [{Most, Sender} | _] = lists:reverse(lists:sort(Senders)),
            Head = fmt("stall: ~b sends suspended in ~ts on the busy ~ts ~ts", [N,
                       os_sup_lib_time:secs(max(1000, Now - F)), port_kind(K),
                       port_text(Port, K, Fmt)]),
            Detail = fmt("; ~ts suspended most (~b)", [os_sup_lib_label:label(Sender, Fmt), Most]),
            Found = os_sup_diagnose:finding(stall, {Head, Detail},
                                            {process_info, [{<<"pid">>, Sender}]}, Sender,
                                            os_sup_proc_groups:app_frame(Sender), Ctx),
            [Found#{facts := #{suspended => N, age_ms => Now - F}}]
    end.

port_kind(busy_dist_port) -> <<"distribution port">>;
port_kind(_) -> <<"port">>.

port_text(Port, busy_dist_port, Fmt) ->
    Node = [N || {N, P} <- erlang:system_info(dist_ctrl), P =:= Port],
    [os_sup_lib_render:term(Port, Fmt, 40) | [[" to ", atom_to_binary(N, utf8)] || N <- Node]];
port_text(Port, _, Fmt) ->
    Name = case erlang:port_info(Port, name) of
               {name, Nm} -> [" (", Nm, ")"];
               _ -> []
           end,
    [os_sup_lib_render:term(Port, Fmt, 40) | Name].
