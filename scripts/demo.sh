#!/usr/bin/env bash
# The main job, end to end on this machine: build Tether and the local
# control plane, bring the control plane up (etcd, kube-apiserver,
# controller-manager, a kubelet), make a Git repository from examples/,
# install Tether *in the cluster* (`tether install --image tether:dev`: two
# controller replicas, which this kubelet runs as real processes of the
# tether binary just built, each with only its ServiceAccount's token),
# create an Application and show it reaching Synced/Healthy; then drift it
# with kubectl, push a commit the API server refuses (nothing of it applies,
# and the NotSyncedTooLong alert goes up: condition, Event, metrics), fix it
# with a new commit, and show Tether converge and the alert clear; last, read
# the controller's /metrics through `kubectl port-forward` with a token
# allowed to scrape it.
# Everything stops when this script ends; pass --keep to leave it running
# (stop it with Ctrl-C).
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

echo "==> starting the local control plane (its kubelet runs the image tether:dev as $tether)"
mkfifo "$state/stdin"
"$kube_local" up --dir "$state/plane" --controller-manager --fake-kubelet \
  --exec-image "tether:dev=$tether" \
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

echo "==> a Git repository made from examples/shop"
# The controller's pods mount an emptyDir at /tmp, hiding the host's: from
# a clone under /tmp, the repository they read lives in /var/tmp instead.
case "$(pwd -P)" in
  /tmp/*) repo=/var/tmp/tether-demo/repo ;;
  *) repo="$state/repo" ;;
esac
rm -rf "$repo" && mkdir -p "$repo" && cp -r examples/shop "$repo/"
git -C "$repo" init -q -b main
git -C "$repo" -c user.name=Demo -c user.email=demo@example.com add -A
git -C "$repo" -c user.name=Demo -c user.email=demo@example.com commit -q -m "shop: first version"
git -C "$repo" log --oneline | sed 's/^/    /'

echo "==> tether install --image tether:dev (the controller runs in the cluster: 2 replicas, one leads)"
"$tether" install --namespace tether-system --image tether:dev | tail -n 4 | sed 's/^/    /'
kubectl -n tether-system rollout status deployment/tether-controller --timeout=120s | sed 's/^/    /'
kubectl -n tether-system get pods -L tether.dev/leader | sed 's/^/    /'

echo "==> the admin project: Applications in tether-system may read a local repository and change any namespace"
# Tenants get projects that allow neither (see the README, Multi-tenancy).
kubectl apply -f - <<'EOF' | sed 's/^/    /'
apiVersion: tether.dev/v1alpha1
kind: Project
metadata: {name: demo-admin}
spec:
  description: The demo's own apps, run by the cluster's administrators.
  applicationNamespaces: [tether-system]
  sourceRepos: ["file://**"]
  allowFileSources: true
  destinationNamespaces: ["**"]
  clusterResources: {allow: [{group: "*", kind: "*"}]}
EOF

echo "==> tether app create shop"
# Polled every 5 s for the demo (a webhook would wake it at once); the
# NotSynced alert after 10 s for the demo (by default an hour).
"$tether" app create shop --repo "file://$repo" --path shop --dest-namespace shop --interval 5s \
  --alert-not-synced-after 10s --project demo-admin

wait_for() { # wait_for DESCRIPTION COMMAND...
  for _ in $(seq 1 300); do "${@:2}" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "demo: timed out waiting for $1" >&2; "$tether" status >&2; exit 1
}
converged() { "$tether" status | grep -q '^shop  *Synced  *Healthy  *Converged '; }
wait_for "shop to converge" converged
"$tether" status

echo
echo "==> drift: kubectl scale deployment/web --replicas=5"
kubectl -n shop scale deployment/web --replicas=5 >/dev/null
reverted() { [ "$(kubectl -n shop get deployment/web -o jsonpath='{.spec.replicas}')" = 2 ]; }
wait_for "the scale to be reverted" reverted
echo "    reverted: spec.replicas is $(kubectl -n shop get deployment/web -o jsonpath='{.spec.replicas}') again"

echo "==> a broken commit: a ConfigMap whose key the API server refuses"
cat >"$repo/shop/broken.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: broken
data:
  "not a valid key!": "x"
YAML
git -C "$repo" add shop/broken.yaml
git -C "$repo" -c user.name=Demo -c user.email=demo@example.com commit -q -m "shop: a broken ConfigMap"
alerting() { "$tether" status | grep -q '^shop .*⚠'; }
wait_for "the NotSyncedTooLong alert" alerting
"$tether" status
"$tether" status shop > "$state/stuck.txt" 2>&1 || true; grep -E "^ *(Not synced|Why):" "$state/stuck.txt" | cut -c1-160 | sed "s/^ */    /" || true
echo "    nothing of the commit applied: configmap/broken $(kubectl -n shop get configmap broken -o name 2>/dev/null || echo "does not exist")"
has_event() { kubectl -n tether-system get events --field-selector "reason=$1" -o name | grep -q .; }
wait_for "the NotSyncedTooLong Event" has_event NotSyncedTooLong
echo "    the Event on the Application:"
kubectl -n tether-system get events --field-selector reason=NotSyncedTooLong -o custom-columns=TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message \
  | cut -c1-150 | sed 's/^/      /'

