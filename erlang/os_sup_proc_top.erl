%%% @doc `os_sup_proc_top' ranks the node's processes for tool
%%% `processes', the way `recon' does. The top N by an attribute, absolute
%%% or over a window (like `recon:proc_count/2' and `proc_window/3'), or
%%% processes counted in groups (`group_by', `os_sup_proc_groups'), where a
%%% leak of small processes shows. Scans skip processes that die mid-way;
%%% the helper's own processes are left out, an eval's are not.
-module(os_sup_proc_top).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text/2, arg_choice/4, fmt_arg/1]).
-import(os_sup_lib_proc, [pinfo_items/2, dict_initial_call/1, proc_dict/1]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2, bytes/1]).

%% API
-export([processes/1]).

-define(GROUPS_SCAN_MS, 2000).

%%%===================================================================
%%% API
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

%%%===================================================================
%%% Private
%%%===================================================================

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
    Sample = maps:get(sample, After),
    Head = fmt("~b groups of ~b processes by ~ts~ts~ts~ts",
               [length(Ranked), maps:get(scanned, After), By, window_note(Window),
                case Sample of
                    1 -> "";
                    _ -> fmt(" (a sample: ~b of ~b processes read, counts scaled)",
                             [maps:get(scanned, After), maps:get(listed, After)])
                end,
                case Truncated of
                    true -> " (scan TRUNCATED at 2 s)";
                    false -> ""
                end]),
    ok_reply([Head | [group_line(R) || R <- Rows]],
             #{rows => [], groups => Rows, group_by => By, sort_by => SortBy,
               window_ms => Window, total => erlang:system_info(process_count),
               scanned => maps:get(scanned, After), truncated => Truncated, sample => Sample,
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
    [{P, V} || P <- Pids, {_, V} <- [pinfo(P, Item)], is_integer(V)].

binary_memory(P) ->
    case pinfo(P, binary) of
        {binary, Bins} when is_list(Bins) -> lists:sum([S || {_, S, _} <- Bins]);
        _ -> undefined
    end.

%% erlang:process_info/2, `undefined' when it raises (a pid of another node).
pinfo(P, Item) ->
    try erlang:process_info(P, Item) catch _:_ -> undefined end.

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
