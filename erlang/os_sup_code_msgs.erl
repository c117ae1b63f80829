%%% @doc `os_sup_code_msgs' answers what a process stuck in a `receive' of the
%%% application's code waits for, and which of the project's functions send it,
%%% for `diagnose': processes that pile up waiting (a leak) end at the code
%%% that should release them, not only where they wait. It reads the receive
%%% clauses and the send sites in the abstract code of `.beam' files
%%% (`os_sup_code_beam', cached per module). Nothing is loaded or compiled.
%%%
%%% It also answers which of the project's messages to a server none of its
%%% callback's clauses take (`handle_info', `handle_cast', `handle_call'), for
%%% a server that holds its callers' calls unanswered.
%%%
%%% == Shapes ==
%%% A message is known by its shape: an atom (`:stop'), or a tuple by its
%%% first element, an atom, and its size (`{:close, _}'). A send is a `send/2'
%%% or `!', `Process.send/3', `Process.send_after/3,4', `erlang:send_after' or
%%% `timer:send_after'/`send_interval',
%%% a cast or a call a `GenServer'/`gen_server' one, whose message is written
%%% as such a term (and its destination, when it is a registered name); a
%%% message built elsewhere and sent as a variable is not seen, and the answer
%%% says so when nothing is.
%%%
%%% == Limits ==
%%% The project's own modules only (`os_sup_code_beam:project/0'); the scan
%%% stops at its deadline and says it is partial; at most ?SENDERS senders.
-module(os_sup_code_msgs).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([waits_for/3, unhandled/3, receive_at/2, send_sites/2]).
%% What `os_sup_code_beam:messages/1' reads (and caches). Not an API.
-export([read/1]).

%% the project's code is searched this long at most
-define(BUDGET_MS, 1000).
-define(SENDERS, 3).
-define(SHAPES, 3).

-type shape() :: atom() | {atom(), pos_integer()}.
-export_type([shape/0]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc What a process waiting in a receive of `{M, F, A}' waits for and who sends it, by the
%% project's code, within ?BUDGET_MS: `#{text, target}' (`target', the first
%% sender as `source' takes it, when one was found), or `undefined' when the function has no
%% receive whose messages have a shape. `M' and the modules `Near' (the one that started the
%% process) are searched first: a sender is most often there.
-spec waits_for(mfa(), [module()], os_sup_lib_render:fmt()) -> map() | undefined.
waits_for({M, F, A}, Near, Fmt) ->
    case os_sup_code_beam:messages(M) of
        {_Source, #{receives := Receives}} ->
            case lists:usort([S || {FA, Shapes} <- Receives, FA =:= {F, A}, S <- Shapes]) of
                [] -> undefined;
                Shapes -> senders(Shapes, [M | Near], deadline(), Fmt)
            end;
        _ -> undefined
    end.

%% @doc The project's sends, casts and calls to the server registered as one of `Names' whose
%% message no clause of its callback module `Mod' takes by shape (only a clause that takes
%% anything, or none), searched for ?BUDGET_MS at most: `#{text, target}' of the first (`target'
%% the sender, as `source' takes it), or `undefined'. A callback whose clauses take no shape
%% (one clause that dispatches) says nothing.
-spec unhandled(module(), [atom()], os_sup_lib_render:fmt()) -> map() | undefined.
unhandled(Mod, Names, Fmt) ->
    case os_sup_code_beam:messages(Mod) of
        {Source, #{handlers := Handlers}} ->
            Missed = fun({_, Shape, _, To, Kind}) ->
                             lists:member(To, Names) andalso
                                 case Handlers of
                                     #{Kind := {[_ | _] = Shapes, _}} ->
                                         not lists:member(Shape, Shapes);
                                     _ -> false
                                 end
                     end,
            #{modules := Modules, dir := Dir} = os_sup_code_beam:project(),
            case scan(Modules, Missed, deadline(), []) of
                {[], _} -> undefined;
                {Found, _} ->
                    [{M, {F, A}, _, _, {_, Shape, _, _, Kind}} = First | _] = lists:reverse(Found),
                    {Taken, CatchAll} = maps:get(Kind, Handlers),
                    Callback = callback(Kind),
                    Instead = case CatchAll of
                                  undefined ->
                                      fmt("no ~ts clause of ~ts takes it", [Callback, name(Mod, Fmt)]);
                                  Line ->
                                      fmt("no ~ts clause of ~ts takes it but the one that takes "
                                          "anything (~ts:~b)",
                                          [Callback, name(Mod, Fmt),
                                           os_sup_code_beam:relative(Source, Dir), Line])
                              end,
                    Like = [shape_text(T, Fmt) || T <- Taken, alike(T, Shape)],
                    Takes = case lists:sublist(Like, ?SHAPES) of
                                [] -> "";
                                Some -> [" (its clauses take ", lists:join(", ", Some), ")"]
                            end,
                    #{text => fmt("~ts ~ts it ~ts, and ~ts~ts",
                                  [site(First, Dir, Fmt), verb(Kind), shape_text(Shape, Fmt),
                                   Instead, Takes]),
                      target => os_sup_lib_render:mfa({M, F, A}, Fmt)}
            end;
        _ -> undefined
    end.

%% @doc The receive of `{M, F, A}' a process waits in: its line, the shapes its clauses take,
%% and whether a clause takes anything (`any': a variable, unguarded) or may take messages of
%% no shape (`some': a map, a variable tag); of several, the first at or after `Line' (the
%% line of the process's stack frame), else the last. `undefined' when `M' has no debug info or
%% the function no receive.
-spec receive_at(mfa(), non_neg_integer() | undefined) ->
          #{line := non_neg_integer(), file := binary() | undefined, shapes := [shape()],
            other := any | some | none} | undefined.
receive_at({M, F, A}, Line) ->
    case os_sup_code_beam:messages(M) of
        {Source, #{receive_sites := Sites}} ->
            Own = lists:keysort(2, [S || {FA, _, _, _} = S <- Sites, FA =:= {F, A}]),
            After = [S || {_, L, _, _} = S <- Own, is_integer(Line), L >= Line],
            case After ++ lists:reverse(Own) of
                [{_, L, Shapes, Other} | _] ->
                    #{line => L, file => os_sup_code_beam:relative(Source, os_sup_code_beam:project_dir()),
                      shapes => Shapes, other => Other};
                [] -> undefined
            end;
        _ -> undefined
    end.

%% @doc The project's sends of a message of one of `Wanted' (`{Kind, Shape}', `Kind' `info'
%% for a plain send, `cast' or `call'), the modules `Near' searched first, within ?BUDGET_MS:
%% `{Sites, Complete}', each `#{mfa, file, line, shape, kind, to}' (`to' the registered name
%% it is sent to when written as one), in the order found.
-spec send_sites([{info | cast | call, shape()}], [module()]) -> {[map()], boolean()}.
send_sites(Wanted, Near) ->
    #{modules := Modules, dir := Dir} = os_sup_code_beam:project(),
    {First, Rest} = lists:partition(fun({Mod, _}) -> lists:member(Mod, Near) end, Modules),
    {Found, Complete} = scan(First ++ Rest, fun({_, Shape, _, _, Kind}) ->
                                                 lists:member({Kind, Shape}, Wanted)
                                         end, deadline(), []),
    {[#{mfa => {M, F, A}, file => os_sup_code_beam:relative(Source, Dir), line => Line,
        shape => Shape, kind => Kind, to => To}
      || {M, {F, A}, Line, Source, {_, Shape, _, To, Kind}} <- lists:reverse(Found)], Complete}.

