#!/usr/bin/env bash
# Tether's performance figures, side by side with kubectl, against one local
# control plane: builds the release binaries, then runs tether-bench (which
# starts kube-local with an audit log and `tether run` as its own process).
# Arguments go to tether-bench, e.g. `scripts/bench.sh --apps 50`.
#
# `scripts/bench.sh --overhead [args]` measures what metrics, Events and
# notifications cost: it also builds `tether` as it was at $baseline_commit
# (the last commit before them; built once, cached under the target
# directory) and runs `tether-bench --overhead-baseline THAT_BINARY [args]`.
#
# `scripts/bench.sh --impersonation [args]` measures what making each app's
# changes as its ServiceAccount costs (`tether-bench --impersonation`).
#
# `scripts/bench.sh --dashboard --apps 1000` measures the web dashboard
# with 1,000 apps: first paint, a status change reflected, its memory.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
baseline_commit=81d6a04

# Prints the path of the baseline's release `tether`, building it first if
# it is not there yet. The sources come from `git archive` (no worktree to
# register or clean up); the build has its own target directory so it never
# invalidates the current build's artifacts.
baseline_binary() {
  local commit dir
  commit="$(git -C "$root" rev-parse --verify "$baseline_commit^{commit}")"
  dir="$CARGO_TARGET_DIR/bench-baseline/${commit:0:12}"
  local binary="$dir/target/release/tether"
  if [ ! -x "$binary" ]; then
    if [ ! -d "$dir/src" ]; then
      rm -rf "$dir/src.tmp"
      mkdir -p "$dir/src.tmp"
      git -C "$root" archive "$commit" | tar -x -C "$dir/src.tmp"
      mv "$dir/src.tmp" "$dir/src"
    fi
    echo "bench: building the baseline tether at ${commit:0:12} (once) in $dir" >&2
    CARGO_TARGET_DIR="$dir/target" cargo build --release --locked \
      --manifest-path "$dir/src/Cargo.toml" -p tether-cli >&2
  fi
  echo "$binary"
}

overhead=false
if [ "${1:-}" = "--overhead" ]; then
  overhead=true
  shift
fi
cargo build --release --manifest-path "$root/Cargo.toml" -p tether-cli -p tether-bench
if "$overhead"; then
  baseline="$(baseline_binary)"
  exec "$CARGO_TARGET_DIR/release/tether-bench" --overhead-baseline "$baseline" "$@"
fi
exec "$CARGO_TARGET_DIR/release/tether-bench" "$@"
