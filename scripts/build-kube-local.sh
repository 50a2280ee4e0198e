#!/usr/bin/env bash
# Builds the local control plane (tools/kube-local) once and prints the path
# of the binary. The binary is cached outside the work tree, keyed on the hash
# of go.sum and the program's sources; Go's own build cache makes a rebuild
# after a source change take seconds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tools/kube-local"
command -v go >/dev/null || { echo "build-kube-local: Go is required (https://go.dev/dl); not found on PATH" >&2; exit 1; }

# _test.go files are not part of the binary, so they are not in the key.
sources=()
for file in "$src"/*.go; do
  [[ "$file" == *_test.go ]] || sources+=("$file")
done
key="$(cat "$0" "$src/go.sum" "$src/go.mod" "${sources[@]}" | sha256sum | cut -c1-16)"
cache="${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}/kube-local"
binary="$cache/kube-local-$key"
if [ ! -x "$binary" ]; then
  mkdir -p "$cache"
  echo "build-kube-local: building $binary (a cold build takes several minutes)" >&2
  started=$(date +%s)
  version="$(cd "$src" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
  minor="${version#v1.}"; minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  (cd "$src" && go build -trimpath -ldflags="$ldflags" -o "$binary.tmp.$$" .)
  mv "$binary.tmp.$$" "$binary"
  find "$cache" -maxdepth 1 -name 'kube-local-*' ! -name "$(basename "$binary")" -delete
  echo "build-kube-local: built in $(( $(date +%s) - started ))s" >&2
fi
echo "$binary"
