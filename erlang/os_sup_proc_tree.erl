%%% @doc `os_sup_proc_tree' walks supervision trees without ever crashing a
%%% supervisor. A call a supervisor does not know kills it on OTP 25, so a
%%% process is identified with `sys:get_state/2' (only when `os_sup_proc_otp'
%%% shows it runs an OTP behaviour loop) before it gets
%%% `which_children'/`count_children', and every call has a timeout. The walk
%%% starts at `application_controller:get_master/1' +
%%% `application_master:get_child/1' and is summarised where it is huge
%%% (`count_children'). Each child is marked with the restarts its supervisor made
%%% of it, as the log keeper counted them (`os_sup_log_stats', an ETS read).
%%%
%%% == Tools ==
%%% <ul>
%%%   <li>{@link supervision_tree/1} (tool `supervision_tree', also usable
%%%       from an eval): args `root' (an
%%%       application, a registered name or a pid; default the project's
%%%       applications), `depth' (5, 1..20), `max_children' (50,
%%%       1..1000), `format'.</li>
%%% </ul>
%%% Replies are `os_sup_lib_reply' replies; at most 2000 nodes are walked.
-module(os_sup_proc_tree).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, arg_text/2, fmt_arg/1]).
-import(os_sup_lib_call, [call_with_deadline/2]).
-import(os_sup_lib_proc, [resolve_pid/1, reg_name/1, parse_pid/1, name_atoms/1, whereis_name/1]).
-import(os_sup_lib_reply, [ok_reply/2, fail/3]).
-import(os_sup_lib_text, [to_text/1, join/2, fmt/2, render_opt_name/2]).

%% API
-export([supervision_tree/1]).

-define(CALL_MS, 2000).
-define(GET_STATE_MS, 1000).
-define(MAX_TREE_NODES, 2000).
%% not the project's applications, beside OTP's and Elixir's (os_sup_lib_label:system_apps/0); a
%% dependency that runs processes (telemetry_poller) is part of the system and is shown
-define(NOT_PROJECT_APPS, [os_sup]).
-define(LIBRARY, <<"library application (no processes)">>).
%% the fewest alike siblings folded into one line
-define(FOLD_MIN, 3).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Supervision tree: args `root', `depth' (5, 1..20), `max_children' (50, 1..1000).
-spec supervision_tree(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
supervision_tree(Args) ->
    Fmt = fmt_arg(Args),
    Opts = #{fmt => Fmt,
             restarted => restarted_index(),
             depth => arg_int(depth, Args, 5, ?TREE_DEPTH_MIN, ?TREE_DEPTH_MAX),
             max_children => arg_int(max_children, Args, 50, ?TREE_MAX_CHILDREN_MIN,
                                    ?TREE_MAX_CHILDREN_MAX)},
    T0 = erlang:monotonic_time(microsecond),
    Roots = tree_roots(arg_text(root, Args)),
    {Trees, Budget} = lists:mapfoldl(fun(R, B) -> walk_root(R, Opts, B) end,
                                     ?MAX_TREE_NODES, Roots),
    Us = erlang:monotonic_time(microsecond) - T0,
    {Libraries, Walked} = lists:partition(fun library/1, Trees),
    Folded = [fold(T) || T <- Walked],
    LibraryNames = [atom_to_binary(maps:get(application, L), utf8) || L <- Libraries],
    Lines = case Trees of
                [] -> [<<"no project applications are running (running: ",
                         (join([atom_to_binary(A, utf8) || A <- running_apps()], <<", ">>))/binary,
                         "); pass root (an application, registered name or pid)">>];
                _ -> lists:append([tree_lines(T, Fmt) || T <- Folded]) ++
                         [<<"libraries (no processes): ", (join(LibraryNames, <<", ">>))/binary>>
                          || LibraryNames =/= []]
            end,
    ok_reply(Lines, #{roots => Folded, libraries => LibraryNames,
                      node_count => ?MAX_TREE_NODES - Budget,
                      truncated => Budget =< 0, duration_us => Us}).

