#!/usr/bin/env bash
# Build Flux's source-controller and kustomize-controller from their Go modules, for
# `tether-bench --flux`. Nothing of Flux's code is committed here: each controller is built from a
# small wrapper module written into the cache directory, whose go.mod is the controller's own go.mod
# (same requirements, so the same dependency versions) with its `./api` replace dropped and
# a requirement on the controller itself added.
#
# Output (cached; a second run only checks the files exist):
#   ~/.cache/tether/flux/<version>/source-controller
#   ~/.cache/tether/flux/<version>/kustomize-controller
#   ~/.cache/tether/flux/<version>/crds/*.yaml   (GitRepository, Kustomization, ...)
#   ~/.cache/tether/flux/current -> <version>
#
# Environment:
#   FLUX_SOURCE_VERSION     source-controller version (default v1.9.6)
#   FLUX_KUSTOMIZE_VERSION  kustomize-controller version (default v1.9.6)
#   FLUX_GOTOOLCHAIN        GOTOOLCHAIN for the build (default: the installed go; v1.10.x needs
#                           go1.27.3)
#   FLUX_CACHE              cache directory (default ~/.cache/tether/flux)
#   FLUX_REPLACES           space-separated module@version pins added as `replace` lines. The
#                           default pins github.com/fluxcd/pkg/artifact to v0.18.0: the Go module
#                           proxy reachable here answers 403 for v0.18.3 (what source-controller
#                           v1.9.x requires) and serves only v0.3.0, v0.5.0, v0.8.0, v0.18.0, v0.29.0.
set -euo pipefail

source_version="${FLUX_SOURCE_VERSION:-v1.9.6}"
kustomize_version="${FLUX_KUSTOMIZE_VERSION:-v1.9.6}"
cache="${FLUX_CACHE:-$HOME/.cache/tether/flux}"
FLUX_REPLACES="${FLUX_REPLACES-github.com/fluxcd/pkg/artifact@v0.18.0}"
out="$cache/sc-$source_version-kc-$kustomize_version"

if [[ -n "${FLUX_GOTOOLCHAIN:-}" ]]; then
    export GOTOOLCHAIN="$FLUX_GOTOOLCHAIN"
fi

command -v go >/dev/null || { echo "build-flux: go is not installed" >&2; exit 2; }

if [[ -x "$out/source-controller" && -x "$out/kustomize-controller" && -d "$out/crds" ]]; then
    ln -sfn "$out" "$cache/current"
    echo "$out"
    exit 0
fi
mkdir -p "$out/crds" "$cache/wrappers"

# build_controller NAME VERSION: download the module, write the wrapper, build the binary.
build_controller() {
    local name="$1" version="$2"
    local module="github.com/fluxcd/$name"
    local wrapper="$cache/wrappers/$name-$version"
    echo "build-flux: $module@$version" >&2

    local dir
    dir="$(cd "$cache" && GOFLAGS=-mod=mod go mod download -json "$module@$version" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -d "$dir" ]] || { echo "build-flux: $module@$version: download failed" >&2; exit 1; }

    rm -rf "$wrapper"
    mkdir -p "$wrapper"
    # The controller's go.mod, renamed. Its local replace (`api => ./api`) is dropped: `api` is a
    # nested module, not in the controller's zip, so the version the go.mod requires is fetched.
    sed -e "s|^module .*|module tether.local/flux-wrapper/$name|" \
        -e '/^replace .* => \.\//d' \
        "$dir/go.mod" >"$wrapper/go.mod"
    printf '\nrequire %s %s\n' "$module" "$version" >>"$wrapper/go.mod"
    local replace
    for replace in $FLUX_REPLACES; do
        printf 'replace %s => %s\n' "${replace%@*}" "${replace/@/ }" >>"$wrapper/go.mod"
    done
    cp "$dir/go.sum" "$wrapper/go.sum"
    chmod u+w "$wrapper/go.mod" "$wrapper/go.sum"
    # A blank import keeps `go mod tidy`-style resolution honest about what the wrapper needs.
    cat >"$wrapper/tools.go" <<EOF
//go:build tools

package tools

import _ "$module"
EOF
    (cd "$wrapper" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags=-s \
        -o "$out/$name" "$module")
    cp "$dir"/config/crd/bases/*.yaml "$out/crds/"
    chmod u+w "$out"/crds/*.yaml
}

build_controller source-controller "$source_version"
build_controller kustomize-controller "$kustomize_version"

ln -sfn "$out" "$cache/current"
echo "$out"
