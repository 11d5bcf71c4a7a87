#!/usr/bin/env bash
# The cluster engine's run-to-run spread on one trace, and where the sim engine falls in it.
# Replays the README's trace RUNS times on the local cluster (same binary, same trace, same seed),
# once on the sim engine, and prints per metric the cluster runs' min, max and spread (max - min)
# and the sim's value, and whether the sim is within the spread of the cluster runs' median
# (hack/spread.py). Takes RUNS x ~4 min on 2 cores with the tools cached.
#
#   hack/spread.sh                        # the README trace, 5 cluster runs
#   RUNS=3 JOBS=100 SPAN=4h hack/spread.sh
#   TRACE=t.jsonl CLUSTER=spec.yaml hack/spread.sh   # a trace of one's own
set -euo pipefail

runs=${RUNS:-5}
jobs=${JOBS:-300}
span=${SPAN:-12h}
seed=${SEED:-1}
spec=${CLUSTER:-examples/clusters/teams.yaml}
out=${OUT:-results/spread}
bin=${KUEUELAB:-./bin/kueuelab}

mkdir -p "$out"
first=1
trace=${TRACE:-}
if [ -z "$trace" ]; then
  "$bin" run --gen-jobs "$jobs" --gen-span "$span" --seed "$seed" --cluster "$spec" --out "$out/cluster-1" || echo "cluster-1: exit $?"
  trace=$out/cluster-1/trace.jsonl first=2
fi
for i in $(seq "$first" "$runs"); do
  # An incomplete run (a preemption loop, a timeout) still writes its results; spread.py names it
  # and leaves it out of the spread.
  "$bin" run --trace "$trace" --seed "$seed" --cluster "$spec" --out "$out/cluster-$i" || echo "cluster-$i: exit $?"
done
"$bin" run --engine sim --trace "$trace" --seed "$seed" --cluster "$spec" --out "$out/sim"
python3 "$(dirname "$0")/spread.py" "$out"/cluster-* -- "$out/sim" | tee "$out/spread.txt"
