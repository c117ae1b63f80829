%%% @doc `os_sup_node_timers' counts the timers of OTP's `timer' module and
%%% says which processes they message. Every `timer:send_interval',
%%% `apply_interval' and `apply_after' (and a `send_after' to a name) is a
%%% row in a table of `timer_server''s (OTP 25 and later: one unnamed table
%%% named `timer'; before: `timer_tab', with `timer_interval_tab' repeating
%%% its intervals), so their count is the rows of its tables. An interval
%%% that nobody cancels fires for good: the node does more work each period
%%% while its input is flat. Timers of `erlang:send_after/3' and
%%% `erlang:start_timer/3' (and `timer:send_after/3' to a pid, which is one)
%%% live in the VM's timer wheel and cannot be listed or counted.
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link count/0}: the timers alive, for the vitals sample (O(1) once
%%%       the tables are known).</li>
%%%   <li>{@link targets/2}: the processes the intervals message, most
%%%       first (OTP 25 and later: `timer_server' monitors each interval's
%%%       target; before, it links to it).</li>
%%% </ul>
%%% Only `ets:info' and `process_info' are read: nothing is sent to
%%% `timer_server' or any other process.
-module(os_sup_node_timers).

%% API
-export([count/0, targets/2]).
%% run under a deadline and a heap limit
-export([targets_now/2]).

%% where the tables found are kept ({ServerPid, Tables}); replaced only when `timer_server'
%% is a new process (a `persistent_term' update is a global GC: once per restart of it)
-define(KEY, {?MODULE, tables}).
%% the targets are read from at most this many monitors, in a process this large, this long
-define(TARGETS_READ, 200000).
-define(READ_HEAP, [{max_heap_size, #{size => 20000000, kill => true, error_logger => false}}]).
-define(READ_MS, 1000).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The timers of the `timer' module alive now (the rows of `timer_server''s tables), 0
%% when it runs none (it starts with the first use), `undefined' when they cannot be read.
-spec count() -> non_neg_integer() | undefined.
count() ->
    try whereis(timer_server) of
        undefined -> 0;
        Server ->
            case sizes(tables(Server)) of
                undefined -> undefined;
                N -> N
            end
    catch
        _:_ -> undefined
    end.

%% @doc The processes the intervals message, at most `Max', most first:
%% `#{intervals, read, targets => [{Target, Count}]}' (`Target' a pid, or `{Name, Node}' for
%% an interval sent to a name); `undefined' when `timer_server' runs none or cannot be read.
-spec targets(pos_integer(), os_sup_lib_render:fmt()) -> map() | undefined.
targets(Max, _Fmt) ->
    case whereis(timer_server) of
        Server when is_pid(Server) ->
            case os_sup_lib_call:call_with_deadline({?MODULE, targets_now, [Server, Max]},
                                                    ?READ_MS, ?READ_HEAP) of
                {ok, Map} when is_map(Map) -> Map;
                _ -> undefined
            end;
        _ -> undefined
    end.

%%%===================================================================
%%% Internal entry points (run under a deadline and a heap limit)
%%%===================================================================

%% @private What `Server' monitors (OTP 25 and later: one monitor per interval, on its
%% target) or links to (before), counted by target among the first ?TARGETS_READ.
-spec targets_now(pid(), pos_integer()) -> map() | undefined.
targets_now(Server, Max) ->
    Item = case erlang:process_info(Server, monitors) of
               {monitors, [_ | _] = Ms} -> [T || {process, T} <- Ms];
               _ -> case erlang:process_info(Server, links) of
                        {links, Ls} -> [L || L <- Ls, is_pid(L), not supervisor(L)];
                        _ -> []
                    end
           end,
    Read = lists:sublist(Item, ?TARGETS_READ),
    Counts = os_sup_lib_rank:count(Read),
    #{intervals => length(Item), read => length(Read),
      targets => os_sup_lib_rank:top(Max, 2, maps:to_list(Counts))}.

%%%===================================================================
%%% Private
%%%===================================================================

%% The tables of `Server' that hold its timers, found once per `timer_server' process.
tables(Server) ->
    case persistent_term:get(?KEY, undefined) of
        {Server, Tabs} ->
            case lists:all(fun(T) -> ets:info(T, owner) =:= Server end, Tabs) of
                true -> Tabs;
                false -> find(Server)
            end;
        _ -> find(Server)
    end.

find(Server) ->
    Tabs = [T || T <- ets:all(), ets:info(T, owner) =:= Server,
                 %% its rows repeat the intervals of `timer_tab'
                 ets:info(T, name) =/= timer_interval_tab],
    _ = Tabs =/= [] andalso persistent_term:put(?KEY, {Server, Tabs}),
    Tabs.

sizes([]) -> 0;
sizes(Tabs) ->
    Sizes = [ets:info(T, size) || T <- Tabs],
    case lists:all(fun is_integer/1, Sizes) of
        true -> lists:sum(Sizes);
        false -> undefined
    end.

%% `timer_server''s supervisor is among its links, and no timer's target.
supervisor(P) ->
    case erlang:process_info(P, registered_name) of
        {registered_name, kernel_sup} -> true;
        _ -> false
    end.
