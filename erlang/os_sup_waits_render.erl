%%% @doc `os_sup_waits_render' turns the wait chains `os_sup_waits' found (and
%%% the rates it sampled) into the tool's reply. It writes one bounded line a
%%% hop (`os_sup_lib_render' for names, in the node's language), chains grouped
%%% and ranked, and plain data.
%%% A hop is named by `os_sup_lib_label:label/2'.
-module(os_sup_waits_render).

-import(os_sup_lib_proc, [pinfo_items/2]).
-import(os_sup_lib_reply, [ok_reply/3]).
-import(os_sup_lib_label, [label/2]).

%% API
-export([render/6]).

-define(MAX_HOPS, 16).
-define(TEXT_BYTES, 4096).
%% waits whose top frame holds a fresh reference for every call
-define(REF_KINDS, [call, await, erpc, io]).
-define(LINE_BYTES, 1200).
%% backtrace guard (words and bytes)

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The `waits' reply: `Chains' with their `Stats' over `Window' ms, the `Scan' summary,
%% the time taken `Us'.
-spec render([map()], map(), map(), non_neg_integer(), non_neg_integer(), map()) -> {ok, map()}.
render(Chains, Scan, Stats, Window, Us, Ctx) ->
    Fmt = maps:get(fmt, Ctx),
    Calls = calls_into(Chains, Stats),
    Rendered = [render_chain(C, Stats, Calls, Window, Ctx) || C <- Chains],
    Deadlocks = length([C || C <- Chains, os_sup_waits:deadlock(C)]),
    Head = head_line(Scan, length(Chains), Deadlocks, Window, Us, Fmt),
    Lines0 = [Head | [L || {L, _} <- Rendered]],
    {Lines, Extra} =
        case Scan of
            #{mode := pid, waited_by := By} ->
                ByData = [#{pid => os_sup_lib_render:pid(P, Fmt), label => label(P, Fmt),
                            kind => K} || {P, K} <- By],
                Line = case By of
                           [] -> [];
                           _ -> [iolist_to_binary(
                                   ["waited on by ", integer_to_binary(length(By)), ": ",
                                    lists:join(<<", ">>, [[label(P, Fmt), " (", atom_to_binary(K, utf8), ")"]
                                                          || {P, K} <- lists:sublist(By, 5)]),
                                    case length(By) > 5 of true -> <<", ...">>; false -> <<>> end])]
                       end,
                {Lines0 ++ Line, #{waited_on_by => ByData}};
            _ when Chains =:= [] ->
                {Lines0 ++ [<<"nothing waits: no process is blocked in a call and every message "
                              "queue is empty; pass pid to see one process">>], #{}};
            _ -> {Lines0, #{}}
        end,
    Data = maps:merge(
             #{chains => [D || {_, D} <- Rendered], deadlocks => Deadlocks,
               window_ms => Window, duration_us => Us,
               mode => maps:get(mode, Scan),
               scanned => maps:get(scanned, Scan, undefined),
               process_count => maps:get(process_count, Scan, undefined),
               scan_truncated => maps:get(truncated, Scan, false),
               waiting => maps:get(waiting, Scan, undefined),
               chains_found => maps:get(chains_found, Scan, length(Chains))}, Extra),
    ok_reply(Lines, Data, ?TEXT_BYTES).

head_line(#{mode := pid, start := P}, _N, Deadlocks, Window, Us, Fmt) ->
    iolist_to_binary(["waits from ", label(P, Fmt), deadlock_note(Deadlocks), " (",
                      window_note(Window), ", ", ms(Us), ")"]);
head_line(Scan, N, Deadlocks, Window, Us, _Fmt) ->
    #{scanned := S, process_count := Total, truncated := T, waiting := W,
      chains_found := Found} = Scan,
    iolist_to_binary([integer_to_binary(N), " of ", integer_to_binary(Found), " chains",
                      deadlock_note(Deadlocks), " (", integer_to_binary(W), " waiting of ",
                      integer_to_binary(S), " processes scanned",
                      case T of true -> [" of ", integer_to_binary(Total), ", scan deadline hit"];
                          false -> [] end,
                      "; ", window_note(Window), ", ", ms(Us), ")"]).

deadlock_note(0) -> <<>>;
deadlock_note(N) -> [", ", integer_to_binary(N), " DEADLOCK", case N of 1 -> ""; _ -> "S" end].

window_note(0) -> <<"no window">>;
window_note(W) -> ["rates over ", integer_to_binary(W), " ms"].

ms(Us) -> [integer_to_binary(Us div 1000), " ms"].

%% Calls per second into each callee, from its callers' call references (the grouped
%% callers of a chain too); a lower bound when a caller could not be sampled, or when
%% processes of other nodes monitor the callee (they may call it too, unseen from here).
calls_into(Chains, Stats) ->
    maps:map(fun(Callee, {Sum, Lower}) -> {Sum, Lower orelse remote_watchers(Callee)} end,
             calls_seen(Chains, Stats)).

remote_watchers(P) when is_pid(P), node(P) =:= node() ->
    case pinfo_items(P, [monitored_by]) of
        [{_, Ms}] -> lists:any(fun(M) -> is_pid(M) andalso node(M) =/= node() end, Ms);
        _ -> false
    end;
remote_watchers(_) ->
    false.

calls_seen(Chains, Stats) ->
    Refs = maps:get(refs, Stats, #{}),
    Elapsed = maps:get(elapsed_ms, Stats, 0),
    Samples = maps:get(samples, Stats, 1),
    Pairs = lists:usort([{Callee, Caller} || C <- Chains,
                                             {Caller, Callee, W} <- edges(C) ++ also_edges(C),
                                             lists:member(maps:get(kind, W), ?REF_KINDS)]),
    lists:foldl(
      fun({Callee, Caller}, M) ->
              {Sum, Lower} = maps:get(Callee, M, {0, false}),
              case maps:get(Caller, Refs, skip) of
                  #{resample := true, changes := Ch} when Elapsed > 0 ->
                      M#{Callee => {Sum + Ch, Lower orelse Ch * 2 > Samples}};
                  _ -> M#{Callee => {Sum, true}}
              end
      end, #{}, Pairs).

%% The grouped callers' edges: each calls what the chain's first hop calls.
also_edges(#{also := Also} = C) ->
    case edges(C) of
        [{_, Callee, W} | _] -> [{A, Callee, W} || A <- Also];
        [] -> []
    end;
also_edges(_) ->
    [].

%% {Caller, Callee, Wait} of a chain.
edges(#{hops := Hops, waits := Waits} = C) ->
    Next = tl(Hops) ++ case C of
                          #{stop := cycle, cycle_to := To} -> [To];
                          #{stop := deadlocked, deadlocked := To} -> [To];
                          #{stop := remote, remote := R} -> [R];
                          #{stop := gone, gone := G} -> [G];
                          _ -> []
                      end,
    N = min(length(Waits), length(Next)),
    lists:zip3(lists:sublist(Hops, N), lists:sublist(Next, N), lists:sublist(Waits, N)).

render_chain(C, Stats, Calls, Window, Ctx) ->
    Fmt = maps:get(fmt, Ctx),
    #{hops := Hops, waits := Waits, stop := Stop} = C,
    HopData = [hop(H, Stats, Calls, Window, Ctx) || H <- Hops],
    HopTexts = [hop_text(case os_sup_waits:deadlock(C) of
                             true -> Hd#{calls_per_s => undefined};
                             false -> Hd
                         end) || Hd <- HopData],
    Pending = [pending(P, W, Stats) || {P, W} <- lists:zip(lists:sublist(Hops, length(Waits)),
                                                            Waits)],
    WaitData = [wait_data(W, Pend, Fmt) || {W, Pend} <- lists:zip(Waits, Pending)],
    HopsWithWaits = attach_waits(HopData, WaitData),
    Parts = interleave(HopTexts, [wait_text(W) || W <- WaitData]),
    Tail = stop_text(C, Waits, Fmt),
    AllPending = Pending =/= [] andalso lists:all(fun(P) -> P =:= true end, Pending),
    Confirmed = lists:all(fun(#{confirmed := Cf}) -> Cf end, Waits),
    Prefix = case os_sup_waits:deadlock(C) of
                 true when not Confirmed ->
                     [<<"POSSIBLE DEADLOCK (a receive? may wait for something else): ">>];
                 true when AllPending ->
                     [<<"DEADLOCK (every wait pending the whole window): ">>];
                 true -> [<<"DEADLOCK: ">>];
                 false -> []
             end,
    Also = maps:get(also, C, []),
    AlsoText = case Also of
                   [] -> [];
                   _ -> [" (+", integer_to_binary(length(Also)), " more waiting the same way: ",
                         lists:join(<<", ">>, [label(A, Fmt) || A <- lists:sublist(Also, 3)]),
                         case length(Also) > 3 of true -> ", ..."; false -> "" end, ")"]
               end,
    Line = os_sup_lib_render:bound(iolist_to_binary([Prefix, Parts, Tail, AlsoText]), ?LINE_BYTES),
    Data = #{hops => HopsWithWaits, deadlock => os_sup_waits:deadlock(C), stop => Stop,
             confirmed => Confirmed,
             cycle_to => case C of #{cycle_to := To} -> label(To, Fmt); _ -> undefined end,
             also_waiting => [os_sup_lib_render:pid(A, Fmt) || A <- lists:sublist(Also, 20)],
             also_count => length(Also), text => Line},
    {Line, Data}.

attach_waits([H | Hs], [W | Ws]) -> [H#{wait => W} | attach_waits(Hs, Ws)];
attach_waits(Hs, []) -> [H#{wait => undefined} || H <- Hs];
attach_waits([], _) -> [].

interleave([H], []) -> [H];
interleave([H], [W | _]) -> [H, W];
interleave([H | Hs], [W | Ws]) -> [H, W | interleave(Hs, Ws)];
interleave([], _) -> [].

%% The calling hop's wait ended the chain (cycle back, remote, gone...): say where.
stop_text(#{stop := cycle, cycle_to := To}, _Waits, Fmt) -> [label(To, Fmt)];
stop_text(#{stop := broke}, _Waits, _Fmt) ->
    [" (a cycle at first, broken by the end of the window: a member exited or moved on)"];
stop_text(#{stop := deadlocked, deadlocked := To}, _Waits, Fmt) ->
    [label(To, Fmt), " (waits behind a DEADLOCK it is not part of)"];
stop_text(#{stop := remote, remote := R}, _Waits, Fmt) ->
    [label(R, Fmt), " (another node: ask it for this pid)"];
stop_text(#{stop := gone, gone := G}, _Waits, Fmt) -> [label(G, Fmt), " (exited)"];
stop_text(#{stop := depth}, _Waits, _Fmt) -> [" ... (longer than ", integer_to_binary(?MAX_HOPS),
                                              " hops)"];
stop_text(#{stop := unresolved}, _Waits, _Fmt) -> ["? (no monitor names the target)"];
stop_text(#{stop := ambiguous}, Waits, Fmt) ->
    ["one of ", targets_text(maps:get(targets, lists:last(Waits)), Fmt),
     " (several monitors; not followed)"];
stop_text(#{stop := multi}, Waits, Fmt) ->
    Ts = maps:get(targets, lists:last(Waits)),
    [integer_to_binary(length(Ts)), " processes: ", targets_text(Ts, Fmt)];
stop_text(#{stop := terminal, hops := [_]}, _Waits, _Fmt) -> [" not waiting on another process"];
stop_text(_, _, _) -> [].

targets_text(Ts, Fmt) ->
    lists:join(<<", ">>, [label(T, Fmt) || T <- lists:sublist(Ts, 5)]) ++
        case length(Ts) > 5 of true -> [", ..."]; false -> [] end.

%% true when the caller was in the same call (same reference, or the same wait when
%% references are not sampled) for every sample of the window.
pending(P, W, Stats) ->
    case Stats of
        #{refs := #{P := #{resample := true, same := Same, first := F}}} when F =/= undefined ->
            Same;
        #{funs := #{P := Funs}, samples := N} ->
            maps:get(maps:get(function, W), Funs, 0) =:= N;
        _ -> undefined
    end.

wait_data(#{kind := K, targets := Ts, confirmed := C, function := F}, Pending, Fmt) ->
    #{kind => K, confirmed => C, function => os_sup_lib_render:mfa(F, Fmt),
      targets => [label(T, Fmt) || T <- lists:sublist(Ts, 10)],
      pending_whole_window => Pending}.

wait_text(#{kind := K, confirmed := C}) ->
    [<<" → "/utf8>>, atom_to_binary(K, utf8), case C of true -> <<>>; false -> <<"?">> end,
     <<" → "/utf8>>].

hop(H, Stats, Calls, Window, Ctx) when is_pid(H) ->
    Fmt = maps:get(fmt, Ctx),
    Base = #{pid => os_sup_lib_render:pid(H, Fmt), label => label(H, Fmt), node => node(H)},
    case node(H) =:= node() andalso
        pinfo_items(H, [current_function, current_stacktrace, message_queue_len, status]) of
        false -> Base#{alive => undefined};
        undefined -> Base#{alive => false};
        Items ->
            Get = fun(K) -> proplists:get_value(K, Items) end,
            CF = Get(current_function),
            {Top, Share} = top_function(H, CF, Stats),
            From = case Top of
                       {M, _, _} when is_atom(M) ->
                           case os_sup_lib_label:library(M, Ctx) of
                               true -> os_sup_waits_of:user_frame(Get(current_stacktrace), Ctx);
                               false -> undefined
                           end;
                       _ -> undefined
                   end,
            Rates = rates(H, Stats),
            {CallsPerS, Lower} = case Calls of
                                     #{H := {Count, Lo}} ->
                                         {round(Count * 1000 / maps:get(elapsed_ms, Stats)), Lo};
                                     _ -> {undefined, false}
                                 end,
            Base#{alive => true,
                  message_queue_len => Get(message_queue_len),
                  status => Get(status),
                  current_function => os_sup_lib_render:mfa(CF, Fmt),
                  top_function => os_sup_lib_render:mfa(Top, Fmt),
                  top_function_share => Share,
                  from => case From of undefined -> undefined;
                              _ -> os_sup_lib_render:mfa(From, Fmt) end,
                  queue_growth_per_s => maps:get(growth, Rates, undefined),
                  reductions_per_s => maps:get(reductions, Rates, undefined),
                  calls_per_s => CallsPerS,
                  calls_per_s_is_lower_bound => Lower,
                  window_ms => Window}
    end;
hop(H, _Stats, _Calls, _Window, Ctx) ->
    Fmt = maps:get(fmt, Ctx),
    #{pid => undefined, label => label(H, Fmt), node => element(2, H), alive => undefined}.

top_function(H, CF, #{funs := Funs, samples := N}) ->
    case maps:get(H, Funs, #{}) of
        PF when map_size(PF) > 0 ->
            {Top, Count} = hd(lists:reverse(lists:keysort(2, maps:to_list(maps:remove(other, PF)) ++
                                                              [{CF, 0}]))),
            {Top, round(Count * 100 / max(1, N))};
        _ -> {CF, undefined}
    end;
top_function(_H, CF, _) ->
    {CF, undefined}.

%% Each process_info request is handled by the process itself and costs it a
%% reduction: the sampling's own requests are not counted.
rates(H, #{start := S, 'end' := E, elapsed_ms := Ms, samples := N, refs := Refs}) ->
    Own = N + case Refs of
                  #{H := #{resample := true}} -> N;
                  _ -> 0
              end,
    case {maps:get(H, S, gone), maps:get(H, E, gone)} of
        {{Q0, R0}, {Q1, R1}} ->
            #{growth => round((Q1 - Q0) * 1000 / Ms),
              reductions => round(max(0, R1 - R0 - Own) * 1000 / Ms)};
        _ -> #{}
    end;
rates(_, _) ->
    #{}.

hop_text(#{alive := false, label := L}) ->
    [L, " (exited)"];
hop_text(#{alive := true, label := L, message_queue_len := Q} = H) ->
    Bits = [["mq ", integer_to_binary(Q)]] ++
        case maps:get(queue_growth_per_s, H) of
            G when is_integer(G), G > 0 -> [["+", integer_to_binary(G), "/s"]];
            G when is_integer(G), G < 0 -> [[integer_to_binary(G), "/s"]];
            _ -> []
        end ++
        [["in ", maps:get(top_function, H),
          case maps:get(top_function_share, H) of
              S when is_integer(S), S < 100 -> [" ", integer_to_binary(S), "%"];
              _ -> []
          end,
          case maps:get(from, H) of undefined -> []; F -> [" from ", F] end]] ++
        case maps:get(status, H) of
            St when St =:= suspended; St =:= exiting; St =:= garbage_collecting ->
                [atom_to_binary(St, utf8)];
            _ -> []
        end ++
        case {maps:get(calls_per_s, H), maps:get(calls_per_s_is_lower_bound, H)} of
            {undefined, _} -> [];
            {0, true} -> [];
            {0, false} -> [["no call returned in ", integer_to_binary(maps:get(window_ms, H)),
                            " ms"]];
            {C, Lower} -> [[case Lower of true -> ">="; false -> "" end,
                            integer_to_binary(C), " calls/s"]]
        end ++
        case maps:get(reductions_per_s, H) of
            undefined -> [];
            R -> [[human(R), " red/s"]]
        end,
    [L, " (", lists:join(<<", ">>, Bits), ")"];
hop_text(#{label := L}) ->
    [L].

human(N) when N >= 10000000 -> [integer_to_binary(N div 1000000), "M"];
human(N) when N >= 10000 -> [integer_to_binary(N div 1000), "k"];
human(N) -> integer_to_binary(N).
