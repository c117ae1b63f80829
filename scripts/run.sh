#!/usr/bin/env bash
# Starts os_sup_mcp on 127.0.0.1:9100 with the bundled example project already running.
# Installs Erlang/Elixir first if they are missing. Extra arguments go to os_sup_mcp.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cargo build --release --quiet
exec target/release/os_sup_mcp --project tests/fixtures/demo_app "$@"
