%%% @doc `os_sup_lib_proc' finds a process from what an agent typed and
%%% reads what a process is, without sending it anything. A process is
%%% given as `<0.1.0>', `#PID<0.1.0>', `0.1.0' or a name (local, `global'
%%% or a `pg' group: `DemoApp.Counter', `Elixir.DemoApp.Counter', `user');
%%% a name is only ever matched against atoms that exist. Facts are read
%%% with `process_info' and are `undefined' once the process is gone.
%%%
%%% == Finding a process ==
%%% <ul>
%%%   <li>{@link pid_arg/1}, {@link resolve_pid/1}, {@link parse_pid/1}: a
%%%       process as text.</li>
%%%   <li>{@link whereis_name/1}, {@link name_atoms/1}: existing atoms a
%%%       name may spell (creates none).</li>
%%% </ul>
%%%
%%% == Facts ==
%%% <ul>
%%%   <li>{@link pinfo_items/2}, {@link reg_name/1}, {@link queue_len/1},
%%%       {@link proc_dict/1}, {@link dict_initial_call/1}.</li>
%%%   <li>{@link first_processes/1}: the first of the node's processes.</li>
%%% </ul>
-module(os_sup_lib_proc).

-import(os_sup_lib_reply, [fail/3, error_reply/2]).

%% Finding a process
-export([pid_arg/1, resolve_pid/1, named_process/1, parse_pid/1, name_atoms/1, whereis_name/1]).
%% Facts
-export([pinfo_items/2, reg_name/1, queue_len/1, proc_dict/1, dict_initial_call/1,
         first_processes/1]).
%% Internal spawn target (a large dictionary's `$'-keys, read under a heap limit). Not an API.
-export([dict_meta/1]).

%% a process's dictionary is read whole only when its heap is at most this many words
-define(DICT_DIRECT_WORDS, 1000000).

%%%===================================================================
%%% Finding a process
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
%% `fail/3' (`bad_args' or `not_found') for `os_sup_lib_reply:guarded/2' to turn into a reply.
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

%% @doc The live local process `Text' names (pid text or registered name), `error' when it
%% names none (the caller may read it as something else: a module, a function); a `fail/3'
%% for a pid that is not alive here.
-spec named_process(binary()) -> {ok, pid()} | error.
named_process(Text) ->
    case parse_pid(Text) of
        {ok, Pid} -> {ok, check_alive(Pid, Text)};
        error -> whereis_name(Text)
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

%% @doc The process registered under a name in any spelling, without creating atoms.
-spec whereis_name(binary()) -> {ok, pid()} | error.
whereis_name(Text) ->
    first_ok([fun() -> whereis_atom(A) end || A <- name_atoms(Text)]).

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

%%%===================================================================
%%% Facts
%%%===================================================================

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

%% @doc The process dictionary, or `undefined' when the process is gone. Reading it copies
%% it: of a large process (a 70 MB dictionary) only the `$'-keys (`$initial_call',
%% `$ancestors'...) are read, by a throw-away process under a heap limit.
-spec proc_dict(pid()) -> list() | undefined.
proc_dict(Pid) ->
    case pinfo_items(Pid, [total_heap_size]) of
        [{_, Heap}] when Heap > ?DICT_DIRECT_WORDS ->
            case os_sup_lib_call:call_with_deadline(
                   {?MODULE, dict_meta, [Pid]}, 1000,
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

%% @doc `$initial_call' from the proc_lib dictionary, or undefined.
-spec dict_initial_call(term()) -> mfa() | undefined.
dict_initial_call(Dict) when is_list(Dict) ->
    case lists:keyfind('$initial_call', 1, Dict) of
        {_, {M, F, A} = MFA} when is_atom(M), is_atom(F), is_integer(A) -> MFA;
        _ -> undefined
    end;
dict_initial_call(_) ->
    undefined.

%%%===================================================================
%%% Internal entry points (spawned through ?MODULE)
%%%===================================================================

%% @private The `$'-keyed entries of `Pid''s dictionary (run in a throw-away process).
-spec dict_meta(pid()) -> list() | undefined.
dict_meta(Pid) ->
    case pinfo_items(Pid, [dictionary]) of
        [{dictionary, D}] -> [KV || {K, _} = KV <- D, is_atom(K), lists:prefix("$", atom_to_list(K))];
        _ -> undefined
    end.

%%%===================================================================
%%% Private
%%%===================================================================

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

strip_gt(R) ->
    case binary:last(R) of
        $> -> binary:part(R, 0, byte_size(R) - 1);
        _ -> R
    end.

%% A local name first, then a `:global' one (an ETS read; it may live on another node),
%% then a `:pg' group of the default scope (its first member on this node).
whereis_atom(A) ->
    case whereis(A) of
        Pid when is_pid(Pid) -> {ok, Pid};
        _ ->
            try global:whereis_name(A) of
                Pid when is_pid(Pid) -> {ok, Pid};
                _ -> local_member(A)
            catch _:_ -> local_member(A)
            end
    end.

%% The first member on this node of the `:pg' group `A' (the default scope).
local_member(A) ->
    try pg:get_local_members(A) of
        [Pid | _] when is_pid(Pid) -> {ok, Pid};
        _ -> error
    catch _:_ -> error
    end.

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

%% @doc At most `N' of the node's processes, in the order of `erlang:processes/0'. Where the
%% release has the processes iterator (OTP 28), only those `N' are read: on a node of a million
%% processes the whole list is not built (`erlang:processes/0' stops the caller's scheduler for
%% 3-12 ms at a time to make it).
-spec first_processes(non_neg_integer()) -> [pid()].
first_processes(N) ->
    case erlang:function_exported(erlang, processes_iterator, 0) of
        true -> next_processes(erlang:processes_iterator(), N, []);
        false -> lists:sublist(erlang:processes(), N)
    end.

next_processes(_Iter, 0, Acc) ->
    lists:reverse(Acc);
next_processes(Iter, N, Acc) ->
    case erlang:processes_next(Iter) of
        {Pid, Next} -> next_processes(Next, N - 1, [Pid | Acc]);
        none -> lists:reverse(Acc)
    end.
