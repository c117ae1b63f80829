%%%-------------------------------------------------------------------
%%% @doc `os_sup_lib' holds what every helper module shares, like
%%% `recon_lib' does for recon: the reply and argument conventions of the
%%% tools, resolving a process from what an agent typed, deadline-bounded
%%% calls, and small bounded text helpers. It is the only module the others
%%% `-import'. Kernel and stdlib only; no process of its own.
%%%
%%% == Replies ==
%%% <ul>
%%%   <li>{@link guarded/1}, {@link guarded/2}: run a tool body; a
%%%       {@link fail/3} becomes an error reply, a crash a bounded
%%%       `internal' one.</li>
%%%   <li>{@link ok_reply/2}, {@link ok_reply/3}, {@link error_reply/2},
%%%       {@link fail/3}: `{ok, #{text, data}}' and
%%%       `{error, #{kind, message}}'.</li>
%%%   <li>{@link reply/3}: answer the sidecar's `{Ref, From, Request}'
%%%       without auto-connecting.</li>
%%% </ul>
%%%
%%% == Arguments ==
%%% <ul>
%%%   <li>{@link arg_int/5} (clamped), {@link arg_range/5} (refused out of
%%%       range), {@link arg_text/2}, {@link arg_text_only/2}, {@link arg_choice/4},
%%%       {@link arg_bool/2}, {@link arg_bool/3}, {@link fmt_arg/1},
%%%       {@link caller_arg/1}.</li>
%%% </ul>
%%%
%%% == Processes and names ==
%%% <ul>
%%%   <li>{@link pid_arg/1}, {@link resolve_pid/1}, {@link parse_pid/1}: a process given as
%%%       `<0.1.0>', `#PID<0.1.0>', `0.1.0' or a registered name
%%%       (`DemoApp.Counter', `Elixir.DemoApp.Counter', `user').</li>
%%%   <li>{@link whereis_name/1}, {@link name_atoms/1}: existing atoms a name may spell (creates
%%%       none).</li>
%%%   <li>{@link pinfo_items/2}, {@link reg_name/1}, {@link proc_dict/1},
%%%       {@link dict_initial_call/1}, {@link queue_len/1}: process facts, `undefined' when the
%%%       process is gone.</li>
%%%   <li>{@link helper_process/1}: whether a process is one of the helper's.</li>
%%%   <li>{@link system_apps/0}: the applications whose code is not the
%%%       user's (OTP's, Elixir's, their build tools').</li>
%%% </ul>
%%%
%%% == Deadlines ==
%%% <ul>
%%%   <li>{@link call_with_deadline/2}, {@link call_with_deadline/3}: run
%%%       `M:F(A)' in a throw-away process under a deadline.</li>
%%%   <li>{@link ensure_started/3}, {@link server_call/3}: start a
%%%       registered long-lived process on demand and call it with a
%%%       timeout (tracing, system monitor).</li>
%%% </ul>
%%%
%%% == Bounded text ==
%%% <ul>
%%%   <li>{@link fmt/2}, {@link to_text/1}, {@link join/2},
%%%       {@link bound/2} (`os_sup_lib_render:bound/2'), {@link cut/2} and
%%%       {@link cut_bin/2} (cut and mark `... (truncated: N bytes
%%%       total)'), {@link mark/2}, {@link safe/2}, {@link clamp/3}.</li>
%%% </ul>
%%%
%%% == Time ==
%%% <ul>
%%%   <li>{@link now_ms/0} (monotonic, for deadlines and durations),
%%%       {@link clock/1} (a system time as UTC `HH:MM:SS.micro').</li>
%%% </ul>
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_lib).

%% Replies
-export([guarded/1, guarded/2, ok_reply/2, ok_reply/3, error_reply/2, fail/3, reply/3]).
%% Arguments
-export([arg_int/5, arg_range/5, arg_text/2, arg_text_only/2, arg_choice/4, arg_bool/2, arg_bool/3,
         fmt_arg/1, caller_arg/1]).
%% Processes and names
-export([pid_arg/1, resolve_pid/1, parse_pid/1, name_atoms/1, whereis_name/1, pinfo_items/2, reg_name/1, proc_dict/1,
         dict_meta/1,
         dict_initial_call/1, queue_len/1, system_apps/0, helper_process/1]).
%% Deadlines
-export([call_with_deadline/2, call_with_deadline/3, ensure_started/3, server_call/3]).
%% Bounded text
-export([now_ms/0, clock/1, fmt/2, to_text/1, join/2, bytes/1, render_opt_name/2, bound/2, cut/2, cut_bin/2, mark/2, safe/2, clamp/3]).

%% Internal spawn target (deadline-bounded call). Not an API.
-export([deadline_call/3]).

-define(TEXT_BYTES, 16384).
%% a process's dictionary is read whole only when its heap is at most this many words
-define(DICT_DIRECT_WORDS, 1000000).
-define(TERM_BYTES, 1024).
-define(SERVER_CALL_MS, 3000).

-type reply() :: {ok, #{text := binary(), data := term()}}
               | {error, #{kind := atom(), message := binary()}}.
-type args() :: #{atom() => term()}.
-export_type([reply/0, args/0]).

%%%===================================================================
%%% Replies
%%%===================================================================

%% @doc {@link guarded/2} for the introspection tools.
-spec guarded(fun(() -> reply())) -> reply().
guarded(Fun) ->
    guarded(<<"introspection">>, Fun).

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
                        bound(fmt("~ts failed: ~tp:~tP at ~tP",
                                  [What, Class, Reason, 12, lists:sublist(Stack, 3), 12]),
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

%% @doc Sends `{Ref, Reply}' to the sidecar's `From'; never blocks on a sidecar that went
%% away (no auto-connect).
-spec reply(pid(), term(), term()) -> ok.
reply(From, Ref, Reply) ->
    _ = (catch erlang:send(From, {Ref, Reply}, [noconnect])),
    ok.

%%%===================================================================
%%% Arguments
%%%===================================================================

%% @doc Integer argument `Key' clamped to `Lo..Hi' (text is parsed); `Default' when absent.
-spec arg_int(atom(), args(), term(), integer(), integer()) -> term().
arg_int(Key, Args, Default, Lo, Hi) ->
    case maps:get(Key, Args, undefined) of
        undefined -> Default;
        V when is_integer(V) -> max(Lo, min(Hi, V));
        V when is_binary(V) ->
            case catch binary_to_integer(string:trim(V)) of
                I when is_integer(I) -> max(Lo, min(Hi, I));
                _ -> fail(bad_args, "~ts must be an integer, got ~tp", [Key, V])
            end;
        V -> fail(bad_args, "~ts must be an integer, got ~tP", [Key, V, 5])
    end.

%% @doc Text argument `Key' trimmed (atoms and integers spelled out); `undefined' when absent.
-spec arg_text(atom(), args()) -> binary() | pid() | undefined.
arg_text(Key, Args) ->
    case maps:get(Key, Args, undefined) of
        undefined -> undefined;
        null -> undefined;
        nil -> undefined;
        <<>> -> undefined;
        V when is_binary(V) -> string:trim(V);
        V when is_atom(V) -> atom_to_binary(V, utf8);
        V when is_integer(V) -> integer_to_binary(V);
        V when is_pid(V) -> V;
        V when is_list(V) ->
            case catch unicode:characters_to_binary(V) of
                B when is_binary(B) -> string:trim(B);
                _ -> fail(bad_args, "~ts must be text", [Key])
            end;
        V -> fail(bad_args, "~ts must be text, got ~tP", [Key, V, 5])
    end.

%% @doc Argument `Key', one of the atoms `Choices' (given as atom or text); `Default' when absent.
-spec arg_choice(atom(), args(), [atom()], term()) -> term().
arg_choice(Key, Args, Choices, Default) ->
    case maps:get(Key, Args, undefined) of
        undefined -> Default;
        V when is_atom(V) -> check_choice(Key, V, Choices);
        V when is_binary(V) ->
            case [C || C <- Choices, atom_to_binary(C, utf8) =:= string:trim(V)] of
                [C] -> C;
                [] -> check_choice(Key, V, Choices)
            end;
        V -> check_choice(Key, V, Choices)
    end.

check_choice(Key, V, Choices) ->
    case lists:member(V, Choices) of
        true -> V;
        false -> fail(bad_args, "~ts must be one of ~ts, got ~tP",
                      [Key, join([atom_to_binary(C, utf8) || C <- Choices], <<", ">>), V, 5])
    end.

%% @doc The rendering format asked for (`format' argument, default auto).
-spec fmt_arg(args()) -> elixir | erlang.
fmt_arg(Args) ->
    os_sup_lib_render:format(maps:get(format, Args, auto)).

%% @doc Integer argument `Key' in `Lo..Hi', refused (not clamped) outside it; `Default' when
%% absent (the tracing tools' convention: a limit the agent set is never silently changed).
-spec arg_range(atom(), args(), term(), integer(), integer()) -> term().
arg_range(Key, Args, Default, Lo, Hi) ->
    case maps:get(Key, Args, undefined) of
        V when V =:= undefined; V =:= nil; V =:= null -> Default;
        V when is_integer(V), V >= Lo, V =< Hi -> V;
        V when is_integer(V) -> fail(bad_args, "~ts must be in ~b..~b, got ~b", [Key, Lo, Hi, V]);
        V when is_binary(V) ->
            case catch binary_to_integer(string:trim(V)) of
                I when is_integer(I) -> arg_range(Key, Args#{Key => I}, Default, Lo, Hi);
                _ -> fail(bad_args, "~ts must be an integer, got ~tp", [Key, V])
            end;
        V -> fail(bad_args, "~ts must be an integer, got ~tP", [Key, V, 5])
    end.

%% @doc Text argument `Key' like {@link arg_text/2}, but a number is refused (the tracing
%% tools' convention).
-spec arg_text_only(atom(), args()) -> binary() | pid() | undefined.
arg_text_only(Key, Args) ->
    case maps:get(Key, Args, undefined) of
        V when is_integer(V) -> fail(bad_args, "~ts must be text, got ~tP", [Key, V, 5]);
        _ -> arg_text(Key, Args)
    end.

%% @doc Boolean argument `Key' (default false).
-spec arg_bool(atom(), args()) -> boolean().
arg_bool(Key, Args) ->
    arg_bool(Key, Args, false).

%% @doc Boolean argument `Key' (`true'/`false' or their text); `Default' when absent.
-spec arg_bool(atom(), args(), boolean()) -> boolean().
arg_bool(Key, Args, Default) ->
    case maps:get(Key, Args, Default) of
        B when is_boolean(B) -> B;
        V when V =:= undefined; V =:= nil; V =:= null -> Default;
        <<"true">> -> true;
        <<"false">> -> false;
        V -> fail(bad_args, "~ts must be true or false, got ~tP", [Key, V, 5])
    end.

%% @doc The sidecar process that asked (set by the helper), or `undefined'.
-spec caller_arg(args()) -> pid() | undefined.
caller_arg(Args) ->
    case maps:get(caller, Args, undefined) of
        Pid when is_pid(Pid) -> Pid;
        _ -> undefined
    end.

%%%===================================================================
%%% Processes and names
%%%===================================================================

%% @doc A process given as pid text or registered name: `{ok, Pid}' (alive, local) or an error reply.
-spec pid_arg(term()) -> {ok, pid()} | {error, #{kind := atom(), message := binary()}}.
pid_arg(Text) ->
    try resolve_pid(Text) of
        Pid -> {ok, Pid}
    catch
        throw:{tool_error, Kind, Msg} -> error_reply(Kind, Msg)
    end.

%% @doc A process given as pid text or registered name, alive and local; otherwise a
%% `fail/3' (`bad_args' or `not_found') for {@link guarded/2} to turn into a reply.
-spec resolve_pid(term()) -> pid().
resolve_pid(undefined) ->
    fail(bad_args, "pid is required: a pid (<0.123.0>, #PID<0.123.0>, 0.123.0) or a "
         "registered name (DemoApp.Counter, user)", []);
resolve_pid(Pid) when is_pid(Pid) ->
    check_alive(Pid, pid_to_list(Pid));
resolve_pid(Text) when is_binary(Text) ->
    case parse_pid(Text) of
        {ok, Pid} -> check_alive(Pid, Text);
        error ->
            case whereis_name(Text) of
                {ok, Pid} -> check_alive(Pid, Text);
                error ->
                    fail(not_found, "no process is registered as ~ts (give a pid like "
                         "<0.123.0> or a registered name; processes tool with filter can "
                         "find one)", [Text])
            end
    end.

check_alive(Pid, Text) ->
    case node(Pid) =:= node() of
        false -> fail(not_found, "~ts is not a process of this node: it lives on ~ts",
                      [Text, node(Pid)]);
        true ->
            case is_process_alive(Pid) of
                true -> Pid;
                false -> fail(not_found, "process ~ts is not alive (it exited)", [Text])
            end
    end.

%% @doc `{ok, Pid}' when `Text' spells a pid (`<0.1.0>', `#PID<0.1.0>', `0.1.0'), `error' when
%% it does not; a `fail/3' when it spells one that cannot exist here.
-spec parse_pid(binary()) -> {ok, pid()} | error.
parse_pid(Text) ->
    Inner = case Text of
                <<"#PID<", R/binary>> -> strip_gt(R);
                <<"<", R/binary>> -> strip_gt(R);
                _ -> Text
            end,
    case re:run(Inner, <<"^[0-9]+\\.[0-9]+\\.[0-9]+$">>, [{capture, none}]) of
        match ->
            try list_to_pid("<" ++ binary_to_list(Inner) ++ ">") of
                Pid -> {ok, Pid}
            catch
                _:_ -> fail(not_found, "~ts is not a valid pid of this node (no such process)",
                            [Text])
            end;
        nomatch -> error
    end.

strip_gt(R) ->
    case binary:last(R) of
        $> -> binary:part(R, 0, byte_size(R) - 1);
        _ -> R
    end.

%% @doc The process registered under a name in any spelling, without creating atoms.
-spec whereis_name(binary()) -> {ok, pid()} | error.
whereis_name(Text) ->
    first_ok([fun() -> whereis_atom(A) end || A <- name_atoms(Text)]).

%% A local name first, then a `:global' one (an ETS read; it may live on another node),
%% then a `:pg' group of the default scope (its first member on this node).
whereis_atom(A) ->
    case whereis(A) of
        Pid when is_pid(Pid) -> {ok, Pid};
        _ ->
            case catch global:whereis_name(A) of
                Pid when is_pid(Pid) -> {ok, Pid};
                _ ->
                    case catch pg:get_local_members(A) of
                        [Pid | _] when is_pid(Pid) -> {ok, Pid};
                        _ -> error
                    end
            end
    end.

%% @doc Existing atoms a name may spell (`:user', `user', `DemoApp.X', `Elixir.DemoApp.X'); creates none.
-spec name_atoms(binary()) -> [atom()].
name_atoms(Text0) ->
    Text = case Text0 of
               <<":", R/binary>> -> unquote(R);
               _ -> unquote(Text0)
           end,
    Candidates = case Text of
                     <<"Elixir.", _/binary>> -> [Text];
                     <<C, _/binary>> when C >= $A, C =< $Z -> [<<"Elixir.", Text/binary>>, Text];
                     _ -> [Text]
                 end,
    [A || B <- Candidates, A <- [existing_atom(B)], A =/= undefined].

unquote(<<"\"", R/binary>> = B) when byte_size(R) > 0 ->
    case binary:last(R) of $" -> binary:part(R, 0, byte_size(R) - 1); _ -> B end;
unquote(<<"'", R/binary>> = B) when byte_size(R) > 0 ->
    case binary:last(R) of $' -> binary:part(R, 0, byte_size(R) - 1); _ -> B end;
unquote(B) -> B.

existing_atom(B) ->
    try binary_to_existing_atom(B, utf8) of
        A -> A
    catch
        _:_ -> undefined
    end.

first_ok([]) -> error;
first_ok([F | Rest]) ->
    case F() of
        {ok, _} = Ok -> Ok;
        _ -> first_ok(Rest)
    end.

%% @doc Process facts; `undefined' when the process is gone.
-spec pinfo_items(pid(), [atom()]) -> [{atom(), term()}] | undefined.
pinfo_items(Pid, Items) ->
    try erlang:process_info(Pid, Items) of
        undefined -> undefined;
        L when is_list(L) -> L;
        [] -> undefined
    catch
        _:_ -> undefined
    end.

%% @doc The registered name of a local process, or `undefined'.
-spec reg_name(pid()) -> atom().
reg_name(Pid) ->
    case pinfo_items(Pid, [registered_name]) of
        [{registered_name, N}] when is_atom(N), N =/= [] -> N;
        _ -> undefined
    end.

%% @doc The message queue length of a local process, 0 when it is gone.
-spec queue_len(pid()) -> non_neg_integer().
queue_len(Pid) ->
    case pinfo_items(Pid, [message_queue_len]) of
        [{_, Q}] -> Q;
        _ -> 0
    end.

%% @doc `$initial_call' from the proc_lib dictionary, or undefined.
-spec dict_initial_call(term()) -> mfa() | undefined.
dict_initial_call(Dict) when is_list(Dict) ->
    case lists:keyfind('$initial_call', 1, Dict) of
        {_, {M, F, A} = MFA} when is_atom(M), is_atom(F), is_integer(A) -> MFA;
        _ -> undefined
    end;
dict_initial_call(_) ->
    undefined.

%% @doc The applications that ship with OTP and Elixir, and their build tools: code in them is
%% never the user's (an application frame, a tree root, a waiting caller).
-spec system_apps() -> [atom()].
system_apps() ->
    [kernel, stdlib, sasl, compiler, crypto, ssl, public_key, inets, asn1, runtime_tools, tools,
     observer, mnesia, os_mon, syntax_tools, parsetools, xmerl, erts, eunit, common_test,
     debugger, wx, et, reltool, edoc, erl_interface, ftp, tftp, snmp, ssh, diameter, eldap,
     megaco, odbc, dialyzer, erl_docgen, jinterface, otp_mibs, hipe, inviso,
     elixir, logger, mix, iex, eex, ex_unit,
     hex, rebar, rebar3, relx].

%% @doc Whether `Pid' is one of this helper's own processes (spawned from an `os_sup_' module):
%% not the node's, so never named as a holder or a culprit.
-spec helper_process(pid()) -> boolean().
helper_process(Pid) ->
    case erlang:process_info(Pid, initial_call) of
        {initial_call, {M, _, _}} when is_atom(M) ->
            lists:prefix("os_sup_", atom_to_list(M));
        _ -> false
    end.

%% @doc The process dictionary, or `undefined' when the process is gone. Reading it copies
%% it: of a large process (a 70 MB dictionary) only the `$'-keys (`$initial_call',
%% `$ancestors'...) are read, by a throw-away process under a heap limit.
-spec proc_dict(pid()) -> list() | undefined.
proc_dict(Pid) ->
    case pinfo_items(Pid, [total_heap_size]) of
        [{_, Heap}] when Heap > ?DICT_DIRECT_WORDS ->
            case call_with_deadline({?MODULE, dict_meta, [Pid]}, 1000,
                                    [{max_heap_size, #{size => 4 * Heap + 100000, kill => true,
                                                       error_logger => false}}]) of
                {ok, D} -> D;
                _ -> []
            end;
        _ ->
            case pinfo_items(Pid, [dictionary]) of
                [{dictionary, D}] -> D;
                _ -> undefined
            end
    end.

%% @private The `$'-keyed entries of `Pid''s dictionary (run in a throw-away process).
-spec dict_meta(pid()) -> list() | undefined.
dict_meta(Pid) ->
    case pinfo_items(Pid, [dictionary]) of
        [{dictionary, D}] -> [KV || {K, _} = KV <- D, is_atom(K), lists:prefix("$", atom_to_list(K))];
        _ -> undefined
    end.

%%%===================================================================
%%% Deadlines
%%%===================================================================

%% @doc Runs M:F(A) in a throw-away process under a deadline of `Ms'.
-spec call_with_deadline({module(), atom(), list()}, timeout()) -> {ok, term()} | timeout | {error, term()}.
call_with_deadline(MFA, Ms) ->
    call_with_deadline(MFA, Ms, []).

%% @doc {@link call_with_deadline/2} with extra spawn options (a heap limit).
-spec call_with_deadline({module(), atom(), list()}, timeout(), list()) -> {ok, term()} | timeout | {error, term()}.
call_with_deadline(MFA, Ms, SpawnOpts) ->
    Tag = make_ref(),
    {Pid, MRef} = spawn_opt(?MODULE, deadline_call, [self(), Tag, MFA], [monitor | SpawnOpts]),
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

%%%===================================================================
%%% Bounded text
%%%===================================================================

%% @doc A short text for a plain value (`-' for undefined).
-spec to_text(term()) -> binary().
to_text(undefined) -> <<"-">>;
to_text(B) when is_binary(B) -> B;
to_text(A) when is_atom(A) -> atom_to_binary(A, utf8);
to_text(I) when is_integer(I) -> integer_to_binary(I);
to_text(F) when is_float(F) -> fmt("~tp", [F]);
to_text(L) when is_list(L) ->
    case catch unicode:characters_to_binary(L) of
        B when is_binary(B) -> B;
        _ -> fmt("~tP", [L, 10])
    end;
to_text(X) -> fmt("~tP", [X, 10]).

%% @doc A byte count for people: `12B', `3.4KB', `5.6MB'.
-spec bytes(number()) -> binary().
bytes(V) when abs(V) >= 1048576 -> fmt("~.1fMB", [V / 1048576]);
bytes(V) when abs(V) >= 1024 -> fmt("~.1fKB", [V / 1024]);
bytes(V) -> fmt("~bB", [V]).

%% @doc `Parts' as text joined by `Sep'.
-spec join([term()], iodata()) -> binary().
join([], _Sep) -> <<>>;
join(Parts, Sep) -> iolist_to_binary(lists:join(Sep, [to_text(P) || P <- Parts])).

%% @doc A name rendered by `os_sup_lib_render:name/2'; `undefined' stays `undefined'.
-spec render_opt_name(term(), elixir | erlang) -> binary() | undefined.
render_opt_name(undefined, _) -> undefined;
render_opt_name(N, Fmt) -> os_sup_lib_render:name(N, Fmt).

%% @doc `os_sup_lib_render:bound/2'.
-spec bound(binary(), non_neg_integer()) -> binary().
bound(Bin, Max) -> os_sup_lib_render:bound(Bin, Max).

%% @doc `io_lib:format/2' as a UTF-8 binary; never raises on a bad term.
-spec fmt(io:format(), list()) -> binary().
fmt(Fmt, Args) ->
    case catch unicode:characters_to_binary(io_lib:format(Fmt, Args)) of
        Bin when is_binary(Bin) -> Bin;
        _ -> iolist_to_binary(io_lib:format("~P", [Args, 10]))
    end.

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

%% @doc `Fun()', or `Default' when it raises.
-spec safe(fun(() -> T), T) -> T.
safe(Fun, Default) ->
    try Fun() of
        Value -> Value
    catch
        _:_ -> Default
    end.

%% @doc `V' limited to `Lo..Hi'.
-spec clamp(integer(), integer(), integer()) -> integer().
clamp(V, Lo, Hi) -> max(Lo, min(Hi, V)).

%%%===================================================================
%%% Internal entry points (spawned through ?MODULE)
%%%===================================================================

%% @doc Runs `apply(M, F, A)' and sends `{deadline_call, self(), Result}' to `Parent'.
-spec deadline_call(pid(), atom(), {atom(), atom(), list()}) -> ok.
deadline_call(Parent, Tag, {M, F, A}) ->
    Result = try {ok, apply(M, F, A)} catch C:R -> {error, {C, R}} end,
    Parent ! {Tag, self(), Result},
    ok.

%%%===================================================================
%%% Time
%%%===================================================================

%% @doc Monotonic milliseconds, for deadlines and durations.
-spec now_ms() -> integer().
now_ms() ->
    erlang:monotonic_time(millisecond).

%% @doc UTC `HH:MM:SS.micro' of a system time in microseconds; `undefined' for anything else.
-spec clock(term()) -> binary() | undefined.
clock(Us) when is_integer(Us) ->
    {_, {H, M, Sec}} = calendar:system_time_to_universal_time(Us div 1000000, second),
    fmt("~2..0b:~2..0b:~2..0b.~6..0b", [H, M, Sec, Us rem 1000000]);
clock(_) ->
    undefined.
