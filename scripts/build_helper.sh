#!/usr/bin/env bash
# Compile the Erlang helper injected into child nodes into priv/ (committed;
# the Rust binary embeds priv/os_sup_helper.beam with include_bytes!).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p priv
erlc +deterministic -o priv erlang/os_sup_helper.erl
