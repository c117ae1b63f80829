%%% @doc `os_sup_proc_groups' counts processes in groups, the way an agent
%%% looks for a leak. 450 processes of 2.7 KB each never show in a top N
%%% by memory, but they do as one group that grows by 40 a second.
%%%
%%% A group is the processes that share a key: their initial call (the
%%% `proc_lib' `$initial_call' when there is one), their current function,
%%% their parent (OTP 25 `process_info(P, parent)'), their registered
%%% name's prefix, or all three of the first (`origin', what `diagnose'
%%% uses). For each group: count, total memory, total queue, links, and
%%% one sample pid; over a window, the change in count per second.
%%%
%%% == Bounds and safety ==
%%% The walk is `os_sup_proc_scan''s: split across the schedulers, at most
%%% 800 ms of it (past that, a sample of the processes, said as such), a
%%% deadline it says it met; nothing is sent to any process. At most 5000
%%% groups are kept (the rest are counted in one `other' group).
-module(os_sup_proc_groups).

-import(os_sup_lib_proc, [pinfo_items/2, reg_name/1]).
-import(os_sup_lib_text, [fmt/2]).

%% API
-export([snapshot/3, snapshot/4, compare/3, describe/3, app_frame/1, frame_text/2, key_text/3]).
%% for the walk (os_sup_proc_scan)
-export([key/5]).

