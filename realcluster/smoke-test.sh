#!/usr/bin/env bash
# Checks scripts/real-cluster end to end with kubectl: two clusters at once (one with
# kube-controller-manager, kube-scheduler and kwok, one with --no-watch-cache); a StatefulSet
# and a DaemonSet whose pods become Running on kwok nodes; the controller manager's /metrics
# with the admin token; restart-apiserver; compact; a start that fails (its log shown, nothing
# left running); stop leaving no process behind. Needs Go (for the build), kubectl, curl.
# Usage: realcluster/smoke-test.sh (a few minutes after the first build).
set -euo pipefail

SCRIPT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/real-cluster
WORK=$(mktemp -d "${TMPDIR:-/tmp}/real-cluster-smoke.XXXXXX")
FULL=$WORK/full
PLAIN=$WORK/plain

say() { printf '\n== %s\n' "$*" >&2; }
fail() {
    printf 'smoke test FAILED: %s\n' "$*" >&2
    exit 1
}
cleanup() {
    local dir
    for dir in "$FULL" "$PLAIN" "$WORK/broken"; do
        [[ -f $dir/.snapinformer-real-cluster ]] && "$SCRIPT" stop --dir "$dir" >/dev/null 2>&1
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Waits up to $1 seconds for a command to succeed.
until_ok() {
    local secs=$1 deadline
    shift
    deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || fail "not within ${secs}s: $*"
        sleep 1
    done
}

# PIDs of processes whose command line names the directory (this shell excluded).
pids_of() {
    local f pid
    for f in /proc/[0-9]*/cmdline; do
        pid=${f#/proc/}
        pid=${pid%/cmdline}
        [[ $pid == "$BASHPID" || $pid == "$$" ]] && continue
        if grep -qsF -- "$1" "$f"; then echo "$pid"; fi
    done
}

say "build (cached after the first time)"
"$SCRIPT" build >/dev/null

say "two clusters at once"
"$SCRIPT" start --dir "$FULL" --with-controller-manager --with-scheduler --kwok-nodes 3 \
    >"$WORK/full.out" &
full_start=$!
kubeconfig_plain=$("$SCRIPT" start --dir "$PLAIN" --no-watch-cache)
wait "$full_start" || fail "start --with-controller-manager --with-scheduler --kwok-nodes 3"
kubeconfig_full=$(cat "$WORK/full.out")
[[ $kubeconfig_full == "$FULL/kubeconfig" && $kubeconfig_plain == "$PLAIN/kubeconfig" ]] ||
    fail "start printed '$kubeconfig_full' and '$kubeconfig_plain'"
"$SCRIPT" status --dir "$FULL"
"$SCRIPT" status --dir "$PLAIN" >/dev/null

k() { kubectl --kubeconfig "$kubeconfig_full" "$@"; }
kp() { kubectl --kubeconfig "$kubeconfig_plain" "$@"; }

say "kubectl on the plain cluster (no controllers: the default ServiceAccount is created by hand)"
kp get ns
kp create serviceaccount default
kp run plain --image=registry.k8s.io/pause:3.10
[[ $(kp get pod plain -o jsonpath='{.status.phase}') == Pending ]] || fail "the pod is not Pending"

say "a StatefulSet and a DaemonSet on the full cluster"
k apply -f - <<'EOF'
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 5
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.10}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.10}]
EOF
running() { [[ $(k get pods -l "app=$1" --field-selector=status.phase=Running -o name | wc -l) -eq $2 ]]; }
until_ok 120 running web 5
until_ok 120 running agent 3
k get pods -o wide
[[ $(k get pods -l app=agent -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort -u | wc -l) -eq 3 ]] ||
    fail "the daemon pods are not on three different nodes"

say "kube-controller-manager /metrics with the admin token"
eval "$("$SCRIPT" env --dir "$FULL")"
[[ -n ${REAL_CLUSTER_KCM_METRICS_URL:-} ]] || fail "env has no REAL_CLUSTER_KCM_METRICS_URL"
metrics=$(curl -fsS --cacert "$REAL_CLUSTER_CA_FILE" -H "Authorization: Bearer $(cat "$REAL_CLUSTER_TOKEN_FILE")" \
    "$REAL_CLUSTER_KCM_METRICS_URL")
grep -E '^workqueue_adds_total\{name="statefulset"\} [1-9]' <<<"$metrics" ||
    fail "no statefulset work queue adds in the metrics"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$REAL_CLUSTER_CA_FILE" "$REAL_CLUSTER_KCM_METRICS_URL")
[[ $code == 403 ]] || fail "anonymous /metrics answered $code, not 403"

say "restart-apiserver keeps the data and the port"
"$SCRIPT" restart-apiserver --dir "$FULL"
k get statefulset web
k scale statefulset web --replicas=6
until_ok 120 running web 6

say "compact"
rev=$("$SCRIPT" compact --dir "$FULL")
[[ $rev =~ ^[0-9]+$ ]] || fail "compact printed '$rev'"
url="$REAL_CLUSTER_APISERVER_URL/api/v1/namespaces/default/pods?resourceVersion=1&resourceVersionMatch=Exact"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$REAL_CLUSTER_CA_FILE" \
    -H "Authorization: Bearer $(cat "$REAL_CLUSTER_TOKEN_FILE")" "$url")
[[ $code == 410 ]] || fail "a list at a compacted revision answered $code, not 410"

say "a failing start shows the log and leaves nothing behind"
if "$SCRIPT" start --dir "$WORK/broken" --apiserver-arg=--no-such-flag 2>"$WORK/broken.err"; then
    fail "a start with a bad kube-apiserver flag succeeded"
fi
grep -q "unknown flag: --no-such-flag" "$WORK/broken.err" || fail "the failing component's log was not shown"
[[ -z $(pids_of "$WORK/broken") ]] || fail "processes left behind by the failed start"

say "stop"
"$SCRIPT" stop --dir "$FULL"
"$SCRIPT" stop --dir "$PLAIN"
for dir in "$FULL" "$PLAIN"; do
    [[ -z $(pids_of "$dir") ]] || fail "processes left behind in $dir: $(pids_of "$dir")"
    [[ -f $dir/kubeconfig ]] || fail "stop removed files from $dir"
done
if "$SCRIPT" status --dir "$FULL" >/dev/null; then fail "status says the stopped cluster runs"; fi

printf '\nsmoke test passed\n' >&2
