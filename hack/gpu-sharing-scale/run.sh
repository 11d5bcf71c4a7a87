#!/usr/bin/env bash
# The sim's cost with share-sized GPU requests against whole GPUs, the pair run at the same time
# (GOMAXPROCS=1 each, on 2 cores): A, the org profile on examples/clusters/org.yaml; B, the same
# profile with debug_eval's shares (org-shares.yaml) on time-sliced replicas (org-timeslice.yaml)
# or MIG slices (SHARING=mig: org-mig.yaml). Prints each run's CPU seconds, wall time and peak
# memory from /usr/bin/time, and the ratios B/A.
#   JOBS=1000000 hack/gpu-sharing-scale/run.sh          # about an hour on this 2-core machine
#   JOBS=20000 SHARING=mig hack/gpu-sharing-scale/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
JOBS=${JOBS:-20000}
SHARING=${SHARING:-timeslice}
OUT=${OUT:-$(mktemp -d)}
BIN=${BIN:-$root/bin/kueuelab}
case "$SHARING" in
timeslice) cluster_b=$here/org-timeslice.yaml ;;
mig) cluster_b=$here/org-mig.yaml ;;
*) echo "SHARING=$SHARING: want timeslice or mig" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
"$BIN" gen --profile "$root/examples/profiles/org.yaml" --jobs "$JOBS" --seed 1 --emit-workload-records --out "$OUT/a.jsonl"
"$BIN" gen --profile "$here/org-shares.yaml" --jobs "$JOBS" --seed 1 --emit-workload-records --out "$OUT/b.jsonl"
"$BIN" trace inspect "$OUT/b.jsonl" | grep -i "shares of a GPU" || true
GOMAXPROCS=1 /usr/bin/time -v "$BIN" run --engine sim --trace "$OUT/a.jsonl" --cluster "$root/examples/clusters/org.yaml" --out "$OUT/ra" >"$OUT/run-a.log" 2>"$OUT/time-a.log" &
a=$!
GOMAXPROCS=1 /usr/bin/time -v "$BIN" run --engine sim --trace "$OUT/b.jsonl" --cluster "$cluster_b" --out "$OUT/rb" >"$OUT/run-b.log" 2>"$OUT/time-b.log" &
b=$!
wait "$a" "$b"
python3 - "$OUT" <<'PY'
import re, sys
out = sys.argv[1]
def read(side):
    t = open(f"{out}/time-{side}.log").read()
    cpu = float(re.search(r"User time \(seconds\): ([\d.]+)", t).group(1)) + float(re.search(r"System time \(seconds\): ([\d.]+)", t).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", t).group(1)
    secs = 0.0
    for part in wall.split(":"):
        secs = secs * 60 + float(part)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1024
    return cpu, secs, rss
a, b = read("a"), read("b")
for name, x in (("A whole GPUs", a), ("B shares", b)):
    print(f"{name}: {x[0]:.0f} CPU-s, {x[1]:.1f} s wall, {x[2]:.0f} MiB peak")
print(f"B/A: CPU {b[0]/a[0]:.2f}, wall {b[1]/a[1]:.2f}, memory {b[2]/a[2]:.2f}")
PY
echo "results in $OUT"
