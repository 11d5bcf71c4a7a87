#!/usr/bin/env bash
# Wall time of a 2-variant experiment run one variant after the other and with --parallel 2 (two
# local clusters at once), and the peak memory of the processes of a run (its clusters and the
# kueuelab process). Each pass uses its own state root and cluster names. Run it on an otherwise
# idle machine, under the shared lock where machines are shared:
#
#   flock /tmp/kl/e2e.lock hack/parallel-bench.sh            # 100 workloads, 2 variants
#   JOBS=300 flock /tmp/kl/e2e.lock hack/parallel-bench.sh
set -euo pipefail

jobs=${JOBS:-100}
out=${OUT:-results/parallel-bench}
bin=${KUEUELAB:-./bin/kueuelab}
spec=$(realpath "${CLUSTER:-examples/clusters/teams.yaml}")

rm -rf "$out"
mkdir -p "$out"
cat >"$out/exp.yaml" <<EOF
apiVersion: kueuelab.io/v1alpha1
kind: Experiment
metadata: {name: parallel-bench}
generator: {jobs: $jobs, seed: 7, overrides: {meanInterArrivalSec: 120}}
cluster: $spec
speedup: max
timeout: 30m
variants:
- name: borrowing-off
  patch:
  - set: {queue: "*", flavor: h100-sxm, resource: nvidia.com/gpu, borrowingLimit: 0}
- name: borrowing-limited
EOF

# peak_rss PID FILE: samples, every second until PID exits, the summed RSS (MiB) of the processes
# whose command line names the pass's state root or is the kueuelab run itself; keeps the maximum.
peak_rss() {
  local pid=$1 root=$2 file=$3 peak=0 now
  while kill -0 "$pid" 2>/dev/null; do
    now=$(ps -eo rss=,args= | awk -v r="$root" -v p="$bin experiment run" 'index($0, r) || index($0, p) { s += $1 } END { printf "%d", s / 1024 }')
    ((now > peak)) && peak=$now
    sleep 1
  done
  echo "$peak" >"$file"
}

for p in 1 2; do
  root=$(mktemp -d /tmp/kueuelab-parallel-bench-XXXX)
  t0=$(date +%s.%N)
  XDG_STATE_HOME=$root "$bin" experiment run "$out/exp.yaml" --out "$out/p$p" --parallel "$p" --name "pbench$p" \
    >"$out/p$p.log" 2>&1 &
  run=$!
  peak_rss "$run" "$root" "$out/p$p.rss" &
  sampler=$!
  wait "$run"
  wait "$sampler"
  t1=$(date +%s.%N)
  echo "parallel $p: $(echo "$t1 - $t0" | bc) s wall, peak RSS $(cat "$out/p$p.rss") MiB ($(nproc) cores)" | tee -a "$out/summary.txt"
  rm -rf "$root"
done
"$bin" report "$out/p1" --out "$out/p1.html" >/dev/null
"$bin" report "$out/p2" --out "$out/p2.html" >/dev/null
cat "$out/summary.txt"
