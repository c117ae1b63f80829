%%% @doc `os_sup_diagnose_holders' finds who holds what grows, for `diagnose'. It
%%% names the processes holding the most refc binary bytes, the processes whose
%%% memory grew the most over the window (and what grew in them), the groups of
%%% processes that grew in it (where the count of processes grows), the owners of
%%% the most ETS tables, the owners of the most ports (by port name), the
%%% persistent terms (memory filed under `system'), the timers of OTP's
%%% `timer' module (the processes their intervals message and the
%%% application function that starts them), the processes that took the most
%%% reductions over the window (where the node's work rises), and, for atoms,
%%% open files
%%% and large persistent terms, which no scan can attribute, the one call that
%%% can (a bounded trace of the functions that make them, whose events name the
%%% calling function).
%%%
%%% Only `process_info', `ets:info' and `erlang:port_info' are used:
%%% nothing is sent to any process. Each scan of all processes stops at
%%% ?SCAN_MS and says so (`truncated'); at most ?TOP holders each.
-module(os_sup_diagnose_holders).

-import(os_sup_lib_rank, [count/1, top/3]).
-import(os_sup_lib_text, [fmt/2]).
-import(os_sup_lib_time, [secs/1]).

%% API
-export([find/3, table_writers/2, callers_of/2, table_name/2]).
%% run under a deadline and a heap limit
-export([dictionary_now/1]).

-define(SCAN_MS, 1000).
-define(TOP, 3).
-define(EXAMPLES, 3).
%% a process whose own memory grew this much over the window holds what grows
-define(GREW_BYTES, 16384).
%% a process the history saw grow this much over its readings holds what grows
-define(HISTORY_GREW, 1048576).
%% ... and this much whatever the process
-define(GREW_STEP, 65536).
%% a dictionary is read (copied) by a throw-away process this large, this long at most
-define(DICT_HEAP, [{max_heap_size, #{size => 20000000, kill => true, error_logger => false}}]).
-define(DICT_MS, 1000).
%% what a process monitors, or is monitored by, is grouped over this many
-define(MONITORS_READ, 10000).
%% a holder with this many monitors or links has what made them traced, this long
-define(MANY, 1000).
-define(MAKERS_MS, 1000).
%% the functions that start timers are traced this long (slow growth: one a second)
-define(TIMERS_MS, 2000).
%% persistent terms this large are traced to who puts them
-define(PERSISTENT_BYTES, 8 * 1024 * 1024).
%% a table's binaries are listed when it has at most this many rows
-define(TABLE_ROWS_READ, 200000).

-type suspect() :: binary | process_memory | ets_tables | ets_memory | ports | atoms | files
                 | persistent_terms | process_groups | timers | work.
-export_type([suspect/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc `#{Suspect => Holders}' for each suspect (see the module doc).
-spec find([suspect()], map(), os_sup_lib_render:fmt()) -> map().
find(Suspects, Snapshot, Fmt) ->
    maps:from_list([{S, holders(S, Snapshot, Fmt)} || S <- lists:usort(Suspects)]).

%% @doc Who writes to table `T': the application function that inserts into it (a short trace
%% of `ets:insert' on it in every process), or, when only library code does (the table of a
%% library server such as `timer_server'), the application function that calls its owner.
%% `#{text, target}' (`target' when a function was found).
-spec table_writers(ets:tab(), os_sup_lib_render:fmt()) -> map().
table_writers(T, Fmt) ->
    Owner = ets:info(T, owner),
    ok = os_sup_diagnose_makers:likely([Owner]),
    makers(all, {ets_insert, T}, Owner, Fmt).

%% @doc `#{text, target}': the application function that calls `Server' most, when `Server'
%% is a library server (it runs no code of the application's) that makes things for its
%% callers (`timer_server' timers, `file_server_2' io servers), from a short trace of the
%% calls to it; `undefined' when it is not one or no call from the application was seen.
-spec callers_of(term(), os_sup_lib_render:fmt()) -> map() | undefined.
callers_of(Server, Fmt) ->
    case is_pid(Server) andalso library_server(Server) andalso
        os_sup_diagnose_makers:find(all, {calls_to, Server}, ?MAKERS_MS) of
        {ok, [_ | _] = Sites, _, Ms} ->
            Text = site_text(Sites, Ms, Fmt),
            Text#{text := fmt("~ts, through ~ts",
                              [maps:get(text, Text), os_sup_lib_label:label(Server, Fmt)])};
        _ -> undefined
    end.

%%%===================================================================
%%% Internal entry points (run under a deadline and a heap limit)
%%%===================================================================

%% @private Keys and bytes of `P''s dictionary (run under a deadline and a heap limit).
-spec dictionary_now(pid()) -> {non_neg_integer(), non_neg_integer()}.
dictionary_now(P) ->
    case erlang:process_info(P, dictionary) of
        {dictionary, Dict} ->
            {length(Dict), erts_debug:flat_size(Dict) * erlang:system_info(wordsize)};
        _ -> {0, 0}
    end.

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
    Procs = [{B, (who(P, Fmt))#{refc_count => C, refc_bytes => B, heap_bytes => Own,
                                otp => otp(P), raw_pid => P}}
             || {P, C, B, Own} <- Top],
    %% ETS tables hold refc binaries too (a cache of slices): ranked with the processes.
    Tables = [{B, Row} || {B, Row} <- table_binaries(Fmt)],
    Ranked = [Row || {_, Row} <- top(?TOP, 1, Procs ++ Tables)],
    Shown = case Ranked of
                [#{table := _} = First | Rest] -> [inserted_by(First, Fmt) | Rest];
                %% An OTP process keeps them in its state: which part, and who puts them there.
                [#{otp := true, raw_pid := P} = First | Rest] ->
                    case os_sup_proc_state:growth(P, ?MAKERS_MS, Fmt) of
                        undefined -> [First | Rest];
                        Growth -> [First#{state_growth => Growth} | Rest]
                    end;
                _ -> Ranked
            end,
    marked([maps:remove(raw_pid, R) || R <- Shown], Truncated);
holders(process_memory, #{grown := [_ | _] = Grown} = Snapshot, Fmt) ->
    %% Who grew, not who is large: the processes whose own memory grew the most over the
    %% window (monitors and links included, which `erlang:memory()' files under `system').
    Sizes = maps:from_list(maps:get(largest_after, Snapshot, [])),
    case [{P, D} || {D, P} <- Grown, D >= ?GREW_BYTES, not os_sup_lib_label:helper_process(P),
                    significant(P, D)] of
        [] -> holders(process_memory, maps:remove(grown, Snapshot), Fmt);
        Top ->
            Rows = [maps:merge((who(P, Fmt))#{memory => own_memory(P, Sizes), grew => D,
                                               ranked_by => growth}, inside(P, Fmt))
                    || {P, D} <- lists:sublist(Top, ?TOP)],
            marked(explained([P || {P, _} <- Top], Rows, Fmt), maps:get(truncated, Snapshot, false))
    end;
holders(process_memory, Snapshot, Fmt) ->
    %% None grew in the window: the processes the history saw grow over minutes (a heap steps
    %% up a minute apart), else the largest.
    case grown_over_history() of
        [] -> largest_processes(Snapshot, Fmt);
        Rose ->
            Rows = [maps:merge((who(P, Fmt))#{memory => M, grew => Rise, over_ms => Over,
                                               ranked_by => history}, inside(P, Fmt))
                    || {Rise, Over, M, P} <- lists:sublist(Rose, ?TOP)],
            marked(explained([P || {_, _, _, P} <- Rose], Rows, Fmt),
                   maps:get(truncated, Snapshot, false))
    end;
holders(ets_tables, Snapshot, Fmt) ->
    Owned = by_owner(app_tables()),
    %% Who made tables in the window, else who owns the most.
    Made = by_owner([T || T <- maps:keys(maps:get(ets_after, Snapshot, #{})),
                          not maps:is_key(T, maps:get(ets_before, Snapshot, #{}))]),
    Ranked = case maps:size(Made) of
                 0 -> Owned;
                 _ -> maps:map(fun(O, New) -> New ++ (maps:get(O, Owned, []) -- New) end, Made)
             end,
    Top = top(?TOP, 2, [{O, length(maps:get(O, Owned, Ts)), Ts} || {O, Ts} <- maps:to_list(Ranked)]),
    made_by(ets_tables, [O || {O, _, _} <- Top],
            [(who(O, Fmt))#{tables => N,
                            examples => [table_name(T, Fmt) || T <- lists:sublist(Ts, ?EXAMPLES)]}
             || {O, N, Ts} <- Top], Fmt);
holders(ets_memory, #{ets_before := E0, ets_after := E1}, Fmt) ->
    %% The owner whose tables grew in the window (a table made since counts whole), else the
    %% largest tables: the largest is often a library's that holds still.
    Grown = [{B1 - B0, T} || {T, {_, B1}} <- maps:to_list(E1),
                             {_, B0} <- [maps:get(T, E0, {0, 0})], B1 > B0],
    Owners = maps:to_list(by_owner([T || {_, T} <- Grown])),
    Gains = [{lists:sum([D || {D, T} <- Grown, lists:member(T, Ts)]), O, Ts} || {O, Ts} <- Owners],
    case [G || {Gain, _, _} = G <- Gains, Gain >= ?GREW_BYTES] of
        [] -> largest_tables(Fmt);
        Grew ->
            [begin
                 {_, T} = lists:max([{D, T1} || {D, T1} <- Grown, lists:member(T1, Ts)]),
                 {Rows, Bytes} = maps:get(T, E1),
                 (who(O, Fmt))#{table => table_name(T, Fmt), rows => Rows, bytes => Bytes,
                                owner => maps:get(label, who(O, Fmt)), ranked_by => growth,
                                grew => Gain, tables => length(Ts)}
             end || {Gain, O, Ts} <- top(?TOP, 1, Grew)]
    end;
holders(ets_memory, _Snapshot, Fmt) ->
    largest_tables(Fmt);
holders(process_groups, #{groups := Groups}, Fmt) ->
    %% The processes the server saw grow over minutes: the groups that grew in the window
    %% (too little in one window to be a leak on their own), where their processes are.
    [(who(S, Fmt))#{group => os_sup_proc_groups:describe(origin, G, Fmt), change => D,
                     count => C, born => maps:get(born, G, undefined),
                     died => maps:get(died, G, undefined), waits_on => waits_on(S)}
     || #{key := K, delta := D, count := C, sample := S} = G <- lists:sublist(Groups, ?TOP),
        K =/= other, is_integer(D), D > 0, is_pid(S)];
holders(process_groups, _Snapshot, _Fmt) ->
    [];
holders(ports, _Snapshot, Fmt) ->
    Groups = count([{O, N} || Port <- erlang:ports(),
                              {{connected, O}, {name, N}} <- [{erlang:port_info(Port, connected),
                                                               erlang:port_info(Port, name)}]]),
    Top = top(?TOP, 2, maps:to_list(Groups)),
    made_by(ports, [O || {{O, _}, _} <- Top],
            [(who(O, Fmt))#{name => unicode:characters_to_binary(N), count => C}
             || {{O, N}, C} <- Top], Fmt);
holders(persistent_terms, _Snapshot, Fmt) ->
    %% Memory `erlang:memory()' files under `system' that no process holds: persistent terms
    %% (a term put per request is never freed); who puts them when they hold much of it.
    #{count := Count, memory := Bytes} = persistent_term:info(),
    Info = #{count => Count, bytes => Bytes,
             share => round(Bytes * 100 / max(1, erlang:memory(total)))},
    case Bytes >= ?PERSISTENT_BYTES of
        true -> Info#{made_by => makers(all, persistent_terms, Fmt)};
        false -> Info
    end;
holders(timers, _Snapshot, Fmt) ->
    case os_sup_node_timers:count() of
        %% None alive (or not readable): nothing to trace.
        N when N =:= 0; N =:= undefined -> #{count => N, targets => []};
        _ -> timers(Fmt)
    end;
holders(work, #{busiest := Top, window_s := Secs}, Fmt) ->
    %% The server saw the node's work rise on flat input: the processes busiest in the window
    %% (the walks' reductions deltas), the helper's own left out.
    Rows = [{P, (who(P, Fmt))#{reductions_per_s => D / Secs}}
            || {D, P} <- lists:sublist([T || {_, P} = T <- Top, is_pid(P),
                                             not os_sup_lib_label:helper_process(P)], ?TOP)],
    %% What drives them: the messages each receives, by shape, and what each costs.
    Received = os_sup_diagnose_work:received([P || {P, _} <- Rows], ?MAKERS_MS, Fmt),
    [case Received of
         #{P := R} -> Row#{received => R};
         _ -> Row
     end || {P, Row} <- Rows];
holders(work, _Snapshot, _Fmt) ->
    [];
holders(files, _Snapshot, Fmt) ->
    %% Files and sockets opened through NIFs are no ports, and a file's io server is not who
    %% opened it: the opening functions are traced in every process for a moment.
    #{made_by => makers(all, files, Fmt)};
holders(atoms, _Snapshot, Fmt) ->
    %% No scan tells who made an atom: the functions that make them are traced in every
    %% process for a moment; the trace tool's next call watches longer.
    #{made_by => makers(all, atoms, Fmt),
      next => {trace, [{<<"module">>, <<"erlang">>}, {<<"function">>, <<"binary_to_atom">>},
                       {<<"max_events">>, 20}, {<<"duration_ms">>, 5000}]},
      note => <<"atoms cannot be traced to their creator by a scan; the trace's events name "
                "the calling function (also try list_to_atom)">>}.

%% The timers of the `timer' module, when there are: whom they message and who starts them.
timers(Fmt) ->
    %% An interval nobody cancels fires for good. `timer_server' runs no code of the
    %% application's: who starts them is the application's caller of it (a short trace of
    %% the calls to it), and what they make work for is the processes they message.
    Targets = case os_sup_node_timers:targets(?TOP, Fmt) of
                  #{targets := Ts, intervals := N, read := Read} ->
                      #{intervals => N, read => Read,
                        targets => [(who_or_name(T, Fmt))#{count => C} || {T, C} <- Ts]};
                  _ -> #{targets => []}
              end,
    %% What starts them: the `timer' functions the application calls, traced in every process
    %% for longer than other makers (one interval a second is growth too); when only library
    %% code calls them, the application's calls into `timer_server'.
    Made = case os_sup_diagnose_makers:find(all, timers, ?TIMERS_MS) of
               {ok, [_ | _] = Sites, _, Ms} -> site_text(Sites, Ms, Fmt);
               {ok, [], All, Ms} ->
                   case whereis(timer_server) of
                       Server when is_pid(Server), All > 0 ->
                           case callers_of(Server, Fmt) of
                               undefined -> none_text(all, All, Ms);
                               Through -> Through
                           end;
                       _ -> none_text(all, All, Ms)
                   end;
               {none, Why} -> #{text => fmt("not traced: ~ts", [Why])}
           end,
    Targets#{count => os_sup_node_timers:count(), made_by => Made}.

%% {Pid, Value} for every process answering `F' within ?SCAN_MS, and whether it stopped early.
scan(F) ->
    Deadline = erlang:monotonic_time(millisecond) + ?SCAN_MS,
    {Rows, Truncated} = scan(erlang:processes(), F, Deadline, 0, []),
    %% The helper's own processes hold what its work reads (a trace message's binary): never
    %% the node's holder.
    {[R || {P, _} = R <- Rows, not os_sup_lib_label:helper_process(P)], Truncated}.

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

%% The ETS tables referencing the most refc binary bytes (`ets:info(T, binary)', tables of
%% at most ?TABLE_ROWS_READ rows, for at most ?SCAN_MS), as binary holder rows.
table_binaries(Fmt) ->
    Deadline = erlang:monotonic_time(millisecond) + ?SCAN_MS,
    Word = erlang:system_info(wordsize),
    Sized = lists:foldl(
              fun(T, Acc) ->
                      Rows = ets:info(T, size),
                      case erlang:monotonic_time(millisecond) < Deadline andalso
                          is_integer(Rows) andalso Rows =< ?TABLE_ROWS_READ of
                          true ->
                              try ets:info(T, binary) of
                                  [_ | _] = Bins ->
                                      Distinct = lists:ukeysort(1, Bins),
                                      Bytes = lists:sum([S || {_, S, _} <- Distinct]),
                                      [{Bytes, T, length(Distinct), Rows} | Acc];
                                  _ -> Acc
                              catch _:_ -> Acc
                              end;
                          false -> Acc
                      end
              end, [], app_tables()),
    [{B, #{table => table_name(T, Fmt), tid => T, refc_count => C, refc_bytes => B, rows => Rows,
           heap_bytes => Word * max(0, ets_memory(T)),
           owner => case ets:info(T, owner) of
                        O when is_pid(O) -> os_sup_lib_label:label(O, Fmt);
                        _ -> undefined
                    end,
           label => fmt("ETS table ~ts", [table_name(T, Fmt)])}}
     || {B, T, C, Rows} <- lists:sublist(lists:reverse(lists:sort(Sized)), ?TOP)].

ets_memory(T) ->
    case ets:info(T, memory) of
        M when is_integer(M) -> M;
        _ -> 0
    end.

%% A table holder with the application function that writes to it (`os_sup_diagnose_makers', a short
%% trace of `ets:insert' on that table in every process); its `tid' is not sent on.
inserted_by(#{tid := T} = Row, Fmt) ->
    (maps:remove(tid, Row))#{made_by => table_writers(T, Fmt)}.

%% Growth that tells: a large step, or a smaller one in a process of the application's or in
%% one that links or monitors (or is monitored) a lot, which grows without steps. An OTP
%% process's heap growing by a few KB in a second (the application controller answering
%% calls) is noise.
significant(_P, D) when D >= ?GREW_STEP -> true;
significant(P, _D) ->
    not library_server(P) orelse
        case erlang:process_info(P, [monitors, monitored_by, links]) of
            [{_, Ms}, {_, By}, {_, Ls}] ->
                length(Ms) >= ?MANY orelse length(By) >= ?MANY orelse length(Ls) >= ?MANY;
            _ -> false
        end.

%% The first holder of process memory with the code behind it: what makes its monitors or
%% links when it has many, else what grows in its state.
explained([P | _] = Pids, [First | _] = Rows, Fmt) ->
    case maker(P, First) of
        {Kind, Who} -> made_by(Kind, [Who], Rows, Fmt);
        none -> with_state(Pids, Rows, Fmt)
    end;
explained(_, Rows, _Fmt) ->
    Rows.

%% The first holder with what grows in its state, when it is an OTP process whose memory is
%% its heap (not its mailbox): `state_growth' `#{text, target}' (`os_sup_proc_state').
with_state([P | _], [#{otp := true, heap_words := Heap, memory := Mem, mailbox := Q} = Row | Rest],
           Fmt) when Q < 1000 ->
    case Heap * erlang:system_info(wordsize) * 2 >= Mem of
        true ->
            case os_sup_proc_state:growth(P, ?MAKERS_MS, Fmt) of
                undefined -> [Row | Rest];
                Growth -> [Row#{state_growth => Growth} | Rest]
            end;
        false -> [Row | Rest]
    end;
with_state(_, Rows, _Fmt) ->
    Rows.

%% What to trace for a process whose memory grows by what it links or monitors, puts in its
%% dictionary, or by the monitors on it (then the process that makes most of them):
%% `{Kind, Pid}' or `none'.
maker(P, #{monitors := M, monitored_by := By, links := L, dictionary := D}) ->
    case lists:max([{M, monitors}, {By, monitored_by}, {L, links}, {D, dictionary}]) of
        {N, _} when N < ?MANY -> none;
        {_, monitors} -> {monitors, P};
        {_, links} -> {links, P};
        {_, dictionary} -> {dictionary, P};
        {_, monitored_by} ->
            case erlang:process_info(P, monitored_by) of
                {monitored_by, [_ | _] = Ms} ->
                    Counts = count(lists:sublist(Ms, ?MONITORS_READ)),
                    %% Each monitor by a process of its own (io servers watching their
                    %% owner) is made as that process starts: what starts them is the leak.
                    case lists:max([{C, X} || {X, C} <- maps:to_list(Counts)]) of
                        {C, Most} when C > 1, is_pid(Most) -> {monitors, Most};
                        _ -> none
                    end;
                _ -> none
            end
    end;
maker(_P, _Row) ->
    none.

%% The first holder with the application function that makes what it holds, from a short
%% trace of its calls (`os_sup_diagnose_makers'): `made_by' `#{text, target}' (`target' when a
%% function was found).
made_by(_Kind, [], Rows, _Fmt) -> Rows;
made_by(Kind, [Pid | _], [Row | Rest], Fmt) when is_pid(Pid), node(Pid) =:= node() ->
    [Row#{made_by => makers(Pid, Kind, Fmt)} | Rest];
made_by(_Kind, _Pids, Rows, _Fmt) -> Rows.

%% `#{text, target}' from a short trace of what `Who' (a pid or `all') calls to make `Kind'.
makers(Who, Kind, Fmt) ->
    makers(Who, Kind, Who, Fmt).

%% ... and when the calls come from library code run by `Server' (not the application's: a
%% library server making things for its callers), the application's calls to `Server'.
makers(Who, Kind, Server, Fmt) ->
    case os_sup_diagnose_makers:find(Who, Kind, ?MAKERS_MS) of
        {ok, [_ | _] = Sites, _All, Ms} -> site_text(Sites, Ms, Fmt);
        {ok, [], All, Ms} when All > 0 ->
            case callers_of(Server, Fmt) of
                undefined -> none_text(Who, All, Ms);
                Through -> Through
            end;
        {ok, [], All, Ms} -> none_text(Who, All, Ms);
        {none, Why} -> #{text => fmt("not traced: ~ts", [Why])}
    end.

site_text([#{mfa := MFA, via := Via, count := C} = Site | _], Ms, Fmt) ->
    #{text => fmt("~ts (~ts, ~b calls in ~ts)",
                  [os_sup_proc_origin:describe_frame(Site, Fmt), os_sup_lib_render:mfa(Via, Fmt), C,
                   secs(Ms)]),
      target => os_sup_lib_render:mfa(MFA, Fmt)}.

%% What a trace saw that names no maker; of `all' processes, whether it was narrowed.
none_text(Who, 0, Ms) ->
    #{text => iolist_to_binary([fmt("no call made one in ~ts", [secs(Ms)]), narrowed(Who)])};
none_text(Who, All, Ms) ->
    #{text => iolist_to_binary([fmt("~b calls in ~ts, none from the application's code",
                                    [All, secs(Ms)]), narrowed(Who)])}.

narrowed(all) -> os_sup_diagnose_makers:not_all_note(os_sup_diagnose_makers:targets());
narrowed(_) -> [].

%% The process `P' waits on, when it waits in a call on one or for a lock one holds.
waits_on(P) ->
    case os_sup_waits:wait_of(P) of
        {wait, #{kind := K, targets := [T], confirmed := true}} when (K =:= call orelse K =:= lock),
                                                                     is_pid(T) -> T;
        _ -> undefined
    end.

%% A process that runs no code of the application's (OTP's `timer_server', a library's).
library_server(Pid) ->
    case os_sup_proc_origin:initial_call(Pid) of
        {M, _, _} when is_atom(M) -> not os_sup_proc_origin:app_module(M);
        _ -> false
    end.

%% A process, or a name (an interval sent to a registered name).
who_or_name(P, Fmt) when is_pid(P) -> who(P, Fmt);
who_or_name({Name, Node} = T, Fmt) ->
    case Node =:= node() andalso whereis(Name) of
        P when is_pid(P) -> who(P, Fmt);
        _ -> #{label => os_sup_lib_label:label(T, Fmt)}
    end.

who(P, Fmt) ->
    Frame = os_sup_proc_groups:app_frame(P),
    #{pid => P, label => os_sup_lib_label:label(P, Fmt),
      function => case Frame of
                      undefined -> undefined;
                      _ -> os_sup_proc_groups:frame_text(Frame, Fmt)
                  end}.

%% What can grow in a process: its heap, mailbox, monitors, links and dictionary; and
%% whether it is an OTP process, whose state `get_state' can show (nothing is sent here).
inside(P, Fmt) ->
    case erlang:process_info(P, [total_heap_size, message_queue_len, monitors, monitored_by,
                                 links, binary]) of
        [{_, Heap}, {_, Queue}, {_, Monitors}, {_, By}, {_, Links}, {_, Bins}] ->
            {Keys, DictBytes} = dictionary(P),
            #{heap_words => Heap, mailbox => Queue, monitors => length(Monitors),
              monitors_top => most_common([T || {_, T} <- Monitors], Fmt),
              monitored_by => length(By), monitored_by_top => most_common(By, Fmt),
              links => length(Links), dictionary => Keys, dictionary_bytes => DictBytes,
              refc_count => length(Bins), refc_bytes => lists:sum([S || {_, S, _} <- Bins]),
              otp => otp(P)};
        _ -> #{}
    end.

%% The process dictionary's keys and bytes, measured in a throw-away process under a heap
%% limit (reading it copies it: a 70 MB dictionary must not take the report down with it);
%% `{0, 0}' when it could not be read.
dictionary(P) ->
    case os_sup_lib_call:call_with_deadline({?MODULE, dictionary_now, [P]}, ?DICT_MS, ?DICT_HEAP) of
        {ok, {Keys, Bytes}} -> {Keys, Bytes};
        _ -> {0, 0}
    end.

otp(P) ->
    case os_sup_proc_otp:otp_behaviour(P) of
        {ok, _} -> true;
        _ -> false
    end.

%% The most common element among the first ?MONITORS_READ and how often it appears there,
%% as `#{target, count, read}' (`undefined' for an empty list): 8,000 monitors of one process read
%% as one line.
most_common([], _Fmt) -> undefined;
most_common(L0, Fmt) ->
    L = lists:sublist(L0, ?MONITORS_READ),
    Counts = count(L),
    {C, X} = lists:max([{C, X} || {X, C} <- maps:to_list(Counts)]),
    Target = case is_pid(X) of
                 true -> os_sup_lib_label:label(X, Fmt);
                 false -> os_sup_lib_render:term(X, Fmt, 80)
             end,
    #{target => Target, count => C, read => length(L)}.

own_memory(P, Sizes) ->
    case Sizes of
        #{P := M} -> M;
        _ -> case erlang:process_info(P, memory) of
                 {memory, M} -> M;
                 _ -> 0
             end
    end.

largest_processes(Snapshot, Fmt) ->
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
    Top = top(?TOP, 2, [G || {P, M, D} = G <- Grew, not os_sup_lib_label:helper_process(P),
                             D =:= undefined orelse D >= 0 orelse -D < M]),
    Rows = [maps:merge((who(P, Fmt))#{memory => M, grew => D}, inside(P, Fmt)) || {P, M, D} <- Top],
    marked(explained([P || {P, _, _} <- Top], Rows, Fmt), Truncated).

%% `[{RiseBytes, OverMs, MemoryBytes, Pid}]', the largest rise first: the followed processes
%% whose memory (its level: at each reading, the lowest from then on) rose by ?HISTORY_GREW
%% and by half over the history's readings.
grown_over_history() ->
    Rose = [{Last - Low, MsLast - MsLow, Last, P}
            || {P, Kept} <- os_sup_node_history:processes(), length(Kept) >= 3,
               [{MsLast, Last, _} | _] <- [Kept],
               {MsLow, Low} <- [lowest(lists:reverse(Kept))],
               Last - Low >= ?HISTORY_GREW, Last >= 1.5 * max(1, Low),
               is_process_alive(P), not os_sup_lib_label:helper_process(P)],
    lists:reverse(lists:sort(Rose)).

%% The lowest reading (oldest first) and when: where the level starts.
lowest(Readings) ->
    {Ms, M, _} = lists:foldl(fun({Ms, M, Q}, {_, M0, _}) when M =< M0 -> {Ms, M, Q};
                                (_, Acc) -> Acc
                             end, hd(Readings), Readings),
    {Ms, M}.

%% `#{Owner => [Table]}' of the living tables among `Tables'.
by_owner(Tables) ->
    lists:foldl(fun(T, Acc) ->
                        case ets:info(T, owner) of
                            O when is_pid(O) -> maps:update_with(O, fun(L) -> [T | L] end, [T], Acc);
                            _ -> Acc
                        end
                end, #{}, Tables).

%% The node's tables but the helper's own (its work is never a holder).
app_tables() ->
    [T || T <- ets:all(), not os_sup_helper_own:own_table(ets:info(T, name))].

%% The largest tables, with their owners.
largest_tables(Fmt) ->
    Word = erlang:system_info(wordsize),
    Sized = [{T, Rows, M * Word} || T <- app_tables(), Rows <- [ets:info(T, size)], is_integer(Rows),
                                    M <- [ets:info(T, memory)], is_integer(M)],
    [#{table => table_name(T, Fmt), rows => Rows, bytes => Bytes,
       owner => case ets:info(T, owner) of
                    O when is_pid(O) -> maps:get(label, who(O, Fmt));
                    _ -> undefined
                end}
     || {T, Rows, Bytes} <- top(?TOP, 3, Sized)].

%% @doc A table as the tools print it, by which `ets' opens it: its name, or for an unnamed
%% table `Name (unnamed, #Reference<...>)'.
-spec table_name(ets:tab(), os_sup_lib_render:fmt()) -> binary().
table_name(T, Fmt) ->
    case ets:info(T, name) of
        Name when is_atom(Name), not is_reference(T) -> os_sup_lib_render:name(Name, Fmt);
        Name when is_atom(Name) ->
            fmt("~ts (unnamed, ~ts)", [os_sup_lib_render:name(Name, Fmt),
                                       os_sup_lib_render:term(T, Fmt, 80)]);
        _ -> os_sup_lib_render:term(T, Fmt, 80)
    end.

marked(Rows, false) -> Rows;
marked(Rows, true) -> [R#{truncated => true} || R <- Rows].
