%%% @doc `os_sup_lib_reply' holds the shape of a tool's answer and the
%%% guard around a tool body. An answer is `{ok, #{text, data}}' or
%%% `{error, #{kind, message}}'; the guard turns a failure or a crash of
%%% a tool body into the error. It also
%%% sends the helper's replies to the server. Kernel and stdlib only; no
%%% process of its own.
-module(os_sup_lib_reply).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([guarded/2, ok_reply/2, ok_reply/3, error_reply/2, fail/3, reply/3]).

-define(TEXT_BYTES, 16384).
-define(TERM_BYTES, 1024).

-type reply() :: {ok, #{text := binary(), data := term()}}
               | {error, #{kind := atom(), message := binary()}}.
-export_type([reply/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Runs a tool body: `fail/3' becomes an error reply, a crash a bounded `internal' one.
-spec guarded(binary(), fun(() -> {ok, map()} | {error, map()})) -> {ok, map()} | {error, map()}.
guarded(What, Fun) ->
    try Fun() of
        {ok, #{text := _, data := _}} = Ok -> Ok;
        {error, #{kind := _, message := _}} = Err -> Err
    catch
        throw:{tool_error, Kind, Msg} ->
            error_reply(Kind, Msg);
        Class:Reason:Stack ->
            error_reply(internal,
                        os_sup_lib_render:bound(fmt("~ts failed: ~tp:~tP at ~tP",
                                                    [What, Class, Reason, 12,
                                                     lists:sublist(Stack, 3), 12]),
                                                ?TERM_BYTES))
    end.

%% @doc A tool's answer under ~16 KB of text.
-spec ok_reply([iodata()], term()) -> {ok, map()}.
ok_reply(Lines, Data) ->
    ok_reply(Lines, Data, ?TEXT_BYTES).

%% @doc A tool's answer: `Lines' joined under `TextBytes', and the plain `Data'.
-spec ok_reply([iodata()], term(), pos_integer()) -> {ok, map()}.
ok_reply(Lines, Data, TextBytes) ->
    {ok, #{text => os_sup_lib_render:lines(Lines, TextBytes), data => Data}}.

%% @doc A tool's failure the agent can act on.
-spec error_reply(atom(), iodata()) -> {error, map()}.
error_reply(Kind, Msg) ->
    {error, #{kind => Kind, message => os_sup_lib_render:to_bin(Msg)}}.

%% @doc Ends a tool body with `error_reply(Kind, io_lib:format(Fmt, Args))' (see guarded/2).
-spec fail(atom(), string(), list()) -> no_return().
fail(Kind, Fmt, Args) ->
    throw({tool_error, Kind, fmt(Fmt, Args)}).

%% @doc Sends `{Ref, Reply}' to the server's `From'; never blocks on a server that went
%% away (no auto-connect).
-spec reply(pid(), term(), term()) -> ok.
reply(From, Ref, Reply) ->
    _ = try erlang:send(From, {Ref, Reply}, [noconnect]) catch _:_ -> ok end,
    ok.