%%%===================================================================
%%% Private: supervision_tree
%%%===================================================================

%% An application without processes (its root was not walked).
library(#{kind := unknown, note := ?LIBRARY}) -> true;
library(_) -> false.

%% Runs of at least ?FOLD_MIN siblings of one shape (kind, module or id up to its numbers,
%% restart type, strategy, and the same shape below) become their first, with `folded => N':
%% pools (acceptors, partitions, a DynamicSupervisor's workers) take one line and one subtree.
%% Fields without a value are left out of the data (most of a worker's).
fold(Node) ->
    Folded = case Node of
                 #{children := Children} -> Node#{children := fold_runs([fold(C) || C <- Children])};
                 _ -> Node
             end,
    maps:filter(fun(truncated_children, 0) -> false;
                   (_, V) -> V =/= undefined andalso V =/= []
                end, Folded).

fold_runs([]) -> [];
fold_runs([First | Rest]) ->
    Shape = shape(First),
    {Same, Others} = lists:splitwith(fun(N) -> shape(N) =:= Shape end, Rest),
    Run = case length(Same) + 1 of
              N when N >= ?FOLD_MIN -> [First#{folded => N}];
              _ -> [First | Same]
          end,
    Run ++ fold_runs(Others).

shape(Node) ->
    Get = fun(K) -> maps:get(K, Node, undefined) end,
    {Get(kind), re:replace(node_label(Node), "[0-9]+", "N", [global, {return, binary}]),
     Get(name) =:= undefined, Get(restart), Get(strategy), Get(child_count), Get(folded),
     maps:is_key(restarted, Node), maps:is_key(child_restarts, Node),
     [shape(C) || C <- maps:get(children, Node, [])]}.

running_apps() ->
    try application:which_applications(2000) of
        L when is_list(L) -> [A || {A, _, _} <- L];
        _ -> []
    catch _:_ -> []
    end.

%% -> [{app, App, TopPid} | {pid, Pid}]
tree_roots(undefined) ->
    [{app, A} || A <- running_apps(),
                  not lists:member(A, os_sup_lib_label:system_apps() ++ ?NOT_PROJECT_APPS)];
tree_roots(Text) when is_pid(Text) ->
    [{pid, resolve_pid(Text)}];
tree_roots(Text) ->
    case parse_pid(Text) of
        {ok, _} -> [{pid, resolve_pid(Text)}];
        error ->
            Apps = running_apps(),
            case [A || A <- name_atoms(Text), lists:member(A, Apps)] of
                [App | _] -> [{app, App}];
                [] ->
                    case whereis_name(Text) of
                        {ok, Pid} -> [{pid, Pid}];
                        error ->
                            fail(not_found, "~ts is neither a running application nor a "
                                 "registered process (running applications: ~ts)",
                                 [Text, join([atom_to_binary(A, utf8) || A <- Apps],
                                             <<", ">>)])
                    end
            end
    end.

walk_root({app, App}, Opts, Budget) ->
    case app_top(App) of
        {ok, Top} ->
            Kind = classify_root(Top),
            {Node, B1} = walk(Top, Kind, #{id => undefined, restart => undefined,
                                           modules => undefined}, 0, Opts, Budget - 1),
            {Node#{application => App}, B1};
        {error, Why} ->
            {(empty_node(Opts))#{application => App, kind => unknown, note => Why}, Budget}
    end;
walk_root({pid, Pid}, Opts, Budget) ->
    Kind = classify_root(Pid),
    {Node, B1} = walk(Pid, Kind, #{id => undefined, restart => undefined,
                                   modules => undefined}, 0, Opts, Budget - 1),
    {Node#{application => undefined}, B1}.

app_top(App) ->
    try application_controller:get_master(App) of
        Master when is_pid(Master) ->
            case call_with_deadline({application_master, get_child, [Master]}, ?CALL_MS) of
                {ok, {Top, _Mod}} when is_pid(Top) -> {ok, Top};
                {ok, _} -> {error, <<"the application has no top process">>};
                timeout -> {error, <<"the application master did not answer in time">>};
                {error, _} -> {error, <<"the application master could not be asked">>}
            end;
        _ ->
            {error, ?LIBRARY}
    catch _:_ -> {error, ?LIBRARY}
    end.

%% A root given by pid/name: only processes started as supervisors (OTP,
%% Elixir, DynamicSupervisor, Task.Supervisor) are asked anything.
classify_root(Pid) ->
    case os_sup_proc_otp:otp_behaviour(Pid) of
        {ok, #{kind := supervisor}} -> supervisor;
        _ -> worker
    end.

empty_node(#{fmt := _}) ->
    #{id => undefined, pid => undefined, kind => unknown, name => undefined,
      strategy => undefined, intensity => undefined, period => undefined,
      restart => undefined, modules => [], children => [], child_count => undefined,
      truncated_children => 0}.

%% The restarts the node's supervisors made (os_sup_log_stats), by supervisor and child id
%% (`{Sup, Id}') and by supervisor (`Sup'), a supervisor by its registered name or its pid.
restarted_index() ->
    lists:foldl(fun(#{supervisor := Sup, child := Id} = R, Index) ->
                        Index#{{Sup, Id} => R,
                               Sup => add_restarts(R, maps:get(Sup, Index, undefined))}
                end, #{}, os_sup_log_stats:restarted_children()).

%% Two counts of restarts as one: their sum, with the later one's reason.
add_restarts(R, undefined) -> R;
add_restarts(#{count := C1, age_ms := A1} = R1, #{count := C2, age_ms := A2} = R2) ->
    Later = case A1 =< A2 of true -> R1; false -> R2 end,
    Later#{count => C1 + C2}.

%% `restarted': how often a child was restarted, the last time and why, for the children of a
%% supervisor that names them; a supervisor whose children are all alike and unnamed (simple
%% one for one, DynamicSupervisor) has them counted on itself as `child_restarts'.
restarted_data(#{count := Count, age_ms := Age, last_reason := Reason}) ->
    #{count => Count, last_at_ms => erlang:system_time(millisecond) - Age,
      age_ms => Age, last_reason => Reason}.

%% Walk one process. Spec: #{id, restart, modules} from the parent's child list.
walk(Pid, Type, Spec, Depth, Opts, Budget) ->
    Fmt = maps:get(fmt, Opts),
    Base = (empty_node(Opts))#{
             id => render_id(maps:get(id, Spec), Fmt),
             pid => case is_pid(Pid) of true -> os_sup_lib_render:pid(Pid, Fmt); false -> undefined end,
             name => render_opt_name(reg_name_if_pid(Pid), Fmt),
             restart => maps:get(restart, Spec),
             modules => render_modules(maps:get(modules, Spec), Fmt)},
    case {is_pid(Pid), Type} of
        {false, _} ->
            {Base#{kind => child_kind(Type), status => status_of(Pid)}, Budget};
        {true, worker} ->
            {Base#{kind => worker}, Budget};
        {true, _} ->
            case identify(Pid) of
                {supervisor, Info} -> walk_sup(Pid, supervisor, Info, Base, Depth, Opts, Budget);
                {dynamic_supervisor, Info} ->
                    walk_sup(Pid, dynamic_supervisor, Info, Base, Depth, Opts, Budget);
                unknown -> {Base#{kind => unknown}, Budget}
            end
    end.

child_kind(supervisor) -> supervisor;
child_kind(worker) -> worker;
child_kind(_) -> unknown.

status_of(restarting) -> restarting;
status_of({restarting, _}) -> restarting;
status_of(_) -> not_running.

reg_name_if_pid(Pid) when is_pid(Pid) -> reg_name(Pid);
reg_name_if_pid(_) -> undefined.

render_id(undefined, _) -> undefined;
render_id(Id, Fmt) when is_atom(Id) -> os_sup_lib_render:name(Id, Fmt);
render_id(Id, Fmt) -> os_sup_lib_render:term(Id, Fmt, 256).

render_modules(dynamic, _) -> [<<"dynamic">>];
render_modules(Ms, Fmt) when is_list(Ms) ->
    [os_sup_lib_render:name(M, Fmt) || M <- lists:sublist(Ms, 10)];
render_modules(_, _) -> [].

%% Identify a process that claims to be a supervisor, by its state only;
%% `sys:get_state' goes only to a gen_server (every supervisor kind is one)
%% that otp_behaviour/1 shows answers system messages.
identify(Pid) ->
    case os_sup_proc_otp:otp_behaviour(Pid) of
        {ok, #{kind := Kind}} when Kind =:= supervisor; Kind =:= gen_server ->
            try sys:get_state(Pid, ?GET_STATE_MS) of
                State -> identify_state(State)
            catch
                _:_ -> unknown
            end;
        _ -> unknown
    end.

identify_state(#{'__struct__' := 'Elixir.DynamicSupervisor'} = S) ->
    {dynamic_supervisor,
     #{strategy => plain_atom(maps:get(strategy, S, undefined)),
       intensity => plain_int(maps:get(max_restarts, S, undefined)),
       period => plain_int(maps:get(max_seconds, S, undefined)),
       restarts => dyn_restarts(maps:get(children, S, #{}))}};
identify_state(S) when is_tuple(S), tuple_size(S) >= 8, element(1, S) =:= state ->
    L = tuple_to_list(S),
    case [X || X <- L, is_atom(X), lists:member(X, [one_for_one, one_for_all, rest_for_one,
                                                   simple_one_for_one])] of
        [Strategy | _] ->
            {Intensity, Period} = int_pair(L),
            {supervisor, #{strategy => Strategy, intensity => Intensity, period => Period,
                           restarts => sup_restarts(L)}};
        [] -> unknown
    end;
identify_state(_) ->
    unknown.

%% The first two adjacent non-negative integers after the children field (intensity, period).
int_pair([I, P | _]) when is_integer(I), I >= 0, is_integer(P), P > 0 -> {I, P};
int_pair([_ | Rest]) -> int_pair(Rest);
int_pair([]) -> {undefined, undefined}.

plain_atom(A) when is_atom(A) -> A;
plain_atom(_) -> undefined.

plain_int(I) when is_integer(I) -> I;
plain_int(_) -> undefined.

%% Restart types by child: {by_id, Map} | {all, Restart} | none.
sup_restarts(L) ->
    Records = lists:append([child_records(X) || X <- L]),
    case [R || R <- Records, element(1, R) =:= child] of
        [] -> none;
        Children ->
            case lists:member(simple_one_for_one, L) of
                true -> {all, restart_of(hd(Children))};
                false -> {by_id, maps:from_list([{child_id(C), restart_of(C)} || C <- Children])}
            end
    end.

child_records({Ids, Map}) when is_list(Ids), is_map(Map) ->
    [C || C <- maps:values(Map), is_tuple(C), tuple_size(C) >= 5];
child_records(List) when is_list(List) ->
    [C || C <- List, is_tuple(C), tuple_size(C) >= 5, element(1, C) =:= child];
child_records(_) ->
    [].

%% #child{pid, id, mfargs, restart_type, ...}: the id follows the pid.
child_id(C) -> element(3, C).

restart_of(C) when is_tuple(C) ->
    case [R || R <- tuple_to_list(C), is_restart(R)] of
        [R | _] -> restart_name(R);
        [] -> undefined
    end;
restart_of(_) ->
    undefined.

is_restart(R) when R =:= permanent; R =:= transient; R =:= temporary -> true;
is_restart({R, _}) when R =:= permanent; R =:= transient -> true;
is_restart(_) -> false.

restart_name({R, _}) -> R;
restart_name(R) -> R.

dyn_restarts(Children) when is_map(Children), map_size(Children) =< 100000 ->
    {by_pid, Children};
dyn_restarts(_) ->
    none.

lookup_restart(_Id, _Pid, none) -> undefined;
lookup_restart(_Id, _Pid, {all, R}) -> R;
lookup_restart(Id, _Pid, {by_id, M}) -> maps:get(Id, M, undefined);
lookup_restart(_Id, Pid, {by_pid, M}) -> restart_of(maps:get(Pid, M, undefined)).

walk_sup(Pid, Kind, Info, Base, Depth, Opts, Budget) ->
    #{max_children := MaxChildren, depth := MaxDepth} = Opts,
    Node0 = Base#{kind => Kind, strategy => maps:get(strategy, Info),
                  intensity => maps:get(intensity, Info), period => maps:get(period, Info)},
    Counts = sup_call(Pid, count_children),
    Node1 = case Counts of
                {ok, C} when is_list(C) ->
                    Node0#{counts => counts_map(C), child_count => proplists:get_value(active, C)};
                _ -> Node0
            end,
    case Depth >= MaxDepth of
        true when map_get(child_count, Node1) =:= 0 ->
            {Node1#{children => []}, Budget};
        true ->
            {Node1#{children_note => <<"depth limit">>}, Budget};
        false ->
            case sup_call(Pid, which_children) of
                {ok, Children} when is_list(Children) ->
                    Total = length(Children),
                    Shown = lists:sublist(start_order(Kind, Children), MaxChildren),
                    Restarts = maps:get(restarts, Info),
                    Sup = restart_key(Pid),
                    {Nodes, B1} = walk_children(Shown, {Sup, Restarts}, Depth + 1, Opts, Budget, []),
                    Count = case maps:get(child_count, Node1) of
                                undefined -> Total;
                                N -> N
                            end,
                    Node2 = Node1#{children => Nodes, child_count => Count,
                                   truncated_children => Total - length(Nodes)},
                    {case {Restarts, maps:get(Sup, maps:get(restarted, Opts), undefined)} of
                         {{by_id, _}, _} -> Node2;
                         {_, undefined} -> Node2;
                         {_, R} -> Node2#{child_restarts => restarted_data(R)}
                     end, B1};
                _ ->
                    {Node1#{children_note => <<"which_children did not answer in time">>},
                     Budget}
            end
    end.

%% The supervisor `Pid' as the restarts are counted by: its registered name, or its pid.
restart_key(Pid) ->
    case reg_name(Pid) of
        undefined -> Pid;
        Name -> Name
    end.

%% A child's restarts, where its supervisor names its children (by id).
child_restarted(Sup, Id, {by_id, _}, #{restarted := Index}) ->
    maps:get({Sup, Id}, Index, undefined);
child_restarted(_Sup, _Id, _Restarts, _Opts) ->
    undefined.

%% OTP supervisors list the newest child first; DynamicSupervisor in map
%% order. Show both in (approximate) start order.
start_order(supervisor, Children) -> lists:reverse(Children);
start_order(_, Children) -> lists:keysort(2, Children).

walk_children([], _Restarts, _Depth, _Opts, Budget, Acc) ->
    {lists:reverse(Acc), Budget};
walk_children(_, _Restarts, _Depth, _Opts, Budget, Acc) when Budget =< 0 ->
    {lists:reverse(Acc), Budget};
walk_children([{Id, Child, Type, Mods} | Rest], {Sup, Types} = Restarts, Depth, Opts, Budget,
              Acc) ->
    Spec = #{id => Id, restart => lookup_restart(Id, Child, Types), modules => Mods},
    {Node, B1} = walk(Child, Type, Spec, Depth, Opts, Budget - 1),
    Marked = case child_restarted(Sup, Id, Types, Opts) of
                 undefined -> Node;
                 R -> Node#{restarted => restarted_data(R)}
             end,
    walk_children(Rest, Restarts, Depth, Opts, B1, [Marked | Acc]);
walk_children([_ | Rest], Restarts, Depth, Opts, Budget, Acc) ->
    walk_children(Rest, Restarts, Depth, Opts, Budget, Acc).

%% Only `which_children' and `count_children': both OTP supervisors and
%% DynamicSupervisor understand them. Always with a timeout.
sup_call(Pid, Req) when Req =:= which_children; Req =:= count_children ->
    try gen_server:call(Pid, Req, ?CALL_MS) of
        R -> {ok, R}
    catch
        _:_ -> error
    end.

counts_map(C) ->
    maps:from_list([{K, V} || {K, V} <- C, is_atom(K), is_integer(V)]).

tree_lines(Node, Fmt) ->
    tree_lines(Node, Fmt, 0).

tree_lines(Node, Fmt, Indent) ->
    Pad = binary:copy(<<"  ">>, Indent),
    Line = [Pad, node_line(Node, Fmt)],
    Kids = [L || C <- maps:get(children, Node, []), L <- tree_lines(C, Fmt, Indent + 1)],
    More = case maps:get(truncated_children, Node, 0) of
               N when is_integer(N), N > 0 ->
                   [[Pad, <<"  ... ">>, integer_to_binary(N),
                     <<" more children not read (the counts above are of those read; ",
                       "max_children reads more)">>]];
               _ -> []
           end,
    [Line | Kids ++ More].

node_line(#{folded := N} = Node, Fmt) ->
    Line = node_line(maps:remove(folded, Node), Fmt),
    Label = node_label(Node),
    Size = byte_size(Label),
    <<Label:Size/binary, Rest/binary>> = Line,
    Each = case length(maps:get(children, Node, [])) of
               0 -> <<>>;
               K -> fmt(", ~b children each", [K])
           end,
    <<(re:replace(Label, "[0-9]+", "N", [global, {return, binary}]))/binary,
      (fmt(" ×~b~ts, e.g.", [N, Each]))/binary, Rest/binary>>;
node_line(Node, _Fmt) ->
    Label = node_label(Node),
    Pid = case maps:get(pid, Node, undefined) of
              undefined -> maps:get(status, Node, undefined);
              P -> P
          end,
    Kind = maps:get(kind, Node, unknown),
    Parts = [Label, Pid, Kind] ++
        case Kind of
            K when K =:= supervisor; K =:= dynamic_supervisor ->
                [maps:get(strategy, Node, undefined),
                 fmt("~tp/~tps", [maps:get(intensity, Node, undefined), maps:get(period, Node, undefined)]),
                 fmt("children=~tp", [maps:get(child_count, Node, undefined)])];
            _ -> []
        end ++
        [maps:get(restart, Node, undefined)] ++
        [restarted_text(What, R) || {Key, What} <- [{restarted, <<"restarted">>},
                                                   {child_restarts, <<"children restarted">>}],
                                    R <- [maps:get(Key, Node, undefined)], R =/= undefined] ++
        case maps:get(name, Node, undefined) of
            undefined -> [];
            Label -> [];
            Name -> [<<"name=", Name/binary>>]
        end ++
        case maps:get(application, Node, undefined) of
            undefined -> [];
            App -> [<<"app=", (atom_to_binary(App, utf8))/binary>>]
        end ++
        [<<"(", Note/binary, ")">> || Note <- [maps:get(children_note, Node, undefined),
                                               maps:get(note, Node, undefined)],
                                      is_binary(Note)],
    join([to_text(P) || P <- Parts, P =/= undefined], <<" ">>).

%% `restarted 3×, last 12.0 s ago' (why: `diagnose' or `logs').
restarted_text(What, #{count := Count, age_ms := Age}) ->
    fmt("~ts ~b×, last ~ts ago", [What, Count, os_sup_lib_time:secs(Age)]).

node_label(#{id := Id}) when is_binary(Id) -> Id;
node_label(#{name := Name}) when is_binary(Name) -> Name;
node_label(#{modules := [M | _]}) -> M;
node_label(_) -> <<"-">>.
