#!/usr/bin/env bash
# Measures eval latency through MCP over TCP and the raw helper ping floor (release build).
# Prints p50/p99 and writes scripts/bench_results.md.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
(cd tests/fixtures/demo_app && mix compile >/dev/null)
cargo test --release --test bench -- --ignored --nocapture --test-threads 1
