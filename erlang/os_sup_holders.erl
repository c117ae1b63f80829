%%%-------------------------------------------------------------------
%%% @doc `os_sup_holders' finds who holds what grows, for `diagnose': the
%%% processes holding the most refc binary bytes, the processes whose
%%% memory grew the most over the window (and what grew in them), the
%%% owners of the most ETS tables, the owners of the most ports (by port
%%% name), and, for atoms, which no scan can attribute, the one call that
%%% can (a bounded trace of the atom-making functions, whose events name
%%% the calling function).
%%%
%%% Only `process_info', `ets:info' and `erlang:port_info' are used:
%%% nothing is sent to any process. Each scan of all processes stops at
%%% ?SCAN_MS and says so (`truncated'); at most ?TOP holders each.
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link find/3}: the holders of each suspect; for process memory,
%%%       from the largest processes of the two scans `diagnose' makes
%%%       (`os_sup_groups'), so it walks the processes no third time.</li>
%%% </ul>
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_holders).

-import(os_sup_lib, [fmt/2]).

%% API
-export([find/3]).

-define(SCAN_MS, 1000).
-define(TOP, 3).
-define(EXAMPLES, 3).

-type suspect() :: binary | process_memory | ets_tables | ets_memory | ports | atoms.
-export_type([suspect/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc `#{Suspect => Holders}' for each suspect (see the module doc).
-spec find([suspect()], map(), os_sup_render:fmt()) -> map().
find(Suspects, Snapshot, Fmt) ->
    maps:from_list([{S, holders(S, Snapshot, Fmt)} || S <- lists:usort(Suspects)]).

%%%===================================================================
%%% Private
%%%===================================================================

holders(binary, _Snapshot, Fmt) ->
    Word = erlang:system_info(wordsize),
    {Rows, Truncated} =
        scan(fun(P) ->
                     case erlang:process_info(P, [binary, memory, garbage_collection_info]) of
                         [{binary, Bins}, {memory, Own}, {_, GC}] ->
                             %% The virtual binary heaps count what the list may miss: a
                             %% binary built by appending is listed only after a full GC.
                             Virtual = Word * (proplists:get_value(bin_vheap_size, GC, 0)
                                               + proplists:get_value(bin_old_vheap_size, GC, 0)),
                             Listed = lists:sum([Size || {_, Size, _} <- Bins]),
                             case max(Listed, Virtual) of
                                 0 -> undefined;
                                 Bytes -> {length(Bins), Bytes, Own}
                             end;
                         _ -> undefined
                     end
             end),
    Top = top(?TOP, 3, [{P, C, B, Own} || {P, {C, B, Own}} <- Rows]),
    marked([(who(P, Fmt))#{refc_count => C, refc_bytes => B, heap_bytes => Own}
            || {P, C, B, Own} <- Top], Truncated);
holders(process_memory, Snapshot, Fmt) ->
    %% The largest processes at both ends of the window, from the scans `diagnose' makes.
    Before = maps:from_list(maps:get(largest_before, Snapshot, [])),
    Now = maps:get(largest_after, Snapshot, []),
    Truncated = maps:get(truncated, Snapshot, false),
    Grew = [{P, M, case Before of
                       #{P := M0} -> M - M0;
                       _ -> undefined
                   end} || {P, M} <- Now],
    %% The largest that did not lose half its memory in the window (a burst freed): a heap
    %% grows in steps, so over a short window the process that grows for good may not have
    %% stepped, or may just have been collected (a GC of a growing heap frees a little).
    Top = top(?TOP, 2, [G || {P, M, D} = G <- Grew, not os_sup_lib:helper_process(P),
                             D =:= undefined orelse D >= 0 orelse -D < M]),
    marked([maps:merge((who(P, Fmt))#{memory => M, grew => D}, inside(P)) || {P, M, D} <- Top],
           Truncated);
holders(ets_tables, _Snapshot, Fmt) ->
    Owned = lists:foldl(fun(T, Acc) ->
                                case ets:info(T, owner) of
                                    O when is_pid(O) -> maps:update_with(O, fun(L) -> [T | L] end,
                                                                         [T], Acc);
                                    _ -> Acc
                                end
                        end, #{}, ets:all()),
    Top = top(?TOP, 2, [{O, length(Ts), Ts} || {O, Ts} <- maps:to_list(Owned)]),
    [(who(O, Fmt))#{tables => N,
                    examples => [table_name(T, Fmt) || T <- lists:sublist(Ts, ?EXAMPLES)]}
     || {O, N, Ts} <- Top];
holders(ets_memory, _Snapshot, Fmt) ->
    Word = erlang:system_info(wordsize),
    Sized = [{T, Rows, M * Word} || T <- ets:all(), Rows <- [ets:info(T, size)], is_integer(Rows),
                                    M <- [ets:info(T, memory)], is_integer(M)],
    [#{table => table_name(T, Fmt), rows => Rows, bytes => Bytes,
       owner => case ets:info(T, owner) of
                    O when is_pid(O) -> maps:get(label, who(O, Fmt));
                    _ -> undefined
                end}
     || {T, Rows, Bytes} <- top(?TOP, 3, Sized)];
holders(ports, _Snapshot, Fmt) ->
    Groups = lists:foldl(fun(Port, Acc) ->
                                 case {erlang:port_info(Port, connected), erlang:port_info(Port, name)} of
                                     {{connected, O}, {name, N}} ->
                                         maps:update_with({O, N}, fun(C) -> C + 1 end, 1, Acc);
                                     _ -> Acc
                                 end
                         end, #{}, erlang:ports()),
    [(who(O, Fmt))#{name => unicode:characters_to_binary(N), count => C}
     || {{O, N}, C} <- top(?TOP, 2, maps:to_list(Groups))];
holders(atoms, _Snapshot, _Fmt) ->
    %% No scan tells who made an atom: trace the functions that make them, a few seconds.
    #{next => #{tool => trace,
                args => [[<<"module">>, <<"erlang">>], [<<"function">>, <<"binary_to_atom">>],
                         [<<"max_events">>, 20], [<<"duration_ms">>, 5000]]},
      note => <<"atoms cannot be traced to their creator by a scan; the trace's events name "
                "the calling function (also try list_to_atom)">>}.

%% {Pid, Value} for every process answering `F' within ?SCAN_MS, and whether it stopped early.
scan(F) ->
    Deadline = erlang:monotonic_time(millisecond) + ?SCAN_MS,
    scan(erlang:processes(), F, Deadline, 0, []).

scan([], _F, _Deadline, _N, Acc) -> {Acc, false};
scan([P | Rest], F, Deadline, N, Acc) ->
    case N rem 1000 =:= 0 andalso erlang:monotonic_time(millisecond) > Deadline of
        true -> {Acc, true};
        false ->
            case F(P) of
                undefined -> scan(Rest, F, Deadline, N + 1, Acc);
                V -> scan(Rest, F, Deadline, N + 1, [{P, V} | Acc])
            end
    end.

%% The ?TOP (or N) tuples with the largest element `Pos'.
top(N, Pos, Tuples) ->
    lists:sublist(lists:reverse(lists:keysort(Pos, Tuples)), N).

who(P, Fmt) ->
    Frame = os_sup_groups:app_frame(P),
    #{pid => os_sup_render:pid(P, Fmt), label => os_sup_waits_render:label(P, Fmt),
      function => case Frame of
                      undefined -> undefined;
                      _ -> os_sup_groups:frame_text(Frame, Fmt)
                  end}.

%% What can grow in a process: its heap, mailbox, monitors, links and dictionary; and
%% whether it is an OTP process, whose state `get_state' can show (nothing is sent here).
inside(P) ->
    case erlang:process_info(P, [total_heap_size, message_queue_len, monitors, links,
                                 dictionary]) of
        [{_, Heap}, {_, Queue}, {_, Monitors}, {_, Links}, {_, Dict}] ->
            #{heap_words => Heap, mailbox => Queue, monitors => length(Monitors),
              links => length(Links), dictionary => length(Dict),
              otp => case os_sup_otp:otp_behaviour(P) of {ok, _} -> true; _ -> false end};
        _ -> #{}
    end.

table_name(T, Fmt) ->
    case ets:info(T, name) of
        Name when is_atom(Name), not is_reference(T) -> os_sup_render:name(Name, Fmt);
        Name when is_atom(Name) -> fmt("~ts (unnamed)", [os_sup_render:name(Name, Fmt)]);
        _ -> os_sup_render:term(T, Fmt, 80)
    end.

marked(Rows, false) -> Rows;
marked(Rows, true) -> [R#{truncated => true} || R <- Rows].
