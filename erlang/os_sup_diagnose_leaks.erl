%%% @doc `os_sup_diagnose_leaks' finds the process groups that grow beyond their own turnover
%%% (a leak) for `diagnose', from the two walks of `os_sup_diagnose', and ends each at the
%%% code: the application function its processes wait in, what would release them (a
%%% receive's shape and the project's senders of it, `os_sup_code_msgs'), the application's
%%% calls to the library server that makes them, or the crowded server they wait on.
%%%
%%% A group is a leak when it grew by at least ?LEAK_DELTA processes (?LEAK_MIN where the walks
%%% tell the processes born from those that died) and ?LEAK_PER_S a second. Reads only
%%% `process_info'; the code searches are bounded by their own modules' budgets.
-module(os_sup_diagnose_leaks).

-import(os_sup_lib_text, [fmt/2, bytes/1]).

%% API
-export([leaks/2, behind/3]).

-define(LEAK_DELTA, 10).
-define(LEAK_MIN, 5).
-define(LEAK_PER_S, 5).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The leak findings (at most two) among the groups compared over the window.
-spec leaks([map()], map()) -> [os_sup_diagnose:finding()].
leaks(Groups, #{fmt := Fmt, secs := Secs} = Ctx) ->
    Growing = [G || #{key := K, delta := D, sample := S} = G <- Groups, K =/= other,
                    is_integer(D), D / Secs >= ?LEAK_PER_S, is_pid(S), grew_beyond_churn(G)],
    [begin
         Frame = os_sup_proc_groups:app_frame(S),
         %% (the server writes `leak: ' before it: a leak told inside another finding is
         %% told without it)
         Head = [fmt("+~b/s ", [round(D / Secs)]), os_sup_proc_groups:describe(origin, G, Fmt),
                 fmt(", ~b procs, ~ts, ~ts, ~ts", [C, each(Q, C, "msg"), links(L), bytes(M)])],
         Mailbox = mailbox_note(S, Fmt),
         Fallback = case Frame of
                        undefined -> cf_frame(K);
                        _ -> Frame
                    end,
         %% Processes a library server starts for its callers (`file_server_2' an io server
         %% per `File.open'): the application's calls to that server made them. Processes
         %% that wait in a receive of the application's: what would release them, and who
         %% sends it.
         Leak = case Frame =:= undefined andalso os_sup_diagnose_holders:callers_of(parent(K), Fmt) of
                    #{text := Made, target := Target} ->
                        os_sup_diagnose:finding(leak, {Head, [Mailbox, "; started for the application by ", Made]},
                                {source, [{<<"target">>, Target}]}, S, Fallback, Ctx);
                    _ ->
                        case waits_for(S, Frame, parent(K), Fmt) of
                            #{text := Waits, target := Target} ->
                                os_sup_diagnose:finding(leak, {Head, [Mailbox, "; ", Waits]},
                                        {source, [{<<"target">>, Target}]}, S, Fallback, Ctx);
                            #{text := Waits} ->
                                os_sup_diagnose:finding(leak, {Head, [Mailbox, "; ", Waits]},
                                        {process_info, [{<<"pid">>, S}]}, S,
                                        Fallback, Ctx);
                            undefined ->
                                os_sup_diagnose:finding(leak, {Head, Mailbox},
                                        {process_info, [{<<"pid">>, S}]}, S,
                                        Fallback, Ctx)
                        end
                end,
         %% The process memory it adds, which the server's growth of it is explained by.
         Leak#{facts := #{processes_per_s => round(D / Secs), processes => C, queue => Q,
                          memory_bytes_per_s => round(D / Secs * M / max(1, C))}}
     end || #{key := K, delta := D, count := C, queue := Q, links := L, memory := M,
              sample := S} = G <- lists:sublist(Growing, 2)].

%% @doc A leak whose processes wait in calls on a server found crowded names that server
%% (`keys', `behind'): the server tells the leak as part of the contention finding, its cause.
-spec behind(os_sup_diagnose:finding(), [os_sup_diagnose:finding()], map()) ->
          os_sup_diagnose:finding().
behind(#{pid := Sample} = Leak, Contention, _Ctx) when is_pid(Sample) ->
    case [Server || #{kind := contention, pid := Server} <- Contention, is_pid(Server),
                    waits_on(Sample, Server)] of
        [Server | _] -> Leak#{keys := (maps:get(keys, Leak))#{behind => Server}};
        [] -> Leak
    end;
behind(Leak, _Contention, _Ctx) ->
    Leak.

%%%===================================================================
%%% Private
%%%===================================================================

%% Whether process `P' waits in a call on `Server'.
waits_on(P, Server) ->
    case os_sup_waits:wait_of(P) of
        {wait, #{kind := Kind, targets := [Server]}} when Kind =:= call; Kind =:= lock -> true;
        _ -> false
    end.

%% A group's growth is more than its own coming and going would make by chance. Its processes
%% live on: most of those the first walk counted are there at the second (short-lived ones, a
%% task per request, are all new each time, however many). And its growth is beyond its
%% turnover: a group counts differently at each walk by about the square root of what was born
%% and died between them (twice that is asked). Where the walks do not tell births from
%% deaths, ?LEAK_DELTA is.
grew_beyond_churn(#{delta := D, count := C, born := Born, died := Died}) ->
    Before = C - D,
    D >= ?LEAK_MIN andalso Before > 0 andalso 2 * Died =< Before
        andalso D * D >= 4 * (Born + Died);
grew_beyond_churn(#{delta := D}) ->
    D >= ?LEAK_DELTA.

%% For a process waiting in a receive of the application's code: what that receive takes and
%% which of the project's functions send it (`os_sup_code_msgs'), the code of the process that
%% started it searched first.
waits_for(P, #{mfa := MFA}, Parent, Fmt) ->
    case erlang:process_info(P, [status, current_function]) of
        [{status, waiting}, {current_function, MFA}] ->
            Near = case is_pid(Parent) andalso os_sup_proc_origin:initial_call(Parent) of
                       {Mod, _, _} -> [Mod];
                       _ -> []
                   end,
            try os_sup_code_msgs:waits_for(MFA, Near, Fmt)
            catch _:_ -> undefined
            end;
        _ -> undefined
    end;
waits_for(_P, _Frame, _Parent, _Fmt) ->
    undefined.

%% What waits in the sample's mailbox, by shape (a small queue only: it is copied to read).
mailbox_note(Pid, Fmt) ->
    case os_sup_proc_mailbox:shapes(Pid, 1000, 0, Fmt) of
        #{shapes := [_ | _] = Shapes} ->
            ["; its mailbox: ", lists:join(", ", [fmt("~b× ~ts", [N, Shape])
                                                 || #{shape := Shape, count := N}
                                                        <- lists:sublist(Shapes, 2)])];
        _ -> <<>>
    end.

parent({_, _, Parent}) -> Parent;
parent(_) -> undefined.

cf_frame({_, {M, F, A}, _}) when is_atom(M) -> #{mfa => {M, F, A}};
cf_frame(_) -> undefined.

each(0, _C, What) -> fmt("no ~tss", [What]);
each(Q, C, What) when Q rem C =:= 0 -> fmt("~b ~ts each", [Q div C, What]);
each(Q, _C, What) -> fmt("~b ~tss in all", [Q, What]).

links(0) -> <<"no links">>;
links(1) -> <<"1 link">>;
links(L) -> fmt("~b links", [L]).
