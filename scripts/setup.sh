#!/usr/bin/env bash
# Installs what os_sup_mcp needs and is missing: Erlang/OTP (erl, erlc) and Elixir (elixir, mix),
# with --test Debian's Chromium for the browser test (tests/browser.rs), and with --clients the
# independent MCP clients that tests/clients/run.sh drives (see install_clients below).
# Idempotent; safe to run on every invocation. With OS_SUP_ELIXIR=DIR (scripts/test.sh --elixir
# DIR) the Elixir in DIR/bin is the one used, and Debian's is not installed for it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${OS_SUP_ELIXIR:-}" ]; then
  [ -x "$OS_SUP_ELIXIR/bin/elixir" ] || { echo "setup: OS_SUP_ELIXIR=$OS_SUP_ELIXIR has no bin/elixir" >&2; exit 1; }
  PATH="$OS_SUP_ELIXIR/bin:$PATH"
fi
with_browser=false
with_clients=false
for arg in "$@"; do
  case "$arg" in
    --test) with_browser=true ;;
    --clients) with_clients=true ;;
    *) echo "setup: unknown option $arg (use --test, --clients)" >&2; exit 2 ;;
  esac
done

# Pinned versions of the real clients, installed from their registries into .clients/
# (gitignored): the Python SDK in a venv; MCP Inspector's CLI and the conformance suite from
# npm, with Node 22 (npm's `node` package) when the machine's Node is older.
PY_MCP=2.3.0
NODE=22
INSPECTOR=2.12.0
CONFORMANCE=0.2.0-alpha.12
# The MCP Apps SDK, whose host side (AppBridge) the browser test of the views runs
# (tests/mcp_apps.rs), loaded by Chromium from .clients/npm/node_modules.
EXT_APPS=2.0.4
clients=.clients

install_clients() {
  mkdir -p "$clients"
  if ! "$clients/venv/bin/python" -c "import importlib.metadata as m; assert m.version('mcp') == '$PY_MCP'" 2>/dev/null; then
    echo "setup: installing the Python MCP SDK $PY_MCP" >&2
    python3 -m venv "$clients/venv"
    "$clients/venv/bin/pip" install -q --disable-pip-version-check "mcp==$PY_MCP"
  fi
  local npm_dir="$clients/npm" wanted=("@modelcontextprotocol/inspector@$INSPECTOR" "@modelcontextprotocol/conformance@$CONFORMANCE" "@modelcontextprotocol/ext-apps@$EXT_APPS")
  local major
  major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/')
  if [ "${major:-0}" -lt "$NODE" ]; then
    wanted+=("node@$NODE")
  fi
  local stamp="$npm_dir/.installed-$(echo "${wanted[*]}" | tr ' /@' '_._')"
  if [ ! -f "$stamp" ]; then
    echo "setup: installing ${wanted[*]} (npm)" >&2
    mkdir -p "$npm_dir"
    [ -f "$npm_dir/package.json" ] || echo '{"private": true}' >"$npm_dir/package.json"
    npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "${wanted[@]}" >&2
    touch "$stamp"
  fi
}

missing=()
for tool in erl erlc elixir mix; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
packages=()
case " ${missing[*]} " in
  *" erl "* | *" erlc "*) packages+=(erlang-nox erlang-dev) ;;
esac
case " ${missing[*]} " in
  *" elixir "* | *" mix "*) packages+=(elixir) ;;
esac
if $with_browser && [ ! -x /usr/bin/chromium ]; then
  packages+=(chromium)
fi
if $with_clients; then
  command -v socat >/dev/null 2>&1 || packages+=(socat)
  command -v npm >/dev/null 2>&1 || packages+=(npm)
  python3 -m venv --help >/dev/null 2>&1 || packages+=(python3-venv)
fi

if [ ${#packages[@]} -ne 0 ]; then
  echo "setup: installing ${packages[*]}${missing[*]:+ (missing: ${missing[*]})}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root or sudo to apt-get install ${packages[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
  [ ${#missing[@]} -eq 0 ] || echo "setup: $(erl -noshell -eval 'io:format("OTP ~s", [erlang:system_info(otp_release)]), halt().'), $(elixir --version | tail -n 1)" >&2
fi

if $with_clients; then
  install_clients
fi
