#!/usr/bin/env bash
# Installs what os_sup_mcp needs and is missing: Erlang/OTP (erl, erlc) and Elixir (elixir, mix),
# and, with --test, Debian's Chromium for the browser test (tests/browser.rs).
# Idempotent; safe to run on every invocation.
set -euo pipefail
with_browser=false
[ "${1:-}" = "--test" ] && with_browser=true

missing=()
for tool in erl erlc elixir mix; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
packages=()
if [ ${#missing[@]} -ne 0 ]; then
  packages+=(erlang-nox erlang-dev elixir)
fi
if $with_browser && [ ! -x /usr/bin/chromium ]; then
  packages+=(chromium)
fi
if [ ${#packages[@]} -eq 0 ]; then
  exit 0
fi

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
