%%% @doc `os_sup_waits_of' decides what one process waits on, for
%%% `os_sup_waits'. It reads `process_info' only (nothing is ever sent to a
%%% user process; see `os_sup_waits', "How a wait is found").
-module(os_sup_waits_of).

-import(os_sup_lib_proc, [pinfo_items/2]).
-import(os_sup_lib_label, [lib_modules/0, library/2, own/1]).

%% API
-export([wait_of/1, wait_of/2, user_frame/2, backtrace/1,
         backtrace_allowed/2, top_ref/2, wait_kind/1,
         generic_candidate/3, unmatched/1]).

-define(MAX_LINKS, 500).
%% waits whose top frame holds a fresh reference for every call
%% backtrace guard (words and bytes)
-define(BT_BASE_WORDS, 65536).
-define(BT_WORDS_PER_MSG, 24).
-define(BT_MAX_EXTRA_WORDS, 524288).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc How many messages are queued that the receive `Pid' waits in does not take: a
%% process that is waiting with messages queued has matched none of them (a selective
%% receive whose reply never comes in the shape it expects, a call or a sleep while requests
%% queue). 0 unless it is so at two reads 5 ms apart, so a message just arriving is not
%% counted.
-spec unmatched(pid()) -> non_neg_integer().
unmatched(Pid) ->
    case waiting_queue(Pid) of
        0 -> 0;
        _ ->
            receive after 5 -> ok end,
            waiting_queue(Pid)
    end.

waiting_queue(Pid) ->
    case pinfo_items(Pid, [status, message_queue_len]) of
        [{_, waiting}, {_, Q}] -> Q;
        _ -> 0
    end.

%% @doc What `Pid' waits on: `{wait, Wait}', `none' (not waiting) or `gone'.
-spec wait_of(pid()) -> {wait, os_sup_waits:wait()} | none | gone.
wait_of(Pid) ->
    wait_of(Pid, #{lib => lib_modules()}).

%% @doc {@link wait_of/1} with a context holding `lib' (see {@link lib_modules/0}), so a scan
%% computes the library modules once.
-spec wait_of(pid(), map()) -> {wait, os_sup_waits:wait()} | none | gone.
wait_of(Pid, Ctx) ->
    case pinfo_items(Pid, [current_function, status, monitors, message_queue_len,
                    total_heap_size]) of
        undefined -> gone;
        Items ->
            Get = fun(K) -> proplists:get_value(K, Items) end,
            CF = Get(current_function),
            Monitors = [normalise(T) || {process, T} <- list(Get(monitors))],
            case wait_kind(CF) of
                none ->
                    case generic_candidate(CF, Get(status), Ctx) of
                        true when length(Monitors) =:= 1 ->
                            {wait, #{kind => 'receive', function => CF, targets => Monitors,
                                     confirmed => false, ambiguous => false}};
                        _ -> none
                    end;
                lock ->
                    %% Waiting for a `:global' lock (`global:trans/4', `set_lock/3'): its
                    %% holders are the processes it waits on (the lock it asks for is not
                    %% readable, so several held locks leave it ambiguous).
                    Holders = [H || H <- global_lock_holders(), H =/= Pid],
                    {wait, #{kind => lock, function => CF, targets => lists:sublist(Holders, 10),
                             confirmed => length(Holders) =:= 1,
                             ambiguous => length(Holders) > 1}};
                start ->
                    Links = case pinfo_items(Pid, [links]) of
                                [{links, Ls}] -> Ls;
                                _ -> []
                            end,
                    Children = init_children(Pid, Links),
                    Targets = lists:usort(Children ++ case CF of
                                                          {_, sync_start_monitor, _} -> Monitors;
                                                          _ -> []
                                                      end),
                    {wait, #{kind => start, function => CF, targets => Targets,
                             confirmed => Targets =/= [], ambiguous => length(Targets) > 1}};
                Kind ->
                    Multi = multi_wait(CF),
                    {Targets, Ambiguous} =
                        case Monitors of
                            [_, _ | _] when not Multi ->
                                disambiguate(Pid, Monitors, Get(message_queue_len),
                                             Get(total_heap_size), Ctx);
                            _ -> {lists:sublist(Monitors, 10), false}
                        end,
                    {wait, #{kind => Kind, function => CF, targets => Targets,
                             confirmed => Targets =/= [] andalso not Ambiguous,
                             ambiguous => Ambiguous}}
            end
    end.

