#!/usr/bin/env bash
# Builds the Tether container image from the Containerfile with buildah (no
# container engine, no base image): a static `tether`, static helm and
# kustomize, bubblewrap, ssh and sh with the libraries they link, CA
# certificates and a non-root user. Prints the image's size uncompressed and compressed.
#
#   scripts/build-image.sh [--output DIR|FILE.tar | --tether-only]
#
# --output also writes the image as an OCI layout (a directory) or an OCI
# archive (a file), to load or push with podman, skopeo or buildah.
# --tether-only builds the static `tether` and stops there (the test suite
# runs it in the background, so the image test finds the release build done).
#
# Environment:
#   TAG                   image name (default tether:dev)
#   TETHER_IMAGE_STORAGE  buildah's storage (default
#                         ${XDG_CACHE_HOME:-$HOME/.cache}/tether/image-storage),
#                         not the machine's /var/lib/containers
#   CARGO_TARGET_DIR      as for cargo; the build context is staged in it
#
# The last lines of standard output are `image NAME`, `uncompressed BYTES`
# and `compressed BYTES` (gzip, as pushed to a registry).
set -euo pipefail
caller="$PWD"
cd "$(dirname "$0")/.."

output=""
tether_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --output) output="${2:?--output needs a path}"; shift 2 ;;
    --output=*) output="${1#--output=}"; shift ;;
    --tether-only) tether_only=1; shift ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$output" ]; then
  case "$output" in /*) ;; *) output="$caller/$output" ;; esac
fi
. scripts/setup.sh

tag="${TAG:-tether:dev}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tether"
storage="${TETHER_IMAGE_STORAGE:-$cache/image-storage}"
step() { echo "build-image: $*" >&2; }
seconds() { echo $(($(date +%s) - $1)); }

# Build the static tether: glibc linked in (no musl target is needed), TLS
# by rustls and aws-lc-rs, so nothing is loaded at run time. With --target,
# RUSTFLAGS reaches only the target's code, not build scripts, and the
# output lands apart from the ordinary builds, so neither rebuilds the other.
started=$(date +%s)
step "building tether (static, profile image)"
target_dir="$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
RUSTFLAGS='-C target-feature=+crt-static' \
  cargo build --locked --profile image --target x86_64-unknown-linux-gnu --bin tether
tether="$target_dir/x86_64-unknown-linux-gnu/image/tether"
step "tether built in $(seconds "$started") s"
if [ -n "$tether_only" ]; then
  echo "tether $tether"
  exit 0
fi

# helm and kustomize: static, stripped, once per version (shared with the
# tests' helm).
started=$(date +%s)
helm="$(scripts/go-tool.sh helm)"
kustomize="$(scripts/go-tool.sh kustomize)"
step "helm and kustomize ready in $(seconds "$started") s"

for binary in "$tether" "$helm" "$kustomize"; do
  linkage="$(ldd "$binary" 2>&1 || true)"
  if ! grep -qE 'not a dynamic executable|statically linked' <<<"$linkage"; then
    echo "build-image: $binary is not statically linked: $linkage" >&2
    exit 1
  fi
done

# Stage the context: rootfs/ is the image's file tree (merged /usr as on
# Debian, so the renderer sandbox finds /lib64 and /bin as links into /usr),
# cache/ becomes /var/cache/tether, owned by the image's user. One context
# per run, so that two builds sharing a target directory do not mix.
context="$(mktemp -d "$target_dir/image-context.XXXXXX")"
trap 'rm -rf "$context"' EXIT
rootfs="$context/rootfs"
# /proc, /dev and /sys are empty mount points: with a read-only root, a
# runtime (or bwrap) has nowhere to create them.
mkdir -p "$rootfs"/{usr/local/bin,usr/bin,usr/lib,usr/lib64,etc/ssl/certs,tmp,var/cache,proc,dev,sys} \
  "$context/cache"
ln -s usr/bin "$rootfs/bin"
ln -s usr/lib "$rootfs/lib"
ln -s usr/lib64 "$rootfs/lib64"
chmod 1777 "$rootfs/tmp"
install -m 0755 "$tether" "$helm" "$kustomize" "$rootfs/usr/local/bin/"
# Debian's programs that tether runs, with the shared libraries and loader
# they name, at their merged-/usr paths: bwrap for the renderer sandbox
# (unless `--render-sandbox off`), the `true` its start-up check runs in it,
# OpenSSH's client, which fetches ssh:// repositories, and `sh` (dash),
# through which gix runs it (`sh -c 'ssh … 2>file'`).
for program in bwrap true ssh sh; do
  path="$(type -P "$program")"
  install -m 0755 "$path" "$rootfs/usr/bin/$program"
  ldd "$path" | grep -o '/[^ ]*' | while read -r library; do
    destination="$rootfs/usr/${library#/usr/}"
    mkdir -p "$(dirname "$destination")"
    cp -L "$library" "$destination"
  done
done
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\ntether:x:65532:65532:tether:/tmp:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\ntether:x:65532:\n' >"$rootfs/etc/group"
cp Containerfile "$context/"

# Build the image in storage of our own (no daemon, nothing kept in
# /var/lib/containers). The Containerfile runs nothing (only COPY), so
# chroot isolation and vfs suffice, as root and without user namespaces.
buildah_() {
  buildah --root "$storage/root" --runroot "$storage/run" --storage-driver vfs "$@"
}
version="$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "tether-cli"))')"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
started=$(date +%s)
step "building image $tag (storage $storage)"
buildah_ bud --isolation chroot --layers=false -f "$context/Containerfile" \
  --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
  -t "$tag" "$context" >&2
# A rebuild leaves the previous image untagged; vfs keeps it whole.
buildah_ rmi --prune >/dev/null 2>&1 || true
step "image built in $(seconds "$started") s"

# Measure: push to an OCI layout with gzip layers, as a registry gets them.
layout="$storage/measure"
rm -rf "$layout"
buildah_ push --quiet --compression-format gzip "$tag" "oci:$layout:$tag" >&2
sizes="$(python3 - "$layout" <<'EOF'
import gzip, json, os, sys
layout = sys.argv[1]
def blob(digest):
    algorithm, hex_ = digest.split(":")
    return os.path.join(layout, "blobs", algorithm, hex_)
index = json.load(open(os.path.join(layout, "index.json")))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
compressed = manifest["config"]["size"] + sum(l["size"] for l in manifest["layers"])
uncompressed = manifest["config"]["size"]
for layer in manifest["layers"]:
    with gzip.open(blob(layer["digest"])) as stream:
        while chunk := stream.read(1 << 20):
            uncompressed += len(chunk)
print(uncompressed, compressed)
EOF
)"
read -r uncompressed compressed <<<"$sizes"
rm -rf "$layout"

if [ -n "$output" ]; then
  if [ -d "$output" ] || [ "${output%/}" != "$output" ]; then
    destination="oci:${output%/}:$tag"
  else
    destination="oci-archive:$output:$tag"
  fi
  mkdir -p "$(dirname "${output%/}")"
  buildah_ push --quiet --compression-format gzip "$tag" "$destination" >&2
  step "wrote $destination"
fi

mib() { python3 -c "print(f'{$1 / 1048576:.1f}')"; }
step "image $tag: $(mib "$uncompressed") MiB uncompressed, $(mib "$compressed") MiB compressed (gzip)"
echo "image $tag"
echo "uncompressed $uncompressed"
echo "compressed $compressed"
