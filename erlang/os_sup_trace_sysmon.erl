%%% @doc `os_sup_trace_sysmon' is the node's one owner of `erlang:system_monitor/2' (long
%%% GC, long schedule, large heap, busy ports). Its process, registered as
%%% `os_sup_trace_sysmon', is started by the first vitals sample (`watch/0') or the tool,
%%% and watches pauses all the time at a baseline (GC and schedules of 50 and 150 ms, busy
%%% ports and distribution ports): each pause is counted per process and kind in the
%%% protected table `os_sup_sysmon_stalls' (at most 1000 keys, kept 10 minutes after the
%%% last pause), which `diagnose' reads (`os_sup_diagnose_stalls'). The tool
%%% `system_monitor' is a session on top of it: its settings are merged with the baseline
%%% (the lower threshold wins), it sees only the events at or above its own, keeps the last
%%% 500 of them, stores at most 50 a second (the rest are counted as dropped), and its end
%%% (`off', or the caller going down) puts the baseline back. It never takes the system
%%% monitor from another process: the tool answers `busy', and the baseline says whose it
%%% is (a 10 s tick notices one that took it since, and takes it back only once it is free).
%%% It loops through `?MODULE:sysmon_loop/1' and hibernates when idle (reload-safe).
-module(os_sup_trace_sysmon).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [fmt_arg/1, arg_range/5, arg_bool/2, caller_arg/1]).
-import(os_sup_lib_reply, [ok_reply/3, error_reply/2]).
-import(os_sup_lib_text, [fmt/2]).
-import(os_sup_lib_time, [now_ms/0, clock/1]).

%% API
-export([system_monitor/1, watch/0, stop/0, stalls/0]).

%% Internal entry points: spawn target and reload-safe loop. Not an API.
-export([sysmon_init/2, sysmon_loop/1]).

-define(SYSMON, os_sup_trace_sysmon).

