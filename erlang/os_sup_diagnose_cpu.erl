%%% @doc `os_sup_diagnose_cpu' is the CPU part of `diagnose' (`os_sup_diagnose'). It
%%% finds which processes took the node's reductions over the window, and where
%%% in the application's code they spend them, from samples of their stacks
%%% while they run (`os_sup_proc_profile'). A process that took at least 2 M
%%% reductions a second and ran in 15 % of the reads of its stack is a finding;
%%% when none did and most of the node's reductions went to processes that ended
%%% inside the window, the processes born from then on are read together
%%% (short-lived work: a task per request).
%%%
%%% == Bounds and safety ==
%%% Only `process_info' reads: at most 3 processes for 300 ms, or the new
%%% processes (at most 50 a read) for 500 ms, a read every 5 ms.
-module(os_sup_diagnose_cpu).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([reductions/0, app_reductions/3, app_busy/1, cpu/2]).

%% a process that takes this many reductions a second is profiled; one running in this share
%% of the profile's reads is a finding
-define(CPU_REDS_PER_S, 2000000).
-define(CPU_SHARE, 0.15).
-define(PROFILE_MS, 300).
-define(PROFILE_EVERY_MS, 5).
%% short-lived processes are caught running less often: read them longer
-define(PROFILE_NEW_MS, 500).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc All reductions, and this process's own (the scans'), to tell the node's work from
%% ours.
-spec reductions() -> {non_neg_integer(), non_neg_integer()}.
reductions() ->
    {All, _} = erlang:statistics(reductions),
    {reductions, Own} = erlang:process_info(self(), reductions),
    {All, Own}.

%% @doc The reductions the node's processes took between two {@link reductions/0}: all, less
%% this process's and `Walks' (the `os_sup_proc_scan' workers').
-spec app_reductions(tuple(), tuple(), non_neg_integer()) -> non_neg_integer().
app_reductions({All0, Own0}, {All1, Own1}, Walks) ->
    max(0, (All1 - All0) - (Own1 - Own0) - Walks).

%% @doc How many schedulers the node's work kept busy, from the share of their time `Util'
%% (read while this call was not walking the processes).
-spec app_busy(float() | undefined) -> float().
app_busy(U) when is_float(U) -> U * erlang:system_info(schedulers_online);
app_busy(_) -> 0.0.

%% @doc The processes that took the most reductions over the window, profiled: one that ran in a
%% good share of the reads is a finding, ending at the application's functions it ran most.
%% When none did and most of the node's reductions went to processes that ended inside the
%% window (short-lived: a task per request), the processes born from now on are profiled
%% together instead.
-spec cpu(map(), map()) -> [map()].
cpu(G1, Ctx) ->
    case hot(G1, Ctx) of
        [] -> short_lived(G1, Ctx);
        Found -> Found
    end.

short_lived(#{reductions := Live}, #{app_reductions := App, secs := Secs, app_busy := Busy,
                                     fmt := Fmt} = Ctx)
  when App - Live >= ?CPU_REDS_PER_S * Secs, (App - Live) * 2 >= App, Busy >= ?CPU_SHARE ->
    Known = maps:from_keys(erlang:processes(), []),
    #{busy := B, seen := Seen, initial_calls := Inits} = Prof =
        os_sup_proc_profile:sample_new(Known, ?PROFILE_NEW_MS, ?PROFILE_EVERY_MS),
    %% Each lives a moment: a few busy reads of them show where the work is.
    case B >= 3 of
        false -> [];
        true ->
            {Code, Frame, Next} = hot_code(Prof, undefined, undefined, Ctx),
            Spawned = os_sup_lib_rank:top(2, 2, maps:to_list(Inits)),
            Line = [fmt("cpu: short-lived processes took ~b % of the node's reductions (~ts/s) "
                        "and ended inside the window; the node's work kept ~~~.2f of a scheduler "
                        "busy; ~b of them seen in ~ts, started as ",
                        [round((App - Live) * 100 / max(1, App)), si((App - Live) / Secs),
                         Busy, Seen, os_sup_lib_time:secs(?PROFILE_NEW_MS)]),
                    lists:join(", ", [fmt("~ts (~b)", [os_sup_lib_render:mfa(MFA, Fmt), C])
                                      || {MFA, C} <- Spawned]),
                    Code],
            [os_sup_diagnose:finding(cpu, Line, Next, undefined, Frame, Ctx)]
    end;
short_lived(_, _) ->
    [].

hot(#{top_reductions := Top, reductions := All}, #{secs := Secs} = Ctx) ->
    Hot = [{D, P} || {D, P} <- lists:sublist(Top, 3), D / Secs >= ?CPU_REDS_PER_S],
    Profiles = case Hot of
                   [] -> #{};
                   _ -> os_sup_proc_profile:sample([P || {_, P} <- Hot], ?PROFILE_MS, ?PROFILE_EVERY_MS)
               end,
    Busy = [{Share, D, P, Prof} || {D, P} <- Hot, #{P := #{samples := N, busy := B} = Prof}
                                                      <- [Profiles],
                                   N > 0, Share <- [B / N], Share >= ?CPU_SHARE],
    [cpu_finding(Share, D, P, Prof, All, Ctx)
     || {Share, D, P, Prof} <- lists:sublist(lists:reverse(lists:sort(Busy)), 2)];
hot(_, _) ->
    [].

cpu_finding(Share, D, P, #{samples := N} = Prof, All, #{fmt := Fmt, secs := Secs} = Ctx) ->
    Where = os_sup_proc_groups:app_frame(P),
    {Code, Frame, Next} = hot_code(Prof, Where, P, Ctx),
    Line = ["cpu: ", os_sup_lib_label:label(P, Fmt), os_sup_diagnose:frame_note(Where, Fmt),
            fmt(" was running in ~b % of ~b reads over ~ts (~~~.2f of a scheduler), "
                "~ts reductions/s (~b % of the node's)",
                [round(Share * 100), N, os_sup_lib_time:secs(?PROFILE_MS), Share, si(D / Secs),
                 round(D * 100 / max(1, All))]),
            Code],
    os_sup_diagnose:finding(cpu, Line, Next, P, Frame, Ctx).

%% `; its code when running: …', the frame of the finding and its next call (that code).
hot_code(Prof, Where, P, #{fmt := Fmt}) ->
    case {os_sup_proc_profile:hot(Prof, 3, Fmt), top_frame(Prof)} of
        {[_ | _] = Hot, #{mfa := MFA} = F} ->
            {["; its code when running: ", lists:join(", ", Hot)], F,
             {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]}};
        _ when is_pid(P) ->
            {"; no function of the application on its stack when running (library or VM "
             "code: its stack shows which)", Where,
             {process_info, [{<<"pid">>, P}]}};
        _ ->
            {"; no function of the application on their stacks when running", Where,
             {processes, [{<<"sort_by">>, <<"reductions">>}, {<<"window_ms">>, 1000}]}}
    end.

top_frame(#{frames := Frames}) ->
    case lists:reverse(lists:keysort(2, [{F, C} || {{_, _, _} = F, C} <- maps:to_list(Frames)])) of
        [{{MFA, File, Line}, _} | _] -> #{mfa => MFA, file => File, line => Line};
        [] -> undefined
    end.

si(V) when V >= 1.0e9 -> fmt("~.1fG", [V / 1.0e9]);
si(V) when V >= 1.0e6 -> fmt("~.1fM", [V / 1.0e6]);
si(V) when V >= 1.0e3 -> fmt("~.1fk", [V / 1.0e3]);
si(V) -> fmt("~b", [round(V)]).

