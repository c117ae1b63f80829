//! The probe of the benchmarks that measure what a tool costs an application
//! (`bench_probe`, `bench_history`): an echo process, and a process that asks it every 2 ms
//! and records each round trip's latency, by window, in its table.

/// The probe: an echo process, and a process that asks it every 2 ms and records
/// `{Seq, Window, LatencyUs}` in its public table `probe`, the window named by
/// `persistent_term` `probe_window` (changed by the bench between windows).
pub const PROBE: &str = r#"
persistent_term:put(probe_window, idle),
Echo = spawn(fun Echo() -> receive {From, Ref} -> From ! {Ref, ok}, Echo() end end),
Probe = spawn(fun() ->
    Tab = ets:new(probe, [named_table, public, ordered_set]),
    Loop = fun Loop(Seq) ->
        receive after 2 -> ok end,
        T0 = erlang:monotonic_time(microsecond),
        Ref = make_ref(),
        Echo ! {self(), Ref},
        receive {Ref, ok} -> ok end,
        Us = erlang:monotonic_time(microsecond) - T0,
        ets:insert(Tab, {Seq, persistent_term:get(probe_window), Us}),
        Loop(Seq + 1)
    end,
    Loop(0)
end),
register(probe_echo, Echo), register(probe, Probe),
timer:sleep(100), ok.
"#;

/// `p50 p99 max count` of window `W`'s round trips, in µs.
pub fn window_stats(window: &str) -> String {
    format!(
        "L = lists:sort(ets:select(probe, [{{{{'_', {window}, '$1'}}, [], ['$1']}}])), \
         N = length(L), \
         At = fun(P) -> lists:nth(max(1, min(N, round(P * N))), L) end, \
         lists:flatten(io_lib:format(\"~b ~b ~b ~b\", [At(0.5), At(0.99), lists:last(L), N]))."
    )
}
