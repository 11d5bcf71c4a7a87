#!/usr/bin/env bash
# Calibration of kueuelab forecast on a sim replay it was not tuned on: the replay runs to the end
# (the truth), is stopped at each snapshot time with its state written, and every state is
# forecast with the work left drawn (--draw-known) and scored against the full replay. Prints one
# score line per snapshot time and the pooled coverage of the p10-p90 interval.
# ARRIVALS=history forecasts the arrivals from a process fitted to each state's history, as a live
# cluster's forecast must (recorded, the default, replays the trace's own: an oracle for them);
# HORIZON bounds each run.
#
#   CLUSTER=examples/clusters/teams.yaml JOBS=600 SPAN=12h SEED=1 TIMES="4h 6h 8h 10h" REPEATS=10 \
#     OUT=/tmp/fcal hack/forecast-calibration/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/kueuelab}
CLUSTER=${CLUSTER:-examples/clusters/teams.yaml}
JOBS=${JOBS:-600}
SPAN=${SPAN:-12h}
SEED=${SEED:-1}
TIMES=${TIMES:-4h 6h 8h 10h}
REPEATS=${REPEATS:-10}
CP=${CP:-kueue}
ARRIVALS=${ARRIVALS:-recorded}
HORIZON=${HORIZON:-168h}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
"$BIN" run --engine sim --gen-jobs "$JOBS" --gen-span "$SPAN" --seed "$SEED" --cluster "$CLUSTER" --control-plane "$CP" --out "$OUT/full" >/dev/null
for t in $TIMES; do
  "$BIN" run --engine sim --trace "$OUT/full/trace.jsonl" --seed "$SEED" --cluster "$CLUSTER" --control-plane "$CP" \
    --sim-max-trace "$t" --state-out "$OUT/state-$t" --out "$OUT/part-$t" >/dev/null 2>&1 || true
  if ! grep -q "phase: Pending" "$OUT/state-$t/state.yaml"; then
    echo "$t: no pending workload"
    continue
  fi
  "$BIN" forecast "$OUT/state-$t" --repeats "$REPEATS" --seed "$SEED" --draw-known --control-plane "$CP" \
    --arrivals "$ARRIVALS" --horizon "$HORIZON" \
    --score "$OUT/full" -o json 2>/dev/null > "$OUT/forecast-$t.json"
  python3 - "$t" "$OUT/forecast-$t.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
s = r["score"]
print(f'{sys.argv[1]}: {s["workloads"]} pending, inside p10-p90 {s["inside"]} ({100*s["coverage"]:.0f}%), '
      f'median |p50-actual| {s["medianAbsErrSec"]:.0f}s, {r["drawn"]} drawn from {r["history"]} finished, {r["wallSec"]:.0f}s wall')
PY
done
python3 - "$OUT" <<'PY'
import glob, json, math, sys
k = n = 0
for f in glob.glob(sys.argv[1] + "/forecast-*.json"):
    s = json.load(open(f))["score"]
    k += s["inside"]; n += s["workloads"]
if n:
    z = 1.959963984540054; p = k / n
    c = (p + z*z/(2*n)) / (1 + z*z/n); h = z*math.sqrt(p*(1-p)/n + z*z/(4*n*n)) / (1 + z*z/n)
    print(f"pooled: {k} of {n} inside p10-p90 ({100*p:.0f}%, 95% CI {100*max(c-h,0):.0f}-{100*min(c+h,1):.0f}%)")
PY
