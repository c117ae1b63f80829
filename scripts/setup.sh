#!/usr/bin/env bash
# Installs what os_sup_mcp needs and is missing: Erlang/OTP (erl, erlc) and Elixir (elixir, mix).
# Idempotent; safe to run on every invocation.
set -euo pipefail

missing=()
for tool in erl erlc elixir mix; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing Erlang/Elixir (missing: ${missing[*]})" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup: need root or sudo to apt-get install erlang-nox erlang-dev elixir" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq erlang-nox erlang-dev elixir >/dev/null
echo "setup: $(erl -noshell -eval 'io:format("OTP ~s", [erlang:system_info(otp_release)]), halt().'), $(elixir --version | tail -n 1)" >&2
