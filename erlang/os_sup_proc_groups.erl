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
%%% One `process_info(P, [few items])' per process (the dictionary only
%%% for `proc_lib' processes, to read `$initial_call'); processes that exit
%%% mid-scan are skipped; the scan stops at a deadline and says so; nothing
%%% is sent to any process. At most 5000 groups are kept (the rest are
%%% counted in one `other' group).
-module(os_sup_proc_groups).

-import(os_sup_lib_proc, [pinfo_items/2, dict_initial_call/1, proc_dict/1, reg_name/1]).
-import(os_sup_lib_text, [fmt/2]).

%% API
-export([snapshot/3, snapshot/4, compare/3, describe/3, app_frame/1, frame_text/2, key_text/3]).

-define(MAX_GROUPS, 5000).
%% The largest processes a snapshot keeps by memory (what `diagnose' names when process
%% memory grows, without a walk of its own).
-define(LARGEST, 16).
%% Processes whose reductions and memory a snapshot keeps for the next one (a bound on the
%% helper's heap: ~6 words each); past it, the deltas cover the first ones and say so.
-define(KEEP_PROCS, 500000).
%% The processes ranked by reductions and by memory growth over a window.
-define(TOP_DELTAS, 5).

-type by() :: initial_call | current_function | parent | name_prefix | origin.
-type group() :: #{count := non_neg_integer(), memory := non_neg_integer(),
                   queue := non_neg_integer(), links := non_neg_integer(), sample := pid()}.
-type snapshot() :: #{by := by(), at_ms := integer(), groups := #{term() => group()},
                      largest := [{pid(), non_neg_integer()}],
                      scanned := non_neg_integer(), truncated := boolean(),
                      duration_us := non_neg_integer()}.
