%%% @doc `os_sup_lib_text' makes the short, bounded text of the helper's
%%% answers. It spells a value for people, a byte count, text joined, and
%%% text cut at a byte limit on a UTF-8 boundary with the cut marked.
%%% Terms in the node's language are `os_sup_lib_render''s.
-module(os_sup_lib_text).

%% API
-export([fmt/2, to_text/1, join/2, bytes/1, render_opt_name/2, cut/2, cut_bin/2, mark/2]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc `io_lib:format/2' as a UTF-8 binary; never raises on a bad term.
-spec fmt(io:format(), list()) -> binary().
fmt(Fmt, Args) ->
    try unicode:characters_to_binary(io_lib:format(Fmt, Args)) of
        Bin when is_binary(Bin) -> Bin;
        _ -> iolist_to_binary(io_lib:format("~P", [Args, 10]))
    catch _:_ -> iolist_to_binary(io_lib:format("~P", [Args, 10]))
    end.

%% @doc A short text for a plain value (`-' for undefined).
-spec to_text(term()) -> binary().
to_text(undefined) -> <<"-">>;
to_text(B) when is_binary(B) -> B;
to_text(A) when is_atom(A) -> atom_to_binary(A, utf8);
to_text(I) when is_integer(I) -> integer_to_binary(I);
to_text(F) when is_float(F) -> fmt("~tp", [F]);
to_text(L) when is_list(L) ->
    try unicode:characters_to_binary(L) of
        B when is_binary(B) -> B;
        _ -> fmt("~tP", [L, 10])
    catch _:_ -> fmt("~tP", [L, 10])
    end;
to_text(X) -> fmt("~tP", [X, 10]).

%% @doc `Parts' as text joined by `Sep'.
-spec join([term()], iodata()) -> binary().
join([], _Sep) -> <<>>;
join(Parts, Sep) -> iolist_to_binary(lists:join(Sep, [to_text(P) || P <- Parts])).

%% @doc A byte count for people: `12B', `3.4KB', `5.6MB'.
-spec bytes(number()) -> binary().
bytes(V) when abs(V) >= 1048576 -> fmt("~.1fMB", [V / 1048576]);
bytes(V) when abs(V) >= 1024 -> fmt("~.1fKB", [V / 1024]);
bytes(V) -> fmt("~bB", [V]).

%% @doc A name rendered by `os_sup_lib_render:name/2'; `undefined' stays `undefined'.
-spec render_opt_name(term(), elixir | erlang) -> binary() | undefined.
render_opt_name(undefined, _) -> undefined;
render_opt_name(N, Fmt) -> os_sup_lib_render:name(N, Fmt).

%% @doc `Bin' cut to at most `Max' bytes on a UTF-8 boundary, the cut marked; `true' when cut.
-spec cut(binary(), non_neg_integer()) -> {binary(), boolean()}.
cut(Bin, Max) when byte_size(Bin) =< Max ->
    {Bin, false};
cut(Bin, Max) ->
    {mark(os_sup_lib_render:utf8_trim(binary:part(Bin, 0, Max)), byte_size(Bin)), true}.

%% @doc {@link cut/2} without the flag.
-spec cut_bin(binary(), non_neg_integer()) -> binary().
cut_bin(Bin, Max) ->
    element(1, cut(Bin, Max)).

%% @doc `Bin' followed by `... (truncated: Total bytes total)'.
-spec mark(binary(), non_neg_integer()) -> binary().
mark(Bin, Total) ->
    Marker = fmt("... (truncated: ~b bytes total)", [Total]),
    <<Bin/binary, Marker/binary>>.
