%%%-------------------------------------------------------------------
%%% @doc `os_sup_proc_state' says which part of an OTP process's state
%%% grows, for the process-memory holder of `diagnose': the state is read at
%%% both ends of a short window, its parts (a map's keys, a struct's fields,
%%% a tuple's elements) measured each time (entries and bytes), and the
%%% functions of its callback module that ran in between are counted (a
%%% short trace of that process, `os_sup_health_makers').
%%%
%%% == API ==
%%% <ul>
%%%   <li>{@link growth/3}: the parts that grew, and the functions that ran.</li>
%%% </ul>
%%%
%%% == Bounds and safety ==
%%% Only an OTP process (`os_sup_proc_otp:otp_behaviour/1') is asked, with
%%% `sys:get_state/2' under a 300 ms timeout, in a throw-away process with a
%%% heap limit that measures the state and answers with its parts only (at
%%% most 64 parts; a state over the heap limit is not measured). The state
%%% is never sent back whole.
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_proc_state).

-import(os_sup_lib_text, [fmt/2, bytes/1]).

%% API
-export([growth/3]).
%% run under a deadline and a heap limit
-export([parts_now/1]).

-define(STATE_MS, 300).
-define(MAX_PARTS, 64).
-define(SHOWN, 2).
%% the throw-away reader's heap: 8 M words (64 MB) holds the copy of the state
-define(HEAP, [{max_heap_size, #{size => 8000000, kill => true, error_logger => false}}]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc For an OTP process: `#{text, target}', the parts of its state that grew over `Ms' (with
%% rates) and the functions of its module that ran meanwhile (`target' is the one that ran
%% most, `Mod.fun/2'); `undefined' when its state cannot be read.
-spec growth(pid(), pos_integer(), os_sup_lib_render:fmt()) -> map() | undefined.
growth(Pid, Ms, Fmt) ->
    case os_sup_proc_otp:otp_behaviour(Pid) of
        {ok, #{module := M}} ->
            T0 = erlang:monotonic_time(millisecond),
            case parts(Pid) of
                {ok, P0} ->
                    Ran = os_sup_health_makers:find(Pid, {module, M}, Ms),
                    Secs = max(1, erlang:monotonic_time(millisecond) - T0) / 1000,
                    case parts(Pid) of
                        {ok, P1} -> describe(P0, P1, Secs, Ran, Fmt);
                        _ -> undefined
                    end;
                _ -> undefined
            end;
        _ -> undefined
    end.

%% @private The parts of `Pid''s state: `[{Key, Entries | undefined, Bytes}]'.
-spec parts_now(pid()) -> [{term(), non_neg_integer() | undefined, non_neg_integer()}].
parts_now(Pid) ->
    State = sys:get_state(Pid, ?STATE_MS),
    Word = erlang:system_info(wordsize),
    [{K, entries(V), Word * erts_debug:flat_size(V)} || {K, V} <- split(State)].

%%%===================================================================
%%% Private
%%%===================================================================

parts(Pid) ->
    os_sup_lib_call:call_with_deadline({?MODULE, parts_now, [Pid]}, ?STATE_MS + 200, ?HEAP).

%% A struct's fields, a small map's keys, a record's (a tuple's) elements by position; a
%% gen_statem's `{State, Data}' by its data's parts; anything else (a map of many keys: a
%% collection, not fields) as one part.
split(#{} = Map) when map_size(Map) =< ?MAX_PARTS ->
    [KV || {K, _} = KV <- maps:to_list(Map), K =/= '__struct__'];
split({StateName, Data}) when is_atom(StateName), (is_map(Data) orelse is_tuple(Data)) ->
    split(Data);
split(Tuple) when is_tuple(Tuple), tuple_size(Tuple) > 0 ->
    Elements = lists:zip(lists:seq(1, tuple_size(Tuple)), tuple_to_list(Tuple)),
    [{{element, I}, V} || {I, V} <- lists:sublist(Elements, ?MAX_PARTS)];
split(Other) ->
    [{state, Other}].

entries(V) when is_map(V) -> map_size(V);
entries({In, Out} = V) when is_list(In), is_list(Out) ->
    %% A `:queue': its length (what `queue:is_queue/1' accepts).
    try queue:len(V) catch error:_ -> undefined end;
entries(V) when is_list(V) ->
    try length(V) catch error:badarg -> undefined end;
entries(_) -> undefined.

describe(P0, P1, Secs, Ran, Fmt) ->
    Before = maps:from_list([{K, {E, B}} || {K, E, B} <- P0]),
    Grown = lists:reverse(lists:sort(
                            [{B1 - B0, K, E1, E0, B1} || {K, E1, B1} <- P1,
                                                         {E0, B0} <- [maps:get(K, Before, {0, 0})],
                                                         B1 > B0 orelse grew(E0, E1)])),
    Flat = length(P1) - length(Grown),
    Parts = [part_text(K, E0, E1, B1, DB, Secs, Fmt) || {DB, K, E1, E0, B1} <- lists:sublist(Grown, ?SHOWN)],
    PartsText = case Parts of
                    [] -> no_growth(P1, Secs, Fmt);
                    _ -> [lists:join(", ", Parts),
                          case Flat of
                              0 -> <<>>;
                              _ -> fmt("; ~b other part~ts flat", [Flat, plural(Flat)])
                          end]
                end,
    {RanText, Target} = ran(Ran, Fmt),
    Text = iolist_to_binary(["its state: ", PartsText, RanText]),
    case Target of
        undefined -> #{text => Text};
        _ -> #{text => Text, target => Target}
    end.

grew(E0, E1) -> is_integer(E0) andalso is_integer(E1) andalso E1 > E0.

%% Growth in bursts (a queue filled only in one state) can pause for the whole read: then
%% where its memory is, the largest parts with their share.
no_growth(Parts, Secs, Fmt) ->
    Total = max(1, lists:sum([B || {_, _, B} <- Parts])),
    Largest = os_sup_lib_rank:top(?SHOWN, 3, Parts),
    [fmt("no part grew in ~.1f s; the largest: ", [Secs]),
     lists:join(", ", [fmt("~ts~ts ~ts (~b %)",
                           [key(K, Fmt), case E of
                                             N when is_integer(N) -> fmt(" ~b entries,", [N]);
                                             _ -> <<>>
                                         end, bytes(B), round(B * 100 / Total)])
                       || {K, E, B} <- Largest])].

part_text(K, E0, E1, B1, DB, Secs, Fmt) ->
    Entries = case {E0, E1} of
                  {N0, N1} when is_integer(N0), is_integer(N1) ->
                      fmt(" ~b entries (~ts~.1f/s),", [N1, sign(N1 - N0), (N1 - N0) / Secs]);
                  _ -> <<>>
              end,
    fmt("~ts~ts ~ts (~ts~ts/s)", [key(K, Fmt), Entries, bytes(B1), sign(DB), bytes(round(abs(DB) / Secs))]).

key({element, I}, _Fmt) -> fmt("element ~b", [I]);
key(state, _Fmt) -> <<"the whole state">>;
key(K, Fmt) -> os_sup_lib_render:term(K, Fmt, 40).

sign(N) when N >= 0 -> "+";
sign(_) -> "-".

plural(1) -> "";
plural(_) -> "s".

%% The functions of its module that ran in the window, most first.
ran({ok, [_ | _] = Ran, _All, Ms}, Fmt) ->
    [#{mfa := Top} | _] = Ran,
    {["; in ", os_sup_lib_time:secs(Ms), " it ran ",
      lists:join(", ", [fmt("~ts ~b×", [os_sup_proc_origin:describe_frame(R, Fmt), C])
                        || #{count := C} = R <- Ran])],
     os_sup_lib_render:mfa(Top, Fmt)};
ran({ok, [], _, Ms}, _Fmt) ->
    {fmt("; none of its module's functions ran in ~.1f s", [Ms / 1000]), undefined};
ran({none, Why}, _Fmt) ->
    {["; its calls not traced: ", Why], undefined}.
