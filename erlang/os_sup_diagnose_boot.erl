%%% @doc `os_sup_diagnose_boot' says where a node's boot waits: the
%%% applications whose start has not returned, each followed from its
%%% application master down to the process whose `init' has not returned, and
%%% what that process waits in, with the application's function and
%%% file:line. For the `not_started' finding of `diagnose'
%%% (`os_sup_diagnose') and for the server's `start' that timed out (the
%%% node-only tool `boot_waits'), read before anything is killed.
%%%
%%% == How the chain is found ==
%%% An application being started has an application master (in `ac_tab')
%%% still in `application_master:init_loop/4'. The master's linked process
%%% started in `application_master:start_it/4' runs the application's
%%% `start/2'; from there each `proc_lib' start-up wait (a supervisor waiting
%%% for a child's `init', `os_sup_waits_of') is followed to the child still in
%%% `init_it', until the process whose own code waits: in a call (its target
%%% named), a `receive', a sleep. Five reads of it over 400 ms tell a process
%%% that retries (its reductions grow: a sleep-and-ask-again loop) from one
%%% blocked for good. A start that waits in a call on the application
%%% controller waits for another application's start: that one is the cause,
%%% and its finding names the applications behind it. A Mix project whose
%%% applications are not all started while none is starting (the helper's
%%% readiness watcher still waits for them) says so, with what Mix does.
%%% Whether the node compiles (Elixir's parallel compiler or Mix's compilers
%%% run in one of its processes) is said too: only then is a slow start a
%%% slow compile.
%%%
%%% == Bounds and safety ==
%%% `process_info' only (nothing is sent to any process); at most 16 hops
%%% per chain, 2 applications, a compile check over at most 20 000
%%% processes, five reads of a stuck process over 400 ms; the Mix project's
%%% applications are asked in a throw-away process under a deadline
%%% (`os_sup_helper_status:probe_mix_raw/0').
-module(os_sup_diagnose_boot).

-import(os_sup_lib_proc, [pinfo_items/2]).
-import(os_sup_lib_reply, [ok_reply/2]).
-import(os_sup_lib_text, [fmt/2]).

%% API
-export([boot_waits/1, not_started/1, stuck/1, compiling/0]).

-define(MAX_HOPS, 16).
-define(MAX_APPS, 2).
-define(MAX_SCAN, 20000).
-define(READ_MS, 100).
%% Registered by `os_sup_helper_ready' until the node meets its readiness.
-define(READY_WATCHER, os_sup_helper_ready_watch).
-define(READS, 5).
%% each read of a waiting process's facts counts a reduction to it: more than this many a read
%% is work of its own
-define(IDLE_REDUCTIONS, 2).
%% Modules whose code runs only while Elixir or Mix compiles.
-define(COMPILERS, ['Elixir.Kernel.ParallelCompiler', 'Elixir.Mix.Compilers.Elixir',
                    'Elixir.Mix.Compilers.Erlang', elixir_compiler, elixir_module, elixir_erl,
                    elixir_erl_compiler, elixir_expand, elixir_def, compile]).

-type stuck() :: #{app := atom(), uptime_ms := non_neg_integer(), chain := [pid()],
                   blocked := pid() | undefined, frame := map() | undefined,
                   entry := map() | undefined, waits := binary(), behind := [atom()],
                   line := binary(), next := {atom(), [{binary(), term()}]},
                   atom() => term()}.
