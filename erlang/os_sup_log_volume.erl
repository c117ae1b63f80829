%%% @doc `os_sup_log_volume' counts the lines the node logs, for the health
%%% report: how many a second, by level and by the function that logs them,
%%% and what the logging drops. Log volume is a resource: a process that
%%% writes hundreds of lines a second spends a scheduler formatting them and
%%% fills the queue of every handler.
%%%
%%% == Counting (in the keeper) ==
%%% <ul>
%%%   <li>{@link count/3}: `os_sup_log_keeper' calls it with every logger
%%%       event it receives (before any is hidden or folded). The event is
%%%       counted in the second it was logged (its metadata `time', so a
%%%       keeper that is behind still counts it in its own second), by
%%%       level; unless an `eval' of the server logged it (metadata
%%%       `os_sup_eval': the server's own work, counted apart), also by its
%%%       emitter: the `mfa', `file' and `line' that logger's macros and
%%%       Elixir's Logger put in the metadata (`unknown' without them), with
%%%       the last process that logged there and the start of one of its
%%%       messages.</li>
%%%   <li>{@link dropped/1}: lines the keeper dropped from its buffer (the
%%%       oldest, when 1000 wait for the server).</li>
%%%   <li>{@link keeper_counters/1}: the counters the handler shares with the
%%%       keeper, whose second counts the lines the handler dropped because
%%%       5000 already waited for the keeper.</li>
%%% </ul>
%%% Bounded: a row per second for the last 60 s; per second at most 32
%%% distinct emitters (the rest counted as `other'), kept 10 s; the rows of
%%% seconds gone are deleted once a second. The table is the keeper's
%%% (protected): every read below is an ETS read from any process, never a
%%% call.
%%%
%%% == Reading ==
%%% <ul>
%%%   <li>{@link sample/0}: the totals since the keeper started, by level,
%%%       with the drops and the keeper's backlog; two samples give the rates
%%%       over a window.</li>
%%%   <li>{@link recent/1}: the last N whole seconds: lines by level, per
%%%       second, and the emitters ranked.</li>
%%%   <li>{@link handlers/0}: the backlog of the node's other logger handlers.
%%%       Only what is cheap and safe: each handler's process, found by the
%%%       name `logger_olp' registers for it (`logger_std_h_default', the
%%%       name an existing atom: none is made) or by its id, is asked
%%%       `process_info(P, message_queue_len)', and its overload mode
%%%       (`async', `sync', `drop') is the persistent term `logger_olp' keeps
%%%       it in. No handler is called (`logger_olp:info/1' and
%%%       `sys:get_state/1' are calls, which a busy handler answers late, and
%%%       an unknown process not at all), so its own counts of dropped and
%%%       flushed events are not read.</li>
%%% </ul>
-module(os_sup_log_volume).

%% API: counting (the keeper)
-export([count/3, dropped/1, keeper_counters/1]).
%% API: reading
-export([sample/0, recent/1, handlers/0]).

-define(TABLE, os_sup_log_volume).
%% seconds of counts by level, and of emitters
-define(KEEP_S, 60).
-define(EMIT_KEEP_S, 10).
%% distinct emitters counted per second (the rest are `other')
-define(MAX_EMITTERS, 32).
%% bytes kept of a message's start
-define(SAMPLE_BYTES, 80).
%% handlers looked at
-define(MAX_HANDLERS, 16).
%% the keeper's counters (os_sup_log_keeper's QUEUED and OVERLOAD)
-define(QUEUED, 1).
-define(OVERLOAD, 2).
%% what the server's own handler is called (os_sup_log_handler's HANDLER)
-define(OWN_HANDLER, os_sup_mcp).

-type levels() :: #{error := non_neg_integer(), warning := non_neg_integer(),
                    notice := non_neg_integer(), info := non_neg_integer(),
                    debug := non_neg_integer()}.
-type emitter() :: #{key := {module(), atom(), arity(), binary() | undefined,
                             integer() | undefined} | unknown | other,
                     count := pos_integer(), level := logger:level(), pid := pid() | undefined,
                     sample := binary() | undefined}.
-export_type([levels/0, emitter/0]).

%%%===================================================================
%%% API: counting (called by the keeper, which owns the table)
%%%===================================================================

%% @doc Counts one logger event; the table is created (owned by the caller, the keeper) on the
%% first. Never raises.
-spec count(logger:level(), term(), map()) -> ok.
count(Level, Msg, Meta) ->
    try
        table(),
        Now = os:system_time(second),
        Sec = case Meta of
                  #{time := T} when is_integer(T) -> max(Now - ?KEEP_S, min(Now, T div 1000000));
                  _ -> Now
              end,
        Ops = case maps:get(os_sup_eval, Meta, false) of
                  true -> [{2, 1}, {3, 1}];
                  _ -> [{2, 1}, {level_pos(Level), 1}]
              end,
        _ = ets:update_counter(?TABLE, total, Ops),
        _ = ets:update_counter(?TABLE, {sec, Sec}, Ops, {{sec, Sec}, 0, 0, 0, 0, 0, 0, 0}),
        _ = maps:get(os_sup_eval, Meta, false) =:= true
            orelse emitter(Sec, Level, Msg, Meta),
        prune(Now)
    catch
        _:_ -> ok
    end.

%% @doc Counts `N' lines the keeper dropped from its buffer. Never raises.
-spec dropped(pos_integer()) -> ok.
dropped(N) ->
    try
        table(),
        _ = ets:update_counter(?TABLE, buffer_dropped, N),
        ok
    catch
        _:_ -> ok
    end.

%% @doc Keeps the counters the handler shares with the keeper, to read its backlog and its
%% drops from any process. Never raises.
-spec keeper_counters(counters:counters_ref()) -> ok.
keeper_counters(Counters) ->
    try
        table(),
        case ets:lookup(?TABLE, counters) of
            [{_, Counters}] -> ok;
            _ -> ets:insert(?TABLE, {counters, Counters}), ok
        end
    catch
        _:_ -> ok
    end.

%%%===================================================================
%%% API: reading (any process)
%%%===================================================================

%% @doc The totals since the keeper started: lines (`total', `eval' the server's own, the
%% others by level), the lines the handler dropped because the keeper was behind
%% (`handler_dropped'), those the keeper dropped from its buffer (`buffer_dropped'), and the
%% events waiting for the keeper now (`queued'); `at_ms' monotonic. `counted' is false when
%% nothing is counted (no keeper has run here: its table is made at its first check).
-spec sample() -> #{at_ms := integer(), counted := boolean(),
                    total := non_neg_integer(), eval := non_neg_integer(),
                    levels := levels(), handler_dropped := non_neg_integer(),
                    buffer_dropped := non_neg_integer(), queued := non_neg_integer()}.
sample() ->
    At = erlang:monotonic_time(millisecond),
    try
        [{total, Total, Eval, E, W, N, I, D}] = ets:lookup(?TABLE, total),
        {Queued, Overload} = case ets:lookup(?TABLE, counters) of
                                 [{_, C}] -> {max(0, counters:get(C, ?QUEUED)),
                                              counters:get(C, ?OVERLOAD)};
                                 [] -> {0, 0}
                             end,
        #{at_ms => At, counted => true, total => Total, eval => Eval,
          levels => levels(E, W, N, I, D),
          handler_dropped => Overload, buffer_dropped => ets:lookup_element(?TABLE, buffer_dropped, 2),
          queued => Queued}
    catch
        _:_ ->
            #{at_ms => At, counted => false, total => 0, eval => 0,
              levels => levels(0, 0, 0, 0, 0),
              handler_dropped => 0, buffer_dropped => 0, queued => 0}
    end.

%% @doc The last `Secs' whole seconds (fewer when the keeper started since): how many
%% (`seconds'), the lines of the application (not the server's evals) by level, per second
%% (the newest first: all of them, and those of warnings and worse), and the emitters, most
%% lines first (at most 10; emitters are kept for the last 10 seconds).
-spec recent(pos_integer()) -> #{seconds := non_neg_integer(), levels := levels(),
                                 per_second := [{non_neg_integer(), non_neg_integer()}],
                                 emitters := [emitter()]}.
