%%% @doc `os_sup_log_cascade' names what died first when a process's end
%%% takes others with it: a supervisor killed (`exit(Pid, kill)') logs
%%% nothing itself, while each child that traps exits logs a report that
%%% it ended with reason `killed' (a `GenServer ... terminating ** (stop)
%%% killed', fifty of them for a pool of acceptors), none naming the
%%% supervisor.
%%%
%%% The log keeper (`os_sup_log_keeper') hands it every logger event
%%% before it keeps it. A report of a process that ended of a link's
%%% exit (its reason is `killed', which only a kill gives, or the last
%%% message it read was that exit) opens a cascade, when none is open:
%%% the line {@link note/3} answers, logged just before that report, says
%%% which process died first, `os_sup_mcp: first to die: NAME, REASON'
%%% (the server finds it by that start). NAME is the highest ancestor of
%%% the reporting process (its registered names, as `proc_lib' keeps
%%% them: `$ancestors' read by the handler in the dying process, or the
%%% crash report's `ancestors') that no longer runs, else its parent. A
%%% cascade stays open ?CASCADE_MS after its last report: its other
%%% reports are its consequences and open nothing.
%%%
%%% A crash of the application's own (an exception) is not a cascade: its
%%% report names it and its place in the code, and is the first of its
%%% burst. The reports of `application_master''s processes (which end of
%%% the application's top supervisor) are never the evidence.
%%%
%%% Pure but for `whereis/1' and `is_process_alive/1'; never raises.
-module(os_sup_log_cascade).

%% API
-export([note/3]).

%% a cascade's reports come this close to each other
-define(CASCADE_MS, 2000).
%% ancestors looked at
-define(MAX_ANCESTORS, 16).
-define(FIRST_TO_DIE, <<"os_sup_mcp: first to die: ">>).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The line to log before `Msg' when it opens a cascade (`{line, Text}'), or `none', and
%% the cascade state to keep (`undefined' or until when, monotonic ms, it stays open).
-spec note(term(), map(), undefined | integer()) ->
          {none | {line, binary()}, undefined | integer()}.
note(Msg, Meta, OpenUntil) ->
    Now = erlang:monotonic_time(millisecond),
    try death(Msg, Meta) of
        none ->
            {none, OpenUntil};
        _ when is_integer(OpenUntil), Now =< OpenUntil ->
            {none, Now + ?CASCADE_MS};
        {inherited, Who, Reason, Ancestors} ->
            {{line, first_to_die(Who, Reason, Ancestors)}, Now + ?CASCADE_MS};
        {own, _Who} ->
            {none, Now + ?CASCADE_MS}
    catch
        _:_ -> {none, OpenUntil}
    end.

%%%===================================================================
%%% Private
%%%===================================================================

%% A report of a process's end: `{inherited, Who, Reason, Ancestors}' when it ended of a
%% link's exit, `{own, Who}' when of its own crash, else `none'.
death({report, #{label := {Behaviour, terminate}, reason := Reason} = R}, Meta)
  when Behaviour =:= gen_server; Behaviour =:= gen_statem ->
    Who = maps:get(name, R, maps:get(pid, Meta, undefined)),
    Inherited = case maps:get(last_message, R, undefined) of
                    {'EXIT', _From, Reason} -> true;
                    _ -> Reason =:= killed
                end,
    kind(Inherited, Who, Reason, maps:get(os_sup_ancestors, Meta, []));
death({report, #{label := {proc_lib, crash}, report := [Info | _]}}, _Meta) when is_list(Info) ->
    case proplists:get_value(initial_call, Info) of
        {application_master, _, _} -> none;
        _ ->
            {_Class, Reason, _Stack} = proplists:get_value(error_info, Info, {exit, none, []}),
            Who = case proplists:get_value(registered_name, Info, []) of
                      [] -> proplists:get_value(pid, Info);
                      Name -> Name
                  end,
            kind(Reason =:= killed, Who, Reason, proplists:get_value(ancestors, Info, []))
    end;
death(_Msg, _Meta) ->
    none.

kind(true, Who, Reason, Ancestors) when is_list(Ancestors), Ancestors =/= [] ->
    {inherited, Who, Reason, lists:sublist(Ancestors, ?MAX_ANCESTORS)};
kind(_Inherited, Who, _Reason, _Ancestors) ->
    {own, Who}.

%% `os_sup_mcp: first to die: Web.Supervisor (killed); the reports after this line, from
%% Web.Telemetry's on, ended with it'.
first_to_die(Who, Reason, Ancestors) ->
    Fmt = os_sup_lib_render:format(auto),
    Root = root(Ancestors),
    Why = case is_atom(Reason) of
              true -> atom_to_binary(Reason, utf8);
              false -> os_sup_lib_render:term(Reason, Fmt, 120)
          end,
    iolist_to_binary(
      [?FIRST_TO_DIE, os_sup_lib_render:name(Root, Fmt), " (", Why, "); the reports after this "
       "line, from ", who(Who, Fmt), "'s on, ended with it"]).

%% The highest registered ancestor that no longer runs (the processes under it ended of its
%% end), else the parent.
root([Parent | _] = Ancestors) ->
    case [A || A <- Ancestors, is_atom(A), whereis(A) =:= undefined] of
        [] -> Parent;
        Gone -> lists:last(Gone)
    end.

who(Pid, Fmt) when is_pid(Pid) -> os_sup_lib_render:pid(Pid, Fmt);
who(Name, Fmt) -> os_sup_lib_render:name(Name, Fmt).
