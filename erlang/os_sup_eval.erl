%%% @doc `os_sup_eval' evaluates Elixir or Erlang code for the helper
%%% (request `{eval, Lang, Code, Opts}'), captures what the code prints,
%%% and sweeps up the processes an eval left behind.
%%%
%%% == Limits ==
%%% Everything is bounded: eval has a timeout (1..60000 ms, default 5000),
%%% a heap limit and a cap on rendered value and captured output. Processes
%%% an eval spawns inherit its capture IO server (its coordinator) as group leader: when the
%%% eval fails, is killed or times out, every process still led by that
%%% capture server is killed (a spawn bomb dies with its eval); when it
%%% succeeds, they are handed to `user' and keep running (a bounded number
%%% of sweeps over `erlang:processes()', only when the process count grew).
%%% A spawn refused by the process limit (`system_limit') is an error
%%% reply, never a silent drop. What an eval logs carries the logger
%%% metadata `os_sup_eval => true'.
%%%
%%% == Processes ==
%%% A coordinator per eval (deadline, reply, sweep; it is also the capture
%%% IO server: io protocol, input requests get `eof') and the evaluator (with
%%% the heap limit; its group leader is the coordinator). Both are spawned with
%%% `spawn(?MODULE, F, A)' and wait hibernated through `?MODULE', so they
%%% survive back-to-back reloads (see `os_sup_helper', "Code reload"). The
%%% evaluated code never prints to the node: it writes into the capture.
-module(os_sup_eval).

-import(os_sup_lib_args, [clamp/3]).
-import(os_sup_lib_call, [safe/2]).
-import(os_sup_lib_reply, [reply/3]).
-import(os_sup_lib_text, [cut/2, cut_bin/2, mark/2, fmt/2]).

%% API
-export([start/5]).

%% Internal entry points: spawn targets and reload-safe loops. Not an API.
-export([eval_coordinator/5, eval_wait/1, eval_run/5, capture_init/2, capture_loop/1]).

%% eval limits
-define(DEFAULT_TIMEOUT_MS, 5000).
-define(MAX_TIMEOUT_MS, 60000).
-define(DEFAULT_HEAP_WORDS, 32000000).
-define(DEFAULT_RESULT_BYTES, 65536).
-define(MIN_RESULT_BYTES, 16).
-define(MAX_RESULT_BYTES, 16777216).
-define(MAX_ECHO_BYTES, 1024).
-define(MAX_DEPTH, 30).
%% sweeps over erlang:processes() for the processes an eval left behind
-define(SWEEP_ROUNDS, 10).

-type lang() :: elixir | erlang.
-type eval_opts() :: #{timeout_ms := pos_integer(),
                       max_heap_words := non_neg_integer(),
                       max_result_bytes := pos_integer()}.

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Starts one eval of `Code' (options `timeout_ms', `max_heap_words',
%% `max_result_bytes'); its coordinator replies `{Ref, Reply}' to `From'. Always `ok'.
-spec start(term(), pid(), elixir | erlang | auto, binary(), map()) -> ok.
start(Ref, From, Lang, Code, Opts) ->
    case try_spawn(fun() -> spawn(?MODULE, eval_coordinator, [Ref, From, Lang, Code, Opts]) end) of
        {ok, _} -> ok;
        {error, Error} -> reply(From, Ref, Error)
    end.

%%%===================================================================
%%% Internal entry points (spawned or reloaded through ?MODULE)
%%%===================================================================

%% @doc Runs one eval under a deadline and replies `{Ref, Reply}' to `From'.
-spec eval_coordinator(term(), pid(), elixir | erlang | auto, binary(), map()) -> ok.
eval_coordinator(Ref, From, Lang0, Code, Opts0) ->
    %% The machinery around the user's code is the helper's; the code itself (eval_run) is not.
    os_sup_helper:untraced(),
    Opts = #{timeout_ms := Timeout, max_heap_words := Heap,
             max_result_bytes := Max} = eval_opts(Opts0),
    Lang = resolve_lang(Lang0),
    Before = erlang:system_info(process_count),
    %% The coordinator is the evaluator's group leader: what the code prints comes here, with
    %% no process of its own to spawn, watch and ask (a capture server cost each eval ~10 us).
    SpawnOpts = [monitor | heap_opts(Heap)],
    Args = [self(), self(), Lang, Code, Max],
    case try_spawn(fun() -> spawn_opt(?MODULE, eval_run, Args, SpawnOpts) end) of
        {ok, {Pid, MRef}} ->
            TRef = erlang:start_timer(Timeout, self(), eval_timeout),
            ?MODULE:eval_wait(#{ref => Ref, from => From, pid => Pid, mref => MRef,
                                timer => TRef, capture => self(), lang => Lang,
                                opts => Opts, procs_before => Before,
                                out => #{max => Max, acc => [], kept => 0, total => 0}});
        {error, Error} ->
            reply(From, Ref, Error)
    end.

%% @doc Coordinator wait: result, evaluator death or deadline; replies and cleans up. Serves
%% the io requests of the code meanwhile (it is the evaluator's group leader).
-spec eval_wait(map()) -> ok.
eval_wait(#{ref := Ref, from := From, pid := Pid, mref := MRef, timer := TRef} = W) ->
    receive
        %% (A coordinator of the previous version, across a reload, has no `out': its
        %% evaluator prints to a capture server of its own.)
        {io_request, IoFrom, ReplyAs, Req} when is_pid(IoFrom), is_map_key(out, W) ->
            {Reply, Out1} = io_request(Req, maps:get(out, W)),
            IoFrom ! {io_reply, ReplyAs, Reply},
            ?MODULE:eval_wait(W#{out := Out1});
        {eval_result, Pid, Result} ->
            erlang:demonitor(MRef, [flush]),
            _ = erlang:cancel_timer(TRef),
            eval_done(Ref, From, W, eval_finish(Result, W));
        {'DOWN', MRef, process, Pid, Reason} ->
            _ = erlang:cancel_timer(TRef),
            eval_done(Ref, From, W, eval_died(Reason, W));
        {timeout, TRef, eval_timeout} ->
            eval_done(Ref, From, W, eval_timeout(W))
    after 0 ->
            erlang:hibernate(?MODULE, eval_wait, [W])
    end.

%% @doc Evaluator process: evaluates `Code' with `Capture' as group leader and reports to `Coord'.
-spec eval_run(pid(), pid(), lang(), binary(), pos_integer()) -> ok.
eval_run(Coord, Capture, Lang, Code, Max) ->
    group_leader(Capture, self()),
    %% Marks what this eval logs, so the server can tell it from the application's own events.
    _ = try logger:update_process_metadata(#{os_sup_eval => true}) catch _:_ -> ok end,
    T0 = erlang:monotonic_time(microsecond),
    Result =
        try os_sup_helper_own:counting_own_atoms(fun() -> eval(Lang, Code) end) of
            {ok, Value} ->
                Duration = erlang:monotonic_time(microsecond) - T0,
                {Rendered, Trunc} = cut(render_value(Lang, Value), Max),
                {ok, Rendered, Trunc, Duration};
            {error, Kind, Message} ->
                {error, Kind, cut_bin(Message, Max), <<>>}
        catch
            Class:Reason:Stack0 ->
                Stack = trim_stack(Stack0),
                {Kind, Message, Trace0} = describe_exception(Lang, Class, Reason, Stack),
                %% Raised by the evaluated code itself: no function of the node ran it. Code
                %% that does not compile has only the compiler's frames: none is said.
                Trace = case {Kind, Trace0, Stack0} of
                            {K, _, _} when K =:= syntax; K =:= compile -> <<>>;
                            {_, <<>>, [_ | _]} -> <<"(raised by the evaluated code itself, not "
                                                    "in a function of the node)">>;
                            _ -> Trace0
                        end,
                {error, Kind, cut_bin(Message, Max), cut_bin(Trace, Max),
                 exception_name(Lang, Class, Reason, Stack)}
        end,
    Coord ! {eval_result, self(), Result},
    ok.

%% @doc Capture IO server entry: collects at most `Max' bytes of output for `Owner'. Evals
%% no longer start one (their coordinator captures); kept so that one started by the previous
%% version of this module finishes its eval across a reload.
-spec capture_init(pid(), pos_integer()) -> ok.
capture_init(Owner, Max) ->
    os_sup_helper:untraced(),
    MRef = erlang:monitor(process, Owner),
    ?MODULE:capture_loop(#{owner => Owner, mref => MRef, max => Max,
                           acc => [], kept => 0, total => 0}).

%% @doc Capture IO server loop (io protocol; input requests get `eof').
-spec capture_loop(map()) -> ok.
capture_loop(#{mref := MRef} = S) ->
    receive
        {io_request, From, ReplyAs, Req} when is_pid(From) ->
            {Reply, S1} = io_request(Req, S),
            From ! {io_reply, ReplyAs, Reply},
            ?MODULE:capture_loop(S1);
        {get_output, From, Tag} when is_pid(From) ->
            From ! {output, Tag, captured(S)},
            ?MODULE:capture_loop(S);
        {'DOWN', MRef, process, _, _} ->
            ok;
        _Other ->
            ?MODULE:capture_loop(S)
    after 0 ->
            erlang:hibernate(?MODULE, capture_loop, [S])
    end.

%%%===================================================================
%%% Private: eval
%%%===================================================================

-spec eval_opts(map()) -> eval_opts().
eval_opts(Opts) ->
    #{timeout_ms => clamp(opt(timeout_ms, Opts, ?DEFAULT_TIMEOUT_MS), 1, ?MAX_TIMEOUT_MS),
      max_heap_words => max(0, opt(max_heap_words, Opts, ?DEFAULT_HEAP_WORDS)),
      max_result_bytes => clamp(opt(max_result_bytes, Opts, ?DEFAULT_RESULT_BYTES),
                                ?MIN_RESULT_BYTES, ?MAX_RESULT_BYTES)}.

opt(Key, Opts, Default) ->
    case maps:get(Key, Opts, Default) of
        V when is_integer(V) -> V;
        _ -> Default
    end.

heap_opts(0) -> [];
heap_opts(Words) ->
    [{max_heap_size, #{size => Words, kill => true, error_logger => false}}].

resolve_lang(auto) ->
    case code:ensure_loaded('Elixir.Code') of
        {module, _} -> elixir;
        _ -> erlang
    end;
resolve_lang(Lang) ->
    Lang.

eval_finish({ok, Value, Trunc, Duration}, #{opts := #{max_result_bytes := Max}} = W) ->
    {Output, OutTrunc} = collect_output(W, Max),
    {ok, #{value => Value, output => Output, lang => maps:get(lang, W),
           truncated => Trunc orelse OutTrunc, duration_us => Duration}};
eval_finish({error, Kind, Message, Trace}, W) ->
    eval_finish({error, Kind, Message, Trace, undefined}, W);
eval_finish({error, Kind, Message, Trace, Exception}, #{opts := #{max_result_bytes := Max}} = W) ->
    {Output, _} = collect_output(W, Max),
    case eval_error(Kind, Message, Trace, Output) of
        {error, E} when is_binary(Exception) -> {error, E#{exception => Exception}};
        Error -> Error
    end.

eval_died(killed, #{opts := #{max_heap_words := Heap, max_result_bytes := Max}} = W) ->
    {Output, _} = collect_output(W, Max),
    Msg = case Heap of
              0 -> <<"the evaluating process was killed">>;
              _ -> fmt("the evaluating process was killed; most likely it exceeded the "
                       "heap limit of ~b words (~b MB): raise max_heap_words or return "
                       "less data (otherwise another process or a code purge killed it)",
                       [Heap, Heap * erlang:system_info(wordsize) div 1048576])
          end,
    eval_error(killed, Msg, <<>>, Output);
eval_died(Reason, #{opts := #{max_result_bytes := Max}} = W) ->
    {Output, _} = collect_output(W, Max),
    Msg = cut_bin(fmt("the evaluating process exited: ~tP", [Reason, ?MAX_DEPTH]), Max),
    eval_error(exit, Msg, <<>>, Output).

eval_timeout(#{pid := Pid, mref := MRef, opts := #{timeout_ms := T, max_result_bytes := Max}} = W) ->
    exit(Pid, kill),
    erlang:demonitor(MRef, [flush]),
    {Output, _} = collect_output(W, Max),
    Msg = fmt("eval timed out after ~b ms; the evaluating process was killed", [T]),
    eval_error(timeout, Msg, <<>>, Output).

%% Processes the eval spawned (led by its coordinator, the capture server) die with a failed
%% eval and are handed to `user' after a successful one; then the coordinator goes.
eval_done(Ref, From, #{capture := Capture, pid := Pid, procs_before := Before}, Reply0) ->
    Reply = case Reply0 of
                {ok, _} ->
                    %% Only an eval that left processes behind needs the sweep: it costs a
                    %% pass over every process, which most evals would pay for nothing.
                    %% (Not counted: the evaluator if still exiting.)
                    Evaluator = case is_process_alive(Pid) of true -> 1; false -> 0 end,
                    case erlang:system_info(process_count) - Evaluator > Before of
                        true -> _ = sweep(Capture, Pid, repoint);
                        false -> ok
                    end,
                    Reply0;
                {error, #{message := Msg} = E} ->
                    case sweep(Capture, Pid, kill) of
                        0 -> Reply0;
                        N -> {error, E#{message := <<Msg/binary, (fmt(
                                 " (~b process(es) spawned by the eval were killed)",
                                 [N]))/binary>>}}
                    end;
                _ ->
                    _ = sweep(Capture, Pid, kill),
                    Reply0
            end,
    case Capture =:= self() of
        true -> ok;
        false -> exit(Capture, kill)
    end,
    reply(From, Ref, Reply).

%% Kills (or re-points to `user') every process whose group leader is `Capture', in at most
%% ?SWEEP_ROUNDS passes (a process may spawn again before a kill reaches it); returns how many
%% distinct processes other than the evaluator `Eval' were handled.
sweep(Capture, Eval, Action) ->
    User = case whereis(user) of
               U when is_pid(U) -> U;
               _ -> undefined
           end,
    sweep(Capture, Eval, Action, User, ?SWEEP_ROUNDS, #{}).

sweep(_Capture, Eval, _Action, _User, 0, Seen) ->
    map_size(maps:remove(Eval, Seen));
sweep(Capture, Eval, Action, User, Rounds, Seen) ->
    Self = self(),
    Found = [P || P <- erlang:processes(), P =/= Self, P =/= Capture,
                  led_by(P, Capture)],
    New = [P || P <- Found, not maps:is_key(P, Seen)],
    lists:foreach(fun(P) -> sweep_one(Action, P, User) end, Found),
    Seen1 = lists:foldl(fun(P, Acc) -> Acc#{P => true} end, Seen, New),
    case {Found, New} of
        {[], _} -> map_size(maps:remove(Eval, Seen1));
        {_, []} when Action =:= repoint -> map_size(maps:remove(Eval, Seen1));
        {_, []} -> erlang:yield(), sweep(Capture, Eval, Action, User, Rounds - 1, Seen1);
        _ -> sweep(Capture, Eval, Action, User, Rounds - 1, Seen1)
    end.

led_by(P, Capture) ->
    case erlang:process_info(P, group_leader) of
        {group_leader, Capture} -> true;
        _ -> false
    end.

sweep_one(kill, P, _User) ->
    exit(P, kill);
sweep_one(repoint, P, User) when is_pid(User) ->
    _ = try group_leader(User, P) catch _:_ -> false end,
    ok;
sweep_one(repoint, P, _NoUser) ->
    %% no `user' to hand them to: leave them led by a dead capture server (IO fails)
    _ = P,
    ok.

%% A spawn refused by the process limit (or anything else) becomes an eval error reply.
try_spawn(Spawn) ->
    try Spawn() of
        Result -> {ok, Result}
    catch
        error:system_limit ->
            {error, eval_error(system_limit,
                               <<"the node is at its process limit (system_limit): the eval "
                                 "could not be started; free processes or raise +P">>,
                               <<>>, <<>>)};
        Class:Reason ->
            {error, eval_error(Class, cut_bin(fmt("could not start the eval: ~tP",
                                                 [Reason, ?MAX_DEPTH]), ?MAX_ECHO_BYTES),
                               <<>>, <<>>)}
    end.

eval_error(Kind, Message, Trace, Output) ->
    {error, #{kind => Kind, message => Message, stacktrace => Trace, output => Output}}.

collect_output(#{out := Out}, Max) ->
    {Bin, Total} = captured(Out),
    case Total > Max of
        true -> {mark(os_sup_lib_render:utf8_trim(Bin), Total), true};
        false -> {Bin, false}
    end;
collect_output(#{capture := Capture}, Max) ->
    Tag = make_ref(),
    MRef = erlang:monitor(process, Capture),
    Capture ! {get_output, self(), Tag},
    receive
        {output, Tag, {Bin, Total}} ->
            erlang:demonitor(MRef, [flush]),
            case Total > Max of
                true -> {mark(os_sup_lib_render:utf8_trim(Bin), Total), true};
                false -> {Bin, false}
            end;
        {'DOWN', MRef, process, Capture, _} ->
            {<<>>, false}
    after 1000 ->
            erlang:demonitor(MRef, [flush]),
            {<<>>, false}
    end.

eval(elixir, Code) ->
    case code:ensure_loaded('Elixir.Code') of
        {module, _} -> eval_elixir(pasted(elixir, Code));
        _ -> {error, error, <<"Elixir is not available on this node; use lang erlang">>}
    end;
eval(erlang, Code) ->
    eval_erlang(pasted(erlang, Code)).

%% A pid, port or reference pasted as answers print it (`#PID<0.50.0>', `<0.50.0>') is no
%% term in code (in Elixir it starts a comment): code that has one and does not parse has
%% them replaced by the calls that make them (`:erlang.list_to_pid(~c"<0.50.0>")').
%% Each form has a `<': code without one (most code) is not looked at, which spares every
%% eval the regular expressions (~20 us a call).
pasted(Lang, Code) ->
    case binary:match(Code, <<"<">>) of
        nomatch -> Code;
        _ -> pasted_ids(Lang, Code)
    end.

pasted_ids(Lang, Code) ->
    Ids = case Lang of
              elixir -> [{"#PID<(\\d+\\.\\d+\\.\\d+)>", ":erlang.list_to_pid(~c\"<\\1>\")"},
                         {"#Port<(\\d+\\.\\d+)>", ":erlang.list_to_port(~c\"#Port<\\1>\")"},
                         {"#Reference<([\\d.]+)>", ":erlang.list_to_ref(~c\"#Ref<\\1>\")"}];
              erlang -> [{"(?<![\\w\"'])<(\\d+\\.\\d+\\.\\d+)>", "list_to_pid(\"<\\1>\")"},
                         {"#Port<(\\d+\\.\\d+)>", "list_to_port(\"#Port<\\1>\")"},
                         {"#Ref<([\\d.]+)>", "list_to_ref(\"#Ref<\\1>\")"}]
          end,
    %% Not inside a string: split around the string literals, which come at odd places.
    Parts = re:split(Code, "(\"(?:[^\"\\\\]|\\\\.)*\")", [unicode, {return, binary}]),
    Rewrite = fun(Part) ->
                      lists:foldl(fun({Re, To}, C) ->
                                          re:replace(C, Re, To, [global, unicode, {return, binary}])
                                  end, Part, Ids)
              end,
    Rewritten = iolist_to_binary(
                  [case I rem 2 of 0 -> Rewrite(P); 1 -> P end
                   || {I, P} <- lists:zip(lists:seq(0, length(Parts) - 1), Parts)]),
    case Rewritten =:= Code orelse parses(Lang, Code) of
        true -> Code;
        false -> Rewritten
    end.

parses(elixir, Code) ->
    try 'Elixir.Code':string_to_quoted(Code) of
        {ok, _} -> true;
        _ -> false
    catch
        _:_ -> false
    end;
parses(erlang, Code) ->
    case erl_scan:string(unicode:characters_to_list(Code), {1, 1}) of
        {ok, Tokens, End} ->
            lists:all(fun(Ts) -> element(1, erl_parse:parse_exprs(Ts)) =:= ok end,
                      split_dots(Tokens, End));
        _ -> false
    end.

%% Elixir 1.15 and later report why code does not compile as diagnostics, logged to the node's
%% stderr, and raise `cannot compile file (errors have been logged)': here they are collected
%% and become the error's description (1.14 puts them in the error itself).
eval_elixir(Code) ->
    Eval = fun() ->
                   {Value, _Binding} = 'Elixir.Code':eval_string(Code, [], [{file, <<"eval">>}]),
                   {ok, Value}
           end,
    case erlang:function_exported('Elixir.Code', with_diagnostics, 2) of
        false ->
            Eval();
        true ->
            {Result, Diagnostics} =
                'Elixir.Code':with_diagnostics([{log, false}],
                                               fun() ->
                                                       try Eval()
                                                       catch Class:Reason:Stack ->
                                                               {raised, Class, Reason, Stack}
                                                       end
                                               end),
            case Result of
                {raised, Class, Reason, Stack} ->
                    erlang:raise(Class, with_diagnostics(Reason, Diagnostics), Stack);
                Ok ->
                    Ok
            end
    end.

%% An Elixir compile error with the collected errors as its description: `eval:1: undefined
%% variable "y"', one a line.
with_diagnostics(#{'__struct__' := 'Elixir.CompileError'} = Error, Diagnostics) ->
    Lines = [[diagnostic_at(D), maps:get(message, D, <<>>)]
             || D <- Diagnostics, is_map(D), maps:get(severity, D, error) =:= error],
    case Lines of
        [] -> Error;
        _ -> Error#{description => iolist_to_binary(lists:join(<<"\n">>, Lines)),
                    file => nil, line => nil}
    end;
with_diagnostics(Error, _Diagnostics) ->
    Error.

diagnostic_at(#{position := {Line, Column}}) when is_integer(Line) ->
    io_lib:format("eval:~b:~b: ", [Line, Column]);
diagnostic_at(#{position := Line}) when is_integer(Line), Line > 0 ->
    io_lib:format("eval:~b: ", [Line]);
diagnostic_at(_) ->
    "".

eval_erlang(Code) ->
    case unicode:characters_to_list(Code) of
        Chars when is_list(Chars) ->
            case erl_scan:string(Chars, {1, 1}) of
                {ok, Tokens, EndLoc} ->
                    eval_exprs(split_dots(Tokens, EndLoc), erl_eval:new_bindings(), undefined);
                {error, {Loc, Mod, Desc}, _} ->
                    {error, syntax, error_info(Loc, Mod, Desc)}
            end;
        _ ->
            {error, syntax, <<"eval: the code is not valid UTF-8">>}
    end.

%% Several dot-terminated expression sequences run in order, like the shell.
eval_exprs([], _Bindings, Value) ->
    {ok, Value};
eval_exprs([Tokens | Rest], Bindings, _) ->
    case erl_parse:parse_exprs(Tokens) of
        {ok, Exprs} ->
            {value, Value, Bindings1} = erl_eval:exprs(Exprs, Bindings),
            eval_exprs(Rest, Bindings1, Value);
        {error, {Loc, Mod, Desc}} ->
            {error, syntax, error_info(Loc, Mod, Desc)}
    end.

split_dots(Tokens, EndLoc) ->
    split_dots(Tokens, EndLoc, [], []).

split_dots([], _EndLoc, [], Acc) ->
    lists:reverse(Acc);
split_dots([], EndLoc, Cur, Acc) ->
    lists:reverse([lists:reverse([{dot, EndLoc} | Cur]) | Acc]);
split_dots([{dot, _} = Dot | Rest], EndLoc, Cur, Acc) ->
    split_dots(Rest, EndLoc, [], [lists:reverse([Dot | Cur]) | Acc]);
split_dots([T | Rest], EndLoc, Cur, Acc) ->
    split_dots(Rest, EndLoc, [T | Cur], Acc).

error_info(Loc, Mod, Desc) ->
    Where = case Loc of
                {L, C} -> fmt("eval:~b:~b: ", [L, C]);
                L when is_integer(L) -> fmt("eval:~b: ", [L]);
                _ -> <<"eval: ">>
            end,
    What = safe(fun() -> fmt("~ts", [Mod:format_error(Desc)]) end,
                fmt("~tP", [Desc, ?MAX_DEPTH])),
    <<Where/binary, What/binary>>.

render_value(elixir, Value) ->
    safe(fun() ->
                 'Elixir.Kernel':inspect(Value, [{pretty, true}, {limit, 100},
                                                 {printable_limit, 4096}, {width, 98}])
         end,
         fmt("~tP", [Value, 60]));
render_value(erlang, Value) ->
    fmt("~tP", [Value, 60]).

%% Drop the evaluator's own frames (the oldest ones), like the shell does.
trim_stack(Stack) when is_list(Stack) ->
    lists:reverse(lists:dropwhile(fun internal_frame/1, lists:reverse(Stack)));
trim_stack(Stack) ->
    Stack.

%% (Elixir 1.20 runs evaluated code compiled, as `elixir_compiler:'__FILE__'/1' frames)
internal_frame({_, '__FILE__', _, _}) ->
    true;
internal_frame({M, _, _, _}) ->
    lists:member(M, [?MODULE, os_sup_lib_call, os_sup_helper_own, erl_eval, elixir, elixir_eval, 'Elixir.Code',
                     'Elixir.Module.ParallelChecker']);
internal_frame(_) ->
    false.

%% -> {Kind, Message, Stacktrace}
describe_exception(elixir, Class, Reason, Stack) ->
    Kind = exception_kind(Class, Reason),
    Message = safe(fun() -> elixir_message(Class, Reason, Stack) end,
                   fmt("~tP", [Reason, ?MAX_DEPTH])),
    Trace = case Stack of
                [] -> <<>>;
                _ -> safe(fun() -> iolist_to_binary('Elixir.Exception':format_stacktrace(Stack)) end,
                          fmt("~tP", [Stack, ?MAX_DEPTH]))
            end,
    {Kind, Message, Trace};
describe_exception(erlang, Class, Reason, Stack) ->
    %% `error:badarith' as the shell's `catch' shows it, then the shell's explanation.
    Head = fmt("~ts:~tP", [Class, Reason, ?MAX_DEPTH]),
    Explained = safe(fun() ->
                             Trim = fun(_, _, _) -> true end,
                             unicode:characters_to_binary(
                               erl_error:format_exception(Class, Reason, Stack,
                                                          #{stack_trim_fun => Trim}))
                     end,
                     <<>>),
    Message = case string:trim(Explained) of
                  <<>> -> Head;
                  Text -> <<Head/binary, "\n", Text/binary>>
              end,
    Trace = case Stack of
                [] -> <<>>;
                _ -> fmt("~tP", [Stack, ?MAX_DEPTH])
            end,
    {Class, Message, Trace}.

exception_kind(error, #{'__struct__' := S}) when S =:= 'Elixir.SyntaxError';
                                                 S =:= 'Elixir.TokenMissingError';
                                                 S =:= 'Elixir.MismatchedDelimiterError' ->
    syntax;
exception_kind(error, #{'__struct__' := 'Elixir.CompileError'}) ->
    compile;
exception_kind(Class, _) ->
    Class.

%% Syntax and compile errors are named by their kind; everything else as Elixir prints it:
%% `** (KeyError) key :a not found in: %{}', `** (throw) :x', `** (exit) :normal'.
elixir_message(error, #{'__struct__' := S} = Reason, Stack)
  when S =:= 'Elixir.SyntaxError'; S =:= 'Elixir.TokenMissingError';
       S =:= 'Elixir.MismatchedDelimiterError'; S =:= 'Elixir.CompileError' ->
    Exception = 'Elixir.Exception':normalize(error, Reason, Stack),
    iolist_to_binary('Elixir.Exception':message(Exception));
elixir_message(Class, Reason, Stack) ->
    iolist_to_binary('Elixir.Exception':format_banner(Class, Reason, Stack)).

%% The exception's name, what an agent acts on: the Elixir exception module (`KeyError'), or
%% for Erlang `Class:Tag' (`error:badarith', `error:badmatch'); undefined when not an error.
exception_name(elixir, error, Reason, Stack) ->
    safe(fun() ->
                 #{'__struct__' := Module} = 'Elixir.Exception':normalize(error, Reason, Stack),
                 iolist_to_binary('Elixir.Kernel':inspect(Module))
         end, undefined);
exception_name(_, Class, Reason, _) ->
    Tag = case Reason of
              T when is_atom(T) -> T;
              T when is_tuple(T), tuple_size(T) > 0, is_atom(element(1, T)) -> element(1, T);
              _ -> undefined
          end,
    case Tag of
        undefined -> atom_to_binary(Class, utf8);
        _ -> fmt("~ts:~ts", [Class, Tag])
    end.

%%%===================================================================
%%% Private: capture IO server
%%%===================================================================

io_request({put_chars, Enc, Chars}, S) ->
    put_chars(fun() -> to_utf8(Enc, Chars) end, S);
io_request({put_chars, Enc, M, F, A}, S) ->
    put_chars(fun() -> to_utf8(Enc, apply(M, F, A)) end, S);
io_request({put_chars, Chars}, S) ->
    put_chars(fun() -> to_utf8(latin1, Chars) end, S);
io_request({put_chars, M, F, A}, S) ->
    put_chars(fun() -> to_utf8(latin1, apply(M, F, A)) end, S);
io_request({requests, Reqs}, S) when is_list(Reqs) ->
    io_requests(Reqs, {ok, S});
io_request({get_chars, _, _}, S) -> {eof, S};
io_request({get_chars, _, _, _}, S) -> {eof, S};
io_request({get_line, _}, S) -> {eof, S};
io_request({get_line, _, _}, S) -> {eof, S};
io_request({get_until, _, _, _}, S) -> {eof, S};
io_request({get_until, _, _, _, _, _}, S) -> {eof, S};
io_request(getopts, S) -> {[{binary, true}, {encoding, unicode}], S};
io_request(_, S) -> {{error, enotsup}, S}.

io_requests([], {Reply, S}) ->
    {Reply, S};
io_requests([Req | Rest], {ok, S}) ->
    io_requests(Rest, io_request(Req, S));
io_requests(_, {Reply, S}) ->
    {Reply, S}.

put_chars(Convert, #{max := Max, acc := Acc, kept := Kept, total := Total} = S) ->
    try Convert() of
        Bin when is_binary(Bin) ->
            Size = byte_size(Bin),
            Keep = min(Size, max(0, Max - Kept)),
            Acc1 = case Keep of
                       0 -> Acc;
                       _ -> [binary:part(Bin, 0, Keep) | Acc]
                   end,
            {ok, S#{acc := Acc1, kept := Kept + Keep, total := Total + Size}}
    catch
        _:_ -> {{error, {error, put_chars}}, S}
    end.

to_utf8(Enc, Chars) when Enc =:= unicode; Enc =:= utf8 ->
    checked(unicode:characters_to_binary(Chars));
to_utf8(_, Chars) ->
    checked(unicode:characters_to_binary(Chars, latin1, utf8)).

checked(Bin) when is_binary(Bin) -> Bin.

captured(#{acc := Acc, total := Total}) ->
    {iolist_to_binary(lists:reverse(Acc)), Total}.
