%%% @doc `os_sup_lib_render' turns any term into a bounded, readable binary
%%% in the node's language, for every tool and for `eval''s results.
%%% Kernel and stdlib only; Elixir's `inspect' is used only when Elixir is
%%% loaded.
%%%
%%% == Formats ==
%%% <ul>
%%%   <li>{@link format/1}: resolve the `format' argument
%%%       (`elixir | erlang | auto'; `auto' is elixir when Elixir is loaded).</li>
%%% </ul>
%%%
%%% == Terms ==
%%% <ul>
%%%   <li>{@link term/2}, {@link term/3}: any term, compact, bounded.</li>
%%%   <li>{@link pretty/3}: any term, multi-line, bounded.</li>
%%%   <li>{@link pid/2}: a pid spelled so it can be passed back
%%%       (`<0.1.0>' / `#PID<0.1.0>').</li>
%%%   <li>{@link name/2}: an atom (module or registered name):
%%%       `DemoApp.Counter' / `:user' (elixir), `'Elixir.DemoApp.Counter''
%%%       / `user' (erlang).</li>
%%%   <li>{@link mfa/2}: `{M, F, A}' as `M.f/1' or `m:f/1'.</li>
%%%   <li>{@link call/3}: `{M, F, Args}' as `M.f(1, 2)' or `m:f(1, 2)'.</li>
%%% </ul>
%%%
%%% == Bounds ==
%%% <ul>
%%%   <li>{@link bound/2}: cut a binary at a byte limit on a UTF-8 boundary
%%%       and append `...(truncated)'.</li>
%%%   <li>{@link lines/2}: join lines with newlines under a byte cap.</li>
%%%   <li>{@link utf8_trim/1}: drop a UTF-8 sequence cut in two at the end.</li>
%%% </ul>
%%%
%%% Nothing here raises: a term that cannot be rendered one way is rendered
%%% another way, and the worst case is a short placeholder.
-module(os_sup_lib_render).

-export([format/1, elixir_loaded/0,
         term/2, term/3, shape/3, pretty/3, pid/2, name/2, mfa/2, call/3,
         bound/2, lines/2, to_bin/1, utf8_trim/1, grouped/3, counted/1]).

-define(DEFAULT_BYTES, 1024).
-define(ERL_DEPTH, 20).
-define(MARKER, <<"...(truncated)">>).
%% A shaped struct's field, at most (a path, a name, an id).
-define(FIELD_BYTES, 72).
%% The fields that tell a struct from another of its kind, shown first when it is shaped.
-define(IDENTIFYING, [method, request_path, path, status, id, name, key, type, kind, state]).
%% A struct without such fields is told by this many of its first small ones.
-define(FIRST_FIELDS, 3).

-type fmt() :: elixir | erlang.
-export_type([fmt/0]).

%%%===================================================================
%%% Formats
%%%===================================================================

%% @doc The rendering format for `Requested' (`elixir | erlang | auto', atom or binary).
-spec format(term()) -> fmt().
format(elixir) -> elixir_or_erlang();
format(<<"elixir">>) -> elixir_or_erlang();
format(erlang) -> erlang;
format(<<"erlang">>) -> erlang;
format(_) ->
    case elixir_loaded() of
        true -> elixir;
        false -> erlang
    end.

%% @doc True when Elixir's `Kernel' module is loaded on this node.
-spec elixir_loaded() -> boolean().
elixir_loaded() ->
    case code:is_loaded('Elixir.Kernel') of
        {file, _} -> true;
        false -> false
    end.

elixir_or_erlang() ->
    case elixir_loaded() of
        true -> elixir;
        false -> erlang
    end.

%%%===================================================================
%%% Terms
%%%===================================================================

%% @doc `Term' rendered compactly, cut at 1024 bytes.
-spec term(term(), fmt()) -> binary().
term(Term, Fmt) ->
    term(Term, Fmt, ?DEFAULT_BYTES).

%% @doc `Term' rendered compactly, cut at `Max' bytes with a visible marker.
-spec term(term(), fmt(), pos_integer()) -> binary().
term(Term, elixir, Max) ->
    bound(safe(fun() ->
                       inspect(Term, [{limit, 50}, {printable_limit, 1024}, {pretty, false}])
               end,
               fun() -> erl_term(Term) end), Max);
term(Term, _, Max) ->
    bound(erl_print(Term, ?ERL_DEPTH, 1000000, Max + 64), Max).

%% @doc `Term' within `Max' bytes as it prints when it fits, else by its shape and size, its
%% largest part named: `{:noreply, %{sessions: [2500 items]…} 1.0MB}', a
%% binary's printable start as a string. For a trace event's arguments: a large state is
%% told, not dumped.
-spec shape(term(), fmt(), pos_integer()) -> binary().
shape(Term, Fmt, Max) ->
    case term(Term, Fmt, Max) of
        Whole when byte_size(Whole) =< Max -> Whole;
        _ -> bound(unicode:characters_to_binary(shaped(Term, Fmt, Max)), Max + 32)
    end.

shaped(Term, Fmt, Max) when is_tuple(Term), tuple_size(Term) > 0, tuple_size(Term) =< 8 ->
    Share = max(24, Max div tuple_size(Term)),
    ["{", lists:join(", ", [shape(E, Fmt, Share) || E <- tuple_to_list(Term)]), "}"];
shaped(#{} = Map, Fmt, Max) ->
    Open = case {Fmt, Map} of
               {elixir, #{'__struct__' := S}} when is_atom(S) -> ["%", name(S, Fmt), "{"];
               {elixir, _} -> "%{";
               _ -> "#{"
           end,
    Parts = [{erts_debug:flat_size(V), K, V} || {K, V} <- maps:to_list(Map), K =/= '__struct__'],
    %% A struct is told by the fields that tell one from another (a method, a path, a status,
    %% an id), or lacking such names by its first few small fields, within two thirds of the
    %% budget, the rest elided with its size; a plain map (or a struct with no small field) by
    %% its largest part, by kind and count.
    Small = case Map of
                #{'__struct__' := Struct} when is_atom(Struct) ->
                    small_fields(identifying(Struct, [{K, V} || {_, K, V} <- Parts]), Fmt,
                                 Max * 2 div 3);
                _ -> []
            end,
    Largest = case {Small, lists:reverse(lists:sort(Parts))} of
                  {[], [{_, K, V} | _]} -> [[key(K, Fmt), summary(V, Fmt)]];
                  _ -> []
              end,
    Shown = [[key(K, Fmt), term(V, Fmt, ?FIELD_BYTES)] || {K, V} <- Small] ++ Largest,
    More = case {length(Parts) > length(Shown), Small} of
               {true, []} -> "…";
               {true, _} -> ", …";
               {false, _} -> []
           end,
    [Open, lists:join(", ", Shown), More, "} ", size_text(Map)];
shaped(Term, Fmt, _Max) ->
    summary(Term, Fmt).

%% A value small enough to show whole in a shaped map.
plain(V) -> is_atom(V) orelse is_number(V) orelse (is_binary(V) andalso byte_size(V) =< 64).

%% The plain fields of struct `Struct' that tell it from another of its kind: those named
%% `?IDENTIFYING' (in that order), or when it has none, its first ?FIRST_FIELDS small ones
%% (not nil) in the order it defines them.
identifying(Struct, Fields) ->
    Plain = [{K, V} || {K, V} <- Fields, plain(V)],
    case [{K, V} || K <- ?IDENTIFYING, {K1, V} <- Plain, K1 =:= K] of
        [] ->
            First = [{K, V} || K <- struct_order(Struct, Plain), {K1, V} <- Plain, K1 =:= K,
                               V =/= nil],
            lists:sublist(First, ?FIRST_FIELDS);
        Named ->
            Named
    end.

%% The struct's field names in the order its module defines them (Elixir's
%% `__info__(:struct)`, only when the module is loaded); else sorted.
struct_order(Struct, Plain) ->
    Sorted = lists:sort([K || {K, _} <- Plain]),
    case erlang:function_exported(Struct, '__info__', 1) of
        true ->
            try Struct:'__info__'(struct) of
                Defs when is_list(Defs) -> [F || #{field := F} <- Defs];
                _ -> Sorted
            catch _:_ -> Sorted
            end;
        false -> Sorted
    end.

%% The `{Key, Value}' pairs of `Fields' that fit in `Budget' bytes rendered, in order (one
%% that does not fit is skipped, a shorter one after it may).
small_fields(Fields, Fmt, Budget) ->
    {Kept, _} = lists:foldl(fun({K, V}, {Acc, Left}) ->
                                    Size = iolist_size([key(K, Fmt), term(V, Fmt, ?FIELD_BYTES)]) + 2,
                                    case Size =< Left of
                                        true -> {[{K, V} | Acc], Left - Size};
                                        false -> {Acc, Left}
                                    end
                            end, {[], Budget}, Fields),
    lists:reverse(Kept).

key(K, elixir) when is_atom(K) -> [atom_to_binary(K, utf8), ": "];
key(K, Fmt) -> [term(K, Fmt, 40), " => "].

%% A value by its kind and count: `[2500 items]', `%{40 keys}', `"abc…" 65536 bytes'.
summary(L, _Fmt) when is_list(L) ->
    Items = try length(L) catch error:badarg -> improper end,
    fmt("[~tp items]", [Items]);
summary(#{} = M, Fmt) ->
    [case Fmt of elixir -> "%{"; _ -> "#{" end, fmt("~b keys}", [map_size(M)])];
summary(B, Fmt) when is_binary(B), byte_size(B) > 48 ->
    [term(binary:part(B, 0, 32), Fmt, 48), fmt("… ~b bytes", [byte_size(B)])];
summary(T, _Fmt) when is_tuple(T) ->
    fmt("{~b elements}", [tuple_size(T)]);
summary(T, Fmt) ->
    term(T, Fmt, 48).

size_text(T) ->
    os_sup_lib_text:bytes(erts_debug:flat_size(T) * erlang:system_info(wordsize)).

%% @doc `Term' rendered over several lines (Elixir pretty printer or `~tP'), cut at `Max' bytes;
%% a string shows its first `Max' div 4 characters at most, so one long binary leaves room for
%% the rest.
-spec pretty(term(), fmt(), pos_integer()) -> binary().
pretty(Term, elixir, Max) ->
    bound(safe(fun() ->
                       inspect(Term, [{limit, 100}, {printable_limit, max(64, Max div 4)},
                                      {pretty, true}, {width, 98}])
               end,
               fun() -> erl_term(Term) end), Max);
