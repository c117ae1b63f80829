#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs Erlang/Elixir if missing, checks
# formatting and lints, compiles the fixtures, then runs every test (real nodes, real sockets),
# then the real MCP clients (Python SDK, MCP Inspector, the conformance suite: tests/clients/).
# OS_SUP_SKIP_CLIENTS=1 leaves the clients out (e.g. offline).
#
# `--toolchain SUITE` (bookworm, trixie or sid: OTP 25, 27 or 29, see scripts/toolchain.sh) runs
# the tests inside the Debian root of that release instead, made from Debian's packages on the
# first run and kept: the test binaries are built here, then they, the fixtures' compiles and
# every node they start run there. The lints, the real clients and the browser tests (none of
# which depends on the Erlang release) run only without it. `--nodes` with it runs only the test
# binaries that start nodes (not the static checks of the code and docs).
#
# `--elixir DIR` (or OS_SUP_ELIXIR=DIR) runs everything against the Elixir installed or built in
# DIR (e.g. a source checkout after `make compile`): DIR/bin goes first on PATH for the fixture
# compiles, the tests and the nodes they start. Without it: the `elixir` on PATH (Debian's in CI).
# A fixture's `_build` made by another Erlang or Elixir is removed and made anew; the fixtures
# are compiled once below, before any test runs.
set -euo pipefail
cd "$(dirname "$0")/.."

toolchain=""
nodes_only=false
while [ $# -gt 0 ]; do
  case "$1" in
    --elixir) [ $# -ge 2 ] || { echo "test: --elixir needs a directory" >&2; exit 2; }
      OS_SUP_ELIXIR=$2; shift 2 ;;
    --elixir=*) OS_SUP_ELIXIR=${1#--elixir=}; shift ;;
    --toolchain) [ $# -ge 2 ] || { echo "test: --toolchain needs bookworm, trixie or sid" >&2; exit 2; }
      toolchain=$2; shift 2 ;;
    --toolchain=*) toolchain=${1#--toolchain=}; shift ;;
    --nodes) nodes_only=true; shift ;;
    *) echo "test: unknown option $1 (use --elixir DIR, --toolchain SUITE [--nodes])" >&2; exit 2 ;;
  esac
done

# The fixtures, compiled up front so that parallel tests never race to compile the same project.
# A `_build` another toolchain made is removed first: Mix does not rebuild all of it (an
# umbrella's protocols consolidated by OTP 29 stay, and OTP 27 then cannot load List.Chars).
compile_fixtures() {
  local fixture build made
  made=$(elixir -e 'IO.write("OTP #{System.otp_release()} Elixir #{System.version()}")')
  for build in tests/fixtures/*/_build; do
    [ "$(cat "$build/.made_by" 2>/dev/null)" = "$made" ] || rm -rf "$build"
  done
  for fixture in demo_app shop ailments cluster_app umbrella web_pool; do
    (cd "tests/fixtures/$fixture" && mix compile >/dev/null)
    echo "$made" >"tests/fixtures/$fixture/_build/.made_by"
  done
}

if [ -n "$toolchain" ]; then
  [ -z "${OS_SUP_ELIXIR:-}" ] || { echo "test: --toolchain and --elixir do not mix" >&2; exit 2; }
  scripts/toolchain.sh "$toolchain" >/dev/null
  # The test binaries, built here (the Debian root has no Rust); their paths, one per line.
  binaries=$(cargo test --all-targets --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"])
')
  [ -n "$binaries" ] || { echo "test: no test binaries were built (cargo test --no-run)" >&2; exit 1; }
  cargo build --quiet
  # Not here: the browser's (Chromium is the machine's, not the root's), the benches (ignored
  # anyway); with --nodes also the static checks, which start no node.
  skip=" browser mcp_apps_host "
  $nodes_only && skip+=" os_sup_mcp docs layers tool_list tool_homes test_hygiene "
  # (under the checkout, which the root sees at the same path)
  list=$PWD/target/toolchain-tests-$toolchain.txt
  : >"$list"
  while read -r name path; do
    case "$skip" in *" $name "*) continue ;; esac
    echo "$name $path" >>"$list"
  done <<<"$binaries"
  echo "test: $(wc -l <"$list") test binaries in the Debian $toolchain root" >&2
  export OS_SUP_NO_BROWSER=1
  exec scripts/toolchain.sh "$toolchain" run bash -c '
    set -uo pipefail
    list=$1
    echo "test: $(erl -noshell -eval "io:format(\"OTP ~s\", [erlang:system_info(otp_release)]), halt().") $(elixir --version | tail -n 1) (Debian root)" >&2
    '"$(declare -f compile_fixtures)"'
    compile_fixtures || exit 1
    failed=()
    while read -r name path; do
      echo "test: $name" >&2
      "$path" || failed+=("$name")
    done <"$list"
    [ ${#failed[@]} -eq 0 ] || { echo "test: failed in the Debian root: ${failed[*]}" >&2; exit 1; }
  ' test-in-root "$list"
fi

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
compile_fixtures
cargo test --all-targets --no-fail-fast 2>&1
if [ "${OS_SUP_SKIP_CLIENTS:-}" != 1 ]; then
  tests/clients/run.sh
fi