echo "==> the fix, a new commit: broken.yaml removed, greeting changed in Git"
git -C "$repo" rm -q shop/broken.yaml
sed -i 's/hello from git/hello again from git/' "$repo/shop/config.yaml"
git -C "$repo" -c user.name=Demo -c user.email=demo@example.com commit -q -am "shop: fix, and a new greeting"
head="$(git -C "$repo" rev-parse HEAD)"
at_head() { "$tether" status shop -o json | grep -q "\"revision\": \"$head\""; }
wait_for "the new commit to sync" at_head
wait_for "shop to converge" converged
"$tether" status
"$tether" status shop | sed 's/^/    /'
wait_for "the NotSyncedTooLongCleared Event" has_event NotSyncedTooLongCleared
echo "    the alert cleared: $(kubectl -n tether-system get events --field-selector reason=NotSyncedTooLongCleared -o custom-columns=TYPE:.type,REASON:.reason --no-headers | head -n 1)"
echo "    greeting in the cluster: $(kubectl -n shop get configmap/web-settings -o jsonpath='{.data.greeting}')"
echo "    history:"
"$tether" status shop -o json | python3 -c '
import json, sys
for entry in json.load(sys.stdin)[0]["status"]["history"]:
    print("      ", entry["revision"][:12], entry["initiator"], entry["time"])'

echo
echo "==> the controller's /metrics, through kubectl port-forward, for a token allowed to read them"
kubectl -n tether-system create serviceaccount demo-prometheus >/dev/null
kubectl create clusterrolebinding demo-prometheus --clusterrole tether-metrics-reader \
  --serviceaccount tether-system:demo-prometheus >/dev/null
token="$(kubectl -n tether-system create token demo-prometheus)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# The Service selects the leading replica, the one that reports app series.
kubectl -n tether-system port-forward svc/tether-controller "$port:8080" >"$state/port-forward.log" 2>&1 &
forward=$!
metrics="http://127.0.0.1:$port/metrics"
scraped() { curl -sf -H "Authorization: Bearer $token" "$metrics" >"$state/metrics.txt"; }
wait_for "/metrics through the port-forward" scraped
echo "    /metrics: $metrics (kubectl -n tether-system port-forward svc/tether-controller $port:8080);"
echo "    a Prometheus scrapes each pod's :8080/metrics with a ServiceAccount bound to tether-metrics-reader"
grep -E '^tether_app_(info|not_synced_seconds|drift_total|self_heal_total|sync_total)\{' "$state/metrics.txt" | sed 's/^/    /'
echo "    without a token: HTTP $(curl -s -o /dev/null -w '%{http_code}' "$metrics")"
kill "$forward" 2>/dev/null || true

echo
echo "==> the controller's log (kubectl logs of the leading pod)"
leader="$(kubectl -n tether-system get pods -l tether.dev/leader=true -o name | head -n 1)"
kubectl -n tether-system logs "$leader" | tail -n 5 | cut -c1-200 | sed 's/^/    /'

if $keep; then
  echo
  echo "control plane and controller running; in another shell: export KUBECONFIG=$KUBECONFIG"
  echo "press Ctrl-C to stop"
  wait
fi
