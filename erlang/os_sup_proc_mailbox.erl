%%% @doc `os_sup_proc_mailbox' counts a process's queued messages by shape.
%%% A shape keeps OTP's envelopes and one level of the payload
%%% (`$gen_cast {:post, _, _}', `$gen_call :balance', `{:DOWN, _, _, _, _}'),
%%% so a queue of 10,000 messages reads as a few lines; a sample shows the
%%% first message of each shape. Reading the queue copies it: it is read
%%% only when it holds at most a given number of messages, and the callers
%%% run it in a throw-away process under a heap limit and a deadline
%%% (`process_info', the health report's mailbox and contention findings).
-module(os_sup_proc_mailbox).

-import(os_sup_lib_proc, [pinfo_items/2]).

%% API
-export([shapes/4, shape/1, shape_text/2, message_shape/2]).

-define(TERM_BYTES, 1024).
%% past this many shapes, the others count as one
-define(MAILBOX_SHAPES, 1000).
-define(MAILBOX_SHOWN, 10).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The mailbox of `Pid' counted by message shape (`$gen_cast {:post, _, _}',
%% `$gen_call :balance', `{:DOWN, _, _, _, _}'...), most frequent first, and its first
%% `Sample' messages rendered (`{each_shape, N}': the first of each shape, at most N); reads the queue (a copy) only when it holds at most `Max'
%% messages: `{skipped, Queued}' otherwise, `gone' when the process exited. Meant to run
%% in a process with a heap limit.
-spec shapes(pid(), pos_integer(), non_neg_integer() | {each_shape, pos_integer()},
             os_sup_lib_render:fmt()) ->
          #{queued := non_neg_integer(), read := non_neg_integer(),
            shapes := [#{shape := binary(), count := pos_integer()}],
            other_shapes := non_neg_integer(), sample := [binary()],
            duration_us := non_neg_integer()}
              | {skipped, non_neg_integer()} | gone.
%% @doc One message's shape as {@link shapes/4} counts it (`{:refresh, _}', `:tick').
-spec message_shape(term(), os_sup_lib_render:fmt()) -> binary().
message_shape(Msg, Fmt) ->
    shape_text(shape(Msg), Fmt).

shapes(Pid, Max, Sample, Fmt) ->
    T0 = erlang:monotonic_time(microsecond),
    case pinfo_items(Pid, [message_queue_len]) of
        undefined -> gone;
        [{_, Q}] when Q > Max -> {skipped, Q};
        [{_, _}] ->
            case pinfo_items(Pid, [messages]) of
                [{messages, Ms}] when is_list(Ms) ->
                    Counts = count_shapes(Ms, 1, #{}),
                    Sorted = lists:reverse(lists:keysort(2, [{S, C} || {S, {C, _}}
                                                                    <- maps:to_list(Counts)])),
                    {Shown, Rest} = lists:split(min(?MAILBOX_SHOWN, length(Sorted)), Sorted),
                    #{queued => length(Ms), read => length(Ms),
                      shapes => [#{shape => shape_text(S, Fmt), count => C} || {S, C} <- Shown],
                      other_shapes => length(Rest),
                      other_count => lists:sum([C || {_, C} <- Rest]),
                      sample => [os_sup_lib_render:term(M, Fmt, ?TERM_BYTES)
                                 || M <- sample_messages(Ms, Counts, Sample)],
                      duration_us => erlang:monotonic_time(microsecond) - T0};
                _ -> gone
            end
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% The first message of each shape (its place kept by count_shapes/3), then the next ones, in
%% queue order: a sample shows every kind of message queued, not the first few of the most
%% common one.
sample_messages(Ms, Counts, {each_shape, N}) ->
    pick(Ms, 1, lists:sublist(lists:sort([First || {_, First} <- maps:values(Counts)]), N));
sample_messages(Ms, Counts, N) ->
    Firsts = lists:sublist(lists:sort([First || {_, First} <- maps:values(Counts)]), N),
    Fill = lists:sublist([I || I <- lists:seq(1, min(length(Ms), 2 * N)),
                               not lists:member(I, Firsts)], N - length(Firsts)),
    pick(Ms, 1, lists:sort(Firsts ++ Fill)).

pick(_, _, []) -> [];
pick([M | Ms], I, [I | Is]) -> [M | pick(Ms, I + 1, Is)];
pick([_ | Ms], I, Is) -> pick(Ms, I + 1, Is);
pick([], _, _) -> [].

%% Shape => {Count, the place of its first message}; past ?MAILBOX_SHAPES shapes, `other'.
count_shapes([], _I, Acc) ->
    Acc;
