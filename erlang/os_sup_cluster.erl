%%% @doc `os_sup_cluster' connects a member of a cluster the server started
%%% to its peers, says in the node's log when a peer comes and goes, and
%%% splits and heals the cluster on purpose. The peers come from the
%%% environment (`OS_SUP_CLUSTER', node names separated by commas), set by
%%% the server; a project that forms its own cluster starts without it.
%%%
%%% A partition holds until healed: each blocked peer gets a cookie of its
%%% own on this node that no node has, so every handshake between the two
%%% sides fails (`:global', `:pg' or the app cannot reconnect them) while
%%% the server, a hidden node with the real cookie, still reaches both.
%%% The peers of one side stay connected: `global' may cut two of them
%%% while the blocked peers' disconnects reach them at different times (it
%%% prevents overlapping partitions), and the watcher connects them again.
-module(os_sup_cluster).

-import(os_sup_lib_args, [arg_text/2]).
-import(os_sup_lib_reply, [ok_reply/3]).
-import(os_sup_lib_text, [fmt/2]).

-export([start/2, hold_boot/1, view/1, partition/1, heal/1]).
%% Internal spawn target. Not an API.
-export([watch/3]).

-define(BLOCKED_KEY, {?MODULE, blocked}).
%% The boot process waiting for this member to be connected, while it waits.
-define(BOOT_HOLDER, os_sup_cluster_boot).
-define(HOLD_BOOT_MS, 5000).
-define(GLOBAL_SYNC_MS, 3000).
-define(CONNECT_FOR_MS, 60000).
-define(RETRY_MS, 1000).
%% how long a peer of this side that `global' cut during a partition is connected again
-define(REJOIN_MS, 5000).
-define(TEXT_BYTES, 4096).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Connects this node to `Peers' (a comma-separated list of node names) when
%% `Connect' (else the server introduces it), in a process of its own, which then logs the
%% peers that connect and disconnect. Never raises.
-spec start(string(), boolean()) -> ok.
start(Peers, Connect) ->
    Nodes = [list_to_atom(P) || P <- string:lexemes(Peers, ","), P =/= atom_to_list(node())],
    Until = erlang:monotonic_time(millisecond) + ?CONNECT_FOR_MS,
    _ = try spawn(?MODULE, watch, [Nodes, Connect, Until]) catch _:_ -> ok end,
    ok.

%% @doc Runs `Boot' (which starts the helper, and so `start/2'), then waits until this member
%% is connected to its peers: by its own first round of connects, or by the server's
%% introduction (tool `heal') when the whole cluster starts at once. At most ?HOLD_BOOT_MS.
-spec hold_boot(fun(() -> term())) -> ok.
hold_boot(Boot) ->
    Held = try register(?BOOT_HOLDER, self()) catch _:_ -> false end,
    _ = Boot(),
    _ = Held andalso receive connected -> ok after ?HOLD_BOOT_MS -> ok end,
    _ = Held andalso try unregister(?BOOT_HOLDER) catch _:_ -> false end,
    ok.

%% @doc Tool `cluster_view': `node', `nodes' (connected, visible) and `blocked' (peers this
%% node refuses while a partition lasts).
-spec view(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
view(_Args) ->
    Nodes = lists:sort(nodes()),
    Blocked = blocked(),
    Line = fmt("~ts sees ~b nodes~ts",
               [node(), length(Nodes),
                case Blocked of
                    [] -> <<>>;
                    _ -> fmt(", blocks ~b", [length(Blocked)])
                end]),
    ok_reply([Line], #{node => node(), nodes => Nodes, blocked => Blocked}, ?TEXT_BYTES).

%% @doc Tool `partition': `block', the peers to cut off (comma-separated node names), and
%% `peers', this node's side. The blocked get a cookie no node has and are disconnected (the
%% peers blocked before stay so); then this node connects to its side's peers it does not
%% see (`global' may have cut them to prevent overlapping partitions).
-spec partition(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
partition(Args) ->
    Block = node_names(block, Args),
    case Block -- blocked() of
        [] -> ok;
        New ->
            persistent_term:put(?BLOCKED_KEY, lists:usort(blocked() ++ New)),
            %% Of this node and random: the two sides must never hold the same one.
            Junk = list_to_atom(fmt_list("blocked_~ts_~b", [node(), rand:uniform(1 bsl 60)])),
            _ = [erlang:set_cookie(N, Junk) || N <- New],
            _ = [erlang:disconnect_node(N) || N <- New]
    end,
    _ = [net_kernel:connect_node(N) || N <- node_names(peers, Args) -- blocked(),
                                       not lists:member(N, nodes())],
    view(#{}).

%% @doc Tool `heal': every blocked peer gets this node's cookie back; then this node
%% connects to the peers named in `peers' (comma-separated) that it does not see.
-spec heal(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
heal(Args) ->
    Cookie = erlang:get_cookie(),
    _ = [erlang:set_cookie(N, Cookie) || N <- blocked()],
    persistent_term:put(?BLOCKED_KEY, []),
    Peers = node_names(peers, Args),
    _ = [net_kernel:connect_node(N) || N <- Peers, not lists:member(N, nodes())],
    release_boot(),
    view(#{}).

%%%===================================================================
%%% Internal entry points (spawned)
%%%===================================================================

%% @doc The watcher: when `Connect', connects until every peer is connected or `Until'
%% passes (the boot held by `hold_boot/1' goes on after the first round); then logs peers
%% coming and going for as long as the node runs.
-spec watch([node()], boolean(), integer()) -> no_return().
watch(Peers, Connect, Until) ->
    %% One watcher per node: a helper booted again finds it running.
    true = register(?MODULE, self()),
    ok = net_kernel:monitor_nodes(true, [nodedown_reason]),
    _ = Connect andalso begin
            %% Only the peers up already: one that boots later connects to this node itself
            %% (a node still booting has no cookie yet and would log the refused handshake).
            Missing = connect_round([P || P <- Peers, registered(P)]),
            release_boot(),
            connect(Missing, Until)
        end,
    log_loop().

%%%===================================================================
%%% Private
%%%===================================================================

%% Lets a boot held by `hold_boot/1' go on, if one is, once `global' has synchronised with
%% the peers now connected: connected is not yet in sync, and an application that registers
%% a global name before then registers it a second time in the cluster (a name conflict
%% that `global' resolves by killing one of them).
release_boot() ->
    _ = is_pid(whereis(?BOOT_HOLDER)) andalso
        os_sup_lib_call:call_with_deadline({global, sync, []}, ?GLOBAL_SYNC_MS),
    _ = try ?BOOT_HOLDER ! connected catch _:_ -> ok end,
    ok.

%% The peers of `Peers' still not connected after one attempt each.
connect_round(Peers) ->
    [P || P <- Peers, not lists:member(P, nodes()), not lists:member(P, blocked()),
          net_kernel:connect_node(P) =/= true].

connect(Missing, Until) ->
    case Missing =/= [] andalso erlang:monotonic_time(millisecond) < Until of
        true ->
            receive Event -> log(Event) after ?RETRY_MS -> ok end,
            connect(connect_round(Missing), Until);
        false ->
            ok
    end.

log_loop() ->
    receive Event -> log(Event), rejoin(Event) end,
    log_loop().

%% While a partition holds, a peer of this side lost was cut by `global' (it disconnects nodes
%% it sees in overlapping partitions, racing the blocked peers' own disconnects): connected
%% again, a few times over ?REJOIN_MS, by a short-lived process.
rejoin({nodedown, Node, _}) ->
    case blocked() =/= [] andalso not lists:member(Node, blocked()) of
        true ->
            Until = erlang:monotonic_time(millisecond) + ?REJOIN_MS,
            _ = spawn(fun() -> connect([Node], Until) end),
            ok;
        false -> ok
    end;
rejoin(_) ->
    ok.

log({nodeup, Node, _}) ->
    logger:notice("os_sup_cluster: ~ts connected to ~ts", [node(), Node]);
log({nodedown, Node, Info}) ->
    Why = proplists:get_value(nodedown_reason, Info, unknown),
    logger:warning("os_sup_cluster: ~ts lost ~ts (~tp)~ts",
                   [node(), Node, Why,
                    case lists:member(Node, blocked()) of
                        true -> <<", blocked by a partition">>;
                        false -> <<>>
                    end]);
log(_) ->
    ok.

%% The node names in argument `Key' (comma-separated), this node left out.
node_names(Key, Args) ->
    case arg_text(Key, Args) of
        Text when is_binary(Text) ->
            [list_to_atom(N) || N <- string:lexemes(binary_to_list(Text), ","),
                                N =/= atom_to_list(node())];
        _ -> []
    end.

%% Whether `Node' is registered with its host's EPMD (its distribution is up).
registered(Node) ->
    case string:split(atom_to_list(Node), "@") of
        [Name, Host] ->
            try erl_epmd:port_please(Name, Host, 1000) of
                {port, _, _} -> true;
                _ -> false
            catch _:_ -> false
            end;
        _ -> false
    end.

blocked() ->
    persistent_term:get(?BLOCKED_KEY, []).

fmt_list(Format, Args) ->
    lists:flatten(io_lib:format(Format, Args)).
