%%% @doc `os_sup_log_stats' counts what the node's log says about its health,
%%% for `status' and the health report. It counts error-level events, the
%%% restarts its supervisors made (which supervisor, which child, how many
%%% times, the last reason) and the supervisors that gave up.
%%%
%%% The keeper of `os_sup_log_handler' (`os_sup_log_keeper') calls {@link
%%% record/3} with every logger event it receives, before any of them is
%%% hidden or folded (supervisor reports count restarts), and {@link
%%% shown/1} with the level of each event it keeps, so error-level events
%%% are counted as `logs' shows them (a crash once, not with its echoes); the counts live in a protected ETS table the keeper
%%% owns, so {@link summary/1} is an ETS read from any process, never a
%%% call. Every part is bounded: the last 200 restarts, 20 give-ups and 500
%%% distinct children are kept, reasons are rendered at most 200 bytes when
%%% they are recorded.
%%%
%%% A restart is a supervisor's `child_terminated' report about a child
%%% that is not `temporary' (a temporary child is not restarted); a
%%% supervisor gives up with its `shutdown' report
%%% (`reached_max_restart_intensity').
-module(os_sup_log_stats).

%% API
-export([record/3, shown/1, summary/1, temporary_exits/0, restarted_children/0]).
%% A crash's reason, kept as its facts and written once (`crash/1', `crash_text/1', `at/1').
-export([crash/1, crash_text/1, at/1]).
-export_type([crash/0]).

%% A child's crash: its reason rendered (`RuntimeError: boom') and where in the application's
%% code it was raised (`{M, F, A, File, Line}'), apart: compared and cut as facts, written
%% whole only when shown; and the function of the child's start module its reason names
%% (`{F, Arity}': a stack entry or an `{M, F, A}' in the term, read where the supervisor reports
%% it), or undefined.
-type crash() :: #{message := binary(), frame := tuple() | undefined,
                   named => {atom(), arity()} | undefined}.

-define(TABLE, os_sup_log_stats).
-define(RING, 200).
-define(GAVE_UP_RING, 20).
-define(TEMPORARY_RING, 20).
-define(MAX_CHILDREN, 500).
-define(SHOWN_CHILDREN, 10).
-define(RECENT_MS, 300000).
-define(REASON_BYTES, 200).
%% the times of the last error-level events kept (for the count of the last 5 minutes)
-define(ERROR_RING, 500).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Counts one logger event's supervisor report, if it is one; the table is created (owned
%% by the caller, the keeper) on the first. Never raises.
-spec record(logger:level(), term(), map()) -> ok.
record(_Level, Msg, _Meta) ->
    try
        table(),
        record_report(Msg),
        ok
    catch
        _:_ -> ok
    end.

%% @doc Counts one event of `Level' kept for `logs' (error-level ones only). Never raises.
-spec shown(logger:level()) -> ok.
shown(Level) ->
    try
        table(),
        case logger:compare_levels(Level, error) of
            lt -> ok;
            _ ->
                N = ets:update_counter(?TABLE, errors, 1),
                ets:insert(?TABLE, {{error_at, N rem ?ERROR_RING}, erlang:monotonic_time(millisecond)})
        end,
        ok
    catch
        _:_ -> ok
    end.

%% @doc Error-level events (and those of the last 5 minutes: at most the last 500 are timed)
%% and supervisor restarts since the keeper started, rendered in `Fmt'.
%% `children': at most 10, the most recently restarted first.
-spec summary(os_sup_lib_render:fmt()) ->
          #{errors := non_neg_integer(), errors_last_5m := non_neg_integer(),
            last_error_age_ms := non_neg_integer() | undefined,
            restarts := #{total := non_neg_integer(), last_5m := non_neg_integer(),
                          since_ms := integer(),
                          children := [#{supervisor := binary(), child := binary(),
                                         start := mfa() | undefined, unnamed := boolean(),
                                         count := pos_integer(), last_5m := non_neg_integer(),
                                         last_reason := binary(), last_crash := crash(),
                                         first_crash := crash(), last_at_ms := integer()}],
                          gave_up := [#{supervisor := binary(), reason := binary(),
                                        at_ms := integer()}]}}.
summary(Fmt) ->
    try
        case ets:whereis(?TABLE) of
            undefined -> empty();
            _ -> read(Fmt)
        end
    catch
        _:_ -> empty()
    end.

%% @doc The temporary children that exited with an error, newest first: their supervisor as
%% the report names it (`{local, Name}', `{Pid, Module}'...), their id, the reason rendered,
%% where in the application's code it crashed (`{M, F, A, File, Line}' or undefined) and how
%% long ago. Never raises.
-spec temporary_exits() -> [#{supervisor := term(), id := term(), reason := binary(),
                              frame := tuple() | undefined, age_ms := non_neg_integer()}].
