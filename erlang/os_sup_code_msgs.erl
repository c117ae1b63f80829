%%% @doc `os_sup_code_msgs' answers what a process stuck in a `receive' of the
%%% application's code waits for, and which of the project's functions send it,
%%% for `diagnose': processes that pile up waiting (a leak) end at the code
%%% that should release them, not only where they wait. It reads the receive
%%% clauses and the send sites in the abstract code of `.beam' files
%%% (`os_sup_code_beam', cached per module). Nothing is loaded or compiled.
%%%
%%% == Shapes ==
%%% A message is known by its shape: an atom (`:stop'), or a tuple by its
%%% first element, an atom, and its size (`{:close, _}'). A send is a `send/2'
%%% or `!', `Process.send/3', `Process.send_after/3,4' or `erlang:send_after'
%%% whose message is written as such a term; a message built elsewhere and
%%% sent as a variable is not seen, and the answer says so when nothing is.
%%%
%%% == Limits ==
%%% The project's own modules only (`os_sup_code_beam:project/0'); the scan
%%% stops at its deadline and says it is partial; at most ?SENDERS senders.
-module(os_sup_code_msgs).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([waits_for/3]).
%% What `os_sup_code_beam:messages/1' reads (and caches). Not an API.
-export([read/1]).

-define(SENDERS, 3).
-define(SHAPES, 3).

-type shape() :: atom() | {atom(), pos_integer()}.

%%%===================================================================
%%% API
%%%===================================================================

%% @doc What a process waiting in a receive of `{M, F, A}' waits for and who sends it, by the
%% project's code, within `Deadline' (monotonic ms): `#{text, target}' (`target', the first
%% sender as `source' takes it, when one was found), or `undefined' when the function has no
%% receive whose messages have a shape.
-spec waits_for(mfa(), integer(), os_sup_lib_render:fmt()) -> map() | undefined.
waits_for({M, F, A}, Deadline, Fmt) ->
    case os_sup_code_beam:messages(M) of
        {_Source, Receives, _Sends} ->
            case lists:usort([S || {FA, Shapes} <- Receives, FA =:= {F, A}, S <- Shapes]) of
                [] -> undefined;
                Shapes -> senders(Shapes, Deadline, Fmt)
            end;
        _ -> undefined
    end.

%%%===================================================================
%%% Private
%%%===================================================================

senders(Shapes, Deadline, Fmt) ->
    #{modules := Modules, dir := Dir} = os_sup_code_beam:project(),
    {Found, Complete} = scan(Modules, Shapes, Deadline, []),
    Waited = lists:join(" or ", [shape_text(S, Fmt) || S <- lists:sublist(Shapes, ?SHAPES)]),
    Partial = case Complete of
                  true -> "";
                  false -> " (the search of the project's code was cut short)"
              end,
    case lists:sublist(lists:reverse(Found), ?SENDERS) of
        [] ->
            #{text => fmt("it waits for ~ts, which no send in the project's code writes~ts",
                          [Waited, Partial])};
        [{M, {F, A}, _, _} | _] = Senders ->
            Sites = [fmt("~ts ~ts:~b", [os_sup_lib_render:mfa({SM, SF, SA}, Fmt),
                                        os_sup_code_beam:relative(Source, Dir), Line])
                     || {SM, {SF, SA}, Line, Source} <- Senders],
            #{text => fmt("it waits for ~ts, sent by ~ts~ts",
                          [Waited, lists:join(", ", Sites), Partial]),
              target => os_sup_lib_render:mfa({M, F, A}, Fmt)}
    end.

scan([], _Shapes, _Deadline, Acc) ->
    {Acc, true};
scan([{M, _File} | Rest], Shapes, Deadline, Acc) ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> {Acc, false};
        false ->
            Sends = case os_sup_code_beam:messages(M) of
                        {Source, _, S} -> [{M, FA, Line, Source} || {FA, Shape, Line} <- S,
                                                                   lists:member(Shape, Shapes)];
                        _ -> []
                    end,
            scan(Rest, Shapes, Deadline, lists:reverse(Sends) ++ Acc)
    end.

shape_text(Atom, Fmt) when is_atom(Atom) ->
    os_sup_lib_render:term(Atom, Fmt);
shape_text({Tag, Size}, Fmt) ->
    Rest = lists:duplicate(Size - 1, ", _"),
    unicode:characters_to_binary(["{", os_sup_lib_render:term(Tag, Fmt), Rest, "}"]).

%% @doc `{Receives, Sends}': each function's receive clauses' shapes
%% (`[{{F, A}, [Shape]}]'), and each send of a message written with a shape
%% (`[{{F, A}, Shape, Line}]').
-spec read([erl_parse:abstract_form()]) -> {[{{atom(), arity()}, [shape()]}],
                                             [{{atom(), arity()}, shape(), non_neg_integer()}]}.
read(Forms) ->
    Functions = [{{F, A}, Clauses} || {function, _, F, A, Clauses} <- Forms],
    {[{FA, Shapes} || {FA, Clauses} <- Functions,
                      Shapes <- [lists:usort(receives(Clauses, []))], Shapes =/= []],
     lists:append([sends(Clauses, FA, []) || {FA, Clauses} <- Functions])}.

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

clause_shapes(Clauses) ->
    [S || {clause, _, [Pattern], _, _} <- Clauses, S <- [shape(Pattern)], S =/= undefined].

sends({op, Anno, '!', _To, Msg} = T, FA, Acc) ->
    sends(tuple_to_list(T), FA, sent(Msg, Anno, FA, Acc));
sends({call, Anno, {remote, _, {atom, _, Mod}, {atom, _, Fun}}, Args} = T, FA, Acc) ->
    Msg = case {Mod, Fun, Args} of
              {erlang, send, [_, X | _]} -> X;
              {erlang, send_after, [_, _, X | _]} -> X;
              {'Elixir.Process', send, [_, X, _]} -> X;
              {'Elixir.Process', send_after, [_, X | _]} -> X;
              _ -> undefined
          end,
    sends(tuple_to_list(T), FA, sent(Msg, Anno, FA, Acc));
sends(T, FA, Acc) when is_tuple(T) ->
    sends(tuple_to_list(T), FA, Acc);
sends([H | T], FA, Acc) ->
    sends(T, FA, sends(H, FA, Acc));
sends(_, _FA, Acc) ->
    Acc.

sent(undefined, _Anno, _FA, Acc) -> Acc;
sent(Msg, Anno, FA, Acc) ->
    case shape(Msg) of
        undefined -> Acc;
        Shape -> [{FA, Shape, erl_anno:line(Anno)} | Acc]
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