%%%===================================================================
%%% Private
%%%===================================================================

deadline() ->
    erlang:monotonic_time(millisecond) + ?BUDGET_MS.

senders(Shapes, Near, Deadline, Fmt) ->
    #{modules := Modules, dir := Dir} = os_sup_code_beam:project(),
    {First, Rest} = lists:partition(fun({Mod, _}) -> lists:member(Mod, Near) end, Modules),
    %% a cast or a call arrives wrapped (`$gen_cast'): no receive of the application takes it
    {Found, Complete} = scan(First ++ Rest, fun({_, Shape, _, _, Kind}) ->
                                              Kind =:= info andalso lists:member(Shape, Shapes)
                                      end, Deadline, []),
    Waited = lists:join(" or ", [shape_text(S, Fmt) || S <- lists:sublist(Shapes, ?SHAPES)]),
    Partial = case Complete of
                  true -> "";
                  false -> " (the search of the project's code was cut short)"
              end,
    case lists:sublist(lists:reverse(Found), ?SENDERS) of
        [] ->
            #{text => fmt("it waits for ~ts, which no send in the project's code writes~ts",
                          [Waited, Partial])};
        [{M, {F, A}, _, _, _} | _] = Senders ->
            Sites = [site(Sender, Dir, Fmt) || Sender <- Senders],
            #{text => fmt("it waits for ~ts, sent by ~ts~ts",
                          [Waited, lists:join(", ", Sites), Partial]),
              target => os_sup_lib_render:mfa({M, F, A}, Fmt)}
    end.

%% The project's sends that `Wanted' keeps, as `{M, FA, Line, Source, Send}', in the order of
%% the modules; and whether every module was read before `Deadline'.
scan([], _Wanted, _Deadline, Acc) ->
    {Acc, true};
scan([{M, File} | Rest], Wanted, Deadline, Acc) ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> {Acc, false};
        false ->
            Sends = case os_sup_code_beam:messages(M, File) of
                        {Source, #{sends := S}} ->
                            [{M, FA, Line, Source, Send}
                             || {FA, _, Line, _, _} = Send <- S, Wanted(Send)];
                        _ -> []
                    end,
            scan(Rest, Wanted, Deadline, lists:reverse(Sends) ++ Acc)
    end.

site({M, {F, A}, Line, Source, _}, Dir, Fmt) ->
    fmt("~ts ~ts:~b", [os_sup_lib_render:mfa({M, F, A}, Fmt),
                       os_sup_code_beam:relative(Source, Dir), Line]).

callback(info) -> "handle_info/2";
callback(cast) -> "handle_cast/2";
callback(call) -> "handle_call/3".

verb(info) -> "sends";
verb(cast) -> "casts";
verb(call) -> "calls".

name(Mod, Fmt) -> os_sup_lib_render:name(Mod, Fmt).

%% Shapes of the same kind: atoms, or tuples of the same size.
alike(A, B) when is_atom(A), is_atom(B) -> true;
alike({_, N}, {_, N}) -> true;
alike(_, _) -> false.

shape_text(Atom, Fmt) when is_atom(Atom) ->
    os_sup_lib_render:term(Atom, Fmt);
shape_text({Tag, Size}, Fmt) ->
    Rest = lists:duplicate(Size - 1, ", _"),
    unicode:characters_to_binary(["{", os_sup_lib_render:term(Tag, Fmt), Rest, "}"]).

%% @doc What a module's code takes and sends: `receives', each function's receive clauses'
%% shapes (`[{{F, A}, [Shape]}]'); `receive_sites', each receive with its line, its clauses'
%% shapes and whether a clause takes any message or messages of no shape
%% (`[{{F, A}, Line, [Shape], any | some | none}]'); `sends', each message written with a shape and sent
%% (`[{{F, A}, Shape, Line, To, Kind}]': `To' the registered name it is sent to when written
%% as one, `Kind' `info' for a plain send, `cast' or `call' for a `GenServer'/`gen_server'
%% one); `handlers', the shapes its `handle_info/2', `handle_cast/2' and `handle_call/3' take,
%% and the line of a clause that takes anything (`#{Kind => {[Shape], Line | undefined}}').
-spec read([erl_parse:abstract_form()]) -> map().
read(Forms) ->
    Functions = [{{F, A}, Clauses} || {function, _, F, A, Clauses} <- Forms],
    #{receives => [{FA, Shapes} || {FA, Clauses} <- Functions,
                                   Shapes <- [lists:usort(receives(Clauses, []))], Shapes =/= []],
      receive_sites => [{FA, L, Shapes, Other} || {FA, Clauses} <- Functions,
                                                  {L, Shapes, Other} <- receive_sites(Clauses, [])],
      sends => lists:append([sends(Clauses, FA, []) || {FA, Clauses} <- Functions]),
      handlers => maps:from_list([{Kind, handled(Clauses)}
                                  || {FA, Clauses} <- Functions,
                                     Kind <- [handler_kind(FA)], Kind =/= undefined])}.

handler_kind({handle_info, 2}) -> info;
handler_kind({handle_cast, 2}) -> cast;
handler_kind({handle_call, 3}) -> call;
handler_kind(_) -> undefined.

%% The shapes a callback's clauses take by their first argument, and the first clause that
%% takes anything (a variable, unguarded).
handled(Clauses) ->
    Shapes = [S || {clause, _, [P | _], _, _} <- Clauses, S <- [shape(P)], S =/= undefined],
    CatchAll = [erl_anno:line(A) || {clause, A, [P | _], [], _} <- Clauses, any(P)],
    {lists:usort(Shapes), case CatchAll of [L | _] -> L; [] -> undefined end}.

any({var, _, _}) -> true;
any({match, _, P1, P2}) -> any(P1) andalso any(P2);
any(_) -> false.

receives({'receive', _, Clauses}, Acc) ->
    receives(Clauses, clause_shapes(Clauses) ++ Acc);
receives({'receive', _, Clauses, _After, _Body}, Acc) ->
    receives(Clauses, clause_shapes(Clauses) ++ Acc);
receives(T, Acc) when is_tuple(T) ->
    receives(tuple_to_list(T), Acc);
receives([H | T], Acc) ->
    receives(T, receives(H, Acc));
receives(_, Acc) ->
    Acc.

receive_sites({'receive', Anno, Clauses}, Acc) ->
    receive_sites(Clauses, [receive_site(Anno, Clauses) | Acc]);
receive_sites({'receive', Anno, Clauses, _After, _Body}, Acc) ->
    receive_sites(Clauses, [receive_site(Anno, Clauses) | Acc]);
receive_sites(T, Acc) when is_tuple(T) ->
    receive_sites(tuple_to_list(T), Acc);
receive_sites([H | T], Acc) ->
    receive_sites(T, receive_sites(H, Acc));
receive_sites(_, Acc) ->
    Acc.

receive_site(Anno, Clauses) ->
    Patterns = [{P, G} || {clause, _, [P], G, _} <- Clauses],
    Other = case {[x || {P, []} <- Patterns, any(P)], [x || {P, _} <- Patterns, shape(P) =:= undefined]} of
                {[_ | _], _} -> any;
                {[], [_ | _]} -> some;
                {[], []} -> none
            end,
    {erl_anno:line(Anno), lists:usort(clause_shapes(Clauses)), Other}.

clause_shapes(Clauses) ->
    [S || {clause, _, [Pattern], _, _} <- Clauses, S <- [shape(Pattern)], S =/= undefined].

sends({op, Anno, '!', To, Msg} = T, FA, Acc) ->
    sends(tuple_to_list(T), FA, sent(Msg, To, info, Anno, FA, Acc));
sends({call, Anno, {remote, _, {atom, _, Mod}, {atom, _, Fun}}, Args} = T, FA, Acc) ->
    {To, Msg, Kind} = case {Mod, Fun, Args} of
                          {erlang, send, [D, X | _]} -> {D, X, info};
                          {erlang, send_after, [_, D, X | _]} -> {D, X, info};
                          {'Elixir.Process', send, [D, X, _]} -> {D, X, info};
                          {'Elixir.Process', send_after, [D, X | _]} -> {D, X, info};
                          {timer, send_after, [_, D, X]} -> {D, X, info};
                          {timer, send_interval, [_, D, X]} -> {D, X, info};
                          {timer, send_after, [_, X]} -> {self, X, info};
                          {timer, send_interval, [_, X]} -> {self, X, info};
                          {'Elixir.GenServer', cast, [D, X]} -> {D, X, cast};
                          {gen_server, cast, [D, X]} -> {D, X, cast};
                          {'Elixir.GenServer', call, [D, X | _]} -> {D, X, call};
                          {gen_server, call, [D, X | _]} -> {D, X, call};
                          _ -> {undefined, undefined, undefined}
                      end,
    sends(tuple_to_list(T), FA, sent(Msg, To, Kind, Anno, FA, Acc));
sends(T, FA, Acc) when is_tuple(T) ->
    sends(tuple_to_list(T), FA, Acc);
sends([H | T], FA, Acc) ->
    sends(T, FA, sends(H, FA, Acc));
sends(_, _FA, Acc) ->
    Acc.

sent(undefined, _To, _Kind, _Anno, _FA, Acc) -> Acc;
sent(Msg, To, Kind, Anno, FA, Acc) ->
    case shape(Msg) of
        undefined -> Acc;
        Shape ->
            Name = case To of
                       {atom, _, N} -> N;
                       _ -> undefined
                   end,
            [{FA, Shape, erl_anno:line(Anno), Name, Kind} | Acc]
    end.

%% The shape of a pattern or of a message written as a term.
shape({atom, _, A}) -> A;
shape({tuple, _, [{atom, _, Tag} | Rest]}) -> {Tag, 1 + length(Rest)};
shape({match, _, P1, P2}) ->
    case shape(P1) of
        undefined -> shape(P2);
        S -> S
    end;
shape(_) -> undefined.
