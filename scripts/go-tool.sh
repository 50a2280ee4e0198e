#!/usr/bin/env bash
# Builds one of the Go programs Tether runs (helm, kustomize) from the Go
# module proxy, once per version, and prints the binary's path. Static (no
# cgo), stripped and -trimpath: the same binary serves the tests and goes
# into the container image, so a fresh machine compiles it once.
#
#   scripts/go-tool.sh helm|kustomize
set -euo pipefail
case "${1:-}" in
  helm)
    version=v3.22.0
    package=helm.sh/helm/v3/cmd/helm
    ldflags="-X helm.sh/helm/v3/internal/version.version=$version"
    ;;
  kustomize)
    version=v5.8.2
    package=sigs.k8s.io/kustomize/kustomize/v5
    ldflags=""
    ;;
  *) echo "go-tool: usage: scripts/go-tool.sh helm|kustomize" >&2; exit 2 ;;
esac
dir="${XDG_CACHE_HOME:-$HOME/.cache}/tether/image-bin/$1-$version"
if [ ! -x "$dir/$1" ]; then
  command -v go >/dev/null || { echo "go-tool: Go is required to build $1; not found on PATH" >&2; exit 1; }
  echo "go-tool: building $1 $version from the Go module proxy (once)" >&2
  CGO_ENABLED=0 GOBIN="$dir" go install -trimpath -ldflags="-s -w $ldflags" "$package@$version" >&2
fi
echo "$dir/$1"
