#!/usr/bin/env bash
# Pins every k8s.io staging module that k8s.io/kubernetes lists at v0.0.0 to
# the matching v0.MINOR.PATCH release, as `replace` lines in go.mod.
#
# k8s.io/kubernetes is not meant to be imported as a library: its go.mod
# requires its staging modules at the placeholder v0.0.0 and relies on
# replace directives that only hold inside its own repository. This script
# reads that go.mod from the module proxy and writes the equivalent replaces
# here, so the list is never typed by hand.
#
# Usage: gen-replaces.sh [KUBERNETES_VERSION]   (default: the version go.mod requires)
set -euo pipefail
cd "$(dirname "$0")"

version="${1:-$(go list -m -f '{{.Version}}' k8s.io/kubernetes)}"
modfile="$(go mod download -json "k8s.io/kubernetes@${version}" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')"
staging="v0.${version#v1.}"

mapfile -t modules < <(awk '$2 == "v0.0.0" && $1 ~ /^k8s\.io\// { print $1 }' "$modfile" | sort -u)
if [ "${#modules[@]}" -eq 0 ]; then
  echo "gen-replaces: no v0.0.0 staging modules found in $modfile" >&2
  exit 1
fi

go mod edit -require "k8s.io/kubernetes@${version}"
for module in "${modules[@]}"; do
  go mod edit -replace "${module}=${module}@${staging}"
done
echo "gen-replaces: k8s.io/kubernetes ${version}: ${#modules[@]} staging modules pinned to ${staging}"
