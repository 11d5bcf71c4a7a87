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

# sample PID ROOT FILE: every second until PID exits, the summed RSS (MiB) of the processes whose
# command line names the pass's state root or is the kueuelab run itself (keeps the maximum), and
# the machine's 1-minute load average (keeps the mean): other work on the machine shows there.
sample() {
  local pid=$1 root=$2 file=$3 peak=0 now load=0 n=0
  while kill -0 "$pid" 2>/dev/null; do
    now=$(ps -eo rss=,args= | awk -v r="$root" -v p="$bin experiment run" 'index($0, r) || index($0, p) { s += $1 } END { printf "%d", s / 1024 }')
    ((now > peak)) && peak=$now
    load=$(awk -v l="$load" '{ print l + $1 }' /proc/loadavg)
    n=$((n + 1))
    sleep 1
  done
  echo "peak RSS $peak MiB, mean load $(awk -v l="$load" -v n="$n" 'BEGIN { printf "%.1f", l / (n ? n : 1) }')" >"$file"
}

for p in 1 2; do
  root=$(mktemp -d /tmp/kueuelab-parallel-bench-XXXX)
  t0=$(date +%s.%N)
  XDG_STATE_HOME=$root "$bin" experiment run "$out/exp.yaml" --out "$out/p$p" --parallel "$p" --name "pbench$p" \
    >"$out/p$p.log" 2>&1 &
  run=$!
  sample "$run" "$root" "$out/p$p.rss" &
  sampler=$!
  wait "$run"
  wait "$sampler"
  t1=$(date +%s.%N)
  echo "parallel $p: $(echo "$t1 - $t0" | bc) s wall, $(cat "$out/p$p.rss") on $(nproc) cores" | tee -a "$out/summary.txt"
  for d in "$out/p$p"/*/r0; do
    python3 - "$d/done" <<'PY' | tee -a "$out/summary.txt"
import json, sys
m = json.load(open(sys.argv[1]))
s = m["summary"]
print(f"  {m['variant']}: {m['wallSec']:.0f} s (replay {s['wallSec']:.0f} s, clock held {s['heldWallSec']:.0f} s)")
PY
  done
  rm -rf "$root"
done
"$bin" report "$out/p1" --out "$out/p1.html" >/dev/null
"$bin" report "$out/p2" --out "$out/p2.html" >/dev/null
cat "$out/summary.txt"
