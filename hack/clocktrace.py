#!/usr/bin/env python3
"""Summarise a trace clock hold log (KUEUELAB_CLOCK_TRACE=file kueuelab run ...).

Per hold kind: how many holds, how long each lasted (p50, p95, max, total wall seconds), and the
wall time during which that kind was the only thing keeping the clock still ("alone"): the time a
faster step of that kind would save.
"""
import collections
import sys


def main(path):
    start = {}
    durs = collections.defaultdict(list)
    active = collections.Counter()
    alone = collections.Counter()
    last = 0.0
    events = 0
    for line in open(path):
        parts = line.split()
        if len(parts) != 3:
            continue
        t, ev, what = float(parts[0]), parts[1], parts[2]
        events += 1
        kinds = [k for k, n in active.items() if n > 0]
        if len(kinds) == 1:
            alone[kinds[0]] += t - last
        last = t
        kind = what.split("/", 1)[0]
        if ev == "hold":
            start[what] = t
            active[kind] += 1
        elif ev in ("release", "expire") and what in start:
            durs[kind].append(t - start.pop(what))
            if ev == "expire":
                durs[kind + "(expired)"].append(0)
            active[kind] -= 1
    print(f"{events} events over {last:.1f} s of wall time")
    print(f"{'kind':<16}{'n':>7}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'total s':>9}{'alone s':>9}")
    for kind in sorted(durs, key=lambda k: -sum(durs[k])):
        d = sorted(durs[kind])
        q = lambda p: d[min(len(d) - 1, int(p * len(d)))] * 1000
        print(f"{kind:<16}{len(d):>7}{q(0.5):>9.1f}{q(0.95):>9.1f}{d[-1]*1000:>9.1f}{sum(d):>9.1f}{alone[kind]:>9.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