-export_type([by/0, snapshot/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The node's processes grouped by `By', skipping `Skip' (a predicate on the initial
%% call: the helper's own processes) and stopping at `Deadline' (monotonic ms); with the
%% largest processes by memory, largest first.
-spec snapshot(by(), fun((mfa()) -> boolean()), integer()) -> snapshot().
snapshot(By, Skip, Deadline) ->
    snapshot(By, Skip, Deadline, none).

%% @doc {@link snapshot/3}, and per process: with `keep', each process's reductions and
%% memory (`procs', for the next snapshot); with the snapshot that kept them, the processes
%% that took the most reductions (`top_reductions', `[{Delta, Pid}]') and whose memory grew
%% the most (`top_grown', `[{Delta, Pid}]') since then, and all reductions taken
%% (`reductions'). A process born in between counts from zero.
-spec snapshot(by(), fun((mfa()) -> boolean()), integer(), none | keep | snapshot()) ->
          snapshot().
snapshot(By, Skip, Deadline, Deltas) ->
    At = erlang:monotonic_time(millisecond),
    T0 = erlang:monotonic_time(microsecond),
    Items = items(By) ++ [reductions || Deltas =/= none],
    put(?MODULE, {0, []}),
    put({?MODULE, deltas}, deltas_start(Deltas)),
    {Groups, N, Truncated} = scan(erlang:processes(), By, Items, Skip, Deadline, #{}, 0),
    {_, Largest} = erase(?MODULE),
    Snapshot = #{by => By, at_ms => At, groups => Groups, scanned => N, truncated => Truncated,
                 largest => lists:reverse([{P, M} || {M, P} <- Largest]),
                 duration_us => erlang:monotonic_time(microsecond) - T0},
    maps:merge(Snapshot, deltas_end(erase({?MODULE, deltas}))).

%% @doc The groups of `After' with their change since `Before' (`undefined': none), ranked
%% by `Rank' (`count', `memory', `message_queue_len', `growth'); each `#{key, count, delta,
%% per_s, memory, queue, links, sample}'.
-spec compare(snapshot() | undefined, snapshot(), atom()) -> [map()].
compare(Before, #{groups := G1, at_ms := A1}, Rank) ->
    {G0, Secs} = case Before of
                     undefined -> {undefined, undefined};
                     #{groups := G, at_ms := A0} -> {G, max(1, A1 - A0) / 1000}
                 end,
    Rows = [row(K, V, G0, Secs) || {K, V} <- maps:to_list(G1)] ++
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
%%% Private: the scan
%%%===================================================================

items(By) ->
    Base = [initial_call, current_function, message_queue_len, memory, links]
        ++ [registered_name || By =:= name_prefix],
    case By =:= parent orelse By =:= origin of
        true ->
            case catch erlang:process_info(self(), parent) of
                {parent, _} -> Base ++ [parent];
                _ -> Base
            end;
        false -> Base
    end.

scan([], _By, _Items, _Skip, _Deadline, Groups, N) ->
    {Groups, N, false};
scan([P | Rest], By, Items, Skip, Deadline, Groups, N) ->
    case N band 1023 =:= 0 andalso erlang:monotonic_time(millisecond) > Deadline of
        true -> {Groups, N, true};
        false ->
            case pinfo_items(P, Items) of
                undefined -> scan(Rest, By, Items, Skip, Deadline, Groups, N);
                Info ->
                    Init = initial(P, element(2, lists:keyfind(initial_call, 1, Info))),
                    case Skip(Init) of
                        true -> scan(Rest, By, Items, Skip, Deadline, Groups, N);
                        false ->
                            Key = key(By, Init, Info),
                            scan(Rest, By, Items, Skip, Deadline, add(Key, P, Info, Groups), N + 1)
                    end
            end
    end.

initial(P, {proc_lib, init_p, 5} = Init) ->
    case dict_initial_call(proc_dict(P)) of
        undefined -> Init;
        MFA -> MFA
    end;
initial(_P, Init) ->
    Init.

key(initial_call, Init, _Info) -> Init;
key(current_function, _Init, Info) -> get(current_function, Info);
key(parent, _Init, Info) -> get(parent, Info);
key(name_prefix, _Init, Info) -> prefix(get(registered_name, Info));
key(origin, Init, Info) -> {Init, get(current_function, Info), get(parent, Info)}.

get(K, Info) ->
    case lists:keyfind(K, 1, Info) of
        {_, V} -> V;
        false -> undefined
    end.

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

add(Key0, P, Info, Groups) ->
    Key = case map_size(Groups) < ?MAX_GROUPS orelse is_map_key(Key0, Groups) of
              true -> Key0;
              false -> other
          end,
    Mem = get(memory, Info),
    put(?MODULE, largest(Mem, P, get(?MODULE))),
    deltas_add(P, Info),
    Q = get(message_queue_len, Info),
    L = length(get(links, Info)),
    case Groups of
        #{Key := #{count := C, memory := M, queue := Qs, links := Ls} = G} ->
            Groups#{Key := G#{count := C + 1, memory := M + Mem, queue := Qs + Q,
                              links := Ls + L, sample := P}};
        _ ->
            Groups#{Key => #{count => 1, memory => Mem, queue => Q, links => L, sample => P}}
    end.

%% Per-process deltas, kept in the scanning process's dictionary like `largest': `none';
%% `{keep, N, Procs}' while keeping; `{since, Before, TopReds, TopGrown, Sum}' while ranking.
deltas_start(none) -> none;
deltas_start(keep) -> {keep, 0, #{}};
deltas_start(#{procs := Before}) -> {since, Before, {0, []}, {0, []}, 0};
deltas_start(_) -> none.

deltas_add(P, Info) ->
    case get({?MODULE, deltas}) of
        none -> ok;
        {keep, N, Procs} when N < ?KEEP_PROCS ->
            put({?MODULE, deltas}, {keep, N + 1, Procs#{P => {get(reductions, Info),
                                                               get(memory, Info)}}});
        {keep, _, _} -> ok;
        {since, Before, Reds, Grown, Sum} ->
            {R0, M0} = maps:get(P, Before, {0, 0}),
            DR = get(reductions, Info) - R0,
            DM = get(memory, Info) - M0,
            put({?MODULE, deltas},
                {since, Before, top(DR, P, Reds), top(DM, P, Grown), Sum + max(0, DR)})
    end.

deltas_end(none) -> #{};
deltas_end({keep, N, Procs}) -> #{procs => Procs, procs_cut => N >= ?KEEP_PROCS};
deltas_end({since, _, {_, Reds}, {_, Grown}, Sum}) ->
    #{top_reductions => lists:reverse(Reds), top_grown => lists:reverse(Grown),
      reductions => Sum}.

top(D, P, {N, Top}) when N < ?TOP_DELTAS -> {N + 1, lists:sort([{D, P} | Top])};
top(D, P, {N, [{Min, _} | Rest]}) when D > Min -> {N, lists:sort([{D, P} | Rest])};
top(_D, _P, Top) -> Top.

%% The ?LARGEST largest `{Memory, Pid}' seen so far, smallest first (kept in the scanning
%% process's dictionary: the scan's own state stays as it was).
largest(Mem, P, {N, Top}) when N < ?LARGEST -> {N + 1, lists:sort([{Mem, P} | Top])};
largest(Mem, P, {N, [{Min, _} | Rest]}) when Mem > Min -> {N, lists:sort([{Mem, P} | Rest])};
largest(_Mem, _P, Top) -> Top.

%%%===================================================================
%%% Private: comparing and describing
%%%===================================================================

row(K, #{count := C} = V, G0, Secs) ->
    Delta = case G0 of
                undefined -> undefined;
                #{K := #{count := C0}} -> C - C0;
                _ -> C
            end,
    V#{key => K, delta => Delta, per_s => per_s(Delta, Secs)}.

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
