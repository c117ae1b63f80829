%%% @doc `os_sup_lib_call' runs code that must neither hang nor crash its
%%% caller. It runs it in a throw-away process under a deadline (and a heap
%%% limit), as a call to a registered helper process started on demand, or with
%%% a default when it raises.
-module(os_sup_lib_call).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([call_with_deadline/2, call_with_deadline/3, ensure_started/3, server_call/3, safe/2]).
%% Internal spawn target of call_with_deadline/3. Not an API.
-export([deadline_worker/3]).

-define(SERVER_CALL_MS, 3000).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Runs M:F(A) in a throw-away process under a deadline of `Ms'.
-spec call_with_deadline({module(), atom(), list()}, timeout()) -> {ok, term()} | timeout | {error, term()}.
call_with_deadline(MFA, Ms) ->
    call_with_deadline(MFA, Ms, []).

%% @doc {@link call_with_deadline/2} with extra spawn options (a heap limit).
-spec call_with_deadline({module(), atom(), list()}, timeout(), list()) -> {ok, term()} | timeout | {error, term()}.
call_with_deadline(MFA, Ms, SpawnOpts) ->
    Tag = make_ref(),
    {Pid, MRef} = spawn_opt(?MODULE, deadline_worker, [self(), Tag, MFA], [monitor | SpawnOpts]),
    receive
        {Tag, Pid, Result} ->
            erlang:demonitor(MRef, [flush]),
            Result;
        {'DOWN', MRef, process, Pid, Reason} ->
            {error, {exit, Reason}}
    after Ms ->
            exit(Pid, kill),
            erlang:demonitor(MRef, [flush]),
            timeout
    end.

%% @doc The registered process `Name', started with `Module:Init(Parent, Ref)' if needed (`Init'
%% registers itself and sends `{Ref, started | exists}'); `{error, internal, Message}' otherwise.
-spec ensure_started(atom(), module(), atom()) -> pid() | {error, internal, binary()}.
ensure_started(Name, Module, Init) ->
    case whereis(Name) of
        Pid when is_pid(Pid) -> Pid;
        undefined ->
            Ref = make_ref(),
            {Pid, MRef} = spawn_monitor(Module, Init, [self(), Ref]),
            receive
                {Ref, _Started} ->
                    erlang:demonitor(MRef, [flush]),
                    case whereis(Name) of
                        P when is_pid(P) -> P;
                        undefined -> ensure_started(Name, Module, Init)
                    end;
                {'DOWN', MRef, process, Pid, Why} ->
                    {error, internal, fmt("~ts did not start: ~tP", [Name, Why, 5])}
            after ?SERVER_CALL_MS ->
                    exit(Pid, kill),
                    {error, internal, fmt("~ts did not start in time", [Name])}
            end
    end.

%% @doc Sends `{Tag, Ref, self(), Request}' to `Pid' and waits (3 s) for `{Ref, Reply}';
%% `{error, unavailable, Message}' when it exits or does not answer. An error from
%% {@link ensure_started/3} passes through.
-spec server_call(pid() | {error, atom(), binary()}, atom(), term()) -> term().
server_call(Pid, Tag, Request) when is_pid(Pid) ->
    MRef = erlang:monitor(process, Pid),
    Ref = make_ref(),
    Pid ! {Tag, Ref, self(), Request},
    receive
        {Ref, Reply} ->
            erlang:demonitor(MRef, [flush]),
            Reply;
        {'DOWN', MRef, process, Pid, Why} ->
            {error, unavailable, fmt("the tracing process exited (~tP); try again", [Why, 5])}
    after ?SERVER_CALL_MS ->
            erlang:demonitor(MRef, [flush]),
            {error, unavailable, fmt("the tracing process did not answer within ~b ms",
                                     [?SERVER_CALL_MS])}
    end;
server_call(Error, _Tag, _Request) ->
    Error.

%% @doc `Fun()', or `Default' when it raises.
-spec safe(fun(() -> T), T) -> T.
safe(Fun, Default) ->
    try Fun() of
        Value -> Value
    catch
        _:_ -> Default
    end.

%%%===================================================================
%%% Internal entry points (spawned through ?MODULE)
%%%===================================================================

%% @doc Runs `apply(M, F, A)' and sends `{Tag, self(), Result}' to `Parent'.
-spec deadline_worker(pid(), reference(), {atom(), atom(), list()}) -> ok.
deadline_worker(Parent, Tag, {M, F, A}) ->
    Result = try {ok, apply(M, F, A)} catch C:R -> {error, {C, R}} end,
    Parent ! {Tag, self(), Result},
    ok.
