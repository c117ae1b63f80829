%%% @doc `os_sup_diagnose_cpu' is the CPU part of `diagnose' (`os_sup_diagnose'). It
%%% finds which processes took the node's reductions over the window, and where
%%% in the application's code they spend them, from samples of their stacks
%%% while they run (`os_sup_proc_profile'). A process that took a fifth of a
%%% scheduler or more is a finding. Reductions a second mean little alone (a
%%% scheduler-second is some millions of them for plain Erlang code, far fewer
%%% for binary work, ETS or `inspect'), so a process's share is judged against
%%% the node: its share of the node's reductions over the window times the
%%% schedulers the node's work kept busy (`scheduler_wall_time', read while
%%% `diagnose' did not walk), or, when that says less, the share of reads of it
%%% that found it running or runnable over the next 300 ms. A node whose work
%%% keeps less than a fifth of a scheduler busy has no such process. When none
%%% is and most of the node's reductions, a fifth of a scheduler's worth, went
%%% to processes that ended inside the window, the processes born from then on
%%% are read together (short-lived work: a task per request).
%%%
%%% == Bounds and safety ==
%%% Only `process_info' reads: at most 3 processes for 300 ms, or the new
%%% processes (at most 50 a read) for 500 ms, a read every 5 ms.
-module(os_sup_diagnose_cpu).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([reductions/0, app_reductions/3, app_busy/1, cpu/2, run_queue/4]).

%% a process that takes this share of a scheduler is a finding
%% schedulers this busy over the window are a run_queue finding
-define(BUSY, 0.95).
-define(CPU_SHARE, 0.2).
%% ... when it is still seen running in this share of the reads of it that follow the window
%% (its work is still going on)
-define(CPU_STILL, 0.05).
%% a process that took this share of the node's reductions is profiled (the top 3)
-define(CPU_REDS_SHARE, 0.05).
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
-spec app_busy(float() | undefined) -> float() | undefined.
app_busy(U) when is_float(U) -> U * erlang:system_info(schedulers_online);
app_busy(_) -> undefined.

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
  when App > 0, (App - Live) * 2 >= App, is_float(Busy),
       (App - Live) / App * Busy >= ?CPU_SHARE ->
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
            Found = os_sup_diagnose:finding(cpu, Line, Next, undefined, Frame, Ctx),
            [Found#{facts := #{reductions_per_s => round((App - Live) / Secs)}}]
    end;
short_lived(_, _) ->
    [].

%% The top consumers by reductions whose share of a scheduler, by their reductions or by the
%% reads of them, is at least ?CPU_SHARE. None on a node whose work kept less than that busy.
hot(#{top_reductions := Top}, #{app_reductions := App, app_busy := Busy} = Ctx)
  when not is_float(Busy); Busy >= ?CPU_SHARE ->
    Hot = [{D, P} || {D, P} <- lists:sublist(Top, 3), D > 0, D >= ?CPU_REDS_SHARE * App],
    Profiles = case Hot of
                   [] -> #{};
                   _ -> os_sup_proc_profile:sample([P || {_, P} <- Hot], ?PROFILE_MS, ?PROFILE_EVERY_MS)
               end,
    %% No process takes more than the node's work kept busy (a read finds a process running
    %% while the OS has its scheduler's thread descheduled).
    Found = [{Share, {Seen, ByReds}, D, P, Prof}
             || {D, P} <- Hot, #{P := #{samples := N, busy := B} = Prof} <- [Profiles],
                N > 0, Seen <- [B / N], ByReds <- [by_reductions(D, App, Busy)],
                Share <- [at_most(max(Seen, ByReds), Busy)],
                Share >= ?CPU_SHARE, Seen >= ?CPU_STILL],
    [cpu_finding(Share, How, D, P, Prof, App, Ctx)
     || {Share, How, D, P, Prof} <- lists:sublist(lists:reverse(lists:sort(Found)), 2)];
hot(_, _) ->
    [].

%% The share of a scheduler `D' of the node's `App' reductions stands for, when `Busy'
%% schedulers ran the node's work.
by_reductions(D, App, Busy) when is_float(Busy), App > 0 -> D / App * Busy;
by_reductions(_D, _App, _Busy) -> 0.0.

at_most(Share, Busy) when is_float(Busy) -> min(Share, Busy);
at_most(Share, _) -> Share.

cpu_finding(Share, {Seen, _ByReds}, D, P, #{samples := N} = Prof, App,
            #{fmt := Fmt, secs := Secs, app_busy := Busy} = Ctx) ->
    Where = os_sup_proc_groups:app_frame(P),
    {Code, Frame, Next} = hot_code(Prof, Where, P, Ctx),
    Node = case is_float(Busy) of
               true -> fmt(", whose work kept ~~~.2f of a scheduler busy", [Busy]);
               false -> ""
           end,
    Line = {["cpu: ", os_sup_lib_label:label(P, Fmt), os_sup_diagnose:frame_note(Where, Fmt),
             fmt(" took ~~~.2f of a scheduler: ~b % of the node's reductions (~ts reductions/s)~ts",
                 [Share, round(D * 100 / max(1, App)), si(D / Secs), Node])],
            [fmt("; running in ~b % of ~b reads over ~ts",
                 [round(Seen * 100), N, os_sup_lib_time:secs(?PROFILE_MS)]),
             Code]},
    Found = os_sup_diagnose:finding(cpu, Line, Next, P, Frame, Ctx),
    Found#{facts := #{scheduler_share => Share, reductions_per_s => round(D / Secs)},
           keys := os_sup_diagnose:named(P)}.

%% `; its code when running: …', the frame of the finding and its next call (that code).
hot_code(Prof, Where, P, #{fmt := Fmt}) ->
    case {os_sup_proc_profile:hot(Prof, 3, Fmt), top_frame(Prof)} of
        {[_ | _] = Hot, #{mfa := MFA} = F} ->
            {["; its code when running: ", lists:join(", ", Hot)], F,
             {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]}};
        _ when is_pid(P) ->
            %% The frames read are the innermost (`backtrace_depth'): deep library code (an
            %% `inspect' of a big term) hides the application's that called it.
            Lib = case library_root(Prof) of
                      undefined -> "";
                      R -> [" (", R, " and what it calls)"]
                  end,
            case Where of
                #{mfa := MFA} ->
                    {["; when running, library code", Lib, " called from ",
                      os_sup_proc_groups:frame_text(Where, Fmt)], Where,
                     {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]}};
                _ ->
                    {["; no function of the application on its stack when running: library "
                      "code", Lib], Where,
                     {process_info, [{<<"pid">>, P}]}}
            end;
        _ ->
            {"; no function of the application on their stacks when running", Where,
             {processes, [{<<"sort_by">>, <<"reductions">>}, {<<"window_ms">>, 1000}]}}
    end.

%% The outermost of the frames read when running, most often (`Elixir.Inspect.Algebra:format/3'
%% as `Inspect.Algebra.format/3'): the profile's roots, counted as terms.
library_root(#{roots := Roots}) ->
    case lists:reverse(lists:keysort(2, maps:to_list(Roots))) of
        [{{M, F, A}, _} | _] ->
            Module = case atom_to_binary(M, utf8) of
                         <<"Elixir.", Name/binary>> -> Name;
                         Name -> Name
                     end,
            fmt("~ts.~ts/~b", [Module, F, A]);
        [] -> undefined
    end;
library_root(_) ->
    undefined.

top_frame(#{frames := Frames}) ->
    case lists:reverse(lists:keysort(2, [{F, C} || {{_, _, _} = F, C} <- maps:to_list(Frames)])) of
        [{{MFA, File, Line}, _} | _] -> #{mfa => MFA, file => File, line => Line};
        [] -> undefined
    end.

si(V) when V >= 1.0e9 -> fmt("~.1fG", [V / 1.0e9]);
si(V) when V >= 1.0e6 -> fmt("~.1fM", [V / 1.0e6]);
si(V) when V >= 1.0e3 -> fmt("~.1fk", [V / 1.0e3]);
si(V) -> fmt("~b", [round(V)]).

%% @doc The `run_queue' finding: a run queue of at least twice the online schedulers at both
%% ends of the window, or schedulers ?BUSY busy.
-spec run_queue(map(), map(), float() | undefined, map()) -> [os_sup_diagnose:finding()].
run_queue(#{run_queue := R0, schedulers := S}, #{run_queue := R1}, Util, Ctx) ->
    Queued = R0 >= 2 * S andalso R1 >= 2 * S,
    Busy = is_float(Util) andalso Util >= ?BUSY,
    case Queued orelse Busy of
        false -> [];
        true ->
            Found = os_sup_diagnose:finding(run_queue,
                            fmt("run queue: ~b then ~b with ~b schedulers, ~ts busy",
                                [R0, R1, S, util_text(Util)]),
                            {processes, [{<<"sort_by">>, <<"reductions">>},
                                         {<<"window_ms">>, 1000}]},
                            undefined, undefined, Ctx),
            [Found#{facts := maps:merge(#{run_queue_start => R0, run_queue_end => R1,
                                          schedulers => S},
                                        case is_float(Util) of
                                            true -> #{scheduler_busy => Util};
                                            false -> #{}
                                        end)}]
    end.

util_text(U) when is_float(U) -> fmt("~b%", [round(U * 100)]);
util_text(_) -> <<"?">>.
