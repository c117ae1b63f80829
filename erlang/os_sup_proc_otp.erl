%%% @doc `os_sup_proc_otp' decides, without sending it anything, whether a
%%% process runs an OTP behaviour loop and so answers system messages
%%% (`sys:get_state/2'). `os_sup_proc_tree' and `os_sup_proc_state' ask it
%%% before they send a process anything: an unknown message or call can hang the
%%% caller, and an unknown call kills an OTP 25 supervisor.
-module(os_sup_proc_otp).

-import(os_sup_lib_proc, [pinfo_items/2, dict_initial_call/1]).
-import(os_sup_lib_reply, [fail/3]).

-export([otp_behaviour/1, not_otp/4, gen_server_idle/1]).

%%%===================================================================
%%% API and its rationale
%%%===================================================================

%% Only a process running an OTP behaviour loop (gen_server, gen_statem,
%% gen_event, gen_fsm; supervisors, supervisor bridges, DynamicSupervisor,
%% Task.Supervisor, Agent and Registry partitions are gen_servers) answers
%% system messages. Anything else (an Elixir Task, a plain spawn, a custom
%% proc_lib loop) takes `{system, From, Req}' in its own `receive', or leaves
%% it in its mailbox, and the caller waits out its timeout. So the helper
%% decides from what the process shows without a message: its call stack
%% first (the outermost frame above proc_lib is the loop it runs), then its
%% `$initial_call' (what `proc_lib:translate_initial_call/1' reads) checked
%% against the callback module's behaviour attributes or exports.
%%
%% `$initial_call' alone is not enough: an Agent overwrites it with its
%% function (`{Mod, "-fun-0-", 0}'), and every Elixir Task sets it to its
%% function too, so `Task.start(MyServer, :init, [x])' looks like a
%% GenServer `{MyServer, init, 1}'.

%% @doc How `Pid' answers system messages, decided without sending it anything.
%% `{ok, #{loop, kind, behaviour, module}}': it runs (or starts, or hibernates
%% in) an OTP behaviour loop; `loop' is the loop seen on its stack (gen_server,
%% gen_statem, gen_event, gen_fsm, sys when sys-suspended, hibernated), `kind'
%% the behaviour it was started as (gen_server, gen_statem, gen_event,
%% gen_fsm, supervisor, supervisor_bridge) or undefined, `behaviour' and
%% `module' as declared by its callback module. `{no, Kind, Detail}' (Kind
%% task | plain | proc_lib | hibernated): it may not understand a system
%% message. `gone': it exited.
-spec otp_behaviour(pid()) -> {ok, #{loop := atom(), kind := atom(), behaviour := atom(),
                                     module := atom()}}
                                  | {no, task | plain | proc_lib | hibernated, map()}
                                  | gone.
otp_behaviour(Pid) ->
    case pinfo_items(Pid, [current_function, current_stacktrace, initial_call, dictionary]) of
        undefined -> gone;
        Items -> otp_behaviour_of(Items)
    end.

otp_behaviour_of(Items) ->
    Get = fun(K) -> proplists:get_value(K, Items) end,
    Dict = case Get(dictionary) of D when is_list(D) -> D; _ -> [] end,
    Stack = case Get(current_stacktrace) of
                S when is_list(S) -> [{M, F, A} || {M, F, A, _} <- S];
                _ -> []
            end,
    Initial = dict_initial_call(Dict),
    Claimed = claimed_behaviour(Initial),
    Outer = outer_frame(Stack),
    Detail = #{initial_call => Initial, outer => Outer, current => Get(current_function)},
    case loop_of(Outer) of
        {loop, Loop} -> {ok, loop_info(Loop, Claimed)};
        sys -> {ok, loop_info(sys, Claimed)};
        task -> {no, task, Detail};
        none ->
            Hibernated = Get(current_function) =:= {erlang, hibernate, 3} andalso Stack =:= [],
            ProcLib = Initial =/= undefined orelse proc_lib_start(Get(initial_call))
                orelse lists:any(fun({M, _, _}) -> M =:= proc_lib end, Stack),
            if
                %% A hibernated process shows no stack: trust a `$initial_call'
                %% whose callback module confirms the behaviour, unless the
                %% process has Task's `$callers'.
                Hibernated, Claimed =/= undefined ->
                    case lists:keymember('$callers', 1, Dict) of
                        false -> {ok, loop_info(hibernated, Claimed)};
                        true -> {no, task, Detail}
                    end;
                Hibernated -> {no, hibernated, Detail};
                ProcLib -> {no, proc_lib, Detail};
                true -> {no, plain, Detail}
            end
    end.