-export_type([stuck/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Node-only tool `boot_waits' (the server's `start' asks it when the node is not ready
%% in time): one line per application whose start has not returned (see {@link stuck/1}),
%% and whether the node compiles. Args: `format'.
-spec boot_waits(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
boot_waits(Args) ->
    Fmt = os_sup_lib_args:fmt_arg(Args),
    Stuck = stuck(Fmt),
    Compiling = compiling(),
    ok_reply([L || #{line := L} <- Stuck],
             #{stuck => [maps:with([app, uptime_ms, line], S) || S <- Stuck],
               compiling => Compiling}).

%% @doc The `not_started' findings of `diagnose' (`os_sup_diagnose:finding/6'), the cause
%% first: one per application whose start has not returned, or one for the Mix project's
%% applications when they are not started and nothing starts them.
-spec not_started(#{fmt := os_sup_lib_render:fmt(), atom() => term()}) -> [map()].
not_started(#{fmt := Fmt} = Ctx) ->
    [(os_sup_diagnose:finding(not_started, Line, Next, Blocked, Frame, Ctx))#{
       facts := #{waited_ms => Up, chain => length(Hops)}}
     || #{line := Line, next := Next, blocked := Blocked, frame := Frame, uptime_ms := Up,
          chain := Hops} <- stuck(Fmt)].

%% @doc The applications whose start has not returned, each with the chain from its master
%% to the process that waits (`blocked'), where that process is in the application's code
%% (`entry': where its code was entered, e.g. `init/1'; `frame': the innermost application
%% frame), what it waits in, and a line for an agent; the cause first.
-spec stuck(os_sup_lib_render:fmt()) -> [stuck()].
stuck(Fmt) ->
    Uptime = uptime_ms(),
    Starting = [chain(App, Master, Fmt) || {App, Master} <- starting()],
    %% A start that waits on the application controller waits for another application's
    %% start (`Application.ensure_all_started/1' in `start/2'): that one is the cause.
    {Behind, Causes} = lists:partition(fun(#{waits_on_ac := W}) -> W end, Starting),
    Others = [A || #{app := A} <- Behind],
    Found = case {Causes, Behind} of
                {[], _} -> Behind;
                {_, []} -> Causes;
                {[First | Rest], _} -> [First#{behind := Others} | Rest]
            end,
    Items = case Found of
                [] -> project_not_started(Fmt);
                _ -> Found
            end,
    [finish(S#{uptime_ms => Uptime}, Fmt) || S <- lists:sublist(Items, ?MAX_APPS)].

%% @doc Whether Elixir's or Mix's compilers run in a process of the node now.
-spec compiling() -> boolean().
compiling() ->
    lists:any(fun(P) ->
                      case pinfo_items(P, [current_function]) of
                          [{_, {M, _, _}}] -> lists:member(M, ?COMPILERS);
                          _ -> false
                      end
              end, os_sup_lib_proc:first_processes(?MAX_SCAN)).

%%%===================================================================
%%% Private: the chain
%%%===================================================================

%% `[{App, Master}]': the applications whose master still waits for their `start/2'.
starting() ->
    Masters = try ets:match(ac_tab, {{application_master, '$1'}, '$2'})
              catch _:_ -> []
              end,
    lists:sort([{App, M} || [App, M] <- Masters, is_pid(M),
                            pinfo_items(M, [current_function]) =:=
                                [{current_function, {application_master, init_loop, 4}}]]).

chain(App, Master, Fmt) ->
    Runner = case pinfo_items(Master, [links]) of
                 [{links, Links}] ->
                     case [L || L <- Links, is_pid(L),
                                pinfo_items(L, [initial_call]) =:=
                                    [{initial_call, {application_master, start_it, 4}}]] of
                         [R | _] -> R;
                         [] -> undefined
                     end;
                 _ -> undefined
             end,
    Hops = case Runner of
               undefined -> [];
               _ -> follow_starts(Runner, [])
           end,
    Blocked = case Hops of
                  [] -> undefined;
                  _ -> lists:last(Hops)
              end,
    Stack = case is_pid(Blocked) andalso pinfo_items(Blocked, [current_stacktrace]) of
                [{_, S}] -> S;
                _ -> []
            end,
    %% The process running `start/2' whose stack no longer shows it (a tail call): the
    %% application's callback module says where it is.
    Frame = case {os_sup_proc_origin:app_frame(Stack), Hops} of
                {undefined, [Blocked]} -> start_frame(App);
                {F, _} -> F
            end,
    {Waits, OnAc} = waits_in(Blocked, Frame, Fmt),
    #{app => App, chain => Hops, blocked => Blocked, frame => Frame,
      entry => os_sup_proc_origin:entry_frame(Stack),
      waits => Waits, waits_on_ac => OnAc, behind => [], master => Master}.

%% The application's `start/2' as a frame (its file, no line), when it has a callback module.
start_frame(App) ->
    case application:get_key(App, mod) of
        {ok, {Mod, _}} when is_atom(Mod) -> os_sup_proc_origin:app_frame([{Mod, start, 2, []}]);
        _ -> undefined
    end.

%% From the process running `start/2', down the `proc_lib' start-up waits to the process
%% whose `init' has not returned.
follow_starts(P, Seen) when length(Seen) >= ?MAX_HOPS ->
    lists:reverse([P | Seen]);
follow_starts(P, Seen) ->
    case os_sup_waits:wait_of(P) of
        {wait, #{kind := start, targets := Targets}} ->
            %% A supervisor's own parent is linked and in `init_it' too: the child is the
            %% target not met yet.
            case [T || T <- Targets, is_pid(T), not lists:member(T, [P | Seen])] of
                [T | _] -> follow_starts(T, [P | Seen]);
                [] -> lists:reverse([P | Seen])
            end;
        _ -> lists:reverse([P | Seen])
    end.

%% What the blocked process waits in, as text, and whether that is a call on the
%% application controller (a start waiting for another application's).
waits_in(undefined, _Frame, _Fmt) ->
    {<<"its start/2 process is gone">>, false};
waits_in(P, Frame, Fmt) ->
    Ac = whereis(application_controller),
    case os_sup_waits:wait_of(P) of
        {wait, #{kind := Kind, targets := [T | _]}} when Kind =/= start ->
            What = case Kind of
                       call -> "a call on ";
                       await -> "an await of ";
                       erpc -> "an erpc call to ";
                       io -> "an io request to ";
                       _ -> "a receive, monitoring "
                   end,
            {iolist_to_binary(["in ", What, os_sup_lib_label:label(T, Fmt),
                               target_note(T, Fmt)]),
             is_pid(Ac) andalso T =:= Ac};
        _ ->
            {current(P, Frame, Fmt), false}
    end.

%% Where the target of a call is (a process of the node that does not answer): waiting in a
%% call of its own, in the application's code, or idle in its loop with nothing queued (it
%% holds the call unanswered).
target_note(T, Fmt) when is_pid(T), node(T) =:= node() ->
    case os_sup_waits:wait_of(T) of
        {wait, #{kind := Kind, targets := [T2 | _]}} when Kind =:= call; Kind =:= await;
                                                         Kind =:= erpc ->
            [" (itself in a ", atom_to_list(Kind), " on ", os_sup_lib_label:label(T2, Fmt),
             app_note(T, Fmt), ")"];
        _ ->
            case {os_sup_proc_groups:app_frame(T),
                  pinfo_items(T, [current_function, message_queue_len])} of
                {undefined, [{_, MFA}, {_, Queued}]} ->
                    case os_sup_proc_otp:gen_server_idle(MFA) andalso Queued =:= 0 of
                        true -> [" (idle, nothing queued: it holds the call unanswered)"];
                        false -> [" (in ", os_sup_lib_render:mfa(MFA, Fmt), ")"]
                    end;
                {undefined, _} -> [];
                {F, _} -> [" (in ", os_sup_proc_groups:frame_text(F, Fmt), ")"]
            end
    end;
target_note(_T, _Fmt) -> [].

app_note(P, Fmt) ->
    case os_sup_proc_groups:app_frame(P) of
        undefined -> [];
        F -> [", from ", os_sup_proc_groups:frame_text(F, Fmt)]
    end.

%% A process that waits in its own code: where it is now, and, from ?READS reads of it
%% ?READ_MS apart, whether it retries (waiting in the same function at every read while its
%% reductions grow: a sleep-and-ask-again loop), is blocked for good (no work at all) or works;
%% what a loop repeats is traced during the reads (`os_sup_diagnose_retry').
current(P, Frame, Fmt) ->
    Watch = os_sup_diagnose_retry:watch(P, Frame),
    Reads = try reads(P, ?READS, [])
            catch C:R:St ->
                    _ = os_sup_diagnose_retry:repeated(Watch, Fmt),
                    erlang:raise(C, R, St)
            end,
    Repeated = os_sup_diagnose_retry:repeated(Watch, Fmt),
    case Reads of
        [] -> <<"(it has just exited)">>;
        [{MFA, R1, _} | _] = Reads ->
            {_, R0, _} = lists:last(Reads),
            Ms = (length(Reads) - 1) * ?READ_MS,
            D = R1 - R0,
            Idle = ?IDLE_REDUCTIONS * (length(Reads) - 1),
            Still = lists:all(fun({F, _, St}) -> F =:= MFA andalso St =:= waiting end, Reads),
            Text = os_sup_lib_render:mfa(MFA, Fmt),
            case Still of
                true when D > Idle ->
                    fmt("now in ~ts, looping (+~b reductions in ~b ms, waiting there at every "
                        "read): it retries, and what it waits for has not come~ts",
                        [Text, D, Ms, Repeated]);
                true ->
                    fmt("now in ~ts, blocked (no work in ~b ms)", [Text, Ms]);
                false ->
                    fmt("working (+~b reductions in ~b ms), now in ~ts", [D, Ms, Text])
            end
    end.

%% `[{CurrentFunction, Reductions, Status}]', newest first, until `P' is gone.
reads(_P, 0, Acc) -> Acc;
reads(P, N, Acc) ->
    case Acc of
        [] -> ok;
        _ -> receive after ?READ_MS -> ok end
    end,
    case pinfo_items(P, [current_function, reductions, status]) of
        [{_, MFA}, {_, R}, {_, St}] -> reads(P, N - 1, [{MFA, R, St} | Acc]);
        _ -> Acc
    end.

%%%===================================================================
%%% Private: a Mix project not started, nothing starting it
%%%===================================================================

project_not_started(Fmt) ->
    %% Only while the helper's readiness watcher still waits for the project's applications:
    %% a node it saw ready asks Mix nothing (a busy node would pay for the calls).
    case os_sup_helper:readiness_mode() =:= mix_app andalso is_pid(whereis(?READY_WATCHER)) of
        false -> [];
        true ->
            try os_sup_helper_status:probe_mix_raw() of
                {ok, Apps, false} when Apps =/= [] ->
                    Started = [A || {A, _, _} <- catch_list(fun() ->
                                                                  application:which_applications(1000)
                                                          end)],
                    case [A || A <- Apps, not lists:member(A, Started)] of
                        [] -> [];
                        [App | _] = Missing -> [mix_not_started(App, Missing -- [App], Fmt)]
                    end;
                {ok, _, true} -> [];
                %% Mix has not loaded the project, or has not told yet.
                _ -> [mix_not_started(undefined, [], Fmt)]
            catch _:_ -> [mix_not_started(undefined, [], Fmt)]
            end
    end.

%% The project's application `App' (`undefined': not known yet) not started while no
%% application is starting: what Mix does meanwhile.
mix_not_started(App, Behind, Fmt) ->
    {Boot, Where} =
        case {compiling(), boot_process()} of
            {true, _} ->
                {undefined, <<"no application is starting yet: Elixir compiles">>};
            {false, {mix, P}} ->
                {P, iolist_to_binary(
                      ["no application is starting yet; Mix's process ",
                       os_sup_lib_label:label(P, Fmt), mix_task(P, Fmt), " ", current(P, undefined, Fmt)])};
            {false, {cli, _}} ->
                {undefined, <<"no application is starting yet: Mix is still loading the "
                              "project">>};
            {false, undefined} when App =:= undefined ->
                {undefined, <<"Mix has not loaded the project">>};
            {false, undefined} ->
                {undefined, <<"no application is starting (was it started with "
                              "`--no-start`?)">>}
        end,
    Frame = case Boot of
                undefined -> undefined;
                _ -> os_sup_proc_groups:app_frame(Boot)
            end,
    #{app => App, chain => [], blocked => Boot, frame => Frame, entry => undefined,
      waits => Where, waits_on_ac => false, behind => Behind, master => undefined}.

catch_list(F) ->
    try F() of
        L when is_list(L) -> L;
        _ -> []
    catch _:_ -> []
    end.

%% The process that runs Mix's task (`mix run'): `{mix, Pid}'; else the one that runs the
%% command line's code (`{cli, Pid}', Mix not yet running a task); else `undefined'.
boot_process() ->
    Procs = os_sup_lib_proc:first_processes(?MAX_SCAN),
    Runs = fun(Mod) ->
                   fun(P) ->
                           case pinfo_items(P, [current_stacktrace]) of
                               [{_, Stack}] when is_list(Stack) ->
                                   lists:keymember(Mod, 1, Stack);
                               _ -> false
                           end
                   end
           end,
    case lists:search(Runs('Elixir.Mix.Task'), Procs) of
        {value, P} -> {mix, P};
        false ->
            case lists:search(Runs('Elixir.Kernel.CLI'), Procs) of
                {value, P} -> {cli, P};
                false -> undefined
            end
    end.

%% The innermost Mix task a process runs (`Mix.Tasks.Loadpaths.run/1'), as text, or `[]'.
mix_task(P, Fmt) ->
    case pinfo_items(P, [current_stacktrace]) of
        [{_, Stack}] when is_list(Stack) ->
            case [{M, F, A} || {M, F, A, _} <- Stack, is_atom(M),
                               lists:prefix("Elixir.Mix.Tasks.", atom_to_list(M))] of
                [MFA | _] -> [" runs ", os_sup_lib_render:mfa(MFA, Fmt), ","];
                [] -> []
            end;
        _ -> []
    end.

%%%===================================================================
%%% Private: the line
%%%===================================================================

finish(#{app := App, uptime_ms := Up, chain := Hops, blocked := Blocked, frame := Frame,
         entry := Entry, waits := Waits, behind := Behind} = S, Fmt) ->
    Head = case App of
               undefined -> fmt("not_started: the project's applications not started ~b s after "
                                "the node started", [Up div 1000]);
               _ -> fmt("not_started: application ~ts not started ~b s after the node started",
                        [App, Up div 1000])
           end,
    BehindText = case Behind of
                     [] -> [];
                     _ -> [" (", lists:join(", ", [atom_to_binary(B, utf8) || B <- Behind]),
                           " wait", case Behind of [_] -> "s"; _ -> "" end, " for it)"]
                 end,
    Where = case {Entry, Frame} of
                {undefined, undefined} -> [];
                {#{mfa := A}, #{mfa := B}} when A =/= B ->
                    ["; its start waits in ", os_sup_proc_groups:frame_text(Entry, Fmt), " → ",
                     os_sup_proc_groups:frame_text(Frame, Fmt)];
                {undefined, _} -> ["; its start waits in ", os_sup_proc_groups:frame_text(Frame, Fmt)];
                _ -> ["; its start waits in ", os_sup_proc_groups:frame_text(Entry, Fmt)]
            end,
    Chain = case Hops of
                [] -> [];
                [Runner] -> ["; chain: application master → its start/2 process ",
                             os_sup_lib_render:pid(Runner, Fmt)];
                [_ | Inits] -> ["; chain: application master → ",
                                lists:join(" → ", [os_sup_lib_label:label(H, Fmt) || H <- Inits]),
                                " ", os_sup_lib_render:pid(lists:last(Inits), Fmt)]
            end,
    Line = unicode:characters_to_binary([Head, BehindText, Where, ", ", Waits, Chain]),
    Next = case Frame of
               #{mfa := MFA} -> {source, [{<<"target">>, os_sup_lib_render:mfa(MFA, Fmt)}]};
               _ when is_pid(Blocked) ->
                   {process_info, [{<<"pid">>, Blocked}]};
               _ -> {logs, [{<<"tail">>, 20}]}
           end,
    S#{line => Line, next => Next}.

uptime_ms() ->
    try element(1, erlang:statistics(wall_clock)) catch _:_ -> 0 end.
