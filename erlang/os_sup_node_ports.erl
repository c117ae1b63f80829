%%% @doc `os_sup_node_ports' lists the node's open ports by kind, owner and
%%% name, for the tool `ports': each port's name (a driver such as
%%% `tcp_inet', or the command a spawned port runs), the process it is
%%% connected to (its owner), the bytes it read and wrote, and the bytes
%%% queued in its driver.
%%%
%%% A port is of kind `spawn' when it runs an OS process, `fd' when it
%%% reads and writes file descriptors (`0/1'), and otherwise of its
%%% driver's name (`tcp_inet', `udp_inet'). Kinds come largest first, each
%%% with its `limit' busiest ports (bytes queued, then bytes read and
%%% written) and the rest counted (`… 25 more of 30'), as a leak shows:
%%% many ports of one kind, one owner.
%%%
%%% Only `erlang:port_info/2' is read (and an owner's registered name):
%%% no port and no process is sent anything. A port closed during the scan
%%% is skipped; at most 200,000 ports are read.
-module(os_sup_node_ports).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, fmt_arg/1]).
-import(os_sup_lib_proc, [reg_name/1]).
-import(os_sup_lib_reply, [ok_reply/2]).
-import(os_sup_lib_text, [fmt/2, join/2, bytes/1, render_opt_name/2, cut_bin/2]).

-export([ports/1]).

%% Ports read at most (a node may allow millions).
-define(MAX_SCAN, 200000).
%% Kinds listed at most; the others are only counted.
-define(MAX_KINDS, 20).
%% A port's name (a spawned command line) at most, in bytes.
-define(NAME_BYTES, 200).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The open ports by kind: each kind's count and its `limit' busiest
%% ports, with their name, owner, bytes read and written, and bytes queued.
-spec ports(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
ports(Args) ->
    Fmt = fmt_arg(Args),
    Limit = arg_int(limit, Args, ?PORTS_LIMIT_DEFAULT, ?PORTS_LIMIT_MIN, ?PORTS_LIMIT_MAX),
    All = erlang:ports(),
    Scanned = [S || P <- lists:sublist(All, ?MAX_SCAN), S <- [summary(P)], S =/= closed],
    ByKind = lists:foldl(fun({Kind, _, _} = S, Acc) ->
                                 maps:update_with(Kind, fun(L) -> [S | L] end, [S], Acc)
                         end, #{}, Scanned),
    Ranked = lists:sort(fun({K1, L1}, {K2, L2}) -> {length(L1), K2} >= {length(L2), K1} end,
                        maps:to_list(ByKind)),
    {Shown, Unshown} = lists:split(min(?MAX_KINDS, length(Ranked)), Ranked),
    Kinds = [kind(Kind, Ports, Limit, Fmt) || {Kind, Ports} <- Shown],
    Total = length(Scanned),
    Data = #{total => Total, port_limit => erlang:system_info(port_limit),
             scanned => min(length(All), ?MAX_SCAN), limit => Limit, kinds => Kinds},
    ok_reply([head(Data, length(All), Unshown) | lists:flatmap(fun kind_lines/1, Kinds)], Data).

%%%===================================================================
%%% Private
%%%===================================================================

%% What ranks a port, read cheaply: `{Kind, Busy, Port}', or `closed'.
summary(P) ->
    case [erlang:port_info(P, Item) || Item <- [name, os_pid, queue_size, input, output]] of
        [{name, Name}, {os_pid, OsPid}, {queue_size, Q}, {input, In}, {output, Out}] ->
            {kind_of(text(Name), OsPid), {Q, In + Out}, P};
        _ -> closed
    end.

kind_of(_Name, OsPid) when is_integer(OsPid) -> <<"spawn">>;
kind_of(Name, _) ->
    case re:run(Name, <<"^[0-9]+/[0-9]+$">>) of
        {match, _} -> <<"fd">>;
        nomatch -> hd(binary:split(Name, <<" ">>))
    end.

%% A port's name (a string) as UTF-8.
text(Name) ->
    case unicode:characters_to_binary(Name) of
        Bin when is_binary(Bin) -> Bin;
        _ -> os_sup_lib_render:term(Name, erlang, ?NAME_BYTES)
    end.

%% One kind: its count and its `Limit' busiest ports (those closed meanwhile left out).
kind(Kind, Ports, Limit, Fmt) ->
    Busiest = lists:sublist(lists:reverse(lists:keysort(2, Ports)), Limit),
    #{kind => Kind, count => length(Ports),
      ports => [Row || {_, _, P} <- Busiest, Row <- [row(P, Fmt)], Row =/= closed]}.

row(P, Fmt) ->
    Items = [name, connected, input, output, queue_size, os_pid],
    case [erlang:port_info(P, Item) || Item <- Items] of
        [{name, Name}, {connected, Owner}, {input, In}, {output, Out}, {queue_size, Q},
         {os_pid, OsPid}] ->
            #{port => os_sup_lib_render:term(P, Fmt, 64),
              name => cut_bin(text(Name), ?NAME_BYTES),
              owner => os_sup_lib_render:pid(Owner, Fmt),
              owner_name => render_opt_name(owner_name(Owner), Fmt),
              input => In, output => Out, queue_size => Q, os_pid => OsPid};
        _ -> closed
    end.

%% Who holds a port, as an agent recognises it: its registered name, else the module it was
%% started by (`Ailments.Sockets'); `undefined' for a port of no process (or of a gone one).
owner_name(Owner) when is_pid(Owner) ->
    case reg_name(Owner) of
        undefined -> os_sup_lib_label:started_by(Owner);
        Name -> Name
    end;
owner_name(_) -> undefined.

head(#{total := Total, port_limit := Max, kinds := Kinds}, Open, Unshown) ->
    Counts = [fmt("~b ~ts", [C, K]) || #{kind := K, count := C} <- Kinds]
        ++ [fmt("~b of ~b other kinds", [lists:sum([length(L) || {_, L} <- Unshown]),
                                         length(Unshown)]) || Unshown =/= []],
    Scan = case Open > ?MAX_SCAN of
               true -> fmt(" (the first ~b of ~b read)", [?MAX_SCAN, Open]);
               false -> <<>>
           end,
    fmt("~b ports of ~b allowed~ts: ~ts", [Total, Max, Scan, join(Counts, <<", ">>)]).

kind_lines(#{kind := Kind, count := Count, ports := Rows}) ->
    More = case Count - length(Rows) of
               0 -> [];
               N -> [fmt("  … ~b more of ~b", [N, Count])]
           end,
    [fmt("~ts: ~b", [Kind, Count]) | [port_line(Kind, R) || R <- Rows] ++ More].

port_line(Kind, #{port := P, name := Name, owner := Owner, owner_name := OwnerName,
                  input := In, output := Out, queue_size := Q, os_pid := OsPid}) ->
    Parts = [P] ++ [Name || Name =/= Kind]
        ++ [fmt("os_pid=~b", [OsPid]) || is_integer(OsPid)]
        ++ [<<"owner=", Owner/binary>>] ++ [<<"(", OwnerName/binary, ")">> || is_binary(OwnerName)]
        ++ [<<"in=", (bytes(In))/binary>>, <<"out=", (bytes(Out))/binary>>,
            <<"queue=", (bytes(Q))/binary>>],
    <<"  ", (join(Parts, <<" ">>))/binary>>.
