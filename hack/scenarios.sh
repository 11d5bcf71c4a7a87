#!/usr/bin/env bash
# Runs the scenario library (examples/scenarios) with `kueuelab scenario run`, every variant on a
# fresh local cluster, and prints each scenario's PASS/FAIL lines and wall time. make test's e2e
# runs only the scenarios marked `ci: true`; this runs the others too (backfill, gang,
# checkpoint-sweep, scalability: a minute to an hour each, measured in README.md's Tests).
# Usage: hack/scenarios.sh [OUT] [NAMES]   (NAMES: space-separated, default every scenario)
# Exits non-zero when a scenario fails a check or does not run. Run it on an otherwise idle machine.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/scenarios}
make build >/dev/null || exit 1
NAMES=${2:-}
[ -n "$NAMES" ] || NAMES=$(ls examples/scenarios)
mkdir -p "$OUT"
rc=0
for n in $NAMES; do
  [ -f "examples/scenarios/$n/scenario.yaml" ] || { echo "$n: no examples/scenarios/$n/scenario.yaml"; rc=1; continue; }
  rm -rf "${OUT:?}/$n"
  t0=$SECONDS
  if ./bin/kueuelab scenario run "$n" --name "scenarios-$n" --out "$OUT/$n" >"$OUT/$n.log" 2>&1; then st=PASS; else st=FAIL; rc=1; fi
  echo "== $n: $st in $((SECONDS - t0))s ($OUT/$n.log)"
  grep -E '^\s+(PASS|FAIL)|error' "$OUT/$n.log"
done
exit $rc
