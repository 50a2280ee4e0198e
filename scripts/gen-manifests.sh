#!/usr/bin/env bash
# Regenerates the files written from `tether install` itself:
#
#   deploy/manifests/install.yaml   tether install --image IMAGE --dry-run -o yaml
#   deploy/chart/crds/tether.yaml   tether install --crds-only --dry-run -o yaml
#   deploy/chart/templates/projects.yaml   the tether-projects admission
#                                   policy and binding of install.yaml
#   deploy/chart/templates/rollback-pin.yaml   the tether-rollback-pin
#                                   policy and binding of install.yaml
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
python3 - <<'PY'
import re
text = open("deploy/manifests/install.yaml").read()
docs = [d.removeprefix("---\n").strip("\n") for d in text.split("\n---\n")]
picked = [d for d in docs
          if re.search(r"^kind: ValidatingAdmissionPolicy(Binding)?$", d, re.M)
          and re.search(r"^  name: tether-projects$", d, re.M)]
assert len(picked) == 2, f"expected the tether-projects policy and binding, found {len(picked)}"
header = """{{- /*
The admission policy that refuses an Application whose own spec breaks its
Project (see crates/controller/src/install/project_policy.rs). Written by
scripts/gen-manifests.sh from `tether install`; do not edit.
*/}}
"""
open("deploy/chart/templates/projects.yaml", "w").write(header + "\n---\n".join(picked) + "\n")
PY
python3 - <<'PY'
import re
text = open("deploy/manifests/install.yaml").read()
docs = [d.removeprefix("---\n").strip("\n") for d in text.split("\n---\n")]
picked = [d for d in docs
          if re.search(r"^kind: ValidatingAdmissionPolicy(Binding)?$", d, re.M)
          and re.search(r"^  name: tether-rollback-pin$", d, re.M)]
assert len(picked) == 2, f"expected the tether-rollback-pin policy and binding, found {len(picked)}"
header = """{{- /*
Rollback: spec.pin.by is the user writing the pin (see
crates/controller/src/install/pin_policy.rs). Written by
scripts/gen-manifests.sh from `tether install`; do not edit.
*/}}
"""
open("deploy/chart/templates/rollback-pin.yaml", "w").write(header + "\n---\n".join(picked) + "\n")
PY
echo "gen-manifests: wrote deploy/manifests/install.yaml ($image), deploy/chart/crds/tether.yaml, deploy/chart/templates/projects.yaml and rollback-pin.yaml" >&2
