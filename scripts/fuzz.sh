#!/usr/bin/env bash
# Runs every fuzz target (crates/source/tests/fuzz.rs: the manifest reader,
# the kustomize/helm output reader, the diff normalizer, the webhook
# parsers, the health-rule loader, the adopt YAML editor) for longer than
# the suite does, and the prune properties with more cases.
#   scripts/fuzz.sh [--seconds N]   (N seconds per target; default 600)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=600
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "fuzz: unknown argument $1 (usage: scripts/fuzz.sh [--seconds N])" >&2; exit 2 ;;
  esac
done
export TETHER_FUZZ_SECONDS="$seconds"
# Proptest's own case count for the prune properties, scaled with the time.
export PROPTEST_CASES="$((seconds * 1000))"
cargo test -p tether-source --test fuzz -- --nocapture --test-threads 1
cargo test -p tether-core --test prune_properties -- --nocapture
