#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs Erlang/Elixir if missing, checks
# formatting and lints, compiles the fixtures, then runs every test (real nodes, real sockets),
# then the real MCP clients (Python SDK, MCP Inspector, the conformance suite: tests/clients/).
# OS_SUP_SKIP_CLIENTS=1 leaves the clients out (e.g. offline).
#
# `--elixir DIR` (or OS_SUP_ELIXIR=DIR) runs everything against the Elixir installed or built in
# DIR (e.g. a source checkout after `make compile`): DIR/bin goes first on PATH for the fixture
# compiles, the tests and the nodes they start. Without it: the `elixir` on PATH (Debian's in CI).
# A fixture's `_build` compiled by another Elixir is recompiled by Mix (its manifests record the
# Elixir version); the fixtures are compiled once below, before any test runs.
set -euo pipefail
cd "$(dirname "$0")/.."

while [ $# -gt 0 ]; do
  case "$1" in
    --elixir) [ $# -ge 2 ] || { echo "test: --elixir needs a directory" >&2; exit 2; }
      OS_SUP_ELIXIR=$2; shift 2 ;;
    --elixir=*) OS_SUP_ELIXIR=${1#--elixir=}; shift ;;
    *) echo "test: unknown option $1 (use --elixir DIR)" >&2; exit 2 ;;
  esac
done
if [ -n "${OS_SUP_ELIXIR:-}" ]; then
  dir=$(cd "$OS_SUP_ELIXIR" 2>/dev/null && pwd) || { echo "test: --elixir: no directory $OS_SUP_ELIXIR" >&2; exit 2; }
  OS_SUP_ELIXIR=$dir
  for tool in elixir mix iex; do
    [ -x "$OS_SUP_ELIXIR/bin/$tool" ] || { echo "test: no $OS_SUP_ELIXIR/bin/$tool (--elixir DIR names an Elixir install or built source tree)" >&2; exit 2; }
  done
  export OS_SUP_ELIXIR PATH="$OS_SUP_ELIXIR/bin:$PATH"
fi

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
echo "test: $(elixir --version | tail -n 1) at $(command -v elixir)" >&2
# Compile fixtures up front so that parallel tests never race to compile the same project
# (also after a change of Elixir, which recompiles them).
(cd tests/fixtures/demo_app && mix compile >/dev/null)
(cd tests/fixtures/shop && mix compile >/dev/null)
(cd tests/fixtures/ailments && mix compile >/dev/null)
(cd tests/fixtures/cluster_app && mix compile >/dev/null)
(cd tests/fixtures/umbrella && mix compile >/dev/null)
(cd tests/fixtures/web_pool && mix compile >/dev/null)
cargo test --all-targets --no-fail-fast 2>&1
if [ "${OS_SUP_SKIP_CLIENTS:-}" != 1 ]; then
  tests/clients/run.sh
fi
