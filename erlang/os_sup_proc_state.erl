%%% @doc `os_sup_proc_state' reads an OTP process's state. Tool `get_state'
%%% shows it (a large one by its largest parts first, then its start), and
%%% the process-memory holder of `diagnose' learns which part of it grows:
%%% the state is read at both ends of a short window, its parts (a map's
%%% keys, a struct's fields, a tuple's elements) measured each time (entries
%%% and bytes), and the functions of its callback module that ran in between
%%% are counted (a short trace of that process, `os_sup_diagnose_makers').
%%%
%%% == Bounds and safety ==
%%% Only a process `os_sup_proc_otp' shows to run an OTP behaviour loop is
%%% asked, under a timeout (the agent's for `get_state', 300 ms for
%%% `growth/3'). A process whose heap is over 8 MB measures and renders its
%%% state itself (sys:replace_state with a function that answers by a throw,
%%% so the state stays as it was): its state is never copied. Others are
%%% copied with `sys:get_state/2'; for `growth/3' into a throw-away process
%%% with a heap limit that answers with the parts only (at most 64 parts):
%%% the state is never sent back whole.
-module(os_sup_proc_state).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text/2, fmt_arg/1]).
-import(os_sup_lib_proc, [resolve_pid/1, pinfo_items/2]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2, render_opt_name/2, bytes/1]).

%% API
-export([get_state/1, growth/3]).
%% run under a deadline and a heap limit
-export([parts_now/2]).

