#!/usr/bin/env bash
# Checks and installs what Tether's build, tests and demo need on a fresh
# machine. Debian packages are installed with apt-get when missing; the
# toolchains (Rust, Go) and kubectl must already be there, and their absence
# is reported loudly.
#
# Source it (`. scripts/setup.sh`) so PATH changes reach the caller.
set -euo pipefail

export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"

missing_debian=()
need_debian() { # need_debian COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 || missing_debian+=("$2")
}
need_debian git git
need_debian gpg gnupg
need_debian ssh-keygen openssh-client
need_debian sshd openssh-server
need_debian python3 python3
need_debian curl curl
# Renderers (helm, kustomize, the Jsonnet child) run inside bubblewrap.
need_debian bwrap bubblewrap
# The container image is built with buildah (scripts/build-image.sh).
need_debian buildah buildah
# Metrics and alert rules are checked by a real Prometheus (and promtool).
need_debian prometheus prometheus
need_debian promtool prometheus
# The dashboard's browser tests drive a real headless Chromium over WebDriver.
need_debian chromium chromium
need_debian chromedriver chromium-driver
# OCI sources are tested against the CNCF distribution registry, with
# htpasswd (bcrypt) users for its basic authentication.
need_debian docker-registry docker-registry
need_debian htpasswd apache2-utils

if [ "${#missing_debian[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup: missing packages ${missing_debian[*]}; install them (Debian: apt-get install ${missing_debian[*]})" >&2
    exit 1
  fi
  echo "setup: installing ${missing_debian[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_debian[@]}" >/dev/null
fi

for tool in cargo go kubectl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "setup: '$tool' is required and not on PATH (Rust >= 1.95 via rustup, Go >= 1.26, kubectl)" >&2
    exit 1
  fi
done

# Helm renders Helm sources; it is built from the Go module proxy once and
# cached (the same static binary the container image ships), so the Helm
# tests run on every machine rather than being skipped.
if ! command -v helm >/dev/null 2>&1; then
  helm="$("$(dirname "${BASH_SOURCE[0]}")/go-tool.sh" helm)"
  export PATH="$(dirname "$helm"):$PATH"
fi
