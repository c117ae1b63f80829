%%% @doc `os_sup_trace_sysmon' watches `erlang:system_monitor/2' (long GC, long
%%% schedule, large heap, busy ports) for the tool `system_monitor'. Its
%%% process, registered as `os_sup_trace_sysmon' and started on demand,
%%% keeps the last 500 events in a table, stores at most 50 a second (the
%%% rest are counted as dropped), and turns the system monitor off when the
%%% caller that turned it on goes down (the events stay readable). It never
%%% takes the system monitor from another process (kind `busy'). It loops
%%% through `?MODULE:sysmon_loop/1' and hibernates when idle (reload-safe).
-module(os_sup_trace_sysmon).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [fmt_arg/1, arg_range/5, arg_bool/2, caller_arg/1]).
-import(os_sup_lib_reply, [ok_reply/3, error_reply/2]).
-import(os_sup_lib_text, [fmt/2]).
-import(os_sup_lib_time, [now_ms/0, clock/1]).

%% API
-export([system_monitor/1]).

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

%%%===================================================================
%%% Internal entry points: system monitor
%%%===================================================================

%% @doc System monitor process entry: registers as `os_sup_trace_sysmon' (or exits) and loops.
-spec sysmon_init(pid(), reference()) -> ok.
sysmon_init(Parent, Ref) ->
    Registered = try register(?SYSMON, self()) catch _:_ -> false end,
    case Registered of
        true ->
            Tab = ets:new(?SYSMON, [ordered_set, protected]),
            Parent ! {Ref, started},
            ?MODULE:sysmon_loop(#{tab => Tab, seq => 0, active => false, settings => #{},
                                  caller => undefined, cmon => undefined, dropped => 0,
                                  win_start => now_ms(), win_count => 0, fmt => erlang});
        _ ->
            Parent ! {Ref, exists},
            ok
    end.

%% @doc System monitor loop: stores monitor events (rate-limited), answers requests.
-spec sysmon_loop(map()) -> ok.
sysmon_loop(#{cmon := CMon} = S) ->
    receive
        {monitor, Who, Kind, Info} ->
            S1 = try sysmon_event(Who, Kind, Info, S) catch _:_ -> S end,
            ?MODULE:sysmon_loop(S1);
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
    after 0 ->
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
            _ = erlang:system_monitor(Me, Opts),
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

sysmon_off(#{active := Active} = S) ->
    Me = self(),
    _ = case Active andalso erlang:system_monitor() of
            {Me, _} -> erlang:system_monitor(undefined);
            _ -> ok
        end,
    (demonitor_caller(S))#{active => false}.

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

sysmon_event(Who, Kind, Info, #{active := true, tab := Tab, seq := Seq0, fmt := Fmt} = S) ->
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
    end;
sysmon_event(_Who, _Kind, _Info, S) ->
    S.

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
