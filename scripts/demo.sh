#!/usr/bin/env bash
# The main job, end to end on this machine: build Tether and the local
# control plane, bring the control plane up (etcd, kube-apiserver,
# controller-manager, a fake kubelet), sync the example application with
# Tether and show what happened. The control plane stops when this script
# ends; pass --keep to leave it running (stop it with Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

keep=false
[ "${1:-}" = "--keep" ] && keep=true

state="$PWD/.demo"
rm -rf "$state" && mkdir -p "$state"

echo "==> building tether and the local control plane"
cargo build --quiet --bin tether
tether="$PWD/target/debug/tether"
kube_local="$(scripts/build-kube-local.sh)"

echo "==> starting the local control plane"
mkfifo "$state/stdin"
"$kube_local" up --dir "$state/plane" --controller-manager --fake-kubelet \
  <"$state/stdin" >"$state/up.log" 2>"$state/up.err" &
# Holding the fifo open keeps the control plane alive; it stops (and takes
# every child process with it) when this script exits and the fd closes.
exec 3>"$state/stdin"
for _ in $(seq 1 600); do
  grep -q '^READY ' "$state/up.log" && break
  kill -0 $! 2>/dev/null || { cat "$state/up.err" >&2; exit 1; }
  sleep 0.2
done
export KUBECONFIG="$state/plane/kubeconfig"
kubectl version 2>/dev/null | sed 's/^/    /'

echo "==> tether sync --path examples/shop"
"$tether" sync --path examples/shop --namespace shop --app shop

echo "==> waiting for the Deployment to roll out"
kubectl -n shop rollout status deployment/web --timeout=60s

echo "==> what is in the cluster now"
kubectl -n shop get deployment,service,configmap -l tether.dev/app=shop.shop
echo
echo "==> a second sync changes nothing"
"$tether" sync --path examples/shop --namespace shop --app shop | tail -1

if $keep; then
  echo
  echo "control plane running; in another shell: export KUBECONFIG=$KUBECONFIG"
  echo "press Ctrl-C to stop"
  wait
fi
