%%% @doc `os_sup_diagnose_crashes' finds what crashed, for `diagnose': children the
%%% application's supervisors restarted (counted per child, with the first and the latest
%%% reason and the function a reason names), and temporary children that crashed and that
%%% nothing will start again (`lost').
%%%
%%% Reads the log keeper's counts (`os_sup_log_stats'); the only call it makes is
%%% `supervisor:get_childspec/2', asked only of an OTP supervisor, under a deadline.
-module(os_sup_diagnose_crashes).

-import(os_sup_lib_text, [fmt/2, cut_bin/2]).

%% API
-export([restarts/2, lost/1]).

-define(CHILDSPEC_MS, 500).

%%%===================================================================
%%% API
%%%===================================================================

restarts(#{restarts := #{total := 0}}, _Ctx) -> [];
restarts(#{restarts := #{total := Total, last_5m := Recent} = R}, Ctx) ->
    Children = maps:get(children, R, []),
    GaveUp = maps:get(gave_up, R, []),
    Head = fmt("restarts: ~b since start, ~b in the last 5 min", [Total, Recent]),
    {Detail, Frame} =
        case Children of
            [Last | _] ->
                {[["; ", child_restarts(C), restart_reasons(C)]
                  || C <- lists:sublist(Children, 3)],
                 case maps:get(start, Last, undefined) of
                     {M, _, _} -> {module_name(M), reason_function(M, last_crash(Last))};
                     undefined -> undefined
                 end};
            [] -> {<<>>, undefined}
        end,
    Gave = case GaveUp of
               [#{supervisor := GS} | _] -> fmt("; ~ts GAVE UP", [GS]);
               [] -> <<>>
           end,
    Found = os_sup_diagnose:finding(restarts, {Head, [Gave, Detail]}, next(Children),
                                    undefined, Frame, Ctx),
    %% Which children, so that restarts another finding causes (a deadlock's members timing
    %% out) are told as part of it.
    [Found#{facts := #{restarts => Total, restarts_5m => Recent},
            keys := #{children => [[C, N] || #{child := C, count := N} <- Children],
                      gave_up => GaveUp =/= []}}].

%% The call that reads the newest report of the child restarted last (its crash, or its
%% supervisor's report of its end; alike reports come folded into one), not the last ten lines.
next([Child | _]) ->
    {logs, [{<<"min_level">>, <<"error">>}, {<<"grep">>, child_pattern(Child)}, {<<"tail">>, 1}]};
next([]) ->
    {logs, [{<<"min_level">>, <<"error">>}, {<<"tail">>, 5}]}.

%% A child's name as its reports write it: an unnamed child, named by its start function, by
%% its module and function, which match `DemoApp.Worker.start_link(1)' and
%% `{worker,start_link,[1]}' alike; a named one by its name.
child_pattern(#{unnamed := true, start := {M, F, _}}) ->
    <<(regex_quote(module_name(M)))/binary, ".{0,3}",
      (regex_quote(atom_to_binary(F, utf8)))/binary>>;
child_pattern(#{child := Child}) ->
    regex_quote(Child).

%% `Text' as a regular expression that matches it literally.
regex_quote(Text) ->
    << <<(case lists:member(C, "\\^$.|?*+()[]{}") of
              true -> <<"\\", C>>;
              false -> <<C>>
          end)/binary>> || <<C>> <= Text >>.

%% `Sup restarted Child 6×': every child counted apart (at most three, the one that crashed
%% most recently first), each with its reasons.
child_restarts(#{supervisor := Sup, child := Child, count := N}) ->
    fmt("~ts restarted ~ts ~b×", [Sup, Child, N]).

%% The first crash's reason (what started it) and the latest, or the one when they are alike
%% (compared as facts: the reason and where it was raised).
restart_reasons(C) ->
    Last = last_crash(C),
    case os_sup_log_stats:crash(maps:get(first_crash, C, Last)) of
        Last -> [", last: ", cut_reason(Last, 80)];
        First -> [", first: ", cut_reason(First, 50), ", last: ", cut_reason(Last, 50)]
    end.

%% A child's latest crash (`os_sup_log_stats:crash/1'; a child of an earlier helper's summary
%% has only its text).
last_crash(#{last_crash := Crash}) -> os_sup_log_stats:crash(Crash);
last_crash(#{last_reason := Text}) -> os_sup_log_stats:crash(Text).

%% A crash's reason cut to `Max' bytes, then its place in the code whole
%% (`… at Mod.fun/2 lib/x.ex:9').
cut_reason(#{message := Message, frame := Frame}, Max) ->
    <<(cut_bin(Message, Max))/binary, (os_sup_log_stats:at(Frame))/binary>>.

%% The function of module `M' (the child's start module) its crash's reason names (`named',
%% read from the reason's term), else the one the crash was raised in when that is `M''s (its
%% frame), or undefined. A crash an earlier helper kept as text only has neither.
reason_function(M, #{frame := Frame} = Crash) ->
    case {maps:get(named, Crash, undefined), Frame} of
        {{F, A}, _} ->
            function_text(F, A);
        {undefined, {M, F, A, _File, _Line}} when is_atom(F), is_integer(A) ->
            function_text(F, A);
        _ ->
            undefined
    end.

function_text(F, A) ->
    iolist_to_binary([atom_to_binary(F, utf8), "/", integer_to_binary(A)]).

%% A module's name as the site gives it: an Elixir module without `Elixir.'.
module_name(M) ->
    case atom_to_binary(M, utf8) of
        <<"Elixir.", Name/binary>> -> Name;
        Name -> Name
    end.

%% Temporary children that exited with an error and that their supervisor no longer knows (a
%% simple_one_for_one's template stays; a DynamicSupervisor's children are not asked about).
lost(#{fmt := Fmt} = Ctx) ->
    Exits = lists:ukeysort(1, [{{Sup, Id}, E} || #{supervisor := Sup, id := Id} = E
                                                    <- os_sup_log_stats:temporary_exits(),
                                                Id =/= undefined]),
    Gone = [E || {_, E} <- Exits, gone(E)],
    [begin
         {At, Next, Where} =
             case Frame of
                 {M, F, A, File, Line} ->
                     MFA = os_sup_lib_render:mfa({M, F, A}, Fmt),
                     {fmt(" in ~ts (~ts:~w)", [MFA, File, Line]),
                      {source, [{<<"target">>, MFA}]}, #{mfa => {M, F, A}}};
                 _ -> {<<>>, {logs, [{<<"min_level">>, <<"error">>}, {<<"tail">>, 10}]},
                       undefined}
             end,
         Found = os_sup_diagnose:finding(lost,
                 [fmt("lost: ~ts, a temporary child of ~ts, crashed ~ts ago~ts and nothing "
                      "restarts it: ", [os_sup_lib_render:term(Id, Fmt, 80), sup_name(Sup, Fmt),
                                        age(Age), At]), Reason],
                 Next, undefined, Where, Ctx),
         Found#{facts := case is_integer(Age) of
                              true -> #{age_ms => Age};
                              false -> #{}
                          end}
     end
     || #{supervisor := Sup, id := Id, reason := Reason, age_ms := Age} = Exit
            <- lists:sublist(lists:sort(fun(X, Y) -> maps:get(age_ms, X) =< maps:get(age_ms, Y) end,
                                        Gone), 2),
        Frame <- [maps:get(frame, Exit, undefined)]].

gone(#{supervisor := Ref, id := Id}) ->
    Sup = case Ref of
              {local, Name} -> whereis(Name);
              {Pid, _Module} when is_pid(Pid) -> Pid;
              _ -> undefined
          end,
    is_pid(Sup) andalso node(Sup) =:= node() andalso otp_supervisor(Sup) andalso
        os_sup_lib_call:call_with_deadline({supervisor, get_childspec, [Sup, Id]}, ?CHILDSPEC_MS)
            =:= {ok, {error, not_found}}.

otp_supervisor(Pid) ->
    case os_sup_lib_proc:dict_initial_call(os_sup_lib_proc:proc_dict(Pid)) of
        {supervisor, _, _} -> true;
        _ -> false
    end.

sup_name({local, Name}, Fmt) -> os_sup_lib_render:name(Name, Fmt);
sup_name({_Pid, Module}, Fmt) when is_atom(Module) -> os_sup_lib_render:name(Module, Fmt);
sup_name(Other, Fmt) -> os_sup_lib_render:term(Other, Fmt, 80).

age(Ms) when is_integer(Ms), Ms < 1000 -> <<"<1 s">>;
age(Ms) when is_integer(Ms), Ms < 120000 -> fmt("~b s", [Ms div 1000]);
age(Ms) when is_integer(Ms) -> fmt("~b min", [Ms div 60000]);
age(_) -> <<"?">>.
