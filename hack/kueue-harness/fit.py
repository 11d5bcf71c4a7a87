#!/usr/bin/env python3
"""Fit the control-plane model's write latency and cycle computation from Kueue's own logs.

Reads the minimalkueue.err.log of harness runs (run.sh keeps them: minimalkueue logs its
scheduler at V(2)) and prints, per run and pooled:

- writeLatency: the mean time between two consecutive status writes of Kueue's scheduler for
  the heads it requeues in one cycle (Scheduler.requeueAndUpdate, one after the other: each waits
  for the one before to be answered), over the first 100 s, while the generator creates the
  workloads and Kueue's client is not at its rate limit (PATCH 24-42/s of 50 in run 1's metrics):
  the round trip of one write. Gaps under 5 ms are requeues whose status did not change (no
  write).
- cycle: snapshot + nomination time ("Snapshot taken" and "Nomination done" durations) fitted
  as base + perHead x heads ("Obtained heads" headCount), least squares.

usage: fit.py RUN_DIR...
"""
import datetime
import json
import statistics
import sys

GENERATION_SEC = 100


def parse_ts(s):
    base, frac = s.rstrip("Z").split(".")
    t = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + float("0." + frac)


def parse_dur(s):
    for unit, f in (("µs", 1e-6), ("ms", 1e-3), ("ns", 1e-9), ("s", 1.0)):
        if s.endswith(unit):
            return float(s[: -len(unit)]) * f
    raise ValueError("duration %r" % s)


def read(path):
    cycles, requeues, t0 = {}, {}, None
    with open(path, errors="replace") as f:
        for line in f:
            if "scheduler/scheduler.go" not in line:
                continue
            p = line.split("\t")
            if len(p) < 6:
                continue
            msg = p[4]
            if not msg.startswith(("Obtained heads", "Snapshot taken", "Nomination done", "Workload re-queued")):
                continue
            j = json.loads(p[5])
            c, t = j.get("schedulingCycle"), parse_ts(p[0])
            if t0 is None:
                t0 = t
            d = cycles.setdefault(c, {})
            if msg.startswith("Obtained heads"):
                d["t"], d["heads"] = t - t0, j["headCount"]
            elif msg.startswith("Snapshot taken"):
                d["snap"] = parse_dur(j["duration"])
            elif msg.startswith("Nomination done"):
                d["nom"] = parse_dur(j["duration"])
            else:
                requeues.setdefault(c, []).append(t)
    return cycles, requeues


def main(dirs):
    gaps_all, xs_all, ys_all = [], [], []
    for d in dirs:
        cycles, requeues = read(d.rstrip("/") + "/minimalkueue.err.log")
        gaps = []
        for c, ts in requeues.items():
            if c in cycles and cycles[c].get("t", 1e9) < GENERATION_SEC:
                ts.sort()
                gaps += [b - a for a, b in zip(ts, ts[1:]) if b - a > 0.005]
        full = [c for c in cycles.values() if {"t", "heads", "snap", "nom"} <= c.keys()]
        xs, ys = [c["heads"] for c in full], [c["snap"] + c["nom"] for c in full]
        print("%s: writeLatency %.1f ms (n=%d, median %.1f ms); cycle compute mean %.2f ms over %d cycles"
              % (d, 1e3 * statistics.mean(gaps), len(gaps), 1e3 * statistics.median(gaps), 1e3 * statistics.mean(ys), len(ys)))
        gaps_all += gaps
        xs_all += xs
        ys_all += ys
    slope, base = statistics.linear_regression(xs_all, ys_all)
    print("pooled: writeLatency %.1f ms (n=%d); cycle base %.2f ms + %.3f ms per head"
          % (1e3 * statistics.mean(gaps_all), len(gaps_all), 1e3 * base, 1e3 * slope))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
