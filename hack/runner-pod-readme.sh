#!/usr/bin/env bash
# The runner image's pod on a real node running the README's replay (300 workloads over 12 h on
# examples/clusters/teams.yaml, seed 1): its wall time and peak memory (the pod cgroup's
# high-water mark, cgroup v1). Needs root (a real node); leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build image IMAGE_FORMAT=oci >/dev/null
V=$(make -s print-version)
NAME=${NAME:-runner-measure}
K=bin/kueuelab
NS=runner-measure
$K cluster up --name "$NAME" --real-node --load-image "bin/images/kueuelab-runner-$V.tar"
trap '$K cluster down --name "$NAME" --purge >/dev/null' EXIT
KC=$($K cluster kubeconfig --name "$NAME")
k() { kubectl --kubeconfig "$KC" "$@"; }
k create namespace $NS
k -n $NS create configmap inputs --from-file=teams.yaml=examples/clusters/teams.yaml
k apply -f - <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: readme, namespace: $NS}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {kueuelab.io/real-node: "true"}
      tolerations: [{key: kueuelab.io/real-node, operator: Exists, effect: NoSchedule}]
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532}
      containers:
      - name: runner
        image: ghcr.io/kueuelab/kueuelab-runner:$V
        imagePullPolicy: Never
        args: [run, --gen-jobs, "300", --gen-span, 12h, --seed, "1", --cluster, inputs/teams.yaml, --out, /tmp/results]
        resources: {requests: {cpu: "1", memory: 2Gi}, limits: {memory: 6Gi}}
        volumeMounts: [{name: inputs, mountPath: /work/inputs}, {name: scratch, mountPath: /tmp}]
      volumes:
      - {name: inputs, configMap: {name: inputs}}
      - {name: scratch, emptyDir: {}}
EOF
peak=0
while :; do
  uid=$(k -n $NS get pods -l job-name=readme -o jsonpath='{.items[0].metadata.uid}' 2>/dev/null || true)
  phase=$(k -n $NS get pods -l job-name=readme -o jsonpath='{.items[0].status.phase}' 2>/dev/null || true)
  for f in /sys/fs/cgroup/memory/kueuelab-"$NAME"/kubepods/*/pod"$uid"/memory.max_usage_in_bytes; do
    [ -n "$uid" ] && [ -r "$f" ] && v=$(cat "$f") && [ "$v" -gt "$peak" ] && peak=$v
  done
  case $phase in Succeeded|Failed) break;; esac
  sleep 2
done
k -n $NS logs job/readme --tail 25
started=$(k -n $NS get pods -l job-name=readme -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.startedAt}')
finished=$(k -n $NS get pods -l job-name=readme -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.finishedAt}')
echo "runner pod: $phase, ran $(( $(date -d "$finished" +%s) - $(date -d "$started" +%s) )) s, peak memory $(( peak / 1048576 )) MiB"
[ "$phase" = Succeeded ]