%% @doc The kind of wait a current function means, or none.
-spec wait_kind(term()) -> call | await | erpc | io | start | lock | none.
wait_kind({gen, F, _}) ->
    one_of(F, [do_call, wait_response, receive_response, do_receive_response], call);
wait_kind({gen_server, F, _}) ->
    one_of(F, [wait_response, receive_response], call);
wait_kind({gen_statem, F, _}) ->
    one_of(F, [call_clean, wait_response, receive_response], call);
wait_kind({gen_event, F, _}) ->
    one_of(F, [wait_response, receive_response], call);
wait_kind({erpc, F, _}) ->
    one_of(F, [call, receive_response, wait_response, multicall, multicall_receive], erpc);
wait_kind({io, execute_request, _}) -> io;
wait_kind({proc_lib, F, _}) ->
    one_of(F, [sync_start, sync_start_link, sync_start_monitor, sync_wait], start);
wait_kind({'Elixir.Task', F, _}) ->
    one_of(F, [await, await_many, yield, yield_many], await);
wait_kind({global, F, _}) ->
    one_of(F, [random_sleep, set_lock, trans, set_lock_on_nodes, lock_nodes_safely], lock);
wait_kind(_) -> none.

%% The processes of this node holding a `:global' lock (`global_locks': `{Id, Requester,
%% [{Pid, ...}]}'), at most ?MAX_LINKS of them read.
global_lock_holders() ->
    Rows = try ets:info(global_locks, size) of
               N when is_integer(N), N =< ?MAX_LINKS -> ets:tab2list(global_locks);
               _ -> []
           catch _:_ -> []
           end,
    lists:usort([P || {_, _, Holders} <- Rows, is_list(Holders), H <- Holders, is_tuple(H),
                      tuple_size(H) >= 1, P <- [element(1, H)], is_pid(P), node(P) =:= node()]).

one_of(F, Fs, Kind) ->
    case lists:member(F, Fs) of
        true -> Kind;
        false -> none
    end.

%% Waits that wait on several processes at once.
multi_wait({'Elixir.Task', F, _}) -> F =:= await_many orelse F =:= yield_many;
multi_wait({erpc, F, _}) -> F =:= multicall orelse F =:= multicall_receive;
multi_wait(_) -> false.

normalise({Name, Node}) when is_atom(Name), Node =:= node() ->
    case whereis(Name) of
        P when is_pid(P) -> P;
        _ -> {Name, Node}
    end;
normalise(T) -> T.

