%%% @doc `os_sup_diagnose_deadlock' finds the `deadlock' findings of `diagnose':
%%% cycles of blocked calls (`os_sup_waits:node_chains/2'), confirmed, each member
%%% with where it waits in the application's code, and who waits behind the
%%% cycle. Its `keys' name the members as their supervisors' reports do, so the
%%% server tells their restarts as part of it. Reads only what the waits scan
%%% read; a second scan, at most ?CHAIN_MS, only on a node whose supervisors
%%% restarted something lately.
-module(os_sup_diagnose_deadlock).

-export([deadlocks/2, rescanned/2]).

-define(CHAIN_MS, 1000).

%% @doc The deadlock findings (at most two) among the chains of the waits scan.
-spec deadlocks([map()], map()) -> [os_sup_diagnose:finding()].
deadlocks(Chains, #{fmt := Fmt} = Ctx) ->
    [begin
         [First | _] = Hops = maps:get(hops, C),
         Frames = [{H, os_sup_proc_groups:app_frame(H)} || H <- Hops],
         Parts = [[os_sup_lib_label:label(H, Fmt), os_sup_diagnose:frame_note(F, Fmt)] || {H, F} <- Frames],
         Behind = lists:usort([H || #{stop := deadlocked, deadlocked := To, hops := Hs} <- Chains,
                                    lists:member(To, Hops), H <- Hs]),
         BehindText = case Behind of
                          [] -> [];
                          _ -> ["; waiting behind it (not members): ",
                                lists:join(", ", [[os_sup_lib_label:label(B, Fmt),
                                                   os_sup_diagnose:frame_note(os_sup_proc_groups:app_frame(B), Fmt)]
                                                  || B <- lists:sublist(Behind, 3)])]
                      end,
         Line = {["DEADLOCK ", lists:join(" → call → ", Parts), " → call → ",
                  os_sup_lib_label:label(First, Fmt)], BehindText},
         Found = os_sup_diagnose:finding(deadlock, Line, {process_info, [{<<"pid">>, First}]}, First,
                         proplists:get_value(First, Frames), Ctx),
         %% How its members are known to their supervisors' reports: by name or by module.
         Found#{facts := #{processes => length(Hops), waiting_behind => length(Behind)},
                keys := #{members => lists:usort(lists:append([member_names(H, Fmt)
                                                               || H <- Hops]))}}
     end || C <- lists:sublist([C || C <- Chains, os_sup_waits:deadlock(C),
                                    os_sup_waits:confirmed(C)], 2)].

member_names(P, Fmt) ->
    Module = case os_sup_proc_origin:initial_call(P) of
                 {M, _, _} when is_atom(M) -> [os_sup_lib_render:name(M, Fmt)];
                 _ -> []
             end,
    [os_sup_lib_label:label(P, Fmt) | Module].

%% @doc The chains again, at the end of the window, when the first scan saw no deadlock on a node
%% whose supervisors restarted something lately: a deadlock that times out and restarts is
%% missing from the node for a moment each time (cheap elsewhere: no second scan).
-spec rescanned([map()], map()) -> [map()].
rescanned(Chains, #{restarts := #{last_5m := Recent}}) when Recent > 0 ->
    case lists:any(fun os_sup_waits:deadlock/1, Chains) of
        true -> Chains;
        false ->
            try os_sup_waits:node_chains(5, ?CHAIN_MS) of
                {Again, _} -> Again
            catch
                _:_ -> Chains
            end
    end;
rescanned(Chains, _Log) ->
    Chains.
