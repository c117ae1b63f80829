%%% @doc `os_sup_boot' is the first module a node the server starts loads
%%% (`-pa DIR -eval catch(os_sup_boot:start())'). The server ships the helper
%%% compiled by several OTP releases, one set per directory (`DIR/otp25',
%%% `DIR/otp27', ...), because no single set loads on every release (OTP 29
%%% refuses some beams of OTP 25; OTP 25 refuses every beam of OTP 27). This
%%% module picks the set made for the node's release, loads `os_sup_helper'
%%% from it by absolute path (a Mix project may prune the code path: the
%%% helper loads its other modules the same way) and starts it.
%%%
%%% When the helper cannot load, it says so at once on the control socket
%%% (`refused TEXT', the server fails the start with TEXT) and on standard
%%% error, and never crashes the boot.
%%%
%%% It is compiled by the oldest supported release and kept small and plain
%%% (no binary matching, no maps, no newer BIFs), so every release from
%%% OTP 25 on loads it.
-module(os_sup_boot).

-export([start/0, set_dir/2]).

%% @doc Loads and starts the helper made for this node's release; always `ok'.
-spec start() -> ok.
start() ->
    try boot() of
        ok -> ok;
        {refused, Text} -> refused(Text)
    catch
        Class:Reason -> refused(lists:flatten(io_lib:format("the helper's boot failed: ~p:~P",
                                                            [Class, Reason, 20])))
    end,
    ok.

%% @doc The directory of the set for OTP `Otp' among the `otpNN' directories in `Base': the
%% newest set not newer than the node; the oldest when the node is older than all.
-spec set_dir(string(), pos_integer()) -> {ok, string(), pos_integer()} | error.
set_dir(Base, Otp) ->
    Sets = case file:list_dir(Base) of
               {ok, Names} -> lists:sort([S || "otp" ++ N <- Names, S <- [to_int(N)], S =/= error]);
               _ -> []
           end,
    case {[S || S <- Sets, S =< Otp], Sets} of
        {[], []} -> error;
        {[], [Oldest | _]} -> {ok, filename:join(Base, "otp" ++ integer_to_list(Oldest)), Oldest};
        {Fit, _} ->
            Set = lists:last(Fit),
            {ok, filename:join(Base, "otp" ++ integer_to_list(Set)), Set}
    end.

boot() ->
    Base = filename:dirname(code:which(?MODULE)),
    Otp = otp_major(),
    case set_dir(Base, Otp) of
        error ->
            {refused, "no compiled helper next to " ++ Base};
        {ok, Dir, Set} ->
            case code:load_abs(filename:join(Dir, "os_sup_helper")) of
                {module, os_sup_helper} ->
                    %% Also on the code path, for a module called before the helper has
                    %% loaded it (as long as the project keeps the path).
                    _ = code:add_patha(Dir),
                    os_sup_helper:start();
                {error, Why} ->
                    {refused, lists:flatten(
                                io_lib:format("OTP ~b refused the helper (os_sup_helper, compiled "
                                              "by OTP ~b): ~p; this os_sup_mcp does not support "
                                              "this release", [Otp, Set, Why]))}
            end
    end.

otp_major() ->
    case to_int(erlang:system_info(otp_release)) of
        error -> 0;
        N -> N
    end.

to_int(Text) ->
    try list_to_integer(Text) catch _:_ -> error end.

%% Said on the control socket (when the server started this node) and on standard error.
refused(Text) ->
    Line = "os_sup_mcp: " ++ Text,
    _ = (try io:put_chars(standard_error, [Line, $\n]) catch _:_ -> ok end),
    case os:getenv("OS_SUP_CONTROL_FD") of
        false -> ok;
        Fd ->
            try
                Port = open_port({fd, list_to_integer(Fd), list_to_integer(Fd)}, [out]),
                port_command(Port, ["refused ", Text, $\n])
            catch
                _:_ -> ok
            end
    end,
    ok.
