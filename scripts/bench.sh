#!/usr/bin/env bash
# Tether's performance figures, side by side with kubectl, against one local
# control plane: builds the release binaries, then runs tether-bench (which
# starts kube-local with an audit log and `tether run` as its own process).
# Arguments go to tether-bench, e.g. `scripts/bench.sh --apps 50`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release --manifest-path "$root/Cargo.toml" -p tether-cli -p tether-bench
exec "$CARGO_TARGET_DIR/release/tether-bench" "$@"
