#!/usr/bin/env bash
# Builds the local control plane (scripts/build-kube-local.sh) and runs its
# own checks: gofmt, go vet and go test. scripts/test.sh runs it in the
# background while cargo builds.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
scripts/build-kube-local.sh >/dev/null
echo "check-kube-local: the build took $((SECONDS - started)) s"
started=$SECONDS

# -trimpath matches the build, so vet and test reuse its compiled packages
# instead of compiling Kubernetes a second time. go vet runs every analyzer
# over the program and all it imports (minutes on a fresh machine); go test
# would run a subset of them over the same again, so it skips vet.
cd tools/kube-local
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "check-kube-local: gofmt would reformat (run gofmt -w in tools/kube-local):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet -trimpath ./...
go test -trimpath -vet=off ./...
echo "check-kube-local: the checks took $((SECONDS - started)) s"
