#!/usr/bin/env bash
# Measures (release build) eval and introspection latency through MCP over TCP with the raw
# helper ping floor, tracing and log ingestion, and start/stop times beside bare `mix run`s of
# the same fixture. `scripts/bench.sh lifecycle` runs only the lifecycle part, `scripts/bench.sh
# dashboard` only eval with the web dashboard open in a headless Chromium vs without;
# `scripts/bench.sh scale` only the health report on nodes of 100 000 and 1 000 000 processes,
# `scripts/bench.sh health` that and the stack sampler (tests/bench_health.rs); `scripts/bench.sh
# code` only the code tools (docs, source, callers, find; tests/bench_code.rs); `scripts/bench.sh
# vitals` only the vital-signs sampler's cost on nodes and on the server (tests/bench_vitals.rs);
# `scripts/bench.sh cluster` only a 20-node cluster's start and fan-out (tests/bench_cluster.rs);
# `scripts/bench.sh eval` only where one `eval` spends its time, stage by stage beside the
# `erpc:call` floor (tests/bench_eval.rs); `scripts/bench.sh probe` what `diagnose` costs an
# application's round trips on nodes of 100 000 and 1 000 000 processes (tests/bench_probe.rs;
# OS_SUP_BENCH_PROCESSES=N picks one size); `scripts/bench.sh persist` only the cost of the
# log's disk copy (`--state-dir`) beside the ring alone (tests/bench_persist.rs); `scripts/bench.sh
# safety` what each read tool costs a node holding every pathology at once (a 200 MB state, a
# 500 MB binary, 1 M queued messages, 100 000 monitors...; tests/bench_safety.rs;
# OS_SUP_BENCH_SCALE=0.1 for a smaller node); `scripts/bench.sh history` what the always-on
# history keeper and stall watch cost a node beside the same node without them
# (tests/bench_history.rs; OS_SUP_BENCH_PROCESSES=N picks one size).
# Prints p50/p99 and writes scripts/bench_results.md.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in "" | dashboard) scripts/setup.sh --test ;; *) scripts/setup.sh ;; esac
(cd tests/fixtures/demo_app && mix compile >/dev/null)
if [ "${1:-}" = code ]; then
  exec cargo test --release --test bench_code -- --ignored --nocapture --test-threads 1
fi
if [ "${1:-}" = cluster ]; then
  (cd tests/fixtures/cluster_app && mix compile >/dev/null)
  exec cargo test --release --test bench_cluster -- --ignored --nocapture --test-threads 1
fi
if [ "${1:-}" = eval ]; then
  exec cargo test --release --test bench_eval -- --ignored --nocapture --test-threads 1
fi
if [ "${1:-}" = probe ]; then
  exec cargo test --release --test bench_probe -- --ignored --nocapture --test-threads 1
fi
if [ "${1:-}" = persist ]; then
  exec cargo test --release --test bench_persist -- --ignored --nocapture --test-threads 1
fi
if [ "${1:-}" = safety ]; then
  (cd tests/fixtures/ailments && mix compile >/dev/null)
  exec cargo test --release --test bench_safety -- --ignored --nocapture --test-threads 1
fi
if [ "${1:-}" = history ]; then
  exec cargo test --release --test bench_history -- --ignored --nocapture --test-threads 1
fi
if [ "${1:-}" = vitals ]; then
  exec cargo test --release --test bench_vitals -- --ignored --nocapture --test-threads 1
fi
if [ "${1:-}" = health ] || [ "${1:-}" = scale ]; then
  (cd tests/fixtures/ailments && mix compile >/dev/null)
  only=$([ "$1" = scale ] && echo scale || true)
  exec cargo test --release --test bench_health -- --ignored --nocapture --test-threads 1 $only
fi
cargo test --release --test bench -- --ignored --nocapture --test-threads 1 "$@"
