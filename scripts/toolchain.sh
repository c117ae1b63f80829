#!/usr/bin/env bash
# The Erlang/Elixir toolchains the project is tested on, each a Debian root made from Debian's own
# packages with mmdebstrap and kept between runs (in $OS_SUP_TOOLCHAINS, default
# ~/.cache/os_sup_mcp/toolchains):
#
#   bookworm  OTP 25.2 / Elixir 1.14   (Debian 12; the machine's own Erlang when it is Debian 12)
#   trixie    OTP 27.3 / Elixir 1.18.3 (Debian 13)
#   sid       OTP 29.1 / Elixir 1.20.4 (Debian unstable)
#
#   scripts/toolchain.sh SUITE              makes the root if missing (~30-75 s), prints its path
#   scripts/toolchain.sh SUITE run CMD...   runs CMD inside it, in the current directory
#
# Inside, the checkout is at the same path as outside (bind-mounted), so binaries built outside
# (the release binary, the test binaries) run there as they are, and proc, dev and dev/pts are
# mounted; what this script mounted is unmounted when CMD ends. Needs root (chroot, mount).
# Debian's mirror may serve Release files that read as expired against the clock: their
# validity is not checked.
set -euo pipefail

usage() { echo "usage: scripts/toolchain.sh bookworm|trixie|sid [run CMD...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
suite=$1; shift
case "$suite" in bookworm|trixie|sid) ;; *) usage ;; esac
dir=${OS_SUP_TOOLCHAINS:-$HOME/.cache/os_sup_mcp/toolchains}
root=$dir/$suite
# procps: ps and pgrep, which the tests use; hostname: the tests' host name.
packages=erlang-nox,erlang-dev,elixir,procps,hostname

if [ ! -x "$root/usr/bin/erl" ]; then
  [ "$(id -u)" = 0 ] || { echo "toolchain: making a Debian root needs root" >&2; exit 1; }
  if ! command -v mmdebstrap >/dev/null; then
    echo "toolchain: installing mmdebstrap" >&2
    apt-get update -q >/dev/null && apt-get install -y -q mmdebstrap >/dev/null
  fi
  mkdir -p "$dir"
  rm -rf "$root.partial"
  echo "toolchain: making $root from Debian $suite (erlang, elixir)" >&2
  mmdebstrap --quiet --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$packages" "$suite" "$root.partial" >&2
  mv "$root.partial" "$root"
fi

[ $# -eq 0 ] && { echo "$root"; exit 0; }
[ "$1" = run ] && [ $# -ge 2 ] || usage
shift

[ "$(id -u)" = 0 ] || { echo "toolchain: running in a Debian root needs root" >&2; exit 1; }
checkout=$(cd "$(dirname "$0")/.." && pwd)
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() { # bind SOURCE TARGET-IN-ROOT
  mkdir -p "$root$2"
  if ! mountpoint -q "$root$2"; then
    mount --bind "$1" "$root$2"
    mounted+=("$root$2")
  fi
}
# The machine's names (localhost, its host name), as the tests resolve them outside.
cp /etc/hosts "$root/etc/hosts"
bind /proc /proc
bind /dev /dev
bind /dev/pts /dev/pts
bind "$checkout" "$checkout"
cwd=$(pwd)
case "$cwd" in "$checkout"*) ;; *) cwd=$checkout ;; esac
# A clean environment: the root's own PATH first (its erl, elixir, mix), the caller's OS_SUP_*
# and CI settings kept.
env_keep=()
while IFS='=' read -r name _; do
  case "$name" in OS_SUP_*|CI|RUST_BACKTRACE|RUST_LOG) env_keep+=("$name=${!name}") ;; esac
done < <(env)
status=0
chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
  TERM="${TERM:-dumb}" "${env_keep[@]}" /bin/sh -c 'cd "$0" && exec "$@"' "$cwd" "$@" || status=$?
exit $status
