#!/usr/bin/env bash
# Measures the sim engine (kueuelab run --engine sim) on one core:
#   scale  the default profile for 50 teams (examples/profiles/org.yaml) on the 1,000-node,
#          8,000-GPU org (examples/clusters/org.yaml): 10k, 100k and 1M workloads at the default
#          rate, and 10k and 100k at --mean-inter-arrival-sec 2.4 (the org about 3/4 busy)
#   perf   Kueue's scheduler-performance baseline shape (hack/kueueperf: 15,000 one-pod Jobs,
#          5 cohorts x 6 ClusterQueues)
#   agree  the README trace (300 workloads, teams.yaml) on both engines: the cluster engine on a
#          local cluster (a few minutes), then the sim; their speed ratio and `kueuelab compare`
#          (in $OUT/agree.txt). Not in the default STEPS: it needs the control-plane tools.
# Each run's wall and CPU time, peak RSS, workloads/s and trace seconds per wall second go to
# $OUT/runs.tsv. Traces are generated once into $OUT (the 1M trace is 1.5 GB).
# Usage: hack/bench-sim.sh [OUT] [STEPS]   (STEPS: a subset of "scale perf"; SIZES overrides
# the default-rate sizes, e.g. SIZES="10000 100000"; BIN a binary to measure)
# Run it under the shared lock on an otherwise idle machine: flock /tmp/kl/e2e.lock hack/bench-sim.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/bench-sim}
STEPS=${2:-scale perf}
SIZES=${SIZES:-10000 100000 1000000}
mkdir -p "$OUT"
if [ -z "${BIN:-}" ]; then  # BIN: a kueuelab binary to measure instead of this tree's
  go build -o "$OUT/kueuelab" ./cmd/kueuelab
  BIN=$OUT/kueuelab
fi

# trace NAME JOBS [GEN FLAGS...]: generate $OUT/NAME.jsonl once.
trace() {
  local name=$1 jobs=$2; shift 2
  [ -s "$OUT/$name.jsonl" ] || "$BIN" gen --profile examples/profiles/org.yaml --jobs "$jobs" --seed 1 \
    --emit-workload-records "$@" --out "$OUT/$name.jsonl"
}

# run NAME ARGS...: one sim run on one core into $OUT/NAME; a line in $OUT/runs.tsv.
run() { engine sim "$@"; }

# engine ENGINE NAME ARGS...: one run of either engine (the sim on one core) into $OUT/NAME.
engine() {
  local eng=$1 name=$2; shift 2
  rm -rf "${OUT:?}/$name"
  local procs=1
  [ "$eng" = cluster ] && procs=$(nproc)
  if GOMAXPROCS=$procs /usr/bin/time -f '%e %U %S %M' -o "$OUT/$name.time" \
    "$BIN" run --engine "$eng" --out "$OUT/$name" "$@" >"$OUT/$name.log" 2>&1; then st=ok; else st="exit $?"; fi
  python3 - "$OUT/$name" "$name" "$st" >>"$OUT/runs.tsv" <<'PY'
import json, sys
d, name, st = sys.argv[1:]
wall, user, sys_, rss = open(d + ".time").read().split()[-4:]
s = json.load(open(d + "/summary.json"))
n = sum(s.get("states", {}).values())
print("\t".join([name, st, str(n), wall, "%.1f" % (float(user) + float(sys_)), "%.0f" % (int(rss) / 1024),
                 "%.1f" % (n / float(wall)), "%.0f" % (s["traceSec"] / float(wall)), "%.0f" % s["traceSec"]]))
PY
  tail -1 "$OUT/runs.tsv"
}

[ -s "$OUT/runs.tsv" ] || printf 'run\tstatus\tworkloads\twall_s\tcpu_s\tpeak_rss_MiB\tworkloads_per_s\ttrace_s_per_wall_s\ttrace_s\n' >"$OUT/runs.tsv"
if [[ " $STEPS " == *" scale "* ]]; then
  for n in $SIZES; do
    trace "org-$n" "$n"
    run "org-$n" --trace "$OUT/org-$n.jsonl" --cluster examples/clusters/org.yaml
  done
  for n in 10000 100000; do
    trace "org-busy-$n" "$n" --mean-inter-arrival-sec 2.4
    run "org-busy-$n" --trace "$OUT/org-busy-$n.jsonl" --cluster examples/clusters/org.yaml
  done
fi
if [[ " $STEPS " == *" perf "* ]]; then
  [ -s "$OUT/kueueperf-trace/trace.jsonl" ] || go run ./hack/kueueperf -out "$OUT/kueueperf-trace"
  run kueueperf --trace "$OUT/kueueperf-trace/trace.jsonl" --cluster "$OUT/kueueperf-trace/cluster.yaml"
fi
if [[ " $STEPS " == *" agree "* ]]; then
  # The README's run: the cluster engine generates the trace, the sim replays that file.
  engine cluster readme-cluster --name bench-sim-agree --gen-jobs 300 --gen-span 12h --seed 1 \
    --cluster examples/clusters/teams.yaml
  "$BIN" cluster down --name bench-sim-agree --purge >/dev/null 2>&1 || true
  engine sim readme-sim --trace "$OUT/readme-cluster/trace.jsonl" --seed 1 --cluster examples/clusters/teams.yaml
  "$BIN" compare "$OUT/readme-cluster" "$OUT/readme-sim" --csv "$OUT/agree.csv" >"$OUT/agree.txt" || true
  cat "$OUT/agree.txt"
  python3 - "$OUT/runs.tsv" <<'PY'
import sys
rows = {r[0]: r for r in (l.rstrip("\n").split("\t") for l in open(sys.argv[1]))}
c, s = float(rows["readme-cluster"][3]), float(rows["readme-sim"][3])
print("README trace, whole command: cluster engine %.1f s, sim engine %.2f s: the sim is %.0fx faster" % (c, s, c / s))
PY
fi
column -t -s $'\t' "$OUT/runs.tsv"
