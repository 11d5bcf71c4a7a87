#!/usr/bin/env bash
# Replays one generated trace on the local cluster at two speedups and compares the results: with
# the held trace clock (runtime/simclock) the median job completion time should not depend on the
# speedup. Takes about an hour with the defaults (the slow replay is the long one).
#
#   hack/fidelity.sh                      # 300 workloads over 12 h, speedups 100 and 1000
#   JOBS=100 SPAN=4h FAST=2000 hack/fidelity.sh
set -euo pipefail

jobs=${JOBS:-300}
span=${SPAN:-12h}
seed=${SEED:-1}
slow=${SLOW:-100}
fast=${FAST:-1000}
spec=${CLUSTER:-examples/clusters/teams.yaml}
out=${OUT:-results/fidelity}
bin=${KUEUELAB:-./bin/kueuelab}

mkdir -p "$out"
"$bin" run --name fidelity --gen-jobs "$jobs" --gen-span "$span" --seed "$seed" --cluster "$spec" \
  --speedup "$fast" --out "$out/speedup-$fast"
"$bin" run --name fidelity --trace "$out/speedup-$fast/trace.jsonl" --seed "$seed" --cluster "$spec" \
  --speedup "$slow" --out "$out/speedup-$slow"
"$bin" report "$out/speedup-$slow" "$out/speedup-$fast" --baseline "speedup-$slow" --out "$out/report.html" >"$out/report.txt"

# The whole run's tables (not per queue or family), the speedup-$slow run as the baseline.
awk '/^[^ ]/ { show = ($0 !~ /·/) } show' "$out/report.txt" | tee "$out/fidelity.txt"
