#!/usr/bin/env python3
"""Compare two results directories of the same trace (hack/bench-replay.sh, fidelity step).

Prints, for the whole run: workloads finished in both, median and p95 JCT, p95 time-to-admission,
GPU allocation and energy of each run, and their relative difference against the issue's
tolerances (JCT 1 %, TTA p95 5 %, allocation and energy 1 %), plus how many workloads' JCTs differ
by more than 1 % and the largest differences.
"""
import csv
import json
import sys


def load(d):
    s = json.load(open(d + "/summary.json"))
    w = {r["id"]: r for r in csv.DictReader(open(d + "/workloads.csv"))}
    return s, w


def main(a, b):
    sa, wa = load(a)
    sb, wb = load(b)
    ga, gb = sa["groups"][0], sb["groups"][0]
    both = [i for i in wa if wa[i]["state"] in ("Succeeded", "Failed") and wb.get(i, {}).get("state") in ("Succeeded", "Failed")]
    print(f"A = {a}\nB = {b}")
    print(f"finished in both: {len(both)} of {len(wa)} (A {ga['succeeded'] + ga['failed']}, B {gb['succeeded'] + gb['failed']})")
    rows = [
        ("JCT p50 s", ga["jctSec"]["p50"], gb["jctSec"]["p50"], 0.01),
        ("JCT p95 s", ga["jctSec"]["p95"], gb["jctSec"]["p95"], 0.01),
        ("TTA p95 s", ga["timeToAdmissionSec"]["p95"], gb["timeToAdmissionSec"]["p95"], 0.05),
        ("GPU allocation", ga["gpuAllocation"], gb["gpuAllocation"], 0.01),
        ("energy kWh", ga["energyKWh"], gb["energyKWh"], 0.01),
        ("preemptions", ga["preemptions"], gb["preemptions"], None),
    ]
    print(f"{'metric':<16}{'A':>12}{'B':>12}{'B/A-1':>10}  tolerance")
    for name, x, y, tol in rows:
        rel = (y / x - 1) if x else (0 if not y else float("inf"))
        verdict = "" if tol is None else ("ok" if abs(rel) <= tol else "OVER")
        print(f"{name:<16}{x:>12.3f}{y:>12.3f}{rel:>+10.2%}  {'' if tol is None else f'{tol:.0%} {verdict}'}")
    diffs = []
    for i in both:
        ja, jb = float(wa[i]["jct_sec"]), float(wb[i]["jct_sec"])
        if ja > 0 and abs(jb / ja - 1) > 0.01:
            diffs.append((abs(jb - ja), i, ja, jb))
    diffs.sort(reverse=True)
    print(f"workloads whose JCT differs by > 1 %: {len(diffs)} of {len(both)}")
    for d, i, ja, jb in diffs[:5]:
        print(f"  {i}: {ja:.1f} s vs {jb:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
