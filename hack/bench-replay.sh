#!/usr/bin/env bash
# Measures the replay on the local control plane, event-driven clock against the held clock it
# replaced (built from HELD_REV), in one session on one machine:
#   1. the README's main job (300 workloads on teams.yaml): wall time, event-driven vs held at 1000
#   2. --gen-jobs 1000 --seed 2 on teams.yaml: wall time, event-driven
#   3. Kueue's scheduler-performance baseline shape (hack/kueueperf, 15,000 one-pod Jobs): wall time
#   4. fidelity on the README trace: event-driven vs held at speedup 100, and two event-driven runs
#      against each other (run-to-run spread)
# Each run is one `kueuelab run` on its own local cluster (started and stopped by the run).
# Usage: hack/bench-replay.sh [OUT] [STEPS]   (STEPS: a subset of "readme thousand perf fidelity")
# Long: ~1.5 h with the held-clock runs. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-results/bench-replay}") # absolute: the held binary is built from another dir
STEPS=${2:-readme thousand perf fidelity}
HELD_REV=${HELD_REV:-ed925cb}
mkdir -p "$OUT"
make build >/dev/null
NEW=$PWD/bin/kueuelab
HELD=$OUT/kueuelab-held
if [[ " $STEPS " == *" readme "* || " $STEPS " == *" fidelity "* ]] && [ ! -x "$HELD" ]; then
  tmp=$(mktemp -d)
  git worktree add -q --detach "$tmp" "$HELD_REV"
  (cd "$tmp" && go build -o "$HELD" ./cmd/kueuelab)
  git worktree remove --force "$tmp"
fi

# run NAME BINARY ARGS...: one replay into $OUT/NAME, its wall time and summary line appended to
# $OUT/runs.tsv.
run() {
  local name=$1 bin=$2; shift 2
  rm -rf "${OUT:?}/$name"
  local t0=$SECONDS
  if "$bin" run --name "bench-$name" --out "$OUT/$name" "$@" >"$OUT/$name.log" 2>&1; then st=ok; else st="exit $?"; fi
  # The held-clock binary leaves its cluster running; stop it (by name: only what this run started).
  "$NEW" cluster down --name "bench-$name" --purge >/dev/null 2>&1 || true
  local wall=$((SECONDS - t0))
  python3 - "$OUT/$name" "$name" "$wall" "$st" >>"$OUT/runs.tsv" <<'EOF'
import json, sys
d, name, wall, st = sys.argv[1:]
s = json.load(open(d + "/summary.json"))
g = s["groups"][0]
q = lambda x: "-" if x is None else "%.1f" % x
print("\t".join([name, wall, st, str(g["workloads"]), str(g["succeeded"] + g["failed"]),
  q(s.get("traceSec")), q(s.get("heldWallSec")), str(s.get("holdsExpired", 0)), str(s.get("lateSteps", "-"))]))
EOF
  tail -1 "$OUT/runs.tsv"
}

[ -f "$OUT/runs.tsv" ] || printf 'run\twall_s\tstatus\tworkloads\tfinished\ttrace_s\theld_s\texpired\tlate\n' >"$OUT/runs.tsv"
README=(--gen-jobs 300 --gen-span 12h --seed 1 --cluster examples/clusters/teams.yaml)
for step in $STEPS; do
  case $step in
  readme)
    run readme-event "$NEW" "${README[@]}"
    run readme-held1000 "$HELD" "${README[@]}" --speedup 1000 ;;
  thousand)
    run thousand-event "$NEW" --gen-jobs 1000 --seed 2 --cluster examples/clusters/teams.yaml ;;
  perf)
    go run ./hack/kueueperf -out "$OUT/kueueperf" >/dev/null
    run perf-event "$NEW" --trace "$OUT/kueueperf/trace.jsonl" --cluster "$OUT/kueueperf/cluster.yaml" --stall-timeout 10m ;;
  fidelity)
    [ -d "$OUT/readme-event" ] || run readme-event "$NEW" "${README[@]}"
    run readme-event2 "$NEW" "${README[@]}"
    run readme-held100 "$HELD" "${README[@]}" --speedup 100
    python3 hack/compare-runs.py "$OUT/readme-event" "$OUT/readme-event2" | tee "$OUT/spread.txt"
    python3 hack/compare-runs.py "$OUT/readme-held100" "$OUT/readme-event" | tee "$OUT/event-vs-held100.txt" ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
column -t -s $'\t' "$OUT/runs.tsv"
