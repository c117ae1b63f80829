%%% @doc `os_sup_diagnose_ets' finds the `ets' findings of `diagnose': a table
%%% that grows by at least ?ROWS_PER_S rows or ?BYTES_PER_S bytes a second over
%%% the window, with its owner, who writes its rows
%%% (`os_sup_diagnose_holders:table_writers/2') and the next call (the writer's
%%% code, else the table by the name or id `ets' takes). Reads `ets:info/2' of at
%%% most ?MAX_TABLES tables at each end of the window.
-module(os_sup_diagnose_ets).

-import(os_sup_lib_text, [fmt/2, bytes/1]).

-export([sizes/0, growth/3, growing/3, written_by/2]).

-define(MAX_TABLES, 10000).
-define(ROWS_PER_S, 100).
-define(BYTES_PER_S, 1048576).

%% @doc `#{Table => {Size, MemoryBytes}}' for at most ?MAX_TABLES tables, read at both ends of
%% the window. The helper's own tables (its history grows with the node's table count) are its
%% work, left out of every finding and holder.
-spec sizes() -> #{ets:tid() | atom() => {non_neg_integer(), non_neg_integer()}}.
sizes() ->
    Word = erlang:system_info(wordsize),
    maps:from_list([{T, {S, M * Word}} || T <- lists:sublist(ets:all(), ?MAX_TABLES),
                                          not os_sup_helper_own:own_table(ets:info(T, name)),
                                          S <- [ets:info(T, size)], is_integer(S),
                                          M <- [ets:info(T, memory)], is_integer(M)]).

%% @doc The ets findings (at most two) of the tables' sizes at the window's ends.
-spec growth(map(), map(), map()) -> [os_sup_diagnose:finding()].
growth(Ets0, Ets1, #{fmt := Fmt, secs := Secs} = Ctx) ->
    Growing = lists:reverse(lists:sort(growing(Ets0, Ets1, Secs))),
    [begin
         Name = ets:info(T, name),
         Owner = ets:info(T, owner),
         Frame = case is_pid(Owner) of true -> os_sup_proc_groups:app_frame(Owner); false -> undefined end,
         OwnerText = case is_pid(Owner) of
                         true -> [os_sup_lib_label:label(Owner, Fmt), os_sup_diagnose:frame_note(Frame, Fmt)];
                         false -> <<"(gone)">>
                     end,
         {WrittenBy, Next} = written_by(T, Fmt),
         Line = {[fmt("ets: ~ts +~b rows/s (+~ts/s), ~b rows, ~ts, owner ",
                      [os_sup_lib_render:term(Name, Fmt, 80), round(Rows), bytes(round(Bytes)), S,
                       bytes(M)]), OwnerText], WrittenBy},
         Found = os_sup_diagnose:finding(ets, Line, Next, Owner, Frame, Ctx),
         Found#{facts := #{rows_per_s => round(Rows), bytes_per_s => round(Bytes), rows => S,
                           bytes => M}}
     end || {Rows, Bytes, T, S, M} <- lists:sublist(Growing, 2), ets:info(T, name) =/= undefined].

%% @doc Who writes the rows of `T' (`; written by …'), which the owner of a library's table
%% (`timer_server') is not, and the next call: the writer's code, else the table by the name
%% or id `ets' takes for it.
-spec written_by(ets:tab(), os_sup_lib_render:fmt()) -> {iodata(), {atom(), list()}}.
written_by(T, Fmt) ->
    Writers = os_sup_diagnose_holders:table_writers(T, Fmt),
    Text = case Writers of
               #{target := _, text := W} -> ["; written by ", W];
               #{text := W} -> ["; who writes: ", W]
           end,
    TableArg = case ets:info(T, named_table) of
                   true -> atom_to_binary(ets:info(T, name), utf8);
                   _ -> os_sup_lib_render:term(T, erlang, 80)
               end,
    case Writers of
        #{target := Target} -> {Text, {source, [{<<"target">>, Target}]}};
        _ -> {Text, {ets, [{<<"table">>, TableArg}]}}
    end.

%% @doc The tables that grew enough over the window to be a finding:
%% `[{RowsPerS, BytesPerS, Table, Rows, Bytes}]'.
-spec growing(map(), map(), number()) -> [tuple()].
growing(Ets0, Ets1, Secs) ->
    [{(S1 - S0) / Secs, (M1 - M0) / Secs, T, S1, M1}
     || {T, {S1, M1}} <- maps:to_list(Ets1),
        {S0, M0} <- [maps:get(T, Ets0, {S1, M1})],
        (S1 - S0) / Secs >= ?ROWS_PER_S orelse (M1 - M0) / Secs >= ?BYTES_PER_S,
        not loading_code(T)].

%% The code server's tables grow while modules load (a boot, a first call of many modules):
%% loading code, which the code memory meter follows, not a table that leaks.
loading_code(T) ->
    ets:info(T, owner) =:= whereis(code_server).
