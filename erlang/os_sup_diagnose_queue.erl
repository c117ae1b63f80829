%%% @doc `os_sup_diagnose_queue' is the hidden-queue part of `diagnose' (`os_sup_diagnose'):
%%% the events a `gen_statem' postponed, which it holds in its loop, not its mailbox (its
%%% `message_queue_len' stays 0 while they pile up, and its memory grows with them). The
%%% largest processes and those that grew most over the window are looked at; a gen_statem
%%% among them that holds ?BIG postponed events or more is a `queue' finding: how many, by
%%% shape, the state it is in and the state function that keeps them (file:line), its next
%%% call that code.
%%%
%%% == Bounds and safety ==
%%% Only a gen_statem that is in its own loop (not in a callback, so it answers at once) is
%%% asked, at most ?ASKED of them (`os_sup_proc_queue:postponed/2': one system status
%%% request, only of a process of at most 16 MB): the one message `diagnose' sends.
-module(os_sup_diagnose_queue).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([queues/2]).

-define(BIG, 1000).
-define(ASKED, 3).
-define(SHOWN, 2).
-define(LOOKED_AT, 10).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The `queue' findings of the window's second walk `G1' (at most two).
-spec queues(map(), map()) -> [os_sup_diagnose:finding()].
queues(G1, #{fmt := Fmt} = Ctx) ->
    Looked = lists:usort([P || {P, _} <- lists:sublist(maps:get(largest, G1, []), ?LOOKED_AT)]
                         ++ [P || {_, P} <- lists:sublist(maps:get(top_grown, G1, []), ?LOOKED_AT)]),
    Statems = [{P, M} || P <- Looked, is_pid(P), node(P) =:= node(),
                         {ok, M} <- [idle_statem(P)], not os_sup_lib_label:helper_process(P)],
    Read = [{N, P, M, R} || {P, M} <- lists:sublist(Statems, ?ASKED),
                            #{count := N} = R <- [os_sup_proc_queue:postponed(P, Fmt)], N >= ?BIG],
    [finding(P, M, R, Ctx) || {_, P, M, R} <- lists:sublist(lists:reverse(lists:sort(Read)), ?SHOWN)].

%%%===================================================================
%%% Private
%%%===================================================================

%% A gen_statem in its own loop (between events: it answers a system message at once), with
%% its callback module.
idle_statem(P) ->
    case os_sup_lib_proc:pinfo_items(P, [current_function]) of
        [{_, {gen_statem, _, _}}] ->
            case os_sup_proc_otp:otp_behaviour(P) of
                {ok, #{kind := gen_statem, module := M}} when is_atom(M) -> {ok, M};
                _ -> none
            end;
        _ -> none
    end.

finding(P, M, #{count := N, state := State, shapes := Shapes, shapes_of := Of},
        #{fmt := Fmt} = Ctx) ->
    Mailbox = os_sup_lib_proc:queue_len(P),
    Head = fmt("queue: ~ts (gen_statem~ts) holds ~b postponed events, ~b in its mailbox",
               [os_sup_lib_label:label(P, Fmt),
                case State of
                    undefined -> <<>>;
                    _ -> [", state ", os_sup_lib_render:term(State, Fmt, 60)]
                end, N, Mailbox]),
    Frame = keeper(M, State),
    Detail = [": ", lists:join(", ", [fmt("~ts ×~b", [S, C]) || {S, C} <- Shapes]),
              [fmt(" (of the first ~b)", [Of]) || N > Of],
              case Frame of
                  undefined -> [];
                  _ -> ["; kept by its state function ", os_sup_proc_groups:frame_text(Frame, Fmt),
                        " (postponed events wait until the state changes)"]
              end],
    Next = case Frame of
               #{mfa := {Mod, F, A}} ->
                   {source, [{<<"target">>, os_sup_lib_render:mfa({Mod, F, A}, Fmt)}]};
               _ -> {get_state, [{<<"pid">>, P}]}
           end,
    Found = os_sup_diagnose:finding(queue, {Head, Detail}, Next, P, Frame, Ctx),
    Found#{facts := #{queue => N + Mailbox, postponed => N, mailbox => Mailbox}}.

%% The state function that keeps the events (`StateName/3' in `state_functions' mode, else
%% `handle_event/4'), with its file:line from the debug info.
keeper(M, State) ->
    {F, A} = case is_atom(State) andalso erlang:function_exported(M, State, 3) of
                 true -> {State, 3};
                 false -> {handle_event, 4}
             end,
    case os_sup_code_beam:info(M) of
        #{defs := Defs, source := Source} ->
            Line = hd([L || {F1, A1, _, L, _} <- Defs, F1 =:= F, A1 =:= A] ++ [undefined]),
            #{mfa => {M, F, A}, line => Line,
              file => os_sup_code_beam:relative(Source, os_sup_code_beam:project_dir())};
        _ -> #{mfa => {M, F, A}, file => undefined, line => undefined}
    end.
