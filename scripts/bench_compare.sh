#!/usr/bin/env bash
# `eval` and `diagnose` latency of this checkout beside another commit, in the same run: both
# release builds serve the demo fixture in turn, twice each, alternating (A B A B), so a busy
# moment of the machine does not land on one side only. Writes a section of
# scripts/bench_results.md.
# usage: scripts/bench_compare.sh [BASE_COMMIT]    (default: 760ab72, before issue 22)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
base=${1:-760ab72}
scripts/setup.sh >/dev/null
(cd tests/fixtures/demo_app && mix compile >/dev/null)

# The base commit in a worktree of its own with a target directory of its own: the two
# checkouts must not share one (cargo keeps one build-script output for both, and the helper
# modules embedded by one would be the other's).
tree=${TMPDIR:-/tmp}/os_sup_mcp-bench-base
[ -d "$tree" ] || git worktree add --detach "$tree" "$base" >/dev/null
git -C "$tree" checkout -q --detach "$base"
(cd "$tree" && CARGO_TARGET_DIR=$root/target/bench-base cargo build --release --quiet)
cp "$root/target/bench-base/release/os_sup_mcp" "$root/target/os_sup_mcp-base"
cargo build --release --quiet

head_rev=$(git rev-parse --short HEAD)
base_rev=$(git -C "$tree" rev-parse --short HEAD)
declare -A results
for round in 1 2; do
  for side in base head; do
    if [ "$side" = base ]; then bin=$root/target/os_sup_mcp-base; else bin=$root/target/release/os_sup_mcp; fi
    results[$side$round]=$(python3 scripts/bench_compare.py "$bin" "$root/tests/fixtures/demo_app")
    echo "$side (round $round): ${results[$side$round]}"
  done
done

row() { # side tool
  python3 - "$2" "${results[${1}1]}" "${results[${1}2]}" <<'EOF'
import json, sys
tool = sys.argv[1]
runs = [json.loads(r)[tool] for r in sys.argv[2:]]
print(" / ".join(f"{r['p50']:.2f}" for r in runs), "|", " / ".join(f"{r['p99']:.2f}" for r in runs))
EOF
}
section="## eval and diagnose beside $base_rev

Written by \`scripts/bench_compare.sh\` (release builds, $(nproc) cores, $(date -u +%F)): MCP over
TCP, demo fixture, 300 sequential \`eval \"1 + 1\"\` and 40 \`diagnose\` (window 100 ms) per run;
two runs per side, alternating. Milliseconds, run 1 / run 2.

| call | commit | p50 | p99 |
|---|---|---|---|
| eval | $base_rev (base) | $(row base eval) |
| eval | $head_rev (this checkout) | $(row head eval) |
| diagnose | $base_rev (base) | $(row base diagnose) |
| diagnose | $head_rev (this checkout) | $(row head diagnose) |"
python3 - "$section" <<'EOF'
import pathlib, sys
path = pathlib.Path("scripts/bench_results.md")
section = sys.argv[1].rstrip() + "\n"
old = path.read_text() if path.exists() else ""
header = section.split("\n", 1)[0].split(" beside ")[0]
start = old.find(header)
if start >= 0:
    end = old.find("\n## ", start + 1)
    old = old[:start] + (old[end + 1:] if end >= 0 else "")
path.write_text(old.rstrip() + "\n\n" + section)
EOF
echo "$section"