count_shapes([M | Rest], I, Acc) ->
    S0 = shape(M),
    S = case map_size(Acc) < ?MAILBOX_SHAPES orelse is_map_key(S0, Acc) of
            true -> S0;
            false -> other
        end,
    Counted = case Acc of
                  #{S := {C, First}} -> {C + 1, First};
                  _ -> {1, I}
              end,
    count_shapes(Rest, I + 1, Acc#{S => Counted}).

%% @doc A message's shape: OTP envelopes kept (`{'$gen_cast', Inner}'), one level of the
%% payload (`{atom, A}', `{tuple, Tag, Arity}', `{struct, Name}', otherwise the type).
-spec shape(term()) -> term().
shape({'$gen_cast', Msg}) -> {'$gen_cast', inner(Msg)};
shape({'$gen_call', _From, Req}) -> {'$gen_call', inner(Req)};
shape({system, _From, Req}) -> {system, inner(Req)};
shape(M) -> inner(M).

inner(A) when is_atom(A) -> {atom, A};
inner(T) when is_tuple(T), tuple_size(T) > 0, is_atom(element(1, T)) ->
    {tuple, element(1, T), tuple_size(T)};
inner(T) when is_tuple(T) -> {tuple, '_', tuple_size(T)};
inner(#{'__struct__' := S}) when is_atom(S) -> {struct, S};
inner(M) when is_map(M) -> map;
inner(B) when is_binary(B) -> binary;
inner(L) when is_list(L) -> list;
inner(I) when is_integer(I) -> integer;
inner(F) when is_float(F) -> float;
inner(P) when is_pid(P) -> pid;
inner(R) when is_reference(R) -> reference;
inner(F) when is_function(F) -> 'fun';
inner(P) when is_port(P) -> port;
inner(_) -> term.

%% @doc A shape from {@link shape/1} as the agent reads it (`$gen_cast {:post, _, _}').
-spec shape_text(term(), os_sup_lib_render:fmt()) -> binary().
shape_text(other, _Fmt) -> <<"(other shapes)">>;
shape_text({Envelope, Inner}, Fmt) when Envelope =:= '$gen_cast'; Envelope =:= '$gen_call';
                                        Envelope =:= system ->
    <<(atom_to_binary(Envelope, utf8))/binary, " ", (shape_text(Inner, Fmt))/binary>>;
shape_text({atom, A}, Fmt) -> os_sup_lib_render:term(A, Fmt, 256);
shape_text({tuple, Tag, N}, Fmt) ->
    Head = case Tag of
               '_' -> <<"_">>;
               _ -> os_sup_lib_render:term(Tag, Fmt, 256)
           end,
    Sep = case Fmt of elixir -> <<", ">>; _ -> <<",">> end,
    iolist_to_binary([<<"{">>, lists:join(Sep, [Head | lists:duplicate(N - 1, <<"_">>)]),
                      <<"}">>]);
shape_text({struct, S}, elixir) -> <<"%", (os_sup_lib_render:name(S, elixir))/binary, "{}">>;
shape_text({struct, S}, Fmt) -> <<"#{'__struct__' => ", (os_sup_lib_render:name(S, Fmt))/binary, "}">>;
shape_text(map, elixir) -> <<"%{...}">>;
shape_text(map, _) -> <<"#{...}">>;
shape_text(binary, elixir) -> <<"\"...\"">>;
shape_text(binary, _) -> <<"<<...>>">>;
shape_text(list, _) -> <<"[...]">>;
shape_text(Type, elixir) -> <<"<", (atom_to_binary(Type, utf8))/binary, ">">>;
shape_text(Type, _) -> <<(atom_to_binary(Type, utf8))/binary, "()">>.
