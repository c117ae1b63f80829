%%% @doc `os_sup_proc_profile' samples where processes spend their time. It
%%% reads each one's status and stack every few milliseconds over a short
%%% window (a process caught once is usually caught idle; many reads show where
%%% it works). It counts, over the samples in which a process was running or
%%% runnable, the application's functions on top of its stack (with file:line)
%%% and its whole stacks folded (`m:f/a;m:f/a', root first, for a flame graph).
%%%
%%% == Bounds and safety ==
%%% Only `process_info(P, [status, current_stacktrace])': nothing is sent to
%%% the processes and none is suspended. At most 8 processes, 5 s and a
%%% read every 2 ms or more; stacks are cut at 32 frames and at most 200
%%% distinct folded stacks are kept per process (the rest counted as
%%% `other').
-module(os_sup_proc_profile).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([sample/3, sample_new/3, hot/3, of_process/3, lines/1]).

-define(MAX_PROCS, 8).
-define(MAX_MS, 5000).
-define(MIN_EVERY_MS, 2).
-define(DEPTH, 32).
-define(MAX_STACKS, 200).
%% new processes read at each tick, at most
-define(MAX_NEW, 50).
-define(EMPTY, #{samples => 0, busy => 0, frames => #{}, stacks => #{}, roots => #{}}).

-type profile() :: #{samples := non_neg_integer(), busy := non_neg_integer(),
                     frames := #{term() => pos_integer()},
                     stacks := #{binary() => pos_integer()},
                     roots := #{{module(), atom(), arity()} => pos_integer()}}.
-export_type([profile/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Reads each of `Pids' every `EveryMs' for `Ms': `#{Pid => profile()}', where
%% `samples' counts the reads that found the process alive, `busy' those that found it
%% running or runnable, and `frames' (`{MFA, File, Line}' of the top application frame,
%% `none' when the stack has none), `stacks' (folded, for a reader) and `roots' (the
%% outermost frame of each stack read, `{M, F, Arity}') count the busy reads only.
-spec sample([pid()], pos_integer(), pos_integer()) -> #{pid() => profile()}.
sample(Pids0, Ms, EveryMs) ->
    Pids = lists:sublist(lists:usort(Pids0), ?MAX_PROCS),
    ticks(fun(Acc) -> lists:foldl(fun read/2, Acc, Pids) end, Ms, EveryMs,
          maps:from_list([{P, ?EMPTY} || P <- Pids])).

%% @doc Reads, every `EveryMs' for `Ms', the processes that are not keys of `Known' (those a
%% scan saw): one `profile()' for all of them, where `samples' counts the ticks and `busy'
%% the busy reads (so busy / samples is how many schedulers they kept busy on average), with
%% `seen' (distinct processes read) and `initial_calls' (`#{MFA => count}', the `proc_lib'
%% initial call where there is one, anonymous functions by the function they are in).
-spec sample_new(map(), pos_integer(), pos_integer()) -> map().
sample_new(Known, Ms, EveryMs) ->
    Self = self(),
    Tick = fun(#{samples := S} = Acc) ->
                   New = lists:sublist([P || P <- erlang:processes(), not is_map_key(P, Known),
                                             P =/= Self, not os_sup_lib_label:helper_process(P)],
                                       ?MAX_NEW),
                   lists:foldl(fun read_new/2, Acc#{samples := S + 1}, New)
           end,
    Acc = ticks(Tick, Ms, EveryMs, maps:merge(?EMPTY, #{seen => #{}, initial_calls => #{}})),
    Acc#{seen := map_size(maps:get(seen, Acc))}.

%% @doc The application functions `Profile' saw most in busy samples, at most `N', each
%% with its share and the lines seen most in it: `Mod.fun/2 (88 %: lib/x.ex:20 63 %, :19
%% 25 %)'; `[]' when it saw none.
-spec hot(profile(), pos_integer(), os_sup_lib_render:fmt()) -> [binary()].
hot(#{busy := Busy, frames := Frames}, N, Fmt) when Busy > 0 ->
    ByFunction = lists:foldl(fun({{MFA, File, Line}, C}, Acc) ->
                                     Add = fun({T, Ls}) -> {T + C, [{C, File, Line} | Ls]} end,
                                     maps:update_with(MFA, Add,
                                                      {C, [{C, File, Line}]}, Acc);
                                (_, Acc) -> Acc
                             end, #{}, maps:to_list(Frames)),
    Ranked = lists:reverse(lists:sort([{T, MFA, Ls} || {MFA, {T, Ls}} <- maps:to_list(ByFunction)])),
    [fmt("~ts (~b %: ~ts)", [os_sup_lib_render:mfa(MFA, Fmt), pct(T, Busy), lines(Ls, Busy)])
     || {T, MFA, Ls} <- lists:sublist(Ranked, N)];
hot(_, _, _) ->
    [].

pct(C, All) -> round(C * 100 / All).

%% `lib/x.ex:20 63 %, :19 25 %': the lines seen most, the file named once.
lines(Ls, Busy) ->
    [{C, File, Line} | Rest] = lists:sublist(lists:reverse(lists:sort(Ls)), 3),
    [where(File, Line), fmt(" ~b %", [pct(C, Busy)])
     | [fmt(", :~w ~b %", [L, pct(Cl, Busy)]) || {Cl, _, L} <- Rest]].

where(File, Line) when is_binary(File) -> fmt("~ts:~w", [File, Line]);
where(_, Line) -> fmt("line ~w", [Line]).

%% @doc Where one process spends its time, for `process_info' with `profile_ms': its stack
%% read every 5 ms for `Ms' (0: not asked, `undefined'), with the hot functions and at most
%% 50 folded stacks.
-spec of_process(pid(), non_neg_integer(), os_sup_lib_render:fmt()) -> map() | undefined.
of_process(_Pid, 0, _Fmt) -> undefined;
of_process(Pid, Ms, Fmt) ->
    #{Pid := #{samples := N, busy := B, stacks := Stacks} = P} =
        sample([Pid], Ms, 5),
    Folded = os_sup_lib_rank:top(50, 2, maps:to_list(Stacks)),
    #{duration_ms => Ms, reads => N, running => B, hot => hot(P, 5, Fmt),
      folded => [#{stack => S, count => C} || {S, C} <- Folded],
      folded_cut => max(0, map_size(Stacks) - 50)}.

%% @doc {@link of_process/3}'s profile as text lines (none when not asked).
-spec lines(map() | undefined) -> [binary()].
lines(undefined) -> [];
lines(#{duration_ms := Ms, reads := N, running := B, hot := Hot}) ->
    [fmt("profile: running or runnable in ~b of ~b reads over ~b ms~ts",
         [B, N, Ms, case Hot of
                        [] when B > 0 -> "; no function of the application on its stack then";
                        [] -> "";
                        _ -> "; its code then:"
                    end])
     | [<<"  ", H/binary>> || H <- Hot]].

%%%===================================================================
%%% Private
%%%===================================================================

%% Runs `Tick' on the accumulator now and every `EveryMs' (2 ms at least) until `Ms' (5 s at
%% most) have passed.
ticks(Tick, Ms, EveryMs, Acc) ->
    Every = max(?MIN_EVERY_MS, EveryMs),
    tick_until(Tick, Every, erlang:monotonic_time(millisecond) + min(Ms, ?MAX_MS), Acc).

tick_until(Tick, Every, Deadline, Acc0) ->
    Acc = Tick(Acc0),
    case erlang:monotonic_time(millisecond) + Every > Deadline of
        true -> Acc;
        false ->
            receive after Every -> ok end,
            tick_until(Tick, Every, Deadline, Acc)
    end.

read(P, Acc) ->
    case os_sup_lib_proc:pinfo_items(P, [status, current_stacktrace]) of
        [{_, Status}, {_, Stack}] ->
            #{samples := S} = Prof = maps:get(P, Acc),
            Acc#{P := counted(Status, Stack, Prof#{samples := S + 1})};
        _ -> Acc
    end.

read_new(P, #{seen := Seen, initial_calls := Is} = Acc) ->
    case os_sup_lib_proc:pinfo_items(P, [status, current_stacktrace]) of
        [{_, Status}, {_, Stack}] ->
            Acc1 = case is_map_key(P, Seen) of
                       true -> Acc;
                       false -> Acc#{seen := Seen#{P => true},
                                     initial_calls := bump(initial(P), Is)}
                   end,
            counted(Status, Stack, Acc1);
        _ -> Acc
    end.

%% A busy read counted: its top application frame and its whole stack.
counted(Status, Stack, #{busy := B, frames := Fs, stacks := Ss, roots := Rs} = Prof) ->
    case busy(Status) of
        true -> Prof#{busy := B + 1, frames := bump(frame_key(Stack), Fs),
                      stacks := bump_stack(folded(Stack), Ss),
                      roots := case root(Stack) of
                                   none -> Rs;
                                   Root -> bump_root(Root, Rs)
                               end};
        false -> Prof
    end.

initial(P) ->
    case os_sup_proc_origin:initial_call(P) of
        {M, _, _} = MFA when is_atom(M) -> os_sup_proc_origin:enclosing(MFA);
        Other -> Other
    end.

busy(running) -> true;
busy(runnable) -> true;
busy(garbage_collecting) -> true;
busy(_) -> false.

frame_key(Stack) ->
    case os_sup_proc_origin:app_frame(Stack) of
        #{mfa := MFA, file := File, line := Line} -> {MFA, File, Line};
        _ -> none
    end.

bump(K, Map) -> maps:update_with(K, fun(C) -> C + 1 end, 1, Map).

bump_stack(K, Map) when map_size(Map) < ?MAX_STACKS; is_map_key(K, Map) -> bump(K, Map);
bump_stack(_K, Map) -> bump(<<"other">>, Map).

%% `m:f/a;m:f/a', the root first.
%% The outermost frame of the part of `Stack' that is folded, as a term.
root(Stack) ->
    case [{M, F, arity(A)} || {M, F, A, _} <- lists:sublist(Stack, ?DEPTH), is_atom(M), is_atom(F)] of
        [] -> none;
        Frames -> lists:last(Frames)
    end.

bump_root(K, Map) when map_size(Map) < ?MAX_STACKS; is_map_key(K, Map) -> bump(K, Map);
bump_root(_K, Map) -> Map.

folded(Stack) ->
    Frames = [fmt("~ts:~ts/~b", [M, F, arity(A)])
              || {M, F, A, _} <- lists:sublist(Stack, ?DEPTH), is_atom(M), is_atom(F)],
    iolist_to_binary(lists:join(";", lists:reverse(Frames))).

arity(A) when is_integer(A) -> A;
arity(A) when is_list(A) -> length(A);
arity(_) -> 0.