temporary_exits() ->
    try
        Now = erlang:monotonic_time(millisecond),
        Exits = ets:match(?TABLE, {{temporary, '_'}, '$1', '$2', '$3', '$4', '$5'}),
        [#{supervisor => Sup, id => Id, reason => Reason, frame => Frame, age_ms => Now - At}
         || [At, Sup, Id, Reason, Frame] <- lists:reverse(lists:sort(Exits))]
    catch
        _:_ -> []
    end.

%% @doc Every child counted (at most 500): its supervisor (its registered name, or its pid when
%% it has none), its id as the supervisor's report gives it (an unnamed child's start MFA),
%% how often it was restarted, the last reason and how long ago. Never raises.
-spec restarted_children() -> [#{supervisor := atom() | pid(), child := term(),
                                  count := pos_integer(), last_reason := binary(),
                                  age_ms := non_neg_integer()}].
restarted_children() ->
    try
        Now = erlang:monotonic_time(millisecond),
        [#{supervisor => supervisor_of(Sup), child => Child, count => Count,
           last_reason => crash_text(Reason), age_ms => Now - At}
         || [Sup, Child, Count, At, Reason]
                <- ets:match(?TABLE, {{child, '$1', '$2'}, '$3', '$4', '$5', '_'})]
    catch
        _:_ -> []
    end.

%%%===================================================================
%%% Private
%%%===================================================================

supervisor_of({Pid, _Module}) when is_pid(Pid) -> Pid;
supervisor_of(Name) -> Name.

table() ->
    case ets:whereis(?TABLE) of
        undefined ->
            _ = ets:new(?TABLE, [named_table, protected, set]),
            ets:insert(?TABLE, [{since, erlang:monotonic_time(millisecond)}, {errors, 0}, {restarts, 0}, {seq, 0},
                                {gave_up_seq, 0}, {children, 0}]);
        _ ->
            true
    end.