%% Linked children still in `init_it' (a parent in proc_lib start-up waits for them).
init_children(Parent, Links) ->
    [L || L <- lists:sublist(Links, ?MAX_LINKS), is_pid(L), node(L) =:= node(), L =/= Parent,
          case pinfo_items(L, [initial_call, current_stacktrace]) of
              [{_, {proc_lib, init_p, 5}}, {_, Stack}] when is_list(Stack) ->
                  lists:any(fun({_, F, _, _}) -> F =:= init_it; (_) -> false end, Stack);
              _ -> false
          end].

%% Several monitors: the one whose pid or registered name the caller's frames hold.
disambiguate(Pid, Monitors, Mq, Heap, Ctx) ->
    Frames = case backtrace_allowed(Mq, Heap) of
                 true -> call_frames(backtrace(Pid), Ctx);
                 false -> undefined
             end,
    case Frames of
        undefined -> {Monitors, true};
        _ ->
            case [T || T <- Monitors, mentioned(T, Frames)] of
                [T] -> {[T], false};
                _ -> {Monitors, true}
            end
    end.

mentioned(P, Frames) when is_pid(P) ->
    binary:match(Frames, list_to_binary(pid_to_list(P))) =/= nomatch orelse
        case pinfo_items(P, [registered_name]) of
            [{_, N}] when is_atom(N), N =/= [] -> mentioned_atom(N, Frames);
            _ -> false
        end;
mentioned({Name, _Node}, Frames) ->
    mentioned_atom(Name, Frames).

mentioned_atom(Name, Frames) ->
    Text = unicode:characters_to_binary(io_lib:format("~tp", [Name])),
    binary:match(Frames, <<" ", Text/binary, "\n">>) =/= nomatch.

%% The backtrace frames from the top down to the first frame of user code.
call_frames(undefined, _Ctx) -> undefined;
call_frames(Bt, Ctx) ->
    Frames = binary:split(Bt, <<"\n\n">>, [global]),
    iolist_to_binary(take_until_user(lists:sublist(Frames, 12), Ctx)).

take_until_user([], _Ctx) -> [];
take_until_user([F | Rest], Ctx) ->
    case frame_module(F) of
        {ok, M} ->
            case library(M, Ctx) of
                true -> [F, <<"\n">> | take_until_user(Rest, Ctx)];
                false -> [F, <<"\n">>]
            end;
        error -> [F, <<"\n">> | take_until_user(Rest, Ctx)]
    end.

frame_module(F) ->
    case re:run(F, <<"\\(([^:() ]+):[^/]+/[0-9]+ \\+">>, [{capture, [1], binary}]) of
        {match, [M]} ->
            try binary_to_existing_atom(unquote(M), utf8) of
                A -> {ok, A}
            catch
                _:_ -> error
            end;
        _ -> error
    end.

unquote(<<"'", R/binary>>) when byte_size(R) > 0 -> binary:part(R, 0, byte_size(R) - 1);
unquote(B) -> B.

%% @doc True when a process's backtrace is cheap to take: its heap is small for its queue
%% length `Mq' (a backtrace is printed by the process it describes).
-spec backtrace_allowed(term(), term()) -> boolean().
backtrace_allowed(Mq, Heap) when is_integer(Mq), is_integer(Heap) ->
    Heap =< ?BT_BASE_WORDS + min(Mq * ?BT_WORDS_PER_MSG, ?BT_MAX_EXTRA_WORDS);
backtrace_allowed(_, _) ->
    false.

%% @doc The process's backtrace as text, or undefined.
-spec backtrace(pid()) -> binary() | undefined.
backtrace(Pid) ->
    try erlang:process_info(Pid, backtrace) of
        {backtrace, B} when is_binary(B) -> B;
        _ -> undefined
    catch _:_ -> undefined
    end.

%% @doc The first reference in the top frame when that frame is the wait `Top' (a new
%% reference for every call), else undefined.
-spec top_ref(binary() | undefined, binary()) -> binary() | undefined.
top_ref(undefined, _Top) -> undefined;
top_ref(Bt, Top) ->
    First = case binary:match(Bt, <<"\n\n">>) of
                {Pos, _} -> binary:part(Bt, 0, Pos);
                nomatch -> Bt
            end,
    case binary:match(First, Top) of
        nomatch -> undefined;
        _ ->
            case re:run(First, <<"#Ref<[0-9.]+>">>, [{capture, first, binary}]) of
                {match, [R]} -> R;
                _ -> undefined
            end
    end.

%% @doc The first frame of user code below a library current function.
-spec user_frame(term(), map()) -> mfa() | undefined.
user_frame(Stack, Ctx) when is_list(Stack) ->
    case [{M, F, A} || {M, F, A, _} <- Stack, is_atom(M), not library(M, Ctx)] of
        [First | _] -> First;
        [] -> undefined
    end;
user_frame(_, _) ->
    undefined.

%% @doc True when a process waiting in `receive' in `MFA' may be waiting on another process
%% (user code, not the library's or the helper's).
-spec generic_candidate(term(), atom(), map()) -> boolean().
generic_candidate({M, _, _}, waiting, Ctx) when is_atom(M) ->
    not library(M, Ctx) andalso not own({M, x, 0});
generic_candidate(_, _, _) ->
    false.

%%%===================================================================
%%% Private: small helpers
%%%===================================================================

list(L) when is_list(L) -> L;
list(_) -> [].