%% A walk's share of the time: past it, a sample of the processes is read (two walks and the
%% rest of `diagnose' fit 2 s).
-define(BUDGET_MS, 800).

-type by() :: initial_call | current_function | parent | name_prefix | origin.
-type group() :: #{count := non_neg_integer(), memory := non_neg_integer(),
                   queue := non_neg_integer(), links := non_neg_integer(), sample := pid(),
                   born := non_neg_integer()}.
-type snapshot() :: #{by := by(), at_ms := integer(), groups := #{term() => group()},
                      largest := [{pid(), non_neg_integer()}],
                      scanned := non_neg_integer(), listed := non_neg_integer(),
                      truncated := boolean(),
                      sample := pos_integer(), duration_us := non_neg_integer(),
                      busy_us := non_neg_integer(), own_reductions := non_neg_integer(),
                      diffed => true}.
-export_type([by/0, snapshot/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The node's processes grouped by `By', skipping `Skip' (a predicate on the initial
%% call: the helper's own processes) and stopping at `Deadline' (monotonic ms); with the
%% largest processes by memory, largest first. `scanned' processes were read of `listed'
%% (`sample' > 1: part of them were sampled, at most 1 in `sample', and the counts scaled),
%% in `busy_us' of the schedulers' time.
-spec snapshot(by(), fun((mfa()) -> boolean()), integer()) -> snapshot().
snapshot(By, Skip, Deadline) ->
    snapshot(By, Skip, Deadline, none).

%% @doc {@link snapshot/3}, and per process: with `keep' (or `{keep, WaitsCtx}', which also
%% gathers what `os_sup_waits:node_chains/3' takes, as `waits'), the workers keep each
%% process's reductions and memory for the next snapshot (`walk'); with the snapshot that kept
%% them, the processes that took the most reductions (`top_reductions', `[{Delta, Pid}]') and
%% whose memory grew the most (`top_grown') since then, and all reductions taken
%% (`reductions'). A process born in between counts from zero.
-spec snapshot(by(), fun((mfa()) -> boolean()), integer(),
               none | keep | {keep, map()} | snapshot()) -> snapshot().
snapshot(By, _Skip, Deadline, #{walk := Walk}) ->
    At = erlang:monotonic_time(millisecond),
    (os_sup_proc_scan:again(Walk, Deadline))#{by => By, at_ms => At, diffed => true};
snapshot(By, Skip, Deadline, Deltas) ->
    At = erlang:monotonic_time(millisecond),
    {Keep, Waits} = case Deltas of
                        keep -> {true, undefined};
                        {keep, Ctx} -> {true, Ctx};
                        _ -> {false, undefined}
                    end,
    {Merged, Walk} = os_sup_proc_scan:walk(#{by => By, skip => Skip,
                                             deadline => Deadline, budget_ms => ?BUDGET_MS,
                                             keep => Keep, waits => Waits}),
    Snapshot = Merged#{by => By, at_ms => At},
    case Walk of
        undefined -> Snapshot;
        _ -> Snapshot#{walk => Walk}
    end.

%% @doc The groups of `After' with their change since `Before' (`undefined': none), ranked
%% by `Rank' (`count', `memory', `message_queue_len', `growth'); each `#{key, count, delta,
%% per_s, memory, queue, links, sample}', and when `After' is the second walk of `Before'
%% (`diffed'), `born' (processes new since) and `died' (of those `Before' counted, gone or
%% moved to another group).
-spec compare(snapshot() | undefined, snapshot(), atom()) -> [map()].
compare(Before, #{groups := G1, at_ms := A1} = After, Rank) ->
    {G0, Secs} = case Before of
                     undefined -> {undefined, undefined};
                     #{groups := G, at_ms := A0} -> {G, max(1, A1 - A0) / 1000}
                 end,
    Diffed = is_map_key(diffed, After),
    Rows = [row(K, V, G0, Secs, Diffed) || {K, V} <- maps:to_list(G1)] ++
        [#{key => K, count => 0, delta => -C, per_s => per_s(-C, Secs), memory => 0,
           queue => 0, links => 0, sample => undefined}
         || is_map(G0), {K, #{count := C}} <- maps:to_list(G0), not is_map_key(K, G1)],
    [R || {_, R} <- lists:reverse(lists:keysort(1, [{rank_value(Rank, R), R} || R <- Rows]))].

%% @doc A group's label: `Ailments.Leak spawn → Ailments.Leak.await_ack/1 lib/…/leak.ex:12'
%% for an `origin' key; the key alone (with the sample's frame) for the others.
-spec describe(by(), map(), os_sup_lib_render:fmt()) -> binary().
describe(By, #{key := Key, sample := Sample}, Fmt) ->
    Frame = case is_pid(Sample) of
                true -> app_frame(Sample);
                false -> undefined
            end,
    Base = key_text(By, Key, Fmt),
    case {Frame, current(By, Key)} of
        {undefined, _} -> Base;
        {#{mfa := MFA, file := File, line := Line}, MFA} when is_binary(File), is_integer(Line) ->
            fmt("~ts ~ts:~b", [Base, File, Line]);
        {#{mfa := MFA}, MFA} -> Base;
        _ -> <<Base/binary, " (sample in ", (frame_text(Frame, Fmt))/binary, ")">>
    end.

current(origin, {_, CF, _}) -> CF;
current(current_function, CF) -> CF;
current(_, _) -> undefined.

%% @doc A group key as text.
-spec key_text(by(), term(), os_sup_lib_render:fmt()) -> binary().
key_text(_, other, _Fmt) -> <<"(other groups)">>;
key_text(origin, {Init, CF, Parent}, Fmt) ->
    unicode:characters_to_binary([parent_text(Parent, Fmt), " ", init_text(Init, Fmt), " → ",
                      mfa_text(CF, Fmt)]);
key_text(initial_call, Init, Fmt) -> mfa_text(Init, Fmt);
key_text(current_function, CF, Fmt) -> mfa_text(CF, Fmt);
key_text(parent, Parent, Fmt) -> parent_text(Parent, Fmt);
key_text(name_prefix, undefined, _Fmt) -> <<"(no name)">>;
key_text(name_prefix, Prefix, _Fmt) -> <<Prefix/binary, "*">>.

%% @doc The top application frame of `Pid''s current stack (`os_sup_proc_origin:app_frame/1'), or
%% `undefined'.
-spec app_frame(pid()) -> map() | undefined.
app_frame(Pid) ->
    case pinfo_items(Pid, [current_stacktrace]) of
        [{_, Stack}] -> os_sup_proc_origin:app_frame(Stack);
        _ -> undefined
    end.

%% @doc A frame from {@link app_frame/1} as `Mod.fun/1 lib/x.ex:12'; empty for none.
-spec frame_text(map() | undefined, os_sup_lib_render:fmt()) -> binary().
frame_text(undefined, _Fmt) -> <<>>;
frame_text(Frame, Fmt) ->
    os_sup_proc_origin:describe_frame(Frame, Fmt).

%%%===================================================================
%%% Grouping (the key os_sup_proc_scan groups by)
%%%===================================================================

%% @doc The group of a process: its key when grouped by `By'.
-spec key(by(), mfa(), term(), pid() | undefined, atom() | []) -> term().
key(initial_call, Init, _CF, _Parent, _Reg) -> Init;
key(current_function, _Init, CF, _Parent, _Reg) -> CF;
key(parent, _Init, _CF, Parent, _Reg) -> Parent;
key(name_prefix, _Init, _CF, _Parent, Reg) -> prefix(Reg);
key(origin, Init, CF, Parent, _Reg) -> {Init, CF, Parent}.

%% `DemoApp.Worker.3' -> `DemoApp.Worker.', `pool_12' -> `pool_', `code_server' -> `code_'.
prefix(Name) when is_atom(Name), Name =/= [], Name =/= undefined ->
    Text = atom_to_binary(Name, utf8),
    Bare = case Text of <<"Elixir.", R/binary>> -> R; _ -> Text end,
    case re:run(Bare, <<"^(.*[._])[^._]+$">>, [{capture, all_but_first, binary}, unicode]) of
        {match, [P]} -> P;
        nomatch ->
            case re:replace(Bare, <<"[0-9]+$">>, <<>>, [{return, binary}]) of
                <<>> -> Bare;
                P -> P
            end
    end;
prefix(_) ->
    undefined.

%%%===================================================================
%%% Private: comparing and describing
%%%===================================================================

row(K, #{count := C, born := Born} = V, G0, Secs, Diffed) ->
    C0 = case G0 of
             undefined -> undefined;
             #{K := #{count := N}} -> N;
             _ -> 0
         end,
    Delta = case C0 of
                undefined -> undefined;
                _ -> C - C0
            end,
    Row = V#{key => K, delta => Delta, per_s => per_s(Delta, Secs)},
    case Diffed andalso is_integer(C0) of
        %% the counts are weighted where sampled: never below none
        true -> Row#{died => max(0, C0 - (C - Born))};
        false -> maps:remove(born, Row)
    end.

per_s(undefined, _) -> undefined;
per_s(_, undefined) -> undefined;
per_s(D, Secs) -> round(D / Secs).

rank_value(growth, #{delta := D, count := C}) -> {D, C};
rank_value(count, #{count := C}) -> C;
rank_value(memory, #{memory := M}) -> M;
rank_value(message_queue_len, #{queue := Q}) -> Q;
rank_value(_, #{count := C}) -> C.

parent_text(undefined, _Fmt) -> <<"(no parent)">>;
parent_text(P, Fmt) when is_pid(P) ->
    case reg_name(P) of
        undefined ->
            case is_process_alive(P) of
                true -> os_sup_lib_render:pid(P, Fmt);
                false -> <<(os_sup_lib_render:pid(P, Fmt))/binary, " (exited)">>
            end;
        Name -> os_sup_lib_render:name(Name, Fmt)
    end;
parent_text(X, Fmt) -> os_sup_lib_render:term(X, Fmt, 64).

init_text({erlang, apply, 2}, _Fmt) -> <<"spawn">>;
init_text(MFA, Fmt) -> mfa_text(MFA, Fmt).

mfa_text({M, F, A} = MFA, Fmt) when is_atom(M), is_atom(F), is_integer(A) ->
    os_sup_lib_render:mfa(MFA, Fmt);
mfa_text(X, Fmt) -> os_sup_lib_render:term(X, Fmt, 64).