record_report({report, #{label := {supervisor, child_terminated}, report := Report}})
  when is_list(Report) ->
    Offender = case lists:keyfind(offender, 1, Report) of
                   {_, O} when is_list(O) -> O;
                   _ -> []
               end,
    case proplists:get_value(restart_type, Offender) of
        temporary ->
            Seq = ets:update_counter(?TABLE, temporary_seq, 1, {temporary_seq, 0}),
            Reason = proplists:get_value(reason, Report),
            ets:insert(?TABLE, {{temporary, Seq rem ?TEMPORARY_RING},
                                erlang:monotonic_time(millisecond),
                                proplists:get_value(supervisor, Report),
                                proplists:get_value(id, Offender), reason(exception(Reason)),
                                crash_frame(Reason)}),
            ok;
        _ ->
            Sup = sup_key(proplists:get_value(supervisor, Report)),
            Child = child_key(Offender),
            Start = start_of(Offender),
            Reason = crash_of(proplists:get_value(reason, Report), Start),
            Now = erlang:monotonic_time(millisecond),
            ets:update_counter(?TABLE, restarts, 1),
            Seq = ets:update_counter(?TABLE, seq, 1),
            ets:insert(?TABLE, {{ring, Seq rem ?RING}, Now, Sup, Child}),
            count_child({child, Sup, Child}, Now, Reason),
            %% The function that starts it, a fact for `crashes' (kept beside the child's row,
            %% which a helper before this one may have written without it).
            case Start =/= undefined andalso ets:member(?TABLE, {child, Sup, Child}) of
                true -> ets:insert(?TABLE, {{child_start, Sup, Child}, Start});
                false -> ok
            end,
            ok
    end;
record_report({report, #{label := {supervisor, shutdown}, report := Report}})
  when is_list(Report) ->
    Seq = ets:update_counter(?TABLE, gave_up_seq, 1),
    ets:insert(?TABLE, {{gave_up, Seq rem ?GAVE_UP_RING}, erlang:monotonic_time(millisecond),
                        sup_key(proplists:get_value(supervisor, Report)),
                        reason(proplists:get_value(reason, Report))}),
    ok;
record_report(_Msg) ->
    ok.

%% Each child's count, its latest crash and reason, and its first reason (what started it).
count_child(Key, Now, Reason) ->
    case ets:lookup(?TABLE, Key) of
        [Row] ->
            %% (a row of a helper before first reasons were kept has none: its last is first)
            ets:insert(?TABLE, {Key, element(2, Row) + 1, Now, Reason,
                                element(tuple_size(Row), Row)});
        [] ->
            case ets:update_counter(?TABLE, children, 1) =< ?MAX_CHILDREN of
                true -> ets:insert(?TABLE, {Key, 1, Now, Reason, Reason});
                false -> ok
            end
    end,
    ok.

%% Where a crash happened in the application's code: the first frame of its stacktrace that
%% is not OTP's or Elixir's, as `{M, F, A, File, Line}'; undefined without one.
crash_frame({_, [{_, _, _, _} | _] = Stack}) ->
    Ctx = #{lib => os_sup_lib_label:lib_modules()},
    case [{M, F, A, proplists:get_value(file, Loc), proplists:get_value(line, Loc)}
          || {M, F, A, Loc} <- Stack, is_atom(M), is_list(Loc),
             not os_sup_lib_label:library(M, Ctx)] of
        [Frame | _] -> Frame;
        [] -> undefined
    end;
crash_frame(_) ->
    undefined.

%% A crash's exception without its stacktrace (its frame is kept apart).
exception({E, [{_, _, _, _} | _]}) -> E;
exception(Reason) -> Reason.

%% A supervisor's name; one without a name stays `{Pid, Module}', rendered by its module and
%% pid (`Supervisor.Default <0.184.0>', see name/2): two unnamed supervisors are told apart,
%% and the pid is one to ask `process_info' or `supervision_tree' about.
sup_key({local, Name}) -> Name;
sup_key({global, Name}) -> Name;
sup_key(Other) -> Other.

%% The function that starts a child, `{M, F, Arity}' of its spec's `mfargs'; undefined
%% without one.
start_of(Offender) ->
    case proplists:get_value(mfargs, Offender) of
        {M, F, A} when is_atom(M), is_atom(F), is_list(A) -> {M, F, length(A)};
        _ -> undefined
    end.

%% A child's start function (`start_of/1', kept when its restart was counted); an unnamed
%% child's id is that function.
child_start(Sup, Child) ->
    case ets:lookup(?TABLE, {child_start, Sup, Child}) of
        [{_, Start}] -> Start;
        [] when is_tuple(Child), tuple_size(Child) =:= 3 -> Child;
        [] -> undefined
    end.

%% A child by its id; an unnamed one (a DynamicSupervisor's, a simple one for one's: id
%% `undefined') by the function that starts it: alike children are counted as one, and no
%% argument of theirs is kept.
child_key(Offender) ->
    case proplists:get_value(id, Offender) of
        undefined ->
            case proplists:get_value(mfargs, Offender) of
                {M, F, A} when is_list(A) -> {M, F, length(A)};
                _ -> undefined
            end;
        Id -> Id
    end.

%% A reason as the language names it: an Elixir exception by its name and message
%% (`RuntimeError: boom'), read from its fields (no callback of the user's runs here, in the
%% reporting process), anything else rendered.
reason(Reason) ->
    Fmt = os_sup_lib_render:format(auto),
    case exception(Reason) of
        #{'__exception__' := true, '__struct__' := S, message := M} when is_binary(M) ->
            os_sup_lib_render:bound(iolist_to_binary([os_sup_lib_render:name(S, Fmt), ": ", M]),
                                ?REASON_BYTES);
        R -> os_sup_lib_render:term(R, Fmt, ?REASON_BYTES)
    end.

%% ... and where in the application's code it was raised, apart, and the function of the
%% child's start module it names (see crash()).
crash_of(Reason, Start) ->
    #{message => reason(Reason), frame => crash_frame(Reason),
      named => case Start of
                   {M, _, _} -> named(M, Reason, 8);
                   undefined -> undefined
               end}.

%% The first function of module `M' that `Term' names, as `{F, Arity}': a stack entry
%% `{M, F, A, Loc}', an MFA `{M, F, A}' (A an arity or the arguments), or an exception's
%% `module', `function' and `arity' (a FunctionClauseError's); looked `Depth' levels deep.
named(_M, _Term, 0) -> undefined;
named(M, {M, F, A, _}, _) when is_atom(F), is_integer(A) -> {F, A};
named(M, {M, F, A, _}, _) when is_atom(F), is_list(A) -> {F, length(A)};
named(M, {M, F, A}, _) when is_atom(F), is_integer(A) -> {F, A};
named(M, {M, F, A}, _) when is_atom(F), is_list(A) -> {F, length(A)};
named(M, #{module := M, function := F, arity := A}, _) when is_atom(F), is_integer(A) -> {F, A};
named(M, Term, Depth) when is_tuple(Term) -> named_in(M, tuple_to_list(Term), Depth - 1);
named(M, Term, Depth) when is_map(Term) -> named_in(M, maps:values(Term), Depth - 1);
named(M, Term, Depth) when is_list(Term) -> named_in(M, Term, Depth - 1);
named(_M, _Term, _Depth) -> undefined.

named_in(M, Terms, Depth) ->
    lists:foldl(fun(T, undefined) -> named(M, T, Depth);
                   (_, Found) -> Found
                end, undefined, lists:sublist(Terms, 64)).

%% @doc A child's crash as `summary/1' gives it (`last_crash', `first_crash'); a row kept by
%% a helper before crashes were kept as facts holds the text: its message, with no frame.
-spec crash(crash() | binary()) -> crash().
crash(#{message := _, frame := _} = Crash) -> Crash;
crash(Text) when is_binary(Text) -> #{message => Text, frame => undefined, named => undefined}.

%% @doc A crash written whole: `RuntimeError: boom at Shop.Cart.add/2 lib/shop/cart.ex:12'.
-spec crash_text(crash() | binary()) -> binary().
crash_text(Crash) ->
    #{message := Message, frame := Frame} = crash(Crash),
    unicode:characters_to_binary([Message, at(Frame)]).

%% @doc Where a crash was raised, written: ` at Shop.Cart.add/2 lib/shop/cart.ex:12', or
%% nothing when that is not known.
-spec at(tuple() | undefined) -> binary().
at({M, F, A, File, Line}) when is_list(File), is_integer(Line) ->
    Fmt = os_sup_lib_render:format(auto),
    unicode:characters_to_binary([" at ", os_sup_lib_render:mfa({M, F, A}, Fmt),
                                  " ", File, ":", integer_to_binary(Line)]);
at(_) ->
    <<>>.

read(Fmt) ->
    Now = erlang:monotonic_time(millisecond),
    Recent = Now - ?RECENT_MS,
    Ring = ets:match(?TABLE, {{ring, '_'}, '$1', '$2', '$3'}),
    RecentBy = os_sup_lib_rank:count([{Sup, Child} || [At, Sup, Child] <- Ring, At >= Recent]),
    Children = [{maps:get({Sup, Child}, RecentBy, 0), At, Sup, Child, Count, Reason, First}
                || [Sup, Child, Count, At, Reason, First]
                       <- ets:match(?TABLE, {{child, '$1', '$2'}, '$3', '$4', '$5', '$6'})],
    Shown = lists:sublist(lists:reverse(lists:sort(Children)), ?SHOWN_CHILDREN),
    GaveUp = lists:reverse(lists:sort(ets:match(?TABLE, {{gave_up, '_'}, '$1', '$2', '$3'}))),
    ErrorTimes = [At || [At] <- ets:match(?TABLE, {{error_at, '_'}, '$1'})],
    #{errors => counter(errors),
      errors_last_5m => length([At || At <- ErrorTimes, At >= Recent]),
      last_error_age_ms => case ErrorTimes of
                               [] -> undefined;
                               _ -> Now - lists:max(ErrorTimes)
                           end,
      restarts =>
          #{total => counter(restarts),
            last_5m => lists:sum(maps:values(RecentBy)),
            since_ms => counter(since) + erlang:time_offset(millisecond),
            children => [#{supervisor => name(Sup, Fmt), child => name(Child, Fmt),
                           start => Start, unnamed => Start =/= undefined andalso Child =:= Start,
                           count => Count, last_5m => N, last_reason => crash_text(Reason),
                           first_reason => crash_text(First),
                           last_crash => crash(Reason), first_crash => crash(First),
                           last_at_ms => At + erlang:time_offset(millisecond)}
                         || {N, At, Sup, Child, Count, Reason, First} <- Shown,
                            Start <- [child_start(Sup, Child)]],
            gave_up => [#{supervisor => name(Sup, Fmt), reason => Reason,
                          at_ms => At + erlang:time_offset(millisecond)}
                        || [At, Sup, Reason] <- GaveUp]}}.

empty() ->
    #{errors => 0, errors_last_5m => 0, last_error_age_ms => undefined,
      restarts => #{total => 0, last_5m => 0,
                    since_ms => erlang:system_time(millisecond), children => [],
                    gave_up => []}}.

counter(Key) ->
    case ets:lookup(?TABLE, Key) of
        [{_, N}] -> N;
        [] -> 0
    end.

name(A, Fmt) when is_atom(A) -> os_sup_lib_render:name(A, Fmt);
name(Label, _Fmt) when is_binary(Label) -> Label;
name({Pid, Module}, Fmt) when is_pid(Pid), is_atom(Module) ->
    iolist_to_binary([os_sup_lib_render:name(Module, Fmt), " ", os_sup_lib_render:pid(Pid, Fmt)]);
name({M, F, A}, Fmt) when is_atom(M), is_atom(F), is_integer(A) ->
    os_sup_lib_render:mfa({M, F, A}, Fmt);
name(X, Fmt) -> os_sup_lib_render:term(X, Fmt, 128).
