%%% @doc `os_sup_code_text' reads a function's code from its source file for
%%% tool `source' (`os_sup_code'). It reads from its first line to the last one
%%% its debug info names, then the lines that still belong to it (deeper lines,
%%% the `end' that closes it), never past the next definition; numbered, at most
%%% 40 lines and 3 KB. It also lists a module's functions with their lines.
-module(os_sup_code_text).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([code/4, lines/1, last_line/3, next_def/2, defs_line/2]).

-define(CODE_LINES, 40).
-define(CODE_BYTES, 3000).
-define(CODE_FILE_BYTES, 4000000).

%% @doc A module's functions and macros (private ones too) with their first lines, in file order.
-spec defs_line([{binary(), pos_integer()}], pos_integer()) -> [binary()].
defs_line([], _Max) -> [];
defs_line(Defs, Max) ->
    Shown = [fmt("~ts :~b", [FA, L]) || {FA, L} <- lists:sublist(Defs, Max)],
    More = case length(Defs) - Max of
               N when N > 0 -> [fmt("… ~b more", [N])];
               _ -> []
           end,
    [iolist_to_binary(["functions: ", lists:join(<<", ">>, Shown ++ More)])].

%% @doc The last line of a function's code, from the debug info (0 when unknown).
-spec last_line(binary(), arity(), map()) -> non_neg_integer().
last_line(Name, A, #{ends := Ends}) ->
    try binary_to_existing_atom(Name, utf8) of
        F -> maps:get({F, A}, Ends, 0)
    catch
        _:_ -> 0
    end;
last_line(_, _, _) ->
    0.

%% @doc A function's code from its file: its first line to its last (see rest_of/3), at most
%% ?CODE_LINES lines and ?CODE_BYTES bytes, numbered. `{Text, Cut}' (Cut: the lines left
%% out), or undefined.
-spec code(binary() | undefined, pos_integer(), non_neg_integer(), pos_integer()) ->
          {binary(), non_neg_integer()} | undefined.
code(Source, First, Last0, Next) when is_binary(Source) ->
    Size = filelib:file_size(Source),
    case Size > 0 andalso Size =< ?CODE_FILE_BYTES andalso file:read_file(Source) of
        {ok, Bin} ->
            All = lists:sublist(binary:split(Bin, <<"\n">>, [global]), Next - 1),
            %% Code a macro generated (`use GenServer') names its lines in another file.
            Last = min(Last0, Next - 1),
            Body = lists:sublist(All, First, max(1, Last - First + 1)),
            Indent = indent(hd(Body ++ [<<>>])),
            Tail = rest_of(lists:sublist(All, First + length(Body), ?CODE_LINES), Indent, []),
            Wanted = trim_blank(lists:reverse(Body ++ Tail)),
            Shown = bound_lines(lists:sublist(Wanted, ?CODE_LINES), First, ?CODE_BYTES),
            {iolist_to_binary(lists:join(<<"\n">>, Shown)), length(Wanted) - length(Shown)};
        _ -> undefined
    end;
code(_, _, _, _) ->
    undefined.

%% @doc The first line of the next definition after line `First' (a bound on a function's
%% code).
-spec next_def(pos_integer(), map()) -> pos_integer().
next_def(First, #{defs := Defs}) ->
    lists:min([1 bsl 30 | [L || {_, _, _, L, _} <- Defs, is_integer(L), L > First]]);
next_def(_, _) ->
    1 bsl 30.

%% The function's lines after the last one its debug info names: a literal last expression
%% (`{:noreply, []}', `ok') has no line of its own there. Lines indented deeper than the
%% function's first line, blank lines between them, and the lines that close its blocks at
%% its own indentation (`end', `end.'), up to the first line that is none of these.
rest_of([], _Indent, Acc) ->
    trim_blank(Acc);
rest_of([L | Rest], Indent, Acc) ->
    Blank = string:trim(L) =:= <<>>,
    Deeper = indent(L) > Indent,
    case Blank orelse Deeper of
        true -> rest_of(Rest, Indent, [L | Acc]);
        false ->
            case closer(L) andalso indent(L) =:= Indent of
                true -> lists:reverse([L | Acc]);
                false -> trim_blank(Acc)
            end
    end.

trim_blank(Reversed) ->
    lists:reverse(lists:dropwhile(fun(L) -> string:trim(L) =:= <<>> end, Reversed)).

indent(Line) ->
    byte_size(Line) - byte_size(string:trim(Line, leading)).

closer(Line) ->
    case string:trim(Line) of
        <<"end", Rest/binary>> -> lists:member(Rest, [<<>>, <<".">>, <<";">>, <<",">>, <<")">>]);
        T -> lists:member(T, [<<")">>, <<"}">>, <<"]">>, <<").">>, <<"}.">>, <<"].">>])
    end.

%% Numbered lines, while they fit in `Budget' bytes.
bound_lines(Lines, First, Budget) ->
    bound_lines(Lines, First, Budget, []).

bound_lines([], _, _, Acc) -> lists:reverse(Acc);
bound_lines([L | Rest], N, Budget, Acc) ->
    Numbered = iolist_to_binary([integer_to_binary(N), "  ", os_sup_lib_text:cut_bin(L, 200)]),
    case byte_size(Numbered) + 1 > Budget of
        true -> lists:reverse(Acc);
        false -> bound_lines(Rest, N + 1, Budget - byte_size(Numbered) - 1, [Numbered | Acc])
    end.

%% @doc The text lines of a `code/4' answer.
-spec lines({binary(), non_neg_integer()} | undefined) -> [binary()].
lines(undefined) -> [];
lines({Text, 0}) -> [Text];
lines({Text, Cut}) -> [Text, fmt("… ~b more lines", [Cut])].
