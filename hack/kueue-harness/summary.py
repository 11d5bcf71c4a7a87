#!/usr/bin/env python3
"""Kueue's harness runs (hack/kueue-harness/run.sh) summarised, with their spread.

usage: summary.py OUT_DIR

Per run and per workload class: the mean time to admission as the harness's own summary.yaml
reports it (its checker's number: the last admission seen minus the first event seen, over every
workload of the class), the same mean recomputed from wlTimes.csv (an independent reading of the
per-workload times; they must agree to the millisecond the harness truncates to), evictions,
minimalkueue's wall time (the rangespec's maxWallMs), the makespan (last finish minus first
event), the deep-queue admission rate (admissions per second between the 10th and 90th
percentile of first admissions) and the ClusterQueues' average CPU usage in % of nominal quota
(the rangespec's clusterQueueClassesMinUsage). Then, over the runs: mean, min, max and spread
(max - min, in % of the mean). Writes OUT_DIR/summary.json and prints a table.
"""
import csv
import glob
import json
import os
import statistics
import sys

import yaml


def run_metrics(d):
    s = yaml.safe_load(open(os.path.join(d, "summary.yaml")))
    cmd = yaml.safe_load(open(os.path.join(d, "minimalkueue.stats.yaml")))
    rows = list(csv.DictReader(open(os.path.join(d, "wlTimes.csv"))))
    m = {"wall s": cmd["wallMs"] / 1000, "dropped events": s.get("droppedWorkloadEvents", 0)}
    for cls, c in sorted(s["workloadClasses"].items()):
        m[f"{cls}: TTA mean s (harness)"] = c["averageTimeToAdmissionMs"] / 1000
        m[f"{cls}: evictions"] = c["totalEvictions"]
        m[f"{cls}: count"] = c["count"]
    by = {}
    for r in rows:
        by.setdefault(r["class"], []).append(r)
    unadmitted = 0
    for cls, rs in sorted(by.items()):
        tta = []
        for r in rs:
            last, first = int(r["last_admitted_us"]), int(r["first_event_us"])
            if last == 0:
                unadmitted += 1
                tta.append(0)  # the harness counts a workload it never saw admitted as 0 ms
                continue
            tta.append((last - first) // 1000)  # the harness truncates to whole milliseconds
        m[f"{cls}: TTA mean s (wlTimes)"] = sum(tta) // len(tta) / 1000
    m["unadmitted"] = unadmitted
    firsts = [int(r["first_event_us"]) for r in rows]
    fins = [int(r["finished_us"]) for r in rows if int(r["finished_us"])]
    m["makespan s"] = (max(fins) - min(firsts)) / 1e6 if fins else 0
    adm = sorted(int(r["first_admitted_us"]) for r in rows if int(r["first_admitted_us"]))
    if len(adm) > 10:
        lo, hi = adm[len(adm) // 10], adm[len(adm) * 9 // 10]
        m["admissions/s (p10-p90)"] = (len(adm) * 8 // 10) / ((hi - lo) / 1e6) if hi > lo else 0
    for cls, g in sorted(s["clusterQueueClasses"].items()):
        if g["nominalQuota"]:
            m[f"{cls}: CPU usage % of nominal"] = 100 * g["cpuAverageUsage"] / g["nominalQuota"]
    return m


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    out = argv[1]
    runs = sorted(glob.glob(os.path.join(out, "run-*")), key=lambda p: int(p.rsplit("-", 1)[1]))
    per = {}
    for d in runs:
        if os.path.exists(os.path.join(d, "wlTimes.csv")):
            per[os.path.basename(d)] = run_metrics(d)
    if not per:
        sys.exit(f"summary.py: no finished run in {out}")
    keys = list(next(iter(per.values())).keys())
    table = {}
    for k in keys:
        vals = [m[k] for m in per.values() if k in m]
        mean = statistics.fmean(vals)
        table[k] = {"runs": vals, "mean": mean, "min": min(vals), "max": max(vals),
                    "spread %": 100 * (max(vals) - min(vals)) / mean if mean else 0}
    json.dump({"runs": per, "metrics": table}, open(os.path.join(out, "summary.json"), "w"), indent=1)
    print(f"{len(per)} runs in {out}")
    print(f"{'metric':34} {'mean':>10} {'min':>10} {'max':>10} {'spread %':>9}")
    for k, t in table.items():
        print(f"{k:34} {t['mean']:10.2f} {t['min']:10.2f} {t['max']:10.2f} {t['spread %']:9.1f}")


if __name__ == "__main__":
    main(sys.argv)
