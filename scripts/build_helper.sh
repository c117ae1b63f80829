#!/usr/bin/env bash
# Compiles the Erlang helper injected into child nodes (committed; the Rust binary embeds every
# beam with include_bytes!). No one set of beams loads on every OTP release the product supports
# (OTP 29 refuses some beams of OTP 25, OTP 25 refuses every beam of OTP 27), so the helper is
# compiled once per set, each by the release it is named after, and the node loads the newest
# set not newer than itself:
#
#   priv/otp25/*.beam   erlang/*.erl compiled by OTP 25 (for OTP 25 and 26)
#   priv/otp27/*.beam   erlang/*.erl compiled by OTP 27 (for OTP 27 and later)
#   priv/os_sup_boot.beam  erlang/boot/os_sup_boot.erl by OTP 25: picks and loads the set
#
# Each set is compiled by the machine's erlc when it is that release, else inside the Debian root
# of that release (scripts/toolchain.sh; needs root the first time it is made).
# erlang/os_sup_bounds.hrl is generated from src/bounds.rs by build.rs: when src/bounds.rs is the
# newer, a `cargo check` writes it first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ src/bounds.rs -nt erlang/os_sup_bounds.hrl ] && command -v cargo >/dev/null; then
    cargo check --quiet --lib
    touch erlang/os_sup_bounds.hrl
fi

# The Debian suite whose Erlang is each set's release.
suite_of() { case "$1" in 25) echo bookworm ;; 27) echo trixie ;; esac; }
host_otp=$(erl -noshell -eval 'io:format("~s",[erlang:system_info(otp_release)]),halt().' 2>/dev/null || true)

# erlc_for OTP ARGS...: erlc of release OTP, here or in its Debian root.
erlc_for() {
  local otp=$1; shift
  if [ "$host_otp" = "$otp" ]; then
    erlc "$@"
  else
    scripts/toolchain.sh "$(suite_of "$otp")" run erlc "$@"
  fi
}

flags=(+deterministic -Werror)
rm -rf priv
for otp in 25 27; do
  mkdir -p "priv/otp$otp"
  erlc_for "$otp" "${flags[@]}" -o "priv/otp$otp" erlang/*.erl
done
erlc_for 25 "${flags[@]}" -o priv erlang/boot/os_sup_boot.erl
