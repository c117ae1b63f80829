#!/usr/bin/env bash
# Real, independent MCP clients against os_sup_mcp (installed by `scripts/setup.sh --clients`):
# - the official Python SDK (python_client.py) over TCP (its stdio client through socat), over
#   stdio (the SDK launches the server) and over Streamable HTTP, each in both protocol modes
#   (2026-07-28 through server/discover, and the legacy initialize handshake);
# - MCP Inspector's CLI: `tools/list --strict` must report 0 portability warnings, and its
#   `--app-info` probe finds the MCP Apps views only when it declares the extension;
# - the conformance suite, `server --requirements 2026-07-28` over HTTP, against the committed
#   baseline conformance-baseline.yml: a new failure (or a stale entry) fails the run.
# Every server and node started here is stopped on exit, also on failure or Ctrl-C.
# Run by scripts/test.sh; OS_SUP_MCP_BIN picks the binary (default: target/debug, built here).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
clients=$root/.clients
[ -x "$clients/venv/bin/python" ] || scripts/setup.sh --clients
python=$clients/venv/bin/python
# Node 22 (when setup installed it) and the clients' commands come first.
export PATH="$clients/npm/node_modules/.bin:$PATH"

bin=${OS_SUP_MCP_BIN:-}
if [ -z "$bin" ]; then
  cargo build --quiet
  bin=$root/target/debug/os_sup_mcp
fi

work=$(mktemp -d)
chmod 700 "$work"
server_pid=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  # SIGTERM: the server stops its nodes and exits; SIGKILL after 20 s (its nodes still stop:
  # they watch a pipe from it).
  kill "$server_pid" 2>/dev/null || true
  for _ in $(seq 200); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -m 700 "$work/state"
"$bin" --listen 127.0.0.1:0 --http 127.0.0.1:0 --state-dir "$work/state" </dev/null 2>"$work/server.log" &
server_pid=$!
tcp="" http=""
for _ in $(seq 300); do
  tcp=$(sed -n 's/.*serving MCP addr=\([^ ]*\).*/\1/p' "$work/server.log" | head -n 1)
  http=$(sed -n 's/.*serving MCP over HTTP.* http=\([^ ]*\).*/\1/p' "$work/server.log" | head -n 1)
  [ -n "$tcp" ] && [ -n "$http" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$tcp" ] || [ -z "$http" ]; then
  echo "clients: the server did not start:" >&2
  cat "$work/server.log" >&2
  exit 1
fi
url="http://$http/mcp"

passed=0
failed=0
failures=()
check() {
  local what=$1
  shift
  echo "--- $what"
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$what")
  fi
}

for mode in auto legacy; do
  check "python SDK, TCP (socat), $mode" \
    timeout 300 "$python" tests/clients/python_client.py tcp "$mode" "$tcp" "py_tcp_$mode"
  check "python SDK, stdio, $mode" \
    timeout 300 "$python" tests/clients/python_client.py stdio "$mode" "$bin" "py_stdio_$mode"
  check "python SDK, HTTP, $mode" \
    timeout 300 "$python" tests/clients/python_client.py http "$mode" "$url" "py_http_$mode"
done

inspector_strict() {
  local out=$work/inspector.json err=$work/inspector.err
  if ! timeout 120 mcp-inspector --cli --strict --method tools/list "$url" >"$out" 2>"$err"; then
    cat "$err" >&2
    return 1
  fi
  local summary
  summary=$(grep -E '[0-9]+ errors?, [0-9]+ warnings?' "$err" | tail -n 1 || true)
  echo "  inspector: ${summary:-no portability problems reported}"
  if grep -qE '^(Warning|Error):' "$err" || { [ -n "$summary" ] && ! grep -qE '^0 errors?, 0 warnings?' <<<"$summary"; }; then
    grep -E '^(Warning|Error):|Path:|Issue:' "$err" | head -n 30 >&2
    return 1
  fi
}
check "MCP Inspector CLI tools/list --strict: 0 warnings" inspector_strict

# MCP Apps: the Inspector finds views on exactly supervision_tree, process_info and diagnose
# when it declares the extension (--advertise-apps), and on no tool when it does not.
inspector_apps() {
  local with without
  with=$(timeout 120 mcp-inspector --cli --advertise-apps --app-info --method tools/list "$url" |
    grep '"hasApp":true' | sed -E 's/.*"toolName":"([a-z_]+)".*/\1/' | sort | tr '\n' ' ')
  without=$(timeout 120 mcp-inspector --cli --app-info --method tools/list "$url" |
    grep -c '"hasApp":true' || true)
  echo "  inspector: views on ${with:-no tool} with the extension, on ${without:-?} tools without"
  [ "$with" = "diagnose process_info supervision_tree " ] && [ "$without" = 0 ]
}
check "MCP Inspector CLI --app-info: views only when the client declares MCP Apps" inspector_apps

# One line of our own (the suite's `Total: N passed, M failed` counts the baseline's expected
# failures as failures); its raw output is kept in target/conformance.log.
conformance_run() {
  local log=$root/target/conformance.log status=0
  mkdir -p "$root/target"
  timeout 600 conformance server --url "$url" --requirements 2026-07-28 \
    --expected-failures tests/clients/conformance-baseline.yml >"$log" 2>&1 || status=$?
  local passed failed unexpected stale
  passed=$(sed -nE 's/^Total: ([0-9]+) passed, [0-9]+ failed.*/\1/p' "$log" | head -n 1)
  failed=$(sed -nE 's/^Total: [0-9]+ passed, ([0-9]+) failed.*/\1/p' "$log" | head -n 1)
  unexpected=$(section_lines 'Unexpected failures' "$log")
  stale=$(section_lines 'Stale baseline entries' "$log")
  echo "  conformance: ${passed:-?} passed, $(( ${failed:-0} - unexpected )) expected failures" \
    "(baseline), $unexpected unexpected, $stale stale baseline entries (raw output:" \
    "target/conformance.log)"
  if [ "$status" -ne 0 ]; then
    grep -A 40 -E 'Unexpected failures|Stale baseline entries' "$log" | head -n 60 >&2 || tail -n 30 "$log" >&2
  fi
  return $status
}

# The number of entries listed under the heading that contains $1, up to the next blank line.
section_lines() {
  awk -v heading="$1" 'index($0, heading) { on = 1; next } /^[[:space:]]*$/ { on = 0 } on { n++ }
    END { print n + 0 }' "$2"
}
check "conformance --requirements 2026-07-28 (baseline: tests/clients/conformance-baseline.yml)" conformance_run

stop_server
echo
[ ${#failures[@]} -eq 0 ] || printf 'failed: %s\n' "${failures[@]}" >&2
echo "clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