%% session limits
%% reading
-define(DEFAULT_LIMIT, 100).
-define(TEXT_BYTES, 65536).
%% system monitor
-define(SYSMON_KEEP, 500).
-define(SYSMON_RATE, 50).
%% the baseline, watched all the time: the pauses `diagnose' judges
-define(BASE_GC_MS, 50).
-define(BASE_SCHEDULE_MS, 150).
-define(STALLS, os_sup_sysmon_stalls).
-define(STALL_KEYS, 1000).
-define(STALL_KEEP_MS, 600000).
-define(TICK_MS, 10000).
%% where a paused process was is read at most this often per process and kind
-define(WHERE_EVERY_MS, 1000).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Tool `system_monitor': `long_gc_ms', `long_schedule_ms', `large_heap_words',
%% `busy_port', `busy_dist_port', `off', `limit' (1..500) -> `#{active, settings, events,
%% dropped}'. Returns quickly.
-spec system_monitor(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
system_monitor(Args) ->
    Fmt = fmt_arg(Args),
    Limit = arg_range(limit, Args, ?DEFAULT_LIMIT, 1, ?SYSMON_KEEP),
    Off = arg_bool(off, Args),
    Settings0 = #{long_gc_ms => arg_range(long_gc_ms, Args, undefined, ?MONITOR_MS_MIN, ?MONITOR_MS_MAX),
                  long_schedule_ms => arg_range(long_schedule_ms, Args, undefined, ?MONITOR_MS_MIN,
                                                       ?MONITOR_MS_MAX),
                  large_heap_words => arg_range(large_heap_words, Args, undefined,
                                                       ?MONITOR_HEAP_WORDS_MIN, ?MONITOR_HEAP_WORDS_MAX),
                  busy_port => arg_bool(busy_port, Args),
                  busy_dist_port => arg_bool(busy_dist_port, Args)},
    Settings = maps:filter(fun(_, V) -> V =/= undefined andalso V =/= false end, Settings0),
    Reply = case {Off, maps:size(Settings)} of
                {true, _} ->
                    case whereis(?SYSMON) of
                        undefined -> {ok, idle_status()};
                        Pid -> os_sup_lib_call:server_call(Pid, ?MODULE, {off, Limit})
                    end;
                {false, 0} ->
                    case whereis(?SYSMON) of
                        undefined -> {ok, idle_status()};
                        Pid -> os_sup_lib_call:server_call(Pid, ?MODULE, {status, Limit})
                    end;
                {false, _} ->
                    Opts = sysmon_opts(Settings),
                    os_sup_lib_call:server_call(
                      os_sup_lib_call:ensure_started(?SYSMON, ?MODULE, sysmon_init), ?MODULE,
                         {configure, Opts, Settings, caller_arg(Args), Fmt, Limit})
            end,
    case Reply of
        {ok, #{active := Active, settings := Set, events := Events, dropped := Dropped} = Data} ->
            Head = fmt("system_monitor ~ts~ts; ~b events kept, ~b dropped (over ~b/s)",
                       [case Active of true -> <<"on">>; false -> <<"off">> end,
                        settings_text(Set), maps:get(total, Data, length(Events)), Dropped,
                        ?SYSMON_RATE]),
            Lines = [Head | [maps:get(text, E) || E <- Events]],
            ok_reply(Lines, Data, ?TEXT_BYTES);
        {error, Kind, Msg} ->
            error_reply(Kind, Msg)
    end.

%% @doc Makes sure the baseline is watched (called with every vitals sample: one `whereis'
%% when it is).
-spec watch() -> ok.
watch() ->
    case whereis(?SYSMON) of
        undefined -> _ = os_sup_lib_call:ensure_started(?SYSMON, ?MODULE, sysmon_init), ok;
        _ -> ok
    end.

%% @doc Gives the system monitor back (`undefined') if it is ours, and ends the process: the
%% server detaches from a node it attached to.
-spec stop() -> ok.
stop() ->
    case whereis(?SYSMON) of
        undefined -> ok;
        Pid -> Pid ! {?MODULE, stop}, ok
    end.

%% @doc The pauses seen in the last 10 minutes, each `{{Who, Kind}, Count, SumMs, MaxMs, MinMs,
%% FirstMs, LastMs, Info, Where}' (monotonic ms; `Info' the last event's, `Where' `{Frame |
%% undefined, MFA | undefined}'); none when the watch has not started.
-spec stalls() -> [tuple()].
stalls() ->
    try ets:tab2list(?STALLS) catch _:_ -> [] end.

%%%===================================================================
%%% Internal entry points: system monitor
%%%===================================================================

%% @doc System monitor process entry: registers as `os_sup_trace_sysmon' (or exits) and loops.
-spec sysmon_init(pid(), reference()) -> ok.
sysmon_init(Parent, Ref) ->
    Registered = try register(?SYSMON, self()) catch _:_ -> false end,
    case Registered of
        true ->
            _ = process_flag(message_queue_data, off_heap),
            Tab = ets:new(?SYSMON, [ordered_set, protected]),
            Stalls = ets:new(?STALLS, [set, protected, named_table]),
            Parent ! {Ref, started},
            erlang:send_after(?TICK_MS, self(), {?MODULE, tick}),
            ?MODULE:sysmon_loop(
               set_monitor(#{tab => Tab, stalls => Stalls, seq => 0, active => false,
                             settings => #{}, caller => undefined, cmon => undefined,
                             dropped => 0, win_start => now_ms(), win_count => 0,
                             fmt => erlang}));
        _ ->
            Parent ! {Ref, exists},
            ok
    end.

%% @doc System monitor loop: stores monitor events (rate-limited), answers requests.
-spec sysmon_loop(map()) -> ok.
sysmon_loop(#{cmon := CMon} = S) ->
    receive
        {monitor, Who, Kind, Info} ->
            _ = try base_event(Who, Kind, Info) catch _:_ -> ok end,
            S1 = try sysmon_event(Who, Kind, Info, S) catch _:_ -> S end,
            ?MODULE:sysmon_loop(S1);
        {?MODULE, tick} ->
            erlang:send_after(?TICK_MS, self(), {?MODULE, tick}),
            Cutoff = now_ms() - ?STALL_KEEP_MS,
            _ = ets:select_delete(?STALLS, [{{'_', '_', '_', '_', '_', '_', '$1', '_', '_'},
                                             [{'<', '$1', Cutoff}], [true]}]),
            ?MODULE:sysmon_loop(set_monitor(S));
        {?MODULE, stop} ->
            Me = self(),
            _ = case erlang:system_monitor() of
                    {Me, _} -> erlang:system_monitor(undefined);
                    _ -> ok
                end,
            ok;
        {?MODULE, Ref, From, Request} when is_pid(From) ->
            {Reply, S1} = try sysmon_handle(Request, S)
                          catch C:R ->
                                  {{error, internal,
                                    fmt("system monitor failed: ~tp:~tP", [C, R, 10])}, S}
                          end,
            From ! {Ref, Reply},
            ?MODULE:sysmon_loop(S1);
        {'DOWN', CMon, process, _, _} ->
            ?MODULE:sysmon_loop(sysmon_off(S));
        _Other ->
            ?MODULE:sysmon_loop(S)
    after 5000 ->
            erlang:hibernate(?MODULE, sysmon_loop, [S])
    end.

%%%===================================================================
%%% Private: system monitor
%%%===================================================================

idle_status() ->
    #{active => false, settings => #{}, events => [], dropped => 0, total => 0,
      owner => current_monitor()}.

current_monitor() ->
    case erlang:system_monitor() of
        {Pid, _} when is_pid(Pid) -> list_to_binary(pid_to_list(Pid));
        _ -> undefined
    end.

settings_text(Set) when map_size(Set) =:= 0 ->
    <<>>;
settings_text(Set) ->
    <<" (", (iolist_to_binary(lists:join(<<", ">>,
                                         [fmt("~ts=~tp", [K, V])
                                          || {K, V} <- lists:sort(maps:to_list(Set))])))/binary,
      ")">>.

sysmon_opts(Settings) ->
    lists:append([[{long_gc, V} || {long_gc_ms, V} <- maps:to_list(Settings)],
                  [{long_schedule, V} || {long_schedule_ms, V} <- maps:to_list(Settings)],
                  [{large_heap, V} || {large_heap_words, V} <- maps:to_list(Settings)],
                  [busy_port || maps:get(busy_port, Settings, false)],
                  [busy_dist_port || maps:get(busy_dist_port, Settings, false)]]).

sysmon_handle({configure, Opts, Settings, Caller, Fmt, Limit}, S) ->
    Me = self(),
    case erlang:system_monitor() of
        {Other, _} when Other =/= Me ->
            {{error, busy, fmt("another process (~ts) is the system monitor of this node; "
                               "it would be replaced, so stop that tool first",
                               [pid_to_list(Other)])}, S};
        _ ->
            _ = erlang:system_monitor(Me, merged(Opts)),
            S1 = demonitor_caller(S),
            CMon = case is_pid(Caller) of
                       true -> erlang:monitor(process, Caller);
                       false -> undefined
                   end,
            S2 = S1#{active => true, settings => Settings, caller => Caller, cmon => CMon,
                     fmt => Fmt},
            {{ok, sysmon_status(Limit, S2)}, S2}
    end;
sysmon_handle({off, Limit}, S) ->
    S1 = sysmon_off(S),
    {{ok, sysmon_status(Limit, S1)}, S1};
sysmon_handle({status, Limit}, S) ->
    {{ok, sysmon_status(Limit, S)}, S};
sysmon_handle(_Other, S) ->
    {{error, bad_args, <<"unknown system monitor request">>}, S}.

sysmon_off(S) ->
    set_monitor((demonitor_caller(S))#{active => false, settings => #{}}).

%% The baseline, merged with the tool's settings while a session is on; never set when
%% another process owns the monitor (`diagnose' says whose it is).
set_monitor(#{active := Active, settings := Settings} = S) ->
    Me = self(),
    Opts = merged(case Active of
                      true -> sysmon_opts(Settings);
                      false -> []
                  end),
    _ = case erlang:system_monitor() of
            {Other, _} when is_pid(Other), Other =/= Me -> ok;
            {Me, Opts} -> ok;
            _ -> erlang:system_monitor(Me, Opts)
        end,
    S.

merged(Opts) ->
    Base = [{long_gc, ?BASE_GC_MS}, {long_schedule, ?BASE_SCHEDULE_MS}, busy_port,
            busy_dist_port],
    Lower = fun(K, Default) -> min(Default, proplists:get_value(K, Opts, Default)) end,
    [{long_gc, Lower(long_gc, ?BASE_GC_MS)}, {long_schedule, Lower(long_schedule, ?BASE_SCHEDULE_MS)}
     | [O || {large_heap, _} = O <- Opts]] ++ [O || O <- Base, is_atom(O)].

%% A pause at or above the baseline, counted by process (or port) and kind.
base_event(Who, Kind, Info) ->
    Ms = case Kind of
             _ when Kind =:= long_gc; Kind =:= long_schedule -> proplists:get_value(timeout, Info, 0);
             _ -> 0
         end,
    Base = case Kind of
               long_gc -> Ms >= ?BASE_GC_MS;
               long_schedule -> Ms >= ?BASE_SCHEDULE_MS;
               busy_port -> true;
               busy_dist_port -> true;
               _ -> false
           end,
    Base andalso count_pause({Who, Kind}, Ms, Info, now_ms()).

count_pause(Key, Ms, Info, Now) ->
    case ets:lookup(?STALLS, Key) of
        [{_, C, Sum, Max, Min, First, Last, _, {Frame0, _} = Where0}] ->
            %% An application frame seen once is kept: the next read may find the process
            %% back in its library's loop.
            Where = case Now - Last >= ?WHERE_EVERY_MS andalso where(element(1, Key)) of
                        false -> Where0;
                        {undefined, MFA} -> {Frame0, MFA};
                        Read -> Read
                    end,
            ets:insert(?STALLS, {Key, C + 1, Sum + Ms, max(Max, Ms), min(Min, Ms), First, Now,
                                 Info, Where});
        [] ->
            ets:info(?STALLS, size) =< ?STALL_KEYS andalso
                ets:insert(?STALLS, {Key, 1, Ms, Ms, Ms, Now, Now, Info, where(element(1, Key))})
    end.

%% Where a paused process is just after its pause: its application frame and function.
where(Pid) when is_pid(Pid) ->
    case os_sup_lib_proc:pinfo_items(Pid, [current_function, current_stacktrace]) of
        [{_, MFA}, {_, Stack}] -> {os_sup_proc_origin:app_frame(Stack), MFA};
        _ -> {undefined, undefined}
    end;
where(_) ->
    {undefined, undefined}.

demonitor_caller(#{cmon := undefined} = S) ->
    S;
demonitor_caller(#{cmon := CMon} = S) ->
    erlang:demonitor(CMon, [flush]),
    S#{cmon => undefined, caller => undefined}.

sysmon_status(Limit, #{tab := Tab, active := Active, settings := Set, dropped := Dropped}) ->
    Events = last_n(Tab, Limit),
    #{active => Active, settings => Set, events => Events, dropped => Dropped,
      total => ets:info(Tab, size), owner => current_monitor()}.

last_n(Tab, N) ->
    last_n(Tab, ets:last(Tab), N, []).

last_n(_Tab, '$end_of_table', _N, Acc) -> Acc;
last_n(_Tab, _Key, 0, Acc) -> Acc;
last_n(Tab, Key, N, Acc) ->
    [{_, E}] = ets:lookup(Tab, Key),
    last_n(Tab, ets:prev(Tab, Key), N - 1, [E | Acc]).

sysmon_event(Who, Kind, Info, #{active := true, settings := Set} = S) ->
    case asked(Kind, Info, Set) of
        true -> session_event(Who, Kind, Info, S);
        false -> S
    end;
sysmon_event(_Who, _Kind, _Info, S) ->
    S.

%% The session sees only what it asked for (the baseline may be lower).
asked(long_gc, Info, #{long_gc_ms := Ms}) -> proplists:get_value(timeout, Info, 0) >= Ms;
asked(long_schedule, Info, #{long_schedule_ms := Ms}) -> proplists:get_value(timeout, Info, 0) >= Ms;
asked(large_heap, _Info, #{large_heap_words := _}) -> true;
asked(busy_port, _Info, Set) -> maps:get(busy_port, Set, false);
asked(busy_dist_port, _Info, Set) -> maps:get(busy_dist_port, Set, false);
asked(_, _, _) -> false.

session_event(Who, Kind, Info, #{tab := Tab, seq := Seq0, fmt := Fmt} = S) ->
    Now = now_ms(),
    S1 = case Now - maps:get(win_start, S) >= 1000 of
             true -> S#{win_start => Now, win_count => 0};
             false -> S
         end,
    case maps:get(win_count, S1) >= ?SYSMON_RATE of
        true ->
            S1#{dropped => maps:get(dropped, S1) + 1};
        false ->
            Seq = Seq0 + 1,
            Us = os:system_time(microsecond),
            Time = clock(Us),
            {WhoBin, Name, Current} = who(Who, Fmt),
            InfoBin = os_sup_lib_render:bound(info_text(Info, Fmt), 400),
            Text = iolist_to_binary([Time, " ", atom_to_binary(Kind, utf8), " ", WhoBin,
                                     case Name of undefined -> []; _ -> [" (", Name, ")"] end,
                                     case Current of undefined -> []; _ -> [" in ", Current] end,
                                     " ", InfoBin]),
            ets:insert(Tab, {Seq, #{seq => Seq, time => Time, time_us => Us, kind => Kind,
                                    pid => WhoBin, name => Name, current => Current,
                                    info => InfoBin, text => Text}}),
            _ = ets:delete(Tab, Seq - ?SYSMON_KEEP),
            S1#{seq => Seq, win_count => maps:get(win_count, S1) + 1}
    end.

who(Pid, Fmt) when is_pid(Pid) ->
    Items = try erlang:process_info(Pid, [registered_name, current_function]) of
                L when is_list(L) -> L;
                _ -> []
            catch _:_ -> []
            end,
    Name = case lists:keyfind(registered_name, 1, Items) of
               {_, N} when is_atom(N), N =/= [] -> os_sup_lib_render:name(N, Fmt);
               _ -> undefined
           end,
    Current = case lists:keyfind(current_function, 1, Items) of
                  {_, {_, _, _} = MFA} -> os_sup_lib_render:mfa(MFA, Fmt);
                  _ -> undefined
              end,
    {os_sup_lib_render:pid(Pid, Fmt), Name, Current};
who(Other, Fmt) ->
    {os_sup_lib_render:term(Other, Fmt, 100), undefined, undefined}.

info_text(Info, Fmt) when is_list(Info) ->
    iolist_to_binary(lists:join(<<" ">>, [case I of
                                               {K, V} when is_atom(K) ->
                                                   fmt("~ts=~ts", [K, os_sup_lib_render:term(V, Fmt, 120)]);
                                               _ -> os_sup_lib_render:term(I, Fmt, 120)
                                           end || I <- Info]));
info_text(Port, Fmt) ->
    os_sup_lib_render:term(Port, Fmt, 200).