proc_lib_start({proc_lib, init_p, _}) -> true;
proc_lib_start(_) -> false.

%% @doc Whether `MFA' is where an idle gen_server waits for its next message: `loop', or on
%% OTP 29 `loop_hibernate' (hibernated, as its supervisors are when idle).
-spec gen_server_idle(term()) -> boolean().
gen_server_idle({gen_server, loop, _}) -> true;
gen_server_idle({gen_server, loop_hibernate, _}) -> true;
gen_server_idle(_) -> false.

%% The outermost frame above the process's start (proc_lib, gen start-up).
outer_frame(Stack) ->
    case lists:dropwhile(fun start_frame/1, lists:reverse(Stack)) of
        [Outer | _] -> Outer;
        [] -> undefined
    end.

start_frame({proc_lib, F, _}) -> F =:= init_p_do_apply orelse F =:= init_p orelse F =:= wake_up;
start_frame({gen, F, _}) -> F =:= init_it orelse F =:= init_it2;
start_frame(_) -> false.

%% The loop a process's outermost frame belongs to: a behaviour's own
%% server-side functions only (a process blocked in `gen_server:call/3' is a
%% client, not a server).
loop_of({gen_server, F, _}) ->
    %% (OTP 29's idle gen_server may wait in loop_hibernate/4: its supervisors hibernate)
    loop_if(gen_server, prefix(<<"loop">>, F) orelse
                lists:member(F, [decode_msg, handle_msg, try_dispatch,
                                         try_handle_call, try_handle_continue,
                                         handle_common_reply, wake_hib, init_it, enter_loop]));
loop_of({gen_statem, F, _}) ->
    loop_if(gen_statem, prefix(<<"loop">>, F) orelse
                lists:member(F, [init_it, init_result, enter, wakeup_from_hibernate,
                                 enter_loop]));
loop_of({gen_event, F, _}) ->
    loop_if(gen_event, prefix(<<"server_">>, F) orelse
                lists:member(F, [loop, fetch_msg, decode_msg, handle_msg, wake_hib, init_it,
                                 s_s_h, do_swap, handle_exit]));
loop_of({gen_fsm, F, _}) ->
    loop_if(gen_fsm, lists:member(F, [loop, decode_msg, handle_msg, dispatch, wake_hib,
                                      init_it, enter_loop]));
loop_of({sys, F, _}) ->
    %% Inside sys:handle_system_msg (a sys:suspend-ed behaviour, or one
    %% answering a system message right now): it takes the next one too.
    case lists:member(F, [handle_system_msg, suspend_loop, suspend_loop_hib]) of
        true -> sys;
        false -> none
    end;
loop_of({'Elixir.Task.Supervised', _, _}) ->
    task;
loop_of(_) ->
    none.

loop_if(Loop, true) -> {loop, Loop};
loop_if(_, false) -> none.

prefix(P, F) ->
    B = atom_to_binary(F, utf8),
    binary:longest_common_prefix([P, B]) =:= byte_size(P).

%% {Kind, Behaviour, Module} claimed by `$initial_call' (as proc_lib
%% translates it) and confirmed by the loaded callback module, or undefined.
claimed_behaviour({supervisor, M, 1}) when is_atom(M) ->
    %% OTP supervisor, Elixir Supervisor, DynamicSupervisor (which writes
    %% this itself), Task.Supervisor, Registry.
    case module_behaviour(M) of
        {supervisor, B} -> {supervisor, B, M};
        _ ->
            case module_exports(M, [{init, 1}]) of
                true -> {supervisor, supervisor, M};
                false -> undefined
            end
    end;
claimed_behaviour({supervisor_bridge, M, 1}) when is_atom(M) ->
    case module_behaviour(M) =:= {supervisor_bridge, supervisor_bridge}
        orelse module_exports(M, [{init, 1}]) of
        true -> {supervisor_bridge, supervisor_bridge, M};
        false -> undefined
    end;
claimed_behaviour({gen_event, init_it, 6}) ->
    {gen_event, gen_event, undefined};
claimed_behaviour({M, init, 1}) when is_atom(M) ->
    case module_behaviour(M) of
        {K, B} when K =:= gen_server; K =:= gen_statem; K =:= gen_fsm -> {K, B, M};
        _ ->
            case {module_exports(M, [{init, 1}, {handle_call, 3}]),
                  module_exports(M, [{init, 1}, {callback_mode, 0}])} of
                {_, true} -> {gen_statem, gen_statem, M};
                {true, _} -> {gen_server, gen_server, M};
                _ -> undefined
            end
    end;
claimed_behaviour(_) ->
    undefined.

%% The first process behaviour a loaded module declares: {Kind, AsDeclared}.
%% Never loads code (erlang:get_module_info/2 is a BIF).
module_behaviour(M) ->
    Declared = try erlang:get_module_info(M, attributes) of
                   Attrs when is_list(Attrs) ->
                       lists:append([V || {K, V} <- Attrs, K =:= behaviour orelse
                                              K =:= behavior, is_list(V)]);
                   _ -> []
               catch
                   _:_ -> []
               end,
    case [{K, B} || B <- Declared, K <- [behaviour_kind(B)], K =/= undefined] of
        [First | _] -> First;
        [] -> undefined
    end.

behaviour_kind(gen_server) -> gen_server;
behaviour_kind('Elixir.GenServer') -> gen_server;
behaviour_kind(gen_statem) -> gen_statem;
behaviour_kind(gen_fsm) -> gen_fsm;
behaviour_kind(gen_event) -> gen_event;
behaviour_kind(supervisor) -> supervisor;
behaviour_kind('Elixir.Supervisor') -> supervisor;
behaviour_kind('Elixir.DynamicSupervisor') -> supervisor;
behaviour_kind(supervisor_bridge) -> supervisor_bridge;
behaviour_kind(_) -> undefined.

module_exports(M, FAs) ->
    erlang:module_loaded(M) andalso
        lists:all(fun({F, A}) -> erlang:function_exported(M, F, A) end, FAs).

%% The loop seen on the stack, with what `$initial_call' claims where it fits.
loop_info(Loop, Claimed) ->
    Fits = case {Loop, Claimed} of
               {_, undefined} -> false;
               {hibernated, _} -> true;
               {sys, _} -> true;
               {gen_server, {K, _, _}} -> lists:member(K, [gen_server, supervisor,
                                                           supervisor_bridge]);
               {L, {K, _, _}} -> L =:= K
           end,
    case Fits of
        true ->
            {Kind, Behaviour, Module} = Claimed,
            #{loop => Loop, kind => Kind, behaviour => Behaviour, module => Module};
        false ->
            Kind = case lists:member(Loop, [gen_server, gen_statem, gen_event, gen_fsm]) of
                       true -> Loop;
                       false -> undefined
                   end,
            #{loop => Loop, kind => Kind, behaviour => Kind, module => undefined}
    end.

%% @doc Ends a tool body (`fail/3', kind `not_otp') saying why `get_state' sends `PidText'
%% nothing; `Kind' and `Detail' come from {@link otp_behaviour/1}.
-spec not_otp(binary(), task | plain | proc_lib | hibernated, map(), elixir | erlang) -> no_return().
not_otp(PidText, task, Detail, Fmt) ->
    fail(not_otp, "~ts is an Elixir Task (running ~ts), not an OTP process: it does not "
         "answer system messages, so get_state sent it nothing; use process_info instead",
         [PidText, case initial_text(Detail, Fmt) of
                       <<"-">> -> running(Detail, Fmt);
                       Fun -> Fun
                   end]);
not_otp(PidText, plain, Detail, Fmt) ->
    fail(not_otp, "~ts is a plain process (spawned without proc_lib, running ~ts), not an OTP "
         "process: it does not answer system messages, so get_state sent it nothing; use "
         "process_info instead", [PidText, running(Detail, Fmt)]);
not_otp(PidText, hibernated, Detail, Fmt) ->
    fail(not_otp, "~ts is hibernated and its initial call (~ts) names no OTP behaviour (an Agent "
         "or a Task?): it is not known to answer system messages, so get_state sent it "
         "nothing; use process_info instead, or retry once it has woken up",
         [PidText, initial_text(Detail, Fmt)]);
not_otp(PidText, proc_lib, Detail, Fmt) ->
    fail(not_otp, "~ts is a proc_lib process (started as ~ts, running ~ts) but not an OTP "
         "behaviour (gen_server, gen_statem, gen_event, supervisor): it is not known to answer "
         "system messages, so get_state sent it nothing; use process_info instead",
         [PidText, initial_text(Detail, Fmt), running(Detail, Fmt)]).

running(#{outer := {_, _, _} = MFA}, Fmt) -> os_sup_lib_render:mfa(MFA, Fmt);
running(#{current := {_, _, _} = MFA}, Fmt) -> os_sup_lib_render:mfa(MFA, Fmt);
running(_, _) -> <<"-">>.

initial_text(#{initial_call := {_, _, _} = MFA}, Fmt) -> os_sup_lib_render:mfa(MFA, Fmt);
initial_text(_, _) -> <<"-">>.