pretty(Term, _, Max) ->
    bound(erl_print(Term, 40, 98, Max + 64), Max).

%% @doc A pid as `<0.1.0>' (erlang) or `#PID<0.1.0>' (elixir); other terms via {@link term/2}.
-spec pid(term(), fmt()) -> binary().
pid(Pid, elixir) when is_pid(Pid) ->
    <<"#PID", (list_to_binary(pid_to_list(Pid)))/binary>>;
pid(Pid, _) when is_pid(Pid) ->
    list_to_binary(pid_to_list(Pid));
pid(Other, Fmt) ->
    term(Other, Fmt, 256).

%% @doc An atom (module or registered name) in the format's spelling; other terms via {@link term/2}.
-spec name(term(), fmt()) -> binary().
name(Atom, elixir) when is_atom(Atom) ->
    case atom_to_binary(Atom, utf8) of
        <<"Elixir.", Rest/binary>> -> Rest;
        _ -> term(Atom, elixir, 512)
    end;
name(Atom, _) when is_atom(Atom) ->
    fmt("~tp", [Atom]);
name(Other, Fmt) ->
    term(Other, Fmt, 512).

%% @doc `{M, F, A}' (arity or argument list) as `M.f/1' (elixir) or `m:f/1' (erlang).
-spec mfa(term(), fmt()) -> binary().
mfa({M, F, Args}, Fmt) when is_atom(M), is_atom(F), is_list(Args) ->
    mfa({M, F, length(Args)}, Fmt);
