%%% @doc `os_sup_dev_compile' compiles a Mix project for `os_sup_dev''s
%%% `recompile' in a separate `elixir' OS process, so that the compile
%%% never touches the code the node runs.
%%%
%%% Mix's Elixir compiler (1.14, `Mix.Compilers.Elixir') purges and deletes
%%% (`code:purge/1', `code:delete/1') every module of a stale source file
%%% before compiling it again, and its parallel compiler loads each new
%%% module as soon as it is compiled. Run inside the application's node (as
%%% IEx's `recompile/0' does), that leaves every module of the edited file
%%% without current code for the length of the compile: busy processes hit
%%% `undef', their supervisors give up and the application exits. No
%%% compiler option avoids it. So the compile runs where it cannot touch
%%% the running code: a separate `elixir' OS process (the same Elixir
%%% installation, the node's environment, `MIX_ENV' and `MIX_TARGET')
%%% runs Mix's own `compile' task in the project directory, with Mix's
%%% dependency tracking, diagnostics and protocol consolidation, and
%%% writes the `.beam' files of `_build'. It reports its status and
%%% diagnostics as one marked line on its output; everything else it
%%% prints goes to the node's stdout (the server's logs). It halts when
%%% its stdin closes, so a worker killed by its deadline takes it along.
%%% A compile error leaves the node's code untouched.
%%%
%%% Runs in the recompile's worker process; starts no Erlang process.
-module(os_sup_dev_compile).

%% API
-import(os_sup_lib_time, [now_ms/0]).

-export([backdate_manifests/1, compile/3]).

-include_lib("kernel/include/file.hrl").

