#!/usr/bin/env python3
"""The cluster engine's run-to-run spread, and the sim engine's place in it (hack/spread.sh).

usage: spread.py CLUSTER_DIR... -- SIM_DIR

Per metric of summary.json (the whole run) and of idle.csv (quota held idle): the cluster runs'
values, min, max, spread = max - min, median, the sim's value, and "ok" when
|sim - median| <= spread (the sim agrees with the cluster as closely as the cluster agrees with
itself), else "OUT".
"""
import csv
import json
import statistics
import sys


def metrics(d):
    s = json.load(open(d + "/summary.json"))
    g = s["groups"][0]
    ri = s.get("reservedIdle") or {}
    waits = list(csv.DictReader(open(d + "/idle.csv")))
    longest = sorted(float(w["longest_wait_sec"]) for w in waits) if waits and "longest_wait_sec" in waits[0] else []
    return {
        "TTA p50 s": g["timeToAdmissionSec"]["p50"],
        "TTA p95 s": g["timeToAdmissionSec"]["p95"],
        "JCT p50 s": g["jctSec"]["p50"],
        "JCT p95 s": g["jctSec"]["p95"],
        "GPU allocation": g["gpuAllocation"],
        "preemptions": g["preemptions"],
        "reserved idle GPU-h": ri.get("gpuHours", 0),
        "waits > threshold": ri.get("overThreshold", 0),
        "waits unschedulable": ri.get("unschedulable", 0),
        "idle.csv rows": len(waits),
        "idle longest p95 s": longest[int(0.95 * (len(longest) - 1))] if longest else 0,
    }


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    i = argv.index("--")
    cluster = []
    for d in argv[:i]:
        why = json.load(open(d + "/summary.json")).get("incomplete")
        if why:
            print(f"{d}: left out, incomplete: {why}")
            continue
        cluster.append(metrics(d))
    if not cluster:
        sys.exit("no complete cluster run")
    sim = metrics(argv[i + 1])
    print(f"{len(cluster)} cluster runs, 1 sim run")
    print(f"{'metric':<22}{'min':>12}{'max':>12}{'spread':>12}{'median':>12}{'sim':>12}  verdict")
    out = 0
    for k in cluster[0]:
        vals = [c[k] for c in cluster]
        lo, hi, med = min(vals), max(vals), statistics.median(vals)
        ok = abs(sim[k] - med) <= hi - lo
        out += not ok
        print(f"{k:<22}{lo:>12.3f}{hi:>12.3f}{hi - lo:>12.3f}{med:>12.3f}{sim[k]:>12.3f}  {'ok' if ok else 'OUT'}")
    print(f"{out} metrics outside the cluster's spread")


if __name__ == "__main__":
    main(sys.argv[1:])
