%%% @doc `os_sup_node_system_info' describes the node for tool `system_info'.
%%% That is its memory by type, the counts and limits of processes, ports, atoms
%%% and ETS tables, its schedulers and their utilisation over 100 ms, the run
%%% queue, and the versions of OTP, ERTS and Elixir.
-module(os_sup_node_system_info).

-import(os_sup_lib_reply, [ok_reply/2]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2, bytes/1]).

%% API
-export([system_info/1]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Memory, limits, schedulers, run queue.
-spec system_info(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
system_info(_Args) ->
    Mem = maps:from_list([{K, V} || {K, V} <- erlang:memory(), is_atom(K), is_integer(V)]),
    Limits = #{processes => limit(process_count, process_limit),
               ports => limit(port_count, port_limit),
               atoms => limit(atom_count, atom_limit),
               ets => limit(ets_count, ets_limit)},
    Util = scheduler_utilisation(100),
    RunQueue = try erlang:statistics(total_run_queue_lengths)
               catch _:_ -> erlang:statistics(run_queue) end,
    {Uptime, _} = erlang:statistics(wall_clock),
    Data = #{memory => Mem, limits => Limits,
             schedulers => erlang:system_info(schedulers),
             schedulers_online => erlang:system_info(schedulers_online),
             scheduler_utilisation => Util,
             run_queue => RunQueue,
             uptime_ms => Uptime,
             otp_release => to_text(erlang:system_info(otp_release)),
             erts_version => to_text(erlang:system_info(version)),
             elixir_version => elixir_version(),
             node => node()},
    MemLine = join([fmt("~ts=~ts", [K, bytes(maps:get(K, Mem))])
                    || K <- [total, processes, binary, ets, atom, code, system],
                       is_map_key(K, Mem)], <<" ">>),
    LimitLines = [fmt("~ts: ~b/~b (~.1f%)~ts", [K, C, L, P, case H of true -> <<" HIGH">>;
                                                                  false -> <<>> end])
                  || K <- [processes, ports, atoms, ets],
                     #{count := C, limit := L, percent := P, high := H} <- [maps:get(K, Limits)],
                     is_integer(C), is_integer(L)],
    UtilLine = case Util of
                   #{average := Avg, per_scheduler := Per} ->
                       fmt("scheduler utilisation (100 ms): avg ~.1f% [~ts]",
                           [Avg * 100, join([fmt("~.1f", [U * 100]) || U <- Per], <<" ">>)]);
                   _ -> <<"scheduler utilisation: unavailable">>
               end,
    Lines = [fmt("node ~ts otp ~ts erts ~ts elixir ~ts uptime ~bs",
                 [node(), maps:get(otp_release, Data), maps:get(erts_version, Data),
                  to_text(maps:get(elixir_version, Data)), Uptime div 1000]),
             <<"memory: ", MemLine/binary>>] ++ LimitLines ++
        [fmt("schedulers ~b online ~b run_queue ~b",
             [maps:get(schedulers, Data), maps:get(schedulers_online, Data), RunQueue]),
         UtilLine],
    ok_reply(Lines, Data).

%%%===================================================================
%%% Private
%%%===================================================================

limit(CountKey, LimitKey) ->
    try {erlang:system_info(CountKey), erlang:system_info(LimitKey)} of
        {C, L} when is_integer(C), is_integer(L), L > 0 ->
            P = round(C * 1000 / L) / 10,
            #{count => C, limit => L, percent => P, high => P > 80.0};
        _ -> #{count => undefined, limit => undefined, percent => undefined, high => false}
    catch
        _:_ -> #{count => undefined, limit => undefined, percent => undefined, high => false}
    end.

scheduler_utilisation(Ms) ->
    try
        Old = erlang:system_flag(scheduler_wall_time, true),
        try
            S1 = lists:sort(erlang:statistics(scheduler_wall_time)),
            timer:sleep(Ms),
            S2 = lists:sort(erlang:statistics(scheduler_wall_time)),
            N = erlang:system_info(schedulers),
            Per = [case T2 - T1 of 0 -> 0.0; DT -> (A2 - A1) / DT end
                   || {{I, A1, T1}, {I, A2, T2}} <- lists:zip(S1, S2), I =< N],
            Avg = case Per of [] -> 0.0; _ -> lists:sum(Per) / length(Per) end,
            #{average => round4(Avg), per_scheduler => [round4(U) || U <- Per],
              sample_ms => Ms}
        after
            _ = erlang:system_flag(scheduler_wall_time, Old)
        end
    catch
        _:_ -> undefined
    end.

round4(F) -> round(F * 10000) / 10000.

elixir_version() ->
    case code:is_loaded('Elixir.System') of
        {file, _} -> try to_text('Elixir.System':version()) catch _:_ -> undefined end;
        false -> undefined
    end.
