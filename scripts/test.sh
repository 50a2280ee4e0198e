#!/usr/bin/env bash
# Runs every test: formatting, lints (Rust, and gofmt and go vet for
# tools/kube-local), unit and conformance tests, and the
# integration tests against a real local control plane (built from upstream
# Kubernetes modules on first run). Fails if a control-plane process outlives
# the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

kube_local="$(scripts/build-kube-local.sh)"
running_before="$(pgrep -fc -- "$kube_local" || true)"

# The local control plane's own checks. -trimpath matches the build above,
# so vet and test reuse its compiled packages instead of compiling
# Kubernetes a second time.
(
  cd tools/kube-local
  unformatted="$(gofmt -l .)"
  if [ -n "$unformatted" ]; then
    echo "test: gofmt would reformat (run gofmt -w in tools/kube-local):" >&2
    echo "$unformatted" >&2
    exit 1
  fi
  go vet -trimpath ./...
  go test -trimpath ./...
)

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace

# Every test process's control plane stops when the process exits (its
# stdin pipe closes); give them a moment, then make sure none is left.
for _ in $(seq 1 30); do
  [ "$(pgrep -fc -- "$kube_local" || true)" -le "$running_before" ] && break
  sleep 1
done
left="$(pgrep -fc -- "$kube_local" || true)"
if [ "$left" -gt "$running_before" ]; then
  echo "test: $((left - running_before)) control-plane process(es) left running:" >&2
  pgrep -fa -- "$kube_local" >&2
  exit 1
fi
echo "test: all tests passed; no control-plane process left behind"