%% output of the compiler kept (the rest is dropped, oldest first)
-define(MAX_OUTPUT_BYTES, 4194304).
%% lines of compiler output quoted when the compiler fails without a report
-define(TAIL_LINES, 30).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Mix's Elixir compiler sees a source as changed when its size differs, or when its
%% mtime (in seconds) is after the manifest's (the previous compile's start) and its digest
%% differs. A same-size edit saved in the same second as the previous compile started would
%% be missed (`noop', the old code kept). Where a source's mtime is not before the
%% manifest's, the manifest is dated one second back, so that Mix compares the digests of
%% those sources. `Manifests' pairs each manifest with its application's source directories.
-spec backdate_manifests([{file:filename(), [file:filename()]}]) -> ok.
backdate_manifests(Manifests) ->
    lists:foreach(fun backdate_manifest/1, Manifests).

%% @doc Runs Mix's `compile' task (`--force' when `force') in a separate `elixir' process in
%% the project's `dir', with its `env' and `target', until `Deadline' (monotonic ms); returns
%% its status and diagnostics (the count, and at most 100 of them), or `{error, Kind, Message}'.
-spec compile(#{dir := file:filename(), env := string(), target := string(), _ => _},
              #{force := boolean(), _ => _}, integer()) ->
          {ok, ok | noop | error, non_neg_integer(), [term()]}
        | {error, unavailable | timeout | compile_failed, binary()}.
compile(#{dir := Dir, env := Env, target := Target}, #{force := Force}, Deadline) ->
    case elixir_executable() of
        false ->
            {error, unavailable, <<"cannot find the `elixir' executable of this node's Elixir">>};
        Elixir ->
            Marker = marker(),
            Flags = ["--return-errors", "--no-deps-check"] ++ ["--force" || Force],
            Env1 = [{"MIX_ENV", Env}, {"MIX_TARGET", Target},
                    {"OS_SUP_RECOMPILE_MARKER", binary_to_list(Marker)}],
            try open_port({spawn_executable, Elixir},
                          [{args, ["-e", driver(), "--" | Flags]}, {cd, Dir}, {env, Env1},
                           binary, exit_status, stderr_to_stdout, use_stdio, hide]) of
                Port ->
                    collect(Port, Marker, Deadline, [], 0)
            catch
                error:Reason ->
                    {error, unavailable,
                     iolist_to_binary(io_lib:format("cannot start ~ts to compile: ~tp",
                                                    [Elixir, Reason]))}
            end
    end.

%%%===================================================================
%%% Private
%%%===================================================================

backdate_manifest({Manifest, Srcs}) ->
    case file:read_file_info(Manifest, [{time, posix}]) of
        {ok, #file_info{mtime = M, atime = A}} ->
            Ambiguous = fun(_, true) -> true;
                           (F, false) -> mtime(F) >= M
                        end,
            Same = lists:foldl(fun(Src, Found) ->
                                       filelib:fold_files(Src, "\\.ex$", true, Ambiguous, Found)
                               end, false, Srcs),
            _ = Same andalso file:write_file_info(Manifest, #file_info{mtime = M - 1, atime = A},
                                                 [{time, posix}]),
            ok;
        _ ->
            ok
    end.

mtime(File) ->
    case file:read_file_info(File, [{time, posix}]) of
        {ok, #file_info{mtime = M}} -> M;
        _ -> 0
    end.

%% The `elixir' of the Elixir this node runs, else the first one on the PATH.
elixir_executable() ->
    Beside = case code:lib_dir(elixir) of
                 Lib when is_list(Lib) -> filename:join([Lib, "..", "..", "bin", "elixir"]);
                 _ -> ""
             end,
    case filelib:is_regular(Beside) of
        true -> Beside;
        false -> os:find_executable("elixir")
    end.

marker() ->
    iolist_to_binary(io_lib:format("#os_sup_recompile:~b:~b:",
                                   [erlang:unique_integer([positive]), rand:uniform(1 bsl 48)])).

%% Reads the compiler's output until it exits or the deadline passes.
collect(Port, Marker, Deadline, Acc, Size) ->
    receive
        {Port, {data, Data}} ->
            {Acc1, Size1} = keep([Data | Acc], Size + byte_size(Data)),
            collect(Port, Marker, Deadline, Acc1, Size1);
        {Port, {exit_status, Status}} ->
            Output = iolist_to_binary(lists:reverse(Acc)),
            report(Marker, Status, Output)
    after max(0, Deadline - now_ms()) ->
            try port_close(Port) catch _:_ -> ok end,
            Output = iolist_to_binary(lists:reverse(Acc)),
            forward(Output),
            {error, timeout,
             iolist_to_binary(["the compile did not finish in time and was stopped (raise "
                               "timeout_ms); the node keeps its previous code",
                               quote(Output)])}
    end.

%% Keeps the newest ?MAX_OUTPUT_BYTES of output (the report comes last).
keep(Acc, Size) when Size =< ?MAX_OUTPUT_BYTES ->
    {Acc, Size};
keep(Acc, Size) ->
    Bin = iolist_to_binary(lists:reverse(Acc)),
    Keep = ?MAX_OUTPUT_BYTES div 2,
    {[binary:part(Bin, Size - Keep, Keep)], Keep}.

report(Marker, Status, Output) ->
    case binary:split(Output, <<"\n", Marker/binary>>) of
        [Printed, Rest] ->
            forward(Printed),
            [Encoded | _] = binary:split(Rest, <<"\n">>),
            try binary_to_term(base64:decode(string:trim(Encoded)), [safe]) of
                {S, Count, Ds} when (S =:= ok orelse S =:= noop orelse S =:= error),
                                    is_integer(Count), is_list(Ds) ->
                    {ok, S, Count, Ds}
            catch
                _:_ -> {error, compile_failed, <<"the compiler's report could not be read">>}
            end;
        [_] ->
            forward(Output),
            {error, compile_failed,
             iolist_to_binary([io_lib:format("the compiler exited with status ~b without a "
                                             "report; the node keeps its previous code",
                                             [Status]),
                               quote(Output)])}
    end.

%% The compiler's output goes to the node's stdout, as a compile in the node would print it.
forward(<<>>) ->
    ok;
forward(Output) ->
    _ = try io:put_chars(user, Output) catch _:_ -> ok end,
    ok.

quote(Output) ->
    Lines = [L || L <- binary:split(Output, <<"\n">>, [global]), L =/= <<>>],
    case lists:nthtail(max(0, length(Lines) - ?TAIL_LINES), Lines) of
        [] -> [];
        Tail -> [":\n", os_sup_lib_render:bound(iolist_to_binary(lists:join("\n", Tail)), 8192)]
    end.

%% Elixir code run by the compiling `elixir': what `mix compile' does (Mix.CLI), with the
%% result of the `compile' task printed as one marked line. Halts when its stdin closes.
driver() ->
    "marker = System.fetch_env!(\"OS_SUP_RECOMPILE_MARKER\")\n"
    "System.delete_env(\"OS_SUP_RECOMPILE_MARKER\")\n"
    "spawn(fn -> IO.read(:stdio, :line); System.halt(2) end)\n"
    "{status, ds} =\n"
    "  try do\n"
    "    Mix.start()\n"
    "    Mix.Local.append_archives()\n"
    "    Mix.Local.append_paths()\n"
    "    file = System.get_env(\"MIX_EXS\") || \"mix.exs\"\n"
    "    old = Code.get_compiler_option(:no_warn_undefined)\n"
    "    Code.put_compiler_option(:no_warn_undefined, :all)\n"
    "    Code.compile_file(file)\n"
    "    Code.put_compiler_option(:no_warn_undefined, old)\n"
    "    Mix.Task.run(\"loadconfig\")\n"
    "    case Mix.Task.run(\"compile\", System.argv()) do\n"
    "      {status, ds} when is_list(ds) -> {status, ds}\n"
    "      status when status in [:ok, :noop] -> {status, []}\n"
    "      other -> {:error, [%{severity: :error, message: inspect(other)}]}\n"
    "    end\n"
    "  catch\n"
    "    kind, reason ->\n"
    "      {:error, [%{severity: :error, message: Exception.format(kind, reason, __STACKTRACE__)}]}\n"
    "  end\n"
    "status = if status in [:ok, :noop, :error], do: status, else: :error\n"
    "text = fn t -> t = if is_binary(t), do: t, else: inspect(t); String.slice(t, 0, 4000) end\n"
    %% A diagnostic at line 0 (a misplaced attribute, on 1.18) has its line in the frame of
    %% its own file.
    "frame_line = fn d ->\n"
    "  file = text.(Map.get(d, :file) || \"\")\n"
    "  Enum.find_value(List.wrap(Map.get(d, :stacktrace)), 0, fn\n"
    "    {_, _, _, loc} when is_list(loc) ->\n"
    "      f = to_string(Keyword.get(loc, :file, \"\"))\n"
    "      l = Keyword.get(loc, :line)\n"
    "      if is_integer(l) and l > 0 and f != \"\" and String.ends_with?(file, f), do: l\n"
    "    _ -> nil\n"
    "  end)\n"
    "end\n"
    "shown =\n"
    "  for d <- Enum.take(ds, 100) do\n"
    "    d = if is_map(d), do: d, else: %{message: d}\n"
    "    position = case Map.get(d, :position) do\n"
    "      l when is_integer(l) and l > 0 -> l\n"
    "      {l, c} when is_integer(l) and l > 0 and is_integer(c) -> {l, c}\n"
    "      _ -> frame_line.(d)\n"
    "    end\n"
    "    severity = if Map.get(d, :severity) in [:error, :warning, :information, :hint],\n"
    "      do: d.severity, else: :error\n"
    "    %{severity: severity, file: text.(Map.get(d, :file) || \"\"), position: position,\n"
    "      message: text.(Map.get(d, :message))}\n"
    "  end\n"
    "payload = Base.encode64(:erlang.term_to_binary({status, length(ds), shown}))\n"
    "IO.write([\"\\n\", marker, payload, \"\\n\"])\n"
    "System.halt(0)\n".
