%%%-------------------------------------------------------------------
%%% @doc `os_sup_introspect' looks inside the node the way `observer' and
%%% `recon' do, for an AI agent: every tool returns a compact `text' (one
%%% line per item, capped at ~16 KB) and plain `data' (maps with atom keys,
%%% lists, binaries, numbers, atoms; every user term rendered to a bounded
%%% binary by `os_sup_lib_render').
%%%
%%% The helper runs each tool (its table `TOOLS' names the function) in a
%%% throw-away worker under a deadline and `os_sup_lib_reply:guarded/2' (request
%%% `{introspect, Tool, Args, TimeoutMs}'); each tool is a plain exported
%%% function, also usable from `eval'. Kernel and stdlib only; Elixir is
%%% used for rendering when it is loaded.
%%%
%%% The other introspection tools live in the module of their concern:
%%% `os_sup_proc_tree' (`supervision_tree'), `os_sup_procs' (`processes',
%%% `process_info', `get_state'), `os_sup_waits' (`waits'), `os_sup_health'
%%% (`diagnose'); this module has the system tools below. Shared conventions
%%% live in `os_sup_lib'; `os_sup_proc_otp' decides which processes answer system
%%% messages.
%%%
%%% == System ==
%%% <ul>
%%%   <li>{@link applications/1}: running applications, or one app's env.</li>
%%%   <li>{@link system_info/1}: memory, limits, schedulers, run queue.</li>
%%%   <li>{@link ets/1}: tables by memory, or one table's info and rows.</li>
%%% </ul>
%%%
%%% == Arguments ==
%%% A map with atom keys; text as binaries, numbers as integers. Every tool
%%% takes `format => elixir | erlang | auto' (default auto). A process is
%%% given as `<0.1.0>', `#PID<0.1.0>', `0.1.0' or a registered name
%%% (`DemoApp.Counter', `Elixir.DemoApp.Counter', `user').
%%%
%%% == Safety ==
%%% Never crashes (errors come back as `{error, #{kind, message}}'), never
%%% creates atoms from arguments, never sends a process a message it may not
%%% understand: `sys:get_state' goes only to processes shown, without a
%%% message, to run an OTP behaviour loop (their stack, then `$initial_call'
%%% confirmed by the callback module: see `os_sup_proc_otp'), never to a Task,
%%% a plain spawn or a custom proc_lib loop; a supervisor is identified with
%%% `sys:get_state/2' before it gets `which_children'/`count_children' (an
%%% unknown call kills OTP 25 supervisors); every call has a timeout. Scans skip processes and tables that vanish.
%%% Results are capped (top N, sample sizes, byte limits).
%%% @end
%%%-------------------------------------------------------------------
-module(os_sup_introspect).

%% The ranges (and defaults) the sidecar holds the arguments to: src/bounds.rs.
-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text/2, fmt_arg/1]).
-import(os_sup_lib_proc, [reg_name/1, name_atoms/1]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2, render_opt_name/2, bytes/1]).

%% API
-export([applications/1, system_info/1, ets/1]).

-define(TERM_BYTES, 1024).

%%%===================================================================
%%% API
%%%===================================================================


%%%===================================================================
%%% Private: applications
%%%===================================================================

%% @doc Applications: no args for every running one, or `app' for one app's env.
-spec applications(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
applications(Args) ->
    Fmt = fmt_arg(Args),
    Running = case catch application:which_applications(2000) of
                  L when is_list(L) -> L;
                  _ -> fail(timeout, "the application controller did not answer in 2 s", [])
              end,
    case arg_text(app, Args) of
        undefined ->
            Rows = [#{name => A, vsn => to_text(V), description => to_text(D)}
                    || {A, D, V} <- Running],
            ok_reply([fmt("~ts ~ts ~ts", [A, V, D]) || #{name := A, vsn := V, description := D}
                                                           <- Rows],
                     #{applications => Rows});
        Text ->
            Loaded = [A || {A, _, _} <- application:loaded_applications()],
            App = case [A || A <- name_atoms(Text), lists:member(A, Loaded)] of
                      [A | _] -> A;
                      [] -> fail(not_found, "no application ~ts is loaded (running: ~ts)",
                                 [Text, join([atom_to_binary(A, utf8) || {A, _, _} <- Running],
                                             <<", ">>)])
                  end,
            Vsn = case application:get_key(App, vsn) of {ok, V} -> to_text(V); _ -> undefined end,
            Desc = case application:get_key(App, description) of
                       {ok, D} -> to_text(D);
                       _ -> undefined
                   end,
            Env0 = application:get_all_env(App),
            Env = [#{key => os_sup_lib_render:term(K, Fmt, 256),
                     value => os_sup_lib_render:term(V, Fmt, ?TERM_BYTES)}
                   || {K, V} <- lists:sublist(lists:sort(Env0), 200)],
            IsRunning = lists:keymember(App, 1, Running),
            Head = fmt("~ts ~ts ~ts (~ts)", [App, to_text(Vsn), to_text(Desc),
                                            case IsRunning of true -> <<"running">>;
                                                false -> <<"loaded, not running">> end]),
            ok_reply([Head | [<<"  ", K/binary, " = ", V/binary>> || #{key := K, value := V} <- Env]],
                     #{name => App, vsn => Vsn, description => Desc, running => IsRunning,
                       env => Env, env_count => length(Env0)})
    end.

%%%===================================================================
%%% Private: system_info
%%%===================================================================

%% @doc Memory, limits, schedulers, run queue.
-spec system_info(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
system_info(_Args) ->
    Mem = maps:from_list([{K, V} || {K, V} <- erlang:memory(), is_atom(K), is_integer(V)]),
    Limits = #{processes => limit(process_count, process_limit),
               ports => limit(port_count, port_limit),
               atoms => limit(atom_count, atom_limit),
               ets => limit(ets_count, ets_limit)},
    Util = scheduler_utilisation(100),
    RunQueue = try erlang:statistics(total_run_queue_lengths)
               catch _:_ -> erlang:statistics(run_queue) end,
    {Uptime, _} = erlang:statistics(wall_clock),
    Data = #{memory => Mem, limits => Limits,
             schedulers => erlang:system_info(schedulers),
             schedulers_online => erlang:system_info(schedulers_online),
             scheduler_utilisation => Util,
             run_queue => RunQueue,
             uptime_ms => Uptime,
             otp_release => to_text(erlang:system_info(otp_release)),
             erts_version => to_text(erlang:system_info(version)),
             elixir_version => elixir_version(),
             node => node()},
    MemLine = join([fmt("~ts=~ts", [K, bytes(maps:get(K, Mem))])
                    || K <- [total, processes, binary, ets, atom, code, system],
                       is_map_key(K, Mem)], <<" ">>),
    LimitLines = [fmt("~ts: ~b/~b (~.1f%)~ts", [K, C, L, P, case H of true -> <<" HIGH">>;
                                                                  false -> <<>> end])
                  || K <- [processes, ports, atoms, ets],
                     #{count := C, limit := L, percent := P, high := H} <- [maps:get(K, Limits)],
                     is_integer(C), is_integer(L)],
    UtilLine = case Util of
                   #{average := Avg, per_scheduler := Per} ->
                       fmt("scheduler utilisation (100 ms): avg ~.1f% [~ts]",
                           [Avg * 100, join([fmt("~.1f", [U * 100]) || U <- Per], <<" ">>)]);
                   _ -> <<"scheduler utilisation: unavailable">>
               end,
    Lines = [fmt("node ~ts otp ~ts erts ~ts elixir ~ts uptime ~bs",
                 [node(), maps:get(otp_release, Data), maps:get(erts_version, Data),
                  to_text(maps:get(elixir_version, Data)), Uptime div 1000]),
             <<"memory: ", MemLine/binary>>] ++ LimitLines ++
        [fmt("schedulers ~b online ~b run_queue ~b",
             [maps:get(schedulers, Data), maps:get(schedulers_online, Data), RunQueue]),
         UtilLine],
    ok_reply(Lines, Data).

limit(CountKey, LimitKey) ->
    try {erlang:system_info(CountKey), erlang:system_info(LimitKey)} of
        {C, L} when is_integer(C), is_integer(L), L > 0 ->
            P = round(C * 1000 / L) / 10,
            #{count => C, limit => L, percent => P, high => P > 80.0};
        _ -> #{count => undefined, limit => undefined, percent => undefined, high => false}
    catch
        _:_ -> #{count => undefined, limit => undefined, percent => undefined, high => false}
    end.

scheduler_utilisation(Ms) ->
    try
        Old = erlang:system_flag(scheduler_wall_time, true),
        try
            S1 = lists:sort(erlang:statistics(scheduler_wall_time)),
            timer:sleep(Ms),
            S2 = lists:sort(erlang:statistics(scheduler_wall_time)),
            N = erlang:system_info(schedulers),
            Per = [case T2 - T1 of 0 -> 0.0; DT -> (A2 - A1) / DT end
                   || {{I, A1, T1}, {I, A2, T2}} <- lists:zip(S1, S2), I =< N],
            Avg = case Per of [] -> 0.0; _ -> lists:sum(Per) / length(Per) end,
            #{average => round4(Avg), per_scheduler => [round4(U) || U <- Per],
              sample_ms => Ms}
        after
            _ = erlang:system_flag(scheduler_wall_time, Old)
        end
    catch
        _:_ -> undefined
    end.

round4(F) -> round(F * 10000) / 10000.

elixir_version() ->
    case code:is_loaded('Elixir.System') of
        {file, _} -> try to_text('Elixir.System':version()) catch _:_ -> undefined end;
        false -> undefined
    end.

%%%===================================================================
%%% Private: ets
%%%===================================================================

%% @doc ETS tables by memory, or one table's info and rows.
-spec ets(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
ets(Args) ->
    Fmt = fmt_arg(Args),
    case arg_text(table, Args) of
        undefined -> ets_list(Fmt, arg_int(limit, Args, 20, ?ETS_LIMIT_MIN, ?ETS_LIMIT_MAX));
        Text -> ets_table(find_table(Text, Fmt), Fmt, arg_int(limit, Args, 10, 1, 100))
    end.

ets_list(Fmt, Limit) ->
    Word = erlang:system_info(wordsize),
    Infos = [I || T <- ets:all(), I <- [table_summary(T, Word)], I =/= undefined],
    Sorted = lists:sublist(lists:reverse(lists:keysort(1, Infos)), Limit),
    Rows = [render_table(I, Fmt) || {_, I} <- Sorted],
    Lines = [join([N, Id, fmt("size=~b", [S]), fmt("mem=~ts", [bytes(M)]), to_text(Ty),
                   to_text(P), <<"owner=", O/binary>>] ++
                      case ON of undefined -> []; _ -> [<<"(", ON/binary, ")">>] end,
                  <<" ">>)
             || #{name := N, id := Id, size := S, memory := M, type := Ty, protection := P,
                  owner := O, owner_name := ON} <- Rows],
    ok_reply(Lines, #{tables => Rows, total => length(Infos)}).

table_summary(T, Word) ->
    case catch ets:info(T) of
        Info when is_list(Info) ->
            Mem = proplists:get_value(memory, Info, 0) * Word,
            {Mem, (maps:from_list(Info))#{memory => Mem, table => T}};
        _ -> undefined
    end.

render_table(#{} = I, Fmt) ->
    Owner = maps:get(owner, I, undefined),
    #{name => render_opt_name(maps:get(name, I, undefined), Fmt),
      id => os_sup_lib_render:term(maps:get(id, I, maps:get(table, I)), Fmt, 128),
      owner => os_sup_lib_render:pid(Owner, Fmt),
      owner_name => case is_pid(Owner) of
                        true -> render_opt_name(reg_name(Owner), Fmt);
                        false -> undefined
                    end,
      size => maps:get(size, I, 0), memory => maps:get(memory, I, 0),
      type => maps:get(type, I, undefined), protection => maps:get(protection, I, undefined),
      named_table => maps:get(named_table, I, false)}.

%% Match a name (`demo_cache', `:demo_cache') or an id as rendered by this tool.
find_table(Text, Fmt) ->
    Names = name_atoms(Text),
    Stripped = strip_ref(Text),
    Found = [T || T <- ets:all(),
                  begin
                      Name = catch ets:info(T, name),
                      Id = catch ets:info(T, id),
                      (is_atom(Name) andalso lists:member(Name, Names)
                       andalso ets:info(T, named_table) =:= true)
                          orelse strip_ref(os_sup_lib_render:term(Id, Fmt, 128)) =:= Stripped
                          orelse strip_ref(os_sup_lib_render:term(Id, erlang, 128)) =:= Stripped
                          orelse (is_integer(Id) andalso integer_to_binary(Id) =:= Text)
                  end],
    case Found of
        [T | _] -> T;
        [] -> fail(not_found, "no ETS table named or with id ~ts (the ets tool without "
                   "table lists them)", [Text])
    end.

strip_ref(B) ->
    case re:run(B, <<"([0-9]+(\\.[0-9]+)+)">>, [{capture, [1], binary}]) of
        {match, [Inner]} -> Inner;
        _ -> B
    end.

ets_table(T, Fmt, Limit) ->
    Word = erlang:system_info(wordsize),
    Info = case catch ets:info(T) of
               I when is_list(I) -> I;
               _ -> fail(not_found, "the table vanished", [])
           end,
    Owner = proplists:get_value(owner, Info),
    Prot = proplists:get_value(protection, Info),
    InfoMap = maps:from_list([{K, info_value(K, V, Fmt, Word)} || {K, V} <- Info, is_atom(K)]),
    {Rows, Note} =
        case Prot =:= private andalso Owner =/= self() of
            true -> {[], <<"private table: only its owner can read rows">>};
            false ->
                try ets:match_object(T, '_', Limit) of
                    {Objs, _} -> {[os_sup_lib_render:term(O, Fmt, ?TERM_BYTES) || O <- Objs],
                                  undefined};
                    '$end_of_table' -> {[], undefined}
                catch
                    _:_ -> {[], <<"rows could not be read (the table vanished?)">>}
                end
        end,
    Size = proplists:get_value(size, Info, 0),
    Note2 = case {Note, Size > length(Rows), Rows} of
                {undefined, true, [_ | _]} -> fmt("first ~b of ~b rows", [length(Rows), Size]);
                _ -> Note
            end,
    Lines = [fmt("~ts: ~ts", [K, to_text(V)]) || {K, V} <- lists:sort(maps:to_list(InfoMap))] ++
        [<<"rows:", (case Note2 of undefined -> <<>>; _ -> <<" ", Note2/binary>> end)/binary>>
         | [<<"  ", R/binary>> || R <- Rows]],
    ok_reply(Lines, #{info => InfoMap, rows => Rows, rows_note => Note2}).

info_value(memory, V, _Fmt, Word) when is_integer(V) -> V * Word;
info_value(owner, V, Fmt, _) -> os_sup_lib_render:pid(V, Fmt);
info_value(heir, none, _, _) -> none;
info_value(heir, V, Fmt, _) -> os_sup_lib_render:pid(V, Fmt);
info_value(name, V, Fmt, _) -> os_sup_lib_render:name(V, Fmt);
info_value(_, V, _, _) when is_integer(V); is_boolean(V) -> V;
info_value(_, V, _, _) when is_atom(V) -> V;
info_value(_, V, Fmt, _) -> os_sup_lib_render:term(V, Fmt, 256).


