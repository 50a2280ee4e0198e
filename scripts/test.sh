#!/usr/bin/env bash
# Runs every test: formatting, lints (Rust, and gofmt and go vet for
# tools/kube-local), unit and conformance tests, and the
# integration tests against a real local control plane (built from upstream
# Kubernetes modules on first run). Fails if a control-plane process outlives
# the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step says how long it took, so a slow CI run shows where its time went.
step_started=$SECONDS
took() { echo "test: $1 took $((SECONDS - step_started)) s" >&2; step_started=$SECONDS; }
. scripts/setup.sh
took "setup"
# The image's kustomize is built first: bad_input runs its kustomize cases
# with it as well as with kubectl kustomize, and under CI a test does not
# skip for want of a tool. (Once built, it is cached.)
scripts/go-tool.sh kustomize >/dev/null
took "kustomize"

# Three things run at once, as each leaves the cores idle at moments (a
# crate or a Go package that everything after it waits for, a link): the
# local control plane's build and checks, below cargo's priority; the
# container image's release build (fat LTO, one codegen unit: minutes,
# mostly on one core), at the lowest, on until the image test at the end;
# and in front, cargo's formatting, lints and the tests' build. The image
# build locks only its own profile's build directory.
kube_local_log="$(mktemp)"
setsid nice -n 10 scripts/check-kube-local.sh >"$kube_local_log" 2>&1 &
kube_local_checks=$!
image_build_log="$(mktemp)"
setsid nice -n 19 scripts/build-image.sh --tether-only >"$image_build_log" 2>&1 &
image_build=$!
trap 'kill -- -"$kube_local_checks" -"$image_build" 2>/dev/null || true
  rm -f "$kube_local_log" "$image_build_log"' EXIT

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
took "fmt and clippy"
cargo test --workspace --no-run
took "the tests' build"

if ! wait "$kube_local_checks"; then
  echo "test: the local control plane's build or checks failed:" >&2
  cat "$kube_local_log" >&2
  exit 1
fi
cat "$kube_local_log" >&2
took "the rest of the control plane's build and checks"
kube_local="$(scripts/build-kube-local.sh)"
running_before="$(pgrep -fc -- "$kube_local" || true)"

# The image test runs last and finds the release build done. (--workspace
# --test image, not -p tether-cli: the same features as the workspace's
# build, so the test binary is not compiled again.)
image_test=the_containerfile_builds_a_static_non_root_image
# The test binaries run two at a time (TETHER_TEST_JOBS): most of their
# time is spent waiting on their own control planes, not on the cores. On
# one control plane the user started (TETHER_TEST_KUBECONFIG) they run one
# at a time, as before: binaries were never written to share one at once.
jobs=2
[ -n "${TETHER_TEST_KUBECONFIG:-}" ] && jobs=1
cargo test --workspace --no-run --message-format=json |
  python3 scripts/run-tests.py --jobs "${TETHER_TEST_JOBS:-$jobs}" -- --skip "$image_test"
took "the tests"
if ! wait "$image_build"; then
  echo "test: the image's release build failed:" >&2
  cat "$image_build_log" >&2
  exit 1
fi
grep -h 'built in' "$image_build_log" >&2 || true
took "the rest of the image's release build"
cargo test --workspace --test image
took "the image test"

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