%% get_state: a state larger than STATE_BYTES is shown by its largest parts first, then its start
-define(STATE_BYTES, 16384).
-define(BIG_STATE_START_BYTES, 4096).
-define(BIG_STATE_PARTS, 10).
%% past this many keys a map is a collection, not named parts; a tuple's first this many
%% elements are its parts
-define(MAX_PARTS, 64).
%% growth/3: the state is read with this timeout, and this many grown parts are named
-define(STATE_MS, 300).
-define(SHOWN, 2).
%% the throw-away reader's heap: 8 M words (64 MB) holds the copy of the state
-define(HEAP, [{max_heap_size, #{size => 8000000, kill => true, error_logger => false}}]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc State of an OTP process: args `pid', `timeout_ms' (2000, 1..10000).
-spec get_state(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
get_state(Args) ->
    Fmt = fmt_arg(Args),
    Pid = resolve_pid(arg_text(pid, Args)),
    Timeout = arg_int(timeout_ms, Args, ?GET_STATE_TIMEOUT_DEFAULT_MS, ?GET_STATE_TIMEOUT_MS_MIN,
                      ?GET_STATE_TIMEOUT_MS_MAX),
    PidText = os_sup_lib_render:pid(Pid, Fmt),
    %% Nothing is sent unless the process is known to answer system messages.
    Otp = case os_sup_proc_otp:otp_behaviour(Pid) of
              {ok, Info} -> Info;
              {no, Kind, Detail} -> os_sup_proc_otp:not_otp(PidText, Kind, Detail, Fmt);
              gone -> fail(not_found, "process ~ts exited", [PidText])
          end,
    case pinfo_items(Pid, [status]) of
        undefined -> fail(not_found, "process ~ts exited", [PidText]);
        [{status, suspended}] ->
            fail(timeout, "~ts is suspended (erlang:suspend_process): it cannot answer "
                 "sys:get_state; use process_info instead", [PidText]);
        _ -> ok
    end,
    T0 = erlang:monotonic_time(microsecond),
    Seen = try read(Pid, maps:get(kind, Otp), fun(State) -> seen(State, Fmt) end, Timeout) of
               S -> S
           catch
               exit:{timeout, _} ->
                   fail(timeout, "~ts did not answer sys:get_state within ~b ms: it is busy "
                        "(in a callback, or still in init); its message queue and stacktrace "
                        "are in process_info",
                        [PidText, Timeout]);
               exit:{noproc, _} ->
                   fail(not_found, "process ~ts exited", [PidText]);
               exit:{Reason, _} ->
                   fail(not_otp, "sys:get_state failed for ~ts: ~ts",
                        [PidText, os_sup_lib_render:term(Reason, Fmt, 512)]);
               error:{callback_failed, _, {Class, Reason}} ->
                   fail(not_otp, "reading the state of ~ts in place failed (its state is as "
                        "it was): ~p: ~ts", [PidText, Class, os_sup_lib_render:term(Reason, Fmt, 512)])
           end,
    Us = erlang:monotonic_time(microsecond) - T0,
    #{bytes := Bytes, parts := Parts, summary := Summary, rendered := Rendered} = Seen,
    {Module, Behaviour} = case Seen of
                              #{dynamic_supervisor := true} ->
                                  {'Elixir.DynamicSupervisor', 'Elixir.DynamicSupervisor'};
                              _ -> {maps:get(module, Otp), maps:get(behaviour, Otp)}
                          end,
    {Queue, QueueLines} = queue(Pid, maps:get(kind, Otp), Fmt),
    Data = Queue#{pid => PidText, module => render_opt_name(Module, Fmt),
                  behaviour => render_opt_name(Behaviour, Fmt), state => Rendered,
                  state_bytes => Bytes, parts => [P || {P, _} <- Parts], duration_us => Us},
    Head = join([to_text(X) || X <- [PidText, maps:get(module, Data), maps:get(behaviour, Data)],
                               X =/= undefined], <<" ">>),
    ok_reply([Head | QueueLines ++ Summary ++ binary:split(Rendered, <<"\n">>, [global])], Data).

%% A gen_statem's hidden queue, beside its mailbox: the events it postponed (data key
%% `queue', `#{mailbox, postponed, shapes}'), said when it holds any.
queue(Pid, gen_statem, Fmt) ->
    Mailbox = os_sup_lib_proc:queue_len(Pid),
    case os_sup_proc_queue:postponed(Pid, Fmt) of
        #{count := 0} -> {#{}, []};
        #{count := N, shapes := Shapes} ->
            {#{queue => #{mailbox => Mailbox, postponed => N,
                          shapes => [#{shape => S, count => C} || {S, C} <- Shapes]}},
             [fmt("queue: ~b postponed events (~ts), ~b in its mailbox",
                  [N, join([fmt("~ts ×~b", [S, C]) || {S, C} <- Shapes], <<", ">>), Mailbox])]};
        {too_large, Bytes} ->
            {#{}, [fmt("queue: its postponed events not read (the process holds ~ts: reading "
                       "them would copy its state)", [os_sup_lib_text:bytes(Bytes)])]};
        none -> {#{}, []}
    end;
queue(_Pid, _Kind, _Fmt) ->
    {#{}, []}.

%% @doc For an OTP process: `#{text, target}', the parts of its state that grew over `Ms' (with
%% rates) and the functions of its module that ran meanwhile (`target' is the one that ran
%% most, `Mod.fun/2'); `undefined' when its state cannot be read.
-spec growth(pid(), pos_integer(), os_sup_lib_render:fmt()) -> map() | undefined.
growth(Pid, Ms, Fmt) ->
    case os_sup_proc_otp:otp_behaviour(Pid) of
        {ok, #{module := M, kind := Kind}} ->
            T0 = erlang:monotonic_time(millisecond),
            case parts(Pid, Kind) of
                {ok, P0} ->
                    Ran = os_sup_diagnose_makers:find(Pid, {module, M}, Ms),
                    Secs = max(1, erlang:monotonic_time(millisecond) - T0) / 1000,
                    case parts(Pid, Kind) of
                        {ok, P1} -> describe(P0, P1, Secs, Ran, Fmt);
                        _ -> undefined
                    end;
                _ -> undefined
            end;
        _ -> undefined
    end.

%%%===================================================================
%%% Internal entry points (run under a deadline and a heap limit)
%%%===================================================================

%% @private The parts of `Pid''s state: `[{Key, Entries | undefined, Bytes}]' (measured in
%% `Pid' when its heap is large, see read/4).
-spec parts_now(pid(), atom()) -> [{term(), non_neg_integer() | undefined, non_neg_integer()}].
parts_now(Pid, Kind) ->
    read(Pid, Kind, fun(State) -> [{K, entries(V), term_bytes(V)} || {K, V} <- split(State)] end,
         ?STATE_MS).

%%%===================================================================
%%% Private: get_state
%%%===================================================================

%% `Fun' applied to `Pid''s state. A heavy process (os_sup_trace_session:heavy_bytes/0) runs it
%% itself, on its state as it is: sys:replace_state calls `Fun' there, its answer comes back as
%% a throw, which sys catches (`callback_failed') leaving the state as it was; a copy would
%% grow this node by the state's size (200 MB for a 200 MB state, held until collected).
%% Others are copied (sys:get_state) and `Fun' runs here. gen_event applies replace_state to
%% each handler's state in turn, so it is always copied.
read(Pid, Kind, Fun, Timeout) ->
    case in_place(Pid, Kind) of
        true ->
            Tag = make_ref(),
            try sys:replace_state(Pid, fun(State) -> throw({Tag, Fun(State)}) end, Timeout) of
                _ -> error({not_read_in_place, Kind})
            catch
                error:{callback_failed, _, {throw, {Tag, Seen}}} -> Seen
            end;
        false ->
            Fun(sys:get_state(Pid, Timeout))
    end.

in_place(Pid, Kind) ->
    lists:member(Kind, [gen_server, gen_statem, gen_fsm, supervisor, supervisor_bridge])
        andalso case pinfo_items(Pid, [total_heap_size]) of
                    [{total_heap_size, Words}] ->
                        Words * erlang:system_info(wordsize) > os_sup_trace_session:heavy_bytes();
                    _ -> false
                end.

%% What get_state shows of a state: its size, and when it is large its largest parts (or its
%% shape when it has none) above its start.
seen(State, Fmt) ->
    Bytes = term_bytes(State),
    {Parts, Budget} = case Bytes > ?STATE_BYTES of
                          true -> {state_parts(State, Fmt), ?BIG_STATE_START_BYTES};
                          false -> {[], ?STATE_BYTES}
                      end,
    Summary = if
                  Bytes =< ?STATE_BYTES -> [];
                  Parts =:= [] ->
                      [fmt("state: ~ts, ~ts; its first ~ts:",
                           [size_of(State, Fmt), bytes(Bytes), bytes(Budget)])];
                  true ->
                      [fmt("state: ~ts; largest parts first:", [bytes(Bytes)])
                       | [Line || {_, Line} <- Parts]]
                          ++ [fmt("state, its first ~ts:", [bytes(Budget)])]
              end,
    #{bytes => Bytes, parts => Parts, summary => Summary,
      rendered => os_sup_lib_render:pretty(State, Fmt, Budget),
      dynamic_supervisor => is_map(State)
          andalso maps:get('__struct__', State, undefined) =:= 'Elixir.DynamicSupervisor'}.

%% A term's size in bytes: on a heap, or encoded when more (its binaries counted whole, where
%% on a heap a large one is only its reference).
term_bytes(Term) ->
    try max(erts_debug:flat_size(Term) * erlang:system_info(wordsize), erlang:external_size(Term))
    catch _:_ -> 0
    end.

%% The largest parts of a state, most bytes first: a map's (or struct's) values by key, a
%% small tuple's (a record's) elements by position; each `{Data, Line}'.
state_parts(State, Fmt) ->
    Named = if
                is_map(State), map_size(State) =< ?MAX_PARTS ->
                    [{os_sup_lib_render:term(K, Fmt, 80), V} || {K, V} <- maps:to_list(State),
                                                            K =/= '__struct__'];
                is_tuple(State), tuple_size(State) =< ?MAX_PARTS ->
                    [{fmt("element ~b", [I]), element(I, State)}
                     || I <- lists:seq(1, tuple_size(State))];
                true -> []
            end,
    Sized = lists:reverse(lists:sort([{term_bytes(V), Name, V} || {Name, V} <- Named])),
    [{#{part => Name, bytes => B, shape => size_of(V, Fmt)},
      fmt("  ~ts: ~ts, ~ts", [Name, size_of(V, Fmt), bytes(B)])}
     || {B, Name, V} <- lists:sublist(Sized, ?BIG_STATE_PARTS)].

%% What a value is, by its size (`list of 7320', `map of 2 keys', `binary of 90 bytes'), or
%% a small one itself.
size_of(V, _Fmt) when is_list(V) -> try fmt("list of ~b", [length(V)]) catch _:_ -> <<"improper list">> end;
size_of(V, _Fmt) when is_map(V) -> fmt("map of ~b keys", [map_size(V)]);
size_of(V, _Fmt) when is_binary(V), byte_size(V) > 40 -> fmt("binary of ~b bytes", [byte_size(V)]);
size_of(V, _Fmt) when is_tuple(V) -> fmt("tuple of ~b", [tuple_size(V)]);
size_of(V, Fmt) -> os_sup_lib_render:term(V, Fmt, 40).

%%%===================================================================
%%% Private: growth
%%%===================================================================

parts(Pid, Kind) ->
    os_sup_lib_call:call_with_deadline({?MODULE, parts_now, [Pid, Kind]}, ?STATE_MS + 200, ?HEAP).

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
