#!/usr/bin/env bash
# Regenerates the files written from `tether install` itself:
#
#   deploy/manifests/install.yaml   tether install --image IMAGE --dry-run -o yaml
#   deploy/chart/crds/tether.yaml   tether install --crds-only --dry-run -o yaml
#
# IMAGE is ghcr.io/tether-dev/tether:<workspace version>, the chart's default.
# Run it after changing what `tether install` installs (or the version);
# crates/cli/tests/chart.rs fails while these files are stale.
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
image="ghcr.io/tether-dev/tether:$version"

cargo build --quiet --bin tether
tether="${CARGO_TARGET_DIR:-target}/debug/tether"

"$tether" install --image "$image" --dry-run -o yaml > deploy/manifests/install.yaml
"$tether" install --crds-only --dry-run -o yaml > deploy/chart/crds/tether.yaml
echo "gen-manifests: wrote deploy/manifests/install.yaml ($image) and deploy/chart/crds/tether.yaml" >&2