recent(Secs) ->
    try
        Now = os:system_time(second),
        Since = ets:lookup_element(?TABLE, since, 2),
        From = max(Now - Secs, Since + 1),
        To = Now - 1,
        Rows = lists:sort(ets:select(?TABLE, [{{{sec, '$1'}, '_', '_', '$2', '$3', '$4', '$5', '$6'},
                                               [{'>=', '$1', From}, {'=<', '$1', To}],
                                               [{{'$1', '$2', '$3', '$4', '$5', '$6'}}]}])),
        Sum = fun(Pos) -> lists:sum([element(Pos, R) || R <- Rows]) end,
        Emits = ets:select(?TABLE, [{{{emit, '$1', '$2'}, '$3', '$4', '$5', '$6'},
                                     [{'>=', '$1', From}, {'=<', '$1', To}],
                                     [{{'$1', '$2', '$3', '$4', '$5', '$6'}}]}]),
        #{seconds => max(0, To - From + 1),
          levels => levels(Sum(2), Sum(3), Sum(4), Sum(5), Sum(6)),
          per_second => [{lists:sum([element(P, R) || P <- lists:seq(2, 6)]),
                          element(2, R) + element(3, R)}
                         || S <- lists:seq(To, From, -1),
                            R <- [case lists:keyfind(S, 1, Rows) of
                                      false -> {S, 0, 0, 0, 0, 0};
                                      Row -> Row
                                  end]],
          emitters => ranked(Emits)}
    catch
        _:_ -> #{seconds => 0, levels => levels(0, 0, 0, 0, 0), per_second => [], emitters => []}
    end.

