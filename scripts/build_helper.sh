#!/usr/bin/env bash
# Compile every Erlang module injected into child nodes (erlang/*.erl) into
# priv/ (committed; the Rust binary embeds every priv/*.beam with
# include_bytes! and loads them with -pa or code:load_binary).
# erlang/os_sup_bounds.hrl is generated from src/bounds.rs by build.rs: when
# src/bounds.rs is the newer, a `cargo check` writes it first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ src/bounds.rs -nt erlang/os_sup_bounds.hrl ] && command -v cargo >/dev/null; then
    cargo check --quiet --lib
    touch erlang/os_sup_bounds.hrl
fi
mkdir -p priv
rm -f priv/*.beam
erlc +deterministic -Werror -o priv erlang/*.erl
