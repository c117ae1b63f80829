#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs Erlang/Elixir if missing, checks
# formatting and lints, compiles the fixtures, then runs every test (real nodes, real sockets),
# then the real MCP clients (Python SDK, MCP Inspector, the conformance suite: tests/clients/).
# OS_SUP_SKIP_CLIENTS=1 leaves the clients out (e.g. offline).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${OS_SUP_SKIP_CLIENTS:-}" = 1 ]; then
  scripts/setup.sh --test
else
  scripts/setup.sh --test --clients
fi
# Layering (src/lib.rs, Layout): tools reach nodes only through `node`; config.rs owns its format.
# Also checked by tests/layers.rs; here it fails in a second, before any build.
if grep -rnE 'crate::(helper|dist|term)\b' src/mcp src/dashboard; then
    echo "src/mcp and src/dashboard must import only node (and mcp): see src/lib.rs, Layout" >&2
    exit 1
fi
if grep -nE 'crate::mcp\b' src/config.rs; then
    echo "src/config.rs must not import mcp: its format is node::StartSpec" >&2
    exit 1
fi
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
# Compile fixtures up front so that parallel tests never race to compile the same project.
(cd tests/fixtures/demo_app && mix compile >/dev/null)
(cd tests/fixtures/shop && mix compile >/dev/null)
(cd tests/fixtures/ailments && mix compile >/dev/null)
cargo test --all-targets --no-fail-fast 2>&1
if [ "${OS_SUP_SKIP_CLIENTS:-}" != 1 ]; then
  tests/clients/run.sh
fi
