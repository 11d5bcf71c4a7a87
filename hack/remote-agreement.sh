#!/usr/bin/env bash
# Per-workload agreement of a contended replay on another cluster: the same generated trace twice on
# kueuelab's local cluster (the run-to-run spread) and once with `run --kubeconfig` on a second
# control plane started bare and prepared only by `cluster install` (upstream's 1 s Job batch
# period there). Prints, for local B and for the other cluster against local A, how many workloads
# have the same time-to-admission and JCT, the largest differences, and hack/compare-runs.py's
# aggregate check against the clock issue's tolerances. Run it under the shared lock:
#
#   flock /tmp/kl/e2e.lock hack/remote-agreement.sh          # 100 workloads on small.yaml
#   JOBS=200 SEED=2 flock /tmp/kl/e2e.lock hack/remote-agreement.sh
set -euo pipefail

jobs=${JOBS:-100}
seed=${SEED:-1}
out=${OUT:-results/remote-agreement}
bin=$(realpath "${KUEUELAB:-./bin/kueuelab}")
spec=$(realpath "${CLUSTER:-examples/clusters/small.yaml}")
here=$(dirname "$(realpath "$0")")

rm -rf "$out"
mkdir -p "$out"
state=$(mktemp -d /tmp/kueuelab-remote-agreement-XXXX)
cleanup() {
  XDG_STATE_HOME=$state "$bin" cluster down --name ragree-local --purge >/dev/null 2>&1 || true
  XDG_STATE_HOME=$state "$bin" cluster down --name ragree-bare --purge >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
export XDG_STATE_HOME=$state

"$bin" run --name ragree-local --keep-cluster --gen-jobs "$jobs" --seed "$seed" --cluster "$spec" --out "$out/local-a" >"$out/local-a.log" 2>&1
"$bin" run --name ragree-local --trace "$out/local-a/trace.jsonl" --seed "$seed" --cluster "$spec" --out "$out/local-b" >"$out/local-b.log" 2>&1

"$bin" cluster up --bare --name ragree-bare >"$out/bare-up.log" 2>&1
kc=$("$bin" cluster kubeconfig --name ragree-bare)
read -r kueue sched < <(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["ports"]; print(p["KueueMetrics"], p["Scheduler"])' "$state/kueuelab/ragree-bare/cluster.json")
metrics=(--kueue-metrics "https://127.0.0.1:$kueue/metrics" --scheduler-metrics "https://127.0.0.1:$sched/metrics")
"$bin" cluster install --kubeconfig "$kc" --cluster "$spec" "${metrics[@]}" >"$out/install.log" 2>&1
"$bin" run --kubeconfig "$kc" --trace "$out/local-a/trace.jsonl" --seed "$seed" --cluster "$spec" "${metrics[@]}" \
  --out "$out/remote" >"$out/remote.log" 2>&1

python3 - "$out" <<'EOF' | tee "$out/agreement.txt"
import csv, sys
out = sys.argv[1]
def load(d):
    return {r["id"]: r for r in csv.DictReader(open(f"{out}/{d}/workloads.csv"))}
def span(r, a, b):
    return float(r[b]) - float(r[a]) if r.get(a) and r.get(b) else None
a = load("local-a")
for name in ("local-b", "remote"):
    b = load(name)
    same, diffs = 0, []
    for i, ra in a.items():
        rb = b.get(i)
        tta = (span(ra, "submitted_sec", "admitted_sec"), span(rb, "submitted_sec", "admitted_sec")) if rb else (None, None)
        jct = (span(ra, "submitted_sec", "finished_sec"), span(rb, "submitted_sec", "finished_sec")) if rb else (None, None)
        if None in tta or None in jct:
            diffs.append((float("inf"), i, "missing"))
            continue
        d = max(abs(tta[1] - tta[0]), abs(jct[1] - jct[0]))
        if d <= max(0.01 * jct[0], 1):
            same += 1
        else:
            diffs.append((d, i, f"TTA {tta[0]:.1f}/{tta[1]:.1f} JCT {jct[0]:.1f}/{jct[1]:.1f}"))
    diffs.sort(reverse=True)
    print(f"local-a vs {name}: {same} of {len(a)} workloads agree within max(1 %, 1 s); largest: " +
          "; ".join(f"{i} {s}" for _, i, s in diffs[:3]))
EOF
for name in local-b remote; do
  python3 "$here/compare-runs.py" "$out/local-a" "$out/$name" | tee -a "$out/agreement.txt"
done