%% @doc The node's logger handlers other than the server's: `id', `module', `level', the
%% process that does its work when one is found (`pid'), its queue (`queue') and its overload
%% mode (`mode': `async', `sync', `drop', or undefined when it keeps none). At most 16.
-spec handlers() -> [#{id := atom(), module := module(), level := term(),
                       pid := pid() | undefined, queue := non_neg_integer() | undefined,
                       mode := atom()}].
handlers() ->
    Configs = try logger:get_handler_config() catch _:_ -> [] end,
    [handler(Id, Module, maps:get(level, C, undefined))
     || #{id := Id, module := Module} = C <- lists:sublist(Configs, ?MAX_HANDLERS),
        Id =/= ?OWN_HANDLER].

%%%===================================================================
%%% Private: counting
%%%===================================================================

table() ->
    case ets:whereis(?TABLE) of
        undefined ->
            _ = ets:new(?TABLE, [named_table, protected, set]),
            Now = os:system_time(second),
            ets:insert(?TABLE, [{total, 0, 0, 0, 0, 0, 0, 0}, {since, Now}, {pruned, Now},
                                {buffer_dropped, 0}]);
        _ ->
            true
    end.

%% Positions of a row `{Key, Total, Eval, Error, Warning, Notice, Info, Debug}'.
level_pos(Level) when Level =:= emergency; Level =:= alert; Level =:= critical;
                      Level =:= error -> 4;
level_pos(warning) -> 5;
level_pos(notice) -> 6;
level_pos(debug) -> 8;
level_pos(_) -> 7.

%% One more line of this emitter in second `Sec'; past ?MAX_EMITTERS emitters in that
%% second, of `other'.
emitter(Sec, Level, Msg, Meta) ->
    Key = {emit, Sec, emitter_key(Meta)},
    case ets:member(?TABLE, Key) of
        true ->
            ets:update_counter(?TABLE, Key, {2, 1});
        false ->
            case ets:update_counter(?TABLE, {distinct, Sec}, 1, {{distinct, Sec}, 0})
                 =< ?MAX_EMITTERS of
                true ->
                    ets:insert(?TABLE, {Key, 1, Level, maps:get(pid, Meta, undefined),
                                        sample(Msg)});
                false ->
                    Other = {emit, Sec, other},
                    ets:update_counter(?TABLE, Other, {2, 1}, {Other, 0, Level, undefined,
                                                               undefined})
            end
    end.

%% The place in the code: what the metadata says (the file as it comes: a charlist or a
%% binary, turned into text only when read).
emitter_key(#{mfa := {M, F, A}} = Meta) when is_atom(M), is_atom(F), is_integer(A) ->
    {M, F, A, maps:get(file, Meta, undefined), maps:get(line, Meta, undefined)};
emitter_key(_Meta) ->
    unknown.

%% The start of a message, copied (never a part of a large binary kept alive): a string, a
%% format (its arguments are not formatted here), or a report's label (and the message a
%% report is about, printed no deeper than 8 levels).
sample({string, S}) -> start(S);
sample({report, #{label := {_, Tag}, report := #{message := Message}}}) when is_atom(Tag) ->
    %% A process told of a message it has no clause for (gen_server's `no_handle_info').
    start(io_lib:format("~0tp: ~0tP", [Tag, Message, 8]));
sample({report, #{label := Label}}) -> start(io_lib:format("~0tp", [Label]));
sample({report, _}) -> <<"(a report)">>;
sample({Format, _Args}) when is_list(Format); is_binary(Format) -> start(Format);
sample(_) -> undefined.

start(Chardata) ->
    try unicode:characters_to_binary(string:slice(Chardata, 0, ?SAMPLE_BYTES)) of
        Bin when is_binary(Bin) ->
            binary:copy(os_sup_lib_render:utf8_trim(binary:part(Bin, 0, min(byte_size(Bin),
                                                                          ?SAMPLE_BYTES))));
        _ -> undefined
    catch
        _:_ -> undefined
    end.

%% Once a second: the rows of seconds no longer kept go.
prune(Now) ->
    case ets:lookup_element(?TABLE, pruned, 2) of
        Now ->
            ok;
        _ ->
            ets:insert(?TABLE, {pruned, Now}),
            Old = Now - ?KEEP_S,
            OldEmit = Now - ?EMIT_KEEP_S,
            _ = ets:select_delete(?TABLE,
                                  [{{{sec, '$1'}, '_', '_', '_', '_', '_', '_', '_'},
                                    [{'<', '$1', Old}], [true]},
                                   {{{emit, '$1', '_'}, '_', '_', '_', '_'},
                                    [{'<', '$1', OldEmit}], [true]},
                                   {{{distinct, '$1'}, '_'}, [{'<', '$1', OldEmit}], [true]}]),
            ok
    end.

%%%===================================================================
%%% Private: reading
%%%===================================================================

levels(E, W, N, I, D) ->
    #{error => E, warning => W, notice => N, info => I, debug => D}.

%% Emitters summed over their seconds, most lines first (the latest process and sample).
ranked(Emits) ->
    Summed = lists:foldl(
               fun({_Sec, Key, Count, Level, Pid, Sample}, Acc) ->
                       case Acc of
                           #{Key := {C0, _, P0, S0}} ->
                               Acc#{Key := {C0 + Count, Level, first_set(Pid, P0),
                                            first_set(Sample, S0)}};
                           _ ->
                               Acc#{Key => {Count, Level, Pid, Sample}}
                       end
               end, #{}, lists:reverse(lists:keysort(1, Emits))),
    Top = lists:sublist(lists:reverse(lists:keysort(2, [{K, C, L, P, S} || {K, {C, L, P, S}}
                                                                              <- maps:to_list(Summed)])),
                        10),
    [#{key => text_key(K), count => C, level => L, pid => P, sample => S} || {K, C, L, P, S} <- Top].

first_set(undefined, Other) -> Other;
first_set(Value, _Other) -> Value.

text_key({M, F, A, File, Line}) ->
    {M, F, A, try unicode:characters_to_binary(File) of
                  B when is_binary(B) -> B;
                  _ -> undefined
              catch _:_ -> undefined
              end, case Line of L when is_integer(L) -> L; _ -> undefined end};
text_key(Key) ->
    Key.

handler(Id, Module, Level) ->
    %% `logger_olp' registers a handler of `logger_h_common' as Module_Id; an atom that does
    %% not exist names no process.
    Olp = try list_to_existing_atom(atom_to_list(Module) ++ "_" ++ atom_to_list(Id))
          catch error:badarg -> undefined
          end,
    Pid = case [P || Name <- [Olp, Id], is_atom(Name), Name =/= undefined,
                     P <- [whereis(Name)], is_pid(P)] of
              [P | _] -> P;
              [] -> undefined
          end,
    Queue = case is_pid(Pid) andalso erlang:process_info(Pid, message_queue_len) of
                {message_queue_len, Q} -> Q;
                _ -> undefined
            end,
    Mode = case Olp of
               undefined -> undefined;
               _ -> try persistent_term:get({logger_olp, Olp}, undefined)
                    catch _:_ -> undefined
                    end
           end,
    #{id => Id, module => Module, level => Level, pid => Pid, queue => Queue, mode => Mode}.
