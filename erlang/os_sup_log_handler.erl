%%% @doc `os_sup_log_handler' forwards the node's OTP `logger' events to the
%%% `os_sup_mcp' server. So an agent can read what the node logged (crash
%%% and supervisor reports included) from the node's first moments until
%%% after it died. This module holds the API and the handler; the
%%% work is split by concern:
%%% <ul>
%%%   <li>`os_sup_log_keeper': the keeper, one process registered as
%%%       `os_sup_logger_keeper' that keeps the events (the last 1000
%%%       while nobody is subscribed), sends them to the subscriber, and
%%%       puts the handler back when it is removed or reconfigured.</li>
%%%   <li>`os_sup_log_render': each event as one line in the node's
%%%       language (Elixir's translators when its Logger is loaded), in a
%%%       renderer bounded in time and heap.</li>
%%% </ul>
%%%
%%% == Handler ==
%%% A standard `logger' handler, id `os_sup_mcp', module `os_sup_log_handler':
%%% {@link log/2} and {@link filter_config/1}. `log/2' runs in the
%%% process that logs, so it does little: it sends the event (level,
%%% message, a few metadata keys) to the local keeper, as it is when it
%%% is small (`MAX_WORDS' heap words), else cut to about that size first
%%% (lists, tuples and maps keep their first `MAX_ITEMS' elements, each
%%% with a fair share of the budget, so a huge state cannot crowd out the
%%% crash reason). It only sends to the local keeper (never blocks); when
%%% 5000 events (`MAX_QUEUED') already wait in the keeper's mailbox it
%%% drops the event and counts it (a warning or worse only past twice that). It never logs and never fails. Events
%%% logged while the keeper renders one (metadata `os_sup_render') are
%%% dropped: they would loop.
%%%
%%% == Primary filter ==
%%% Elixir's Logger (1.15 and later) puts its translator in front of every
%%% handler as a primary filter (`logger_translator'): it stops OTP's
%%% `sasl' reports (supervisor and crash reports) unless
%%% `handle_sasl_reports', and turns the other reports into text. A
%%% handler then never sees the supervisor reports that count restarts,
%%% nor the report labels that tell one crash from its echoes. So the
%%% events come from a primary filter too, id `os_sup_mcp', {@link filter/2}:
%%% it sends each event as it was logged (like `log/2', same bounds; not
%%% below the logging process's `Logger.put_process_level/2') and
%%% leaves it as it is (`ignore'); the keeper applies Logger's rules
%%% (hidden sasl reports, its translators) when it renders. Primary
%%% filters run newest first: the keeper puts ours back in front when
%%% Logger's translator is ahead of it. While the filter is installed the
%%% handler forwards nothing; it stays as the marker the keeper checks.
%%%
%%% == Console ==
%%% Every event reaches the server through the handler, so on the nodes
%%% it boots ({@link start/0}) the node's own console echo of the same
%%% events is quieted (else `logs' shows each crash twice): OTP's
%%% `default' handler, when it writes to standard_io or standard_error,
%%% gets level `none' once our handler is in place; Elixir's Logger up to
%%% 1.14 starts without its console backend (`backends' set to `[]'
%%% before the application loads, unless a `-config' file of the node sets
%%% it; a Mix project's `config :logger, backends: ...' is applied later
%%% by Mix and wins); since 1.15 Logger's console is that `default'
%%% handler, added again at each start of Logger: the keeper quiets it
%%% within 5 ms unless the configuration asks for a console
%%% ({@link loud_console/0}). What the program prints still goes to
%%% stdout. Attached nodes are left as they are.
%%%
%%% == Code reload ==
%%% The keeper runs in `os_sup_log_keeper' (see its Code reload). Earlier
%%% versions named this module `os_sup_logger': a node that still runs one
%%% keeps that module loaded, and its keeper goes on through it.
-module(os_sup_log_handler).

%% API
-export([start/0, subscribe/1, stop/0, status/0]).
%% logger handler callback, and the primary filter
-export([log/2, filter_config/1, filter/2]).
%% Internal: quiets the console echo of Elixir 1.15+'s Logger (spawned by the keeper).
-export([quiet_console/0, loud_console/0]).

%% the handler's id (os_sup_log_keeper's HANDLER)
-define(HANDLER, os_sup_mcp).
%% an event bigger than this (heap words) is cut in the handler before it is sent
-define(MAX_WORDS, 16384).
%% elements kept per list, tuple or map of an event that is cut
-define(MAX_ITEMS, 64).
%% metadata the keeper uses
-define(META_KEYS, [pid, mfa, line, file, domain, report_cb, error_logger, logger_formatter,
                    time, os_sup_eval]).
%% events waiting in the keeper's mailbox before the handler drops new ones
-define(MAX_QUEUED, 5000).
%% deadlines
-define(START_MS, 1000).
-define(SUBSCRIBE_MS, 4000).
-define(STOP_MS, 2000).
%% counters shared by the handler and the keeper (os_sup_log_keeper's QUEUED and OVERLOAD)
-define(QUEUED, 1).
-define(OVERLOAD, 2).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Starts the keeper (if needed), waits up to ?START_MS for the handler, then quiets the
%% node's console echo of logger events (see Console). Called at boot on the nodes the server
%% starts; never raises.
-spec start() -> ok | {error, term()}.
start() ->
    try
        Console = try quiet_elixir_console() catch _:_ -> undefined end,
        case os_sup_log_keeper:ensure() of
            {ok, Keeper} ->
                case os_sup_log_keeper:request(Keeper, installed, ?START_MS) of
                    ok ->
                        _ = try quiet_default_handler() catch _:_ -> ok end,
                        _ = Console =:= default_handler
                            andalso os_sup_log_keeper:request(Keeper, quiet_console, ?START_MS),
                        ok;
                    Error ->
                        Error
                end;
            Error ->
                Error
        end
    catch
        Class:Reason -> {error, {Class, Reason}}
    end.

%% @doc Sends the events kept so far, then every new one, to `Pid'; `ok' once the handler is
%% verified installed.
-spec subscribe(pid()) -> ok | {error, term()}.
subscribe(Pid) when is_pid(Pid) ->
    case os_sup_log_keeper:ensure() of
        {ok, Keeper} -> os_sup_log_keeper:request(Keeper, {subscribe, Pid}, ?SUBSCRIBE_MS);
        Error -> Error
    end.

%% @doc Removes the handler and stops the keeper (bounded: ?STOP_MS each); always `ok'.
-spec stop() -> ok.
stop() ->
    case os_sup_log_keeper:running() of
        Keeper when is_pid(Keeper) ->
            case os_sup_log_keeper:request(Keeper, stop, ?STOP_MS) of
                ok -> ok;
                _ ->
                    exit(Keeper, kill),
                    remove_handler()
            end;
        undefined ->
            remove_handler()
    end,
    ok.

%% @doc The keeper's state: subscriber, events buffered and lost, whether the handler is on.
-spec status() -> {ok, map()} | {error, term()}.
status() ->
    case os_sup_log_keeper:running() of
        Keeper when is_pid(Keeper) ->
            case os_sup_log_keeper:request(Keeper, status, ?START_MS) of
                Status when is_map(Status) -> {ok, Status};
                Error -> Error
            end;
        undefined ->
            {error, not_started}
    end.

%%%===================================================================
%%% logger handler callback
%%%===================================================================

%% @doc Hands one event (cut when it is big) to the keeper, unless the primary filter did
%% (see Primary filter); never fails, never blocks.
-spec log(logger:log_event(), logger:handler_config()) -> ok.
log(Event, #{config := #{keeper := Keeper, counters := Counters}}) ->
    case filter_installed() of
        true -> ok;
        false -> forward(Event, Keeper, Counters)
    end;
log(_Event, _Config) ->
    ok.

%% @doc The primary filter: hands the event, as it was logged, to the keeper and lets it go on
%% unchanged (`ignore'); never fails, never blocks.
-spec filter(logger:log_event(), #{keeper := pid(), counters := counters:counters_ref()}) ->
          ignore.
filter(#{level := Level} = Event, #{keeper := Keeper, counters := Counters}) ->
    _ = process_allows(Level) andalso forward(Event, Keeper, Counters),
    ignore;
filter(_Event, _Extra) ->
    ignore.

%% @doc What `logger:get_handler_config/1' shows of the handler: all of it (the keeper checks
%% it every 300 ms; without this callback each check would raise `undef' inside logger).
-spec filter_config(logger:handler_config()) -> logger:handler_config().
filter_config(Config) ->
    Config.

%%%===================================================================
%%% Private: forwarding an event (in the process that logs)
%%%===================================================================

forward(#{meta := #{os_sup_render := true}}, _Keeper, _Counters) ->
    ok;
forward(#{level := Level, msg := Msg, meta := Meta}, Keeper, Counters) ->
    try
        %% (warnings and worse have room of their own: chatter never crowds out a crash)
        Max = case logger:compare_levels(Level, warning) of
                  lt -> ?MAX_QUEUED;
                  _ -> 2 * ?MAX_QUEUED
              end,
        case counters:get(Counters, ?QUEUED) < Max of
            true ->
                {Msg1, Meta1} = fit({Msg, ancestors(Msg, maps:with(?META_KEYS, Meta))}),
                counters:add(Counters, ?QUEUED, 1),
                _ = erlang:send(Keeper, {os_sup_event, Level, Msg1, Meta1},
                                [noconnect, nosuspend]),
                ok;
            false ->
                counters:add(Counters, ?OVERLOAD, 1)
        end
    catch
        _:_ -> ok
    end;
forward(_Event, _Keeper, _Counters) ->
    ok.

%% A process's report of its own end, with its ancestors (`proc_lib''s, read here in the
%% process that ends): `os_sup_log_cascade' names from them what died first.
ancestors({report, #{label := {Behaviour, terminate}}}, Meta)
  when Behaviour =:= gen_server; Behaviour =:= gen_statem ->
    case get('$ancestors') of
        [_ | _] = Ancestors -> Meta#{os_sup_ancestors => lists:sublist(Ancestors, 16)};
        _ -> Meta
    end;
ancestors(_Msg, Meta) ->
    Meta.

%% Elixir's `Logger.put_process_level/2' (its key in the logging process's dictionary), which
%% Logger's own primary filter applies after ours: an event below it is not ours either.
process_allows(Level) ->
    case get(logger_level) of
        undefined -> true;
        Min -> try logger:compare_levels(Level, Min) =/= lt catch _:_ -> true end
    end.

%% True when our primary filter is installed (an ETS read): it forwards every event.
filter_installed() ->
    try logger:get_primary_config() of
        #{filters := Filters} -> lists:keymember(?HANDLER, 1, Filters);
        _ -> false
    catch
        _:_ -> false
    end.

%%%===================================================================
%%% Private: without a keeper
%%%===================================================================

%% Without a keeper: remove the handler and the primary filter in a throw-away process,
%% waiting at most ?STOP_MS.
remove_handler() ->
    {Pid, MRef} = spawn_monitor(os_sup_log_keeper, uninstall, []),
    receive
        {'DOWN', MRef, process, Pid, _} -> ok
    after ?STOP_MS ->
            erlang:demonitor(MRef, [flush]),
            ok
    end.

%%%===================================================================
%%% Internal entry points: the console (spawned by the keeper)
%%%===================================================================

%% @doc Quiets the console echo of Elixir 1.15+'s Logger (its `default' handler writing to
%% stdout or stderr), unless the configuration asks for a console ({@link loud_console/0}).
%% Run by the keeper in a throw-away process after each start of Logger.
-spec quiet_console() -> ok.
quiet_console() ->
    _ = loud_console() orelse quiet_default_handler(),
    ok.

%% @doc True when Logger's configuration asks for a console: `backends' with `console', or a
%% `default_handler' of its own (the project's config, or a `-config' file).
-spec loud_console() -> boolean().
loud_console() ->
    case application:get_env(logger, backends) of
        {ok, Backends} when is_list(Backends) -> lists:member(console, Backends);
        _ -> false
    end orelse application:get_env(logger, default_handler) =/= undefined.

%%%===================================================================
%%% Private: console
%%%===================================================================

%% Elixir's Logger (application `logger', which OTP does not have: its logger is in kernel),
%% when it is on this node and not loaded yet. Up to Elixir 1.14 it writes to the console
%% through its `console' backend: it starts without it (`backends' set to `[]' persistently
%% before the application loads, so its `.app' defaults do not override it; a later
%% `Application.put_env' (Mix loading the project's config) or a `-config' file setting it
%% still wins): `backends'. Since 1.15 its console is OTP's `default' handler, which it adds
%% itself at each start (Mix restarts Logger just before the application), and `backends' is
%% deprecated (1.19 warns at every start): the keeper quiets that handler each time, unless
%% the project's configuration asks for a console (quiet_console/0): `default_handler'. Told
%% apart by what Logger's application module reads, not by version.
quiet_elixir_console() ->
    case elixir_logger_app() of
        false ->
            none;
        AppBeam ->
            case lists:keymember(logger, 1, application:loaded_applications()) of
                true ->
                    none;
                false ->
                    case reads_default_handler(AppBeam) of
                        true ->
                            default_handler;
                        false ->
                            _ = configured(logger, backends)
                                orelse application:set_env(logger, backends, [],
                                                           [{persistent, true}]),
                            backends
                    end
            end
    end.

%% The object file of Elixir's `Logger.App' on this node, or `false': in the code path (Elixir
%% up to 1.14, a release), or under the `-elixir_root' the `elixir' script passes since 1.15
%% (its `elixir' application adds `logger/ebin' to the path only when it starts, after the
%% helper).
elixir_logger_app() ->
    Beam = "Elixir.Logger.App.beam",
    case code:where_is_file(Beam) of
        non_existing ->
            case init:get_argument(elixir_root) of
                {ok, [[Root] | _]} ->
                    File = filename:join([Root, "logger", "ebin", Beam]),
                    filelib:is_regular(File) andalso File;
                _ ->
                    false
            end;
        File ->
            File
    end.

%% True when this Logger starts OTP's `default' handler from its `default_handler' setting
%% (Elixir 1.15 and later).
reads_default_handler(AppBeam) ->
    case beam_lib:chunks(AppBeam, [atoms]) of
        {ok, {_, [{atoms, Atoms}]}} -> lists:keymember(default_handler, 2, Atoms);
        _ -> false
    end.

%% OTP's `default' handler writing to the node's stdout or stderr (what the server reads):
%% level `none'. A handler writing to a file is the user's log, left alone.
quiet_default_handler() ->
    case logger:get_handler_config(default) of
        {ok, #{module := logger_std_h, level := Level, config := #{type := Type}}}
          when (Type =:= standard_io orelse Type =:= standard_error), Level =/= none ->
            logger:set_handler_config(default, level, none);
        _ ->
            ok
    end.

%% True when a `-config' file of the node (or one it includes) sets `App''s `Key'.
configured(App, Key) ->
    Files = case init:get_argument(config) of
                {ok, Args} -> lists:append(Args);
                error -> []
            end,
    lists:any(fun(File) -> configured(App, Key, File, 1) end, Files).

configured(App, Key, File, Depth) ->
    Path = case filename:extension(File) of
               ".config" -> File;
               _ -> File ++ ".config"
           end,
    case file:consult(Path) of
        {ok, [Terms]} when is_list(Terms) ->
            lists:any(fun({A, Env}) when A =:= App, is_list(Env) -> lists:keymember(Key, 1, Env);
                         (Included) when is_list(Included), Depth > 0 ->
                              io_lib:printable_unicode_list(Included)
                                  andalso configured(App, Key, Included, Depth - 1);
                         (_) -> false
                      end, Terms);
        _ ->
            false
    end.

%%%===================================================================
%%% Private: cutting an event to size (in the handler)
%%%===================================================================

%% `Term' itself when it is small (?MAX_WORDS), else cut to about that size. Costs at most
%% about ?MAX_WORDS steps whatever the size of `Term'.
fit(Term) ->
    case words_left(Term, ?MAX_WORDS) of
        Left when Left >= 0 -> Term;
        _ -> element(1, cut_term(Term, ?MAX_WORDS))
    end.

%% Budget minus the heap words `Term' takes, stopping as soon as it is negative.
words_left(_Term, Budget) when Budget < 0 ->
    Budget;
words_left([H | T], Budget) ->
    words_left(T, words_left(H, Budget - 2));
words_left(T, Budget) when is_tuple(T) ->
    elements_left(T, tuple_size(T), Budget - 1 - tuple_size(T));
words_left(T, Budget) when is_map(T) ->
    pairs_left(maps:next(maps:iterator(T)), Budget - 3 - 2 * map_size(T));
words_left(T, Budget) when is_binary(T) ->
    Budget - binary_words(T);
words_left(T, Budget) when is_function(T) ->
    case erlang:fun_info(T, env) of
        {env, Env} -> words_left(Env, Budget - 6);
        _ -> Budget - 6
    end;
words_left(_Term, Budget) ->
    Budget - 3.

elements_left(_T, 0, Budget) ->
    Budget;
elements_left(_T, _I, Budget) when Budget < 0 ->
    Budget;
elements_left(T, I, Budget) ->
    elements_left(T, I - 1, words_left(element(I, T), Budget)).

pairs_left(none, Budget) ->
    Budget;
pairs_left(_Iter, Budget) when Budget < 0 ->
    Budget;
pairs_left({K, V, Iter}, Budget) ->
    pairs_left(maps:next(Iter), words_left(V, words_left(K, Budget))).

%% A binary over 64 bytes is shared, not copied.
binary_words(Bin) when byte_size(Bin) =< 64 -> 3 + byte_size(Bin) div 8;
binary_words(_Bin) -> 6.

%% `{Cut, BudgetLeft}': lists, tuples and maps keep their first ?MAX_ITEMS elements (then
%% '...'), each element gets a fair share of what is left; what does not fit becomes '...'.
cut_term(_Term, Budget) when Budget =< 0 ->
    {'...', Budget};
cut_term(T, Budget) when is_list(T) ->
    {Items, Tail} = take(T, ?MAX_ITEMS, []),
    {Cut, Left} = cut_items(Items, length(Items), Budget - 1, []),
    case Tail of
        [] ->
            {Cut, Left};
        [_ | _] ->
            {Cut ++ ['...'], Left};
        Improper ->
            {CutTail, Left1} = cut_term(Improper, Left),
            {lists:foldr(fun(E, Acc) -> [E | Acc] end, CutTail, Cut), Left1}
    end;
cut_term(T, Budget) when is_tuple(T) ->
    N = min(tuple_size(T), ?MAX_ITEMS),
    Items = [element(I, T) || I <- lists:seq(1, N)],
    {Cut, Left} = cut_items(Items, N, Budget - 1 - N, []),
    case tuple_size(T) > N of
        true -> {list_to_tuple(Cut ++ ['...']), Left};
        false -> {list_to_tuple(Cut), Left}
    end;
cut_term(T, Budget) when is_map(T) ->
    Pairs = take_pairs(maps:next(maps:iterator(T)), ?MAX_ITEMS, []),
    Flat = lists:append([[K, V] || {K, V} <- Pairs]),
    {Cut, Left} = cut_items(Flat, length(Flat), Budget - 3, []),
    Map = maps:from_list(pairs(Cut)),
    case map_size(T) > length(Pairs) of
        true -> {Map#{'...' => '...'}, Left};
        false -> {Map, Left}
    end;
cut_term(T, Budget) when is_function(T) ->
    case words_left(T, Budget) of
        Left when Left >= 0 -> {T, Left};
        _ -> {'...', Budget - 1}
    end;
cut_term(T, Budget) when is_binary(T) ->
    {T, Budget - binary_words(T)};
cut_term(T, Budget) ->
    {T, Budget - 3}.

cut_items([], _N, Budget, Acc) ->
    {lists:reverse(Acc), Budget};
cut_items([Item | Rest], N, Budget, Acc) ->
    Share = max(1, Budget div N),
    {Cut, Left} = cut_term(Item, Share),
    cut_items(Rest, N - 1, Budget - Share + Left, [Cut | Acc]).

take(Tail, 0, Acc) -> {lists:reverse(Acc), Tail};
take([H | T], N, Acc) -> take(T, N - 1, [H | Acc]);
take(Tail, _N, Acc) -> {lists:reverse(Acc), Tail}.

take_pairs(none, _N, Acc) -> lists:reverse(Acc);
take_pairs(_Iter, 0, Acc) -> lists:reverse(Acc);
take_pairs({K, V, Iter}, N, Acc) -> take_pairs(maps:next(Iter), N - 1, [{K, V} | Acc]).

pairs([K, V | Rest]) -> [{K, V} | pairs(Rest)];
pairs(_) -> [].
