#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs Erlang/Elixir if missing, checks
# formatting and lints, compiles the fixtures, then runs every test (real nodes, real sockets).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --test
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
# Compile fixtures up front so that parallel tests never race to compile the same project.
(cd tests/fixtures/demo_app && mix compile >/dev/null)
(cd tests/fixtures/shop && mix compile >/dev/null)
cargo test --all-targets --no-fail-fast 2>&1
