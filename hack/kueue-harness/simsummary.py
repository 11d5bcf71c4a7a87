#!/usr/bin/env python3
"""A kueuelab replay of a harness shape (hack/kueueperf) summarised as summary.py summarises
Kueue's harness: per class the mean time to admission (the last admission minus the submission,
as the harness's checker takes the last admission seen minus the first event), evictions, and the
makespan (last finish minus first submission).

usage: simsummary.py RESULTS_DIR [RESULTS_DIR ...]
"""
import collections
import json
import re
import sys


def summary(d):
    submit, last, evictions, fins = {}, {}, collections.Counter(), []
    for line in open(f"{d}/events.jsonl"):
        e = json.loads(line)
        w, t = e.get("workload", ""), e["t"]
        if e["type"] == "submitted":
            submit[w] = t
        elif e["type"] == "admitted":
            last[w] = t
        elif e["type"] == "evicted":
            evictions[w] += 1
        elif e["type"] == "finished":
            fins.append(t)
    by = collections.defaultdict(list)
    ev = collections.Counter()
    for w, t in submit.items():
        cls = re.match(r"c\d+-q\d+-(\w+)-\d+$", w).group(1)
        by[cls].append(last[w] - t if w in last else 0.0)
        ev[cls] += evictions[w]
    out = {f"{c}: TTA mean s": sum(v) / len(v) for c, v in sorted(by.items())}
    out.update({f"{c}: evictions": ev[c] for c in sorted(by)})
    out["makespan s"] = max(fins) - min(submit.values())
    return out


for d in sys.argv[1:]:
    print(d, json.dumps({k: round(v, 1) for k, v in summary(d).items()}))
