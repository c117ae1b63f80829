%%% @doc `os_sup_log_cascade' names what died first when a process's end
%%% takes others with it: a supervisor killed (`exit(Pid, kill)') logs
%%% nothing itself, while each child that traps exits logs a report that
%%% it ended with reason `killed' (a `GenServer ... terminating ** (stop)
%%% killed', fifty of them for a pool of acceptors), none naming the
%%% supervisor.
%%%
%%% The log keeper (`os_sup_log_keeper') hands it every logger event
%%% ({@link note/3}). A report of a process that ended of its parent's
%%% exit (its reason is `killed', which only a kill gives, or the last
%%% message it read was that exit) is one death of a cascade, with the
%%% process's ancestors (its registered names as `proc_lib' keeps them:
%%% `$ancestors' read by the handler in the dying process, or the crash
%%% report's `ancestors'). Once no such report came for ?QUIET_MS, the
%%% keeper asks {@link close/2} for the line to log after them:
%%% `os_sup_mcp: first to die: NAME (REASON); N processes ended with it,
%%% their reports above' (sent marked `first_to_die', which the server
%%% decides on: this text is written here only). NAME is the
%%% parent of those that died that is the ancestor of most of them (the
%%% higher of two alike): a pool's acceptors and a telemetry process
%%% under the top supervisor name the top supervisor, not the pool's.
%%%
%%% A crash of the application's own (an exception) is not a cascade: its
%%% report names it and its place in the code. The reports of
%%% `application_master''s processes (which end of the application's top
%%% supervisor) are not deaths of one. Pure; never raises; at most
%%% ?MAX_DEATHS deaths are kept.
-module(os_sup_log_cascade).

%% API
-export([note/3, close/2]).

%% a cascade ends once none of its reports came for this long
-define(QUIET_MS, 150).
-define(MAX_DEATHS, 256).
%% ancestors looked at
-define(MAX_ANCESTORS, 16).
-define(FIRST_TO_DIE, <<"os_sup_mcp: first to die: ">>).

-type cascade() :: undefined | #{last_ms := integer(), count := pos_integer(),
                                 reason := term(), deaths := #{pid() => [term()]}}.
-export_type([cascade/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc `Cascade' with the report `Msg' (its metadata `Meta') when it is a death of one:
%% `{opened, C}' when it is the first (the keeper checks for its end ?QUIET_MS later), else
%% `{same, C}'.
-spec note(term(), map(), cascade()) -> {opened | same, cascade()}.
note(Msg, Meta, Cascade) ->
    Now = erlang:monotonic_time(millisecond),
    %% (a process that ends reports twice, a gen_server's report and its crash report)
    Pid = maps:get(pid, Meta, undefined),
    try death(Msg, Meta) of
        {inherited, Reason, Ancestors} when Cascade =:= undefined ->
            {opened, #{last_ms => Now, count => 1, reason => Reason,
                       deaths => #{Pid => Ancestors}}};
        {inherited, _Reason, _Ancestors} when is_map_key(Pid, map_get(deaths, Cascade)) ->
            {same, Cascade#{last_ms := Now}};
        {inherited, _Reason, Ancestors} ->
            #{count := N, deaths := Deaths} = Cascade,
            Kept = case N < ?MAX_DEATHS of
                       true -> Deaths#{Pid => Ancestors};
                       false -> Deaths
                   end,
            {same, Cascade#{last_ms := Now, count := N + 1, deaths := Kept}};
        none ->
            {same, Cascade}
    catch
        _:_ -> {same, Cascade}
    end.

%% @doc When `Cascade' has ended (no death for ?QUIET_MS before `Now'), the line to log and
%% `undefined'; else how long to wait before asking again.
-spec close(cascade(), integer()) -> {line, binary(), undefined} | {wait, pos_integer()}.
close(#{last_ms := Last} = Cascade, Now) when Now - Last >= ?QUIET_MS ->
    {line, first_to_die(Cascade), undefined};
close(#{last_ms := Last}, Now) ->
    {wait, ?QUIET_MS - (Now - Last)};
close(undefined, _Now) ->
    {wait, ?QUIET_MS}.

%%%===================================================================
%%% Private
%%%===================================================================

%% A report of a process that ended of its parent's exit: `{inherited, Reason, Ancestors}';
%% any other event: `none'.
death({report, #{label := {Behaviour, terminate}, reason := Reason} = R}, Meta)
  when Behaviour =:= gen_server; Behaviour =:= gen_statem ->
    Inherited = case maps:get(last_message, R, undefined) of
                    {'EXIT', _From, Reason} -> true;
                    _ -> Reason =:= killed
                end,
    kind(Inherited, Reason, maps:get(os_sup_ancestors, Meta, []));
death({report, #{label := {proc_lib, crash}, report := [Info | _]}}, _Meta) when is_list(Info) ->
    case proplists:get_value(initial_call, Info) of
        {application_master, _, _} -> none;
        _ ->
            {_Class, Reason, _Stack} = proplists:get_value(error_info, Info, {exit, none, []}),
            kind(Reason =:= killed, Reason, proplists:get_value(ancestors, Info, []))
    end;
death(_Msg, _Meta) ->
    none.

kind(true, Reason, [_ | _] = Ancestors) ->
    {inherited, Reason, lists:sublist(Ancestors, ?MAX_ANCESTORS)};
kind(_Inherited, _Reason, _Ancestors) ->
    none.

%% `os_sup_mcp: first to die: Web.Supervisor (killed); 51 processes ended with it, their
%% reports above'.
first_to_die(#{count := N, reason := Reason, deaths := ByPid}) ->
    Deaths = maps:values(ByPid),
    Fmt = os_sup_lib_render:format(auto),
    Why = case is_atom(Reason) of
              true -> atom_to_binary(Reason, utf8);
              false -> os_sup_lib_render:term(Reason, Fmt, 120)
          end,
    Ended = case N of
                1 -> <<"1 process ended with it, its report above">>;
                _ -> [integer_to_binary(N), <<" processes ended with it, their reports above">>]
            end,
    iolist_to_binary([?FIRST_TO_DIE, who(root(Deaths), Fmt), " (", Why, "); ", Ended]).

%% Of the parents of those that died, the one that is the ancestor of most of them; of two
%% alike, the higher.
root(Deaths) ->
    Parents = lists:usort([P || [P | _] <- Deaths]),
    Scored = [{length([A || A <- Deaths, lists:member(P, A)]), height(P, Deaths), P}
              || P <- Parents],
    {_, _, Root} = lists:max(Scored),
    Root.

%% How far up `P' stands in the ancestors that name it (the parent is 1).
height(P, Deaths) ->
    lists:max([index(P, A, 1) || A <- Deaths]).

index(P, [P | _], I) -> I;
index(P, [_ | Rest], I) -> index(P, Rest, I + 1);
index(_P, [], _I) -> 0.

who(Pid, Fmt) when is_pid(Pid) -> os_sup_lib_render:pid(Pid, Fmt);
who(Name, Fmt) -> os_sup_lib_render:name(Name, Fmt).