mfa({M, F, A}, elixir) when is_atom(M), is_atom(F), is_integer(A) ->
    <<(name(M, elixir))/binary, ".", (fun_name(F))/binary, "/", (integer_to_binary(A))/binary>>;
mfa({M, F, A}, _) when is_atom(M), is_atom(F), is_integer(A) ->
    fmt("~tp:~tp/~b", [M, F, A]);
mfa(Other, Fmt) ->
    term(Other, Fmt, 256).

%% @doc `{M, F, Args}' as `M.f(a, b)' (elixir) or `m:f(a, b)' (erlang), cut at `Max' bytes;
%% each argument gets an equal share of the budget.
-spec call({atom(), atom(), list()}, fmt(), pos_integer()) -> binary().
call({M, F, Args}, Fmt, Max) when is_atom(M), is_atom(F), is_list(Args) ->
    Head = case Fmt of
               elixir -> <<(name(M, elixir))/binary, ".", (fun_name(F))/binary>>;
               _ -> fmt("~tp:~tp", [M, F])
           end,
    Share = max(32, (Max - byte_size(Head)) div max(1, length(Args))),
    Rendered = lists:join(<<", ">>, [shape(A, Fmt, Share) || A <- Args]),
    bound(iolist_to_binary([Head, "(", Rendered, ")"]), Max);
call(Other, Fmt, Max) ->
    term(Other, Fmt, Max).

%% @doc Links or monitors, the same target counted once and only the first `Max' rendered
%% (`{Hub.Server, :node} × 50'), then `… 279 more (12 targets not shown)' when cut. Counted on
%% the terms as they are: a process with 100,000 monitors costs a map of its targets, not
%% 100,000 rendered binaries.
-spec grouped([term()], fun((term()) -> binary()), pos_integer()) -> [binary()].
grouped(Targets, Render, Max) ->
    Counted = counted(Targets),
    Shown = [case N of
                 1 -> Render(T);
                 _ -> fmt("~ts × ~b", [Render(T), N])
             end || {T, N} <- lists:sublist(Counted, Max)],
    case length(Counted) - Max of
        More when More > 0 ->
            Left = lists:sum([N || {_, N} <- lists:nthtail(Max, Counted)]),
            Shown ++ [fmt("… ~b more (~b targets not shown)", [Left, More])];
        _ -> Shown
    end.

%% @doc Each distinct target with how often it is in `Targets', in the order first seen: what
%% each entry of `grouped/3' stands for.
-spec counted([term()]) -> [{term(), pos_integer()}].
counted(Targets) ->
    {Order, Counts} = lists:foldl(fun(T, {O, C}) ->
                                          case C of
                                              #{T := N} -> {O, C#{T := N + 1}};
                                              _ -> {[T | O], C#{T => 1}}
                                          end
                                  end, {[], #{}}, Targets),
    [{T, maps:get(T, Counts)} || T <- lists:reverse(Order)].

%%%===================================================================
%%% Bounds
%%%===================================================================

%% @doc `Bin' cut at `Max' bytes on a UTF-8 boundary, with `...(truncated)' appended when cut.
-spec bound(binary(), pos_integer()) -> binary().
bound(Bin, Max) when is_binary(Bin), byte_size(Bin) =< Max ->
    Bin;
bound(Bin, Max) when is_binary(Bin) ->
    <<(utf8_trim(binary:part(Bin, 0, Max)))/binary, ?MARKER/binary>>.

%% @doc `Lines' joined by newlines; stops before `Max' bytes and appends a marker line.
-spec lines([iodata()], pos_integer()) -> binary().
lines(Lines, Max) ->
    lines(Lines, Max, 0, []).

lines([], _Max, _Size, Acc) ->
    iolist_to_binary(lists:join(<<"\n">>, lists:reverse(Acc)));
lines([L | Rest], Max, Size, Acc) ->
    Bin = to_bin(L),
    New = Size + byte_size(Bin) + 1,
    case New > Max of
        true ->
            Marker = fmt("...(truncated: ~b more lines)", [length(Rest) + 1]),
            lines([], Max, Size, [Marker | Acc]);
        false ->
            lines(Rest, Max, New, [Bin | Acc])
    end.

%% @doc iodata or chardata as a UTF-8 binary (never raises).
-spec to_bin(term()) -> binary().
to_bin(B) when is_binary(B) -> B;
to_bin(L) ->
    try unicode:characters_to_binary(L) of
        B when is_binary(B) -> B;
        _ -> safe(fun() -> iolist_to_binary(L) end, fun() -> erl_term(L) end)
    catch _:_ -> safe(fun() -> iolist_to_binary(L) end, fun() -> erl_term(L) end)
    end.

%% @doc `Bin' without an incomplete UTF-8 sequence at its end (what a byte cut leaves).
-spec utf8_trim(binary()) -> binary().
utf8_trim(Bin) ->
    utf8_trim(Bin, byte_size(Bin) - 1, 0).

utf8_trim(Bin, I, Seen) when I >= 0, Seen < 4 ->
    case binary:at(Bin, I) of
        B when B < 16#80 -> Bin;
        B when B >= 16#C0 ->
            Need = if B >= 16#F0 -> 4; B >= 16#E0 -> 3; true -> 2 end,
            case byte_size(Bin) - I >= Need of
                true -> Bin;
                false -> binary:part(Bin, 0, I)
            end;
        _Continuation ->
            utf8_trim(Bin, I - 1, Seen + 1)
    end;
utf8_trim(Bin, _, _) ->
    Bin.

%%%===================================================================
%%% Private
%%%===================================================================

%% A function name as Elixir writes it after `Module.': `handle_call', `"-fun-0-"'.
fun_name(F) ->
    Fun = case fmt("~tp", [F]) of
              <<"'", _/binary>> -> term(F, elixir, 256);
              Plain -> Plain
          end,
    case Fun of
        <<":", Rest/binary>> -> Rest;
        Other -> Other
    end.

inspect(Term, Opts) ->
    case 'Elixir.Kernel':inspect(Term, Opts) of
        B when is_binary(B) -> B
    end.

%% io_lib_pretty with a character limit, so rendering a huge term costs little.
erl_print(Term, Depth, LineLength, Chars) ->
    safe(fun() ->
                 to_bin(io_lib_pretty:print(Term, [{column, 1}, {line_length, LineLength},
                                                   {depth, Depth}, {chars_limit, Chars},
                                                   {encoding, unicode}]))
         end,
         fun() -> erl_term(Term) end).

erl_term(Term) ->
    safe(fun() -> fmt("~tP", [Term, ?ERL_DEPTH]) end,
         fun() -> <<"(unprintable term)">> end).

fmt(Fmt, Args) ->
    case unicode:characters_to_binary(io_lib:format(Fmt, Args)) of
        Bin when is_binary(Bin) -> Bin;
        _ -> iolist_to_binary(io_lib:format("~P", [Args, ?ERL_DEPTH]))
    end.

safe(Fun, Fallback) ->
    try Fun() of
        V -> V
    catch
        _:_ -> Fallback()
    end.
