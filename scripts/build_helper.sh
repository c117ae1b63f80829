#!/usr/bin/env bash
# Compile every Erlang module injected into child nodes (erlang/*.erl) into
# priv/ (committed; the Rust binary embeds every priv/*.beam with
# include_bytes! and loads them with -pa or code:load_binary).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p priv
rm -f priv/*.beam
erlc +deterministic -Werror -o priv erlang/*.erl
