#!/usr/bin/env python3
"""Writes the hand-made traces of examples/scenarios (trace schema v2, workload records only).

Each scenario's trace is small and exact: every workload's submit time, shape and duration is
chosen so that the scenario's checks hold for a reason the scenario's comments give. Rerun after
changing a scenario:  python3 hack/scenario-traces.py
"""
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "scenarios")
PROFILE = {"cpuUtilization": 0.3, "gpuUtilization": 0.9, "memoryIntensity": 0.3, "ioIntensity": 0.1,
           "cpuFeedIntensityGpu": 0.4}
CLASS = {"cpu": "cpu.mixed", "gpu": "gpu.compute_bound"}


def workload(wid, t, ns, family, dur, pods, intent="standard", gang=None, **extra):
    w = {"type": "workload", "schemaVersion": "v2", "workloadId": wid, "submitTimeOffsetSec": t,
         "namespace": ns, "workloadType": family, "durationSec": dur, "workloadClass": CLASS,
         "sharedIntensityProfile": PROFILE, "pods": pods, "intentClass": intent}
    if gang:
        w["gang"] = True
    w.update(extra)
    return w


def gpu_pod(role, replicas, gpus, cpu=None):
    return {"role": role, "replicas": replicas,
            "requests": {"cpu": str(cpu or 8 * gpus), "memory": f"{32 * gpus}Gi", "nvidia.com/gpu": str(gpus)}}


def cpu_pod(role, replicas=1, cpu=4):
    return {"role": role, "replicas": replicas, "requests": {"cpu": str(cpu), "memory": "16Gi"}}


def single(wid, t, ns, gpus, dur, intent="standard", **extra):
    return workload(wid, t, ns, "single_gpu_training", dur, [gpu_pod("main", 1, gpus)], intent, **extra)


def ps_gang(wid, t, ns, workers, dur, **extra):
    return workload(wid, t, ns, "parameter_server_training", dur, [cpu_pod("ps"), gpu_pod("worker", workers, 1)],
                    gang=True, **extra)


def write(name, workloads):
    path = os.path.join(ROOT, name, "trace.jsonl")
    with open(path, "w") as f:
        for w in sorted(workloads, key=lambda w: (w["submitTimeOffsetSec"], w["workloadId"])):
            f.write(json.dumps(w, separators=(",", ":")) + "\n")


H = 3600
CKPT = {"checkpointIntervalSec": 1800, "checkpointCostSec": 30, "restartOverheadSec": 180, "maxRestarts": 3}

# priority-preemption: an eco training run holds the node; an urgent one arrives at 70 min.
write("priority-preemption", [
    single("eco-train", 0, "team-a", 8, 4 * H, "eco", **CKPT),
    single("urgent", 70 * 60, "team-a", 8, 1 * H, "performance", **CKPT),
])

# cohort-borrowing: team A fills its 8 GPUs and borrows team B's idle 8; team B comes back at 1 h.
write("cohort-borrowing", [
    single("a-1", 0, "team-a", 8, 4 * H, **CKPT),
    single("a-2", 60, "team-a", 8, 4 * H, **CKPT),
    single("b-1", 1 * H, "team-b", 8, 1 * H, **CKPT),
])

# backfill: half the node is busy for 2 h; a whole-node job waits; small jobs queue behind it.
write("backfill", [
    single("half", 0, "team-a", 4, 2 * H),
    single("big", 60, "team-a", 8, 1 * H),
] + [single(f"small-{i}", 60 + 60 * i, "team-a", 1, 30 * 60) for i in range(1, 5)])

# gang: two 12-worker gangs on 16 GPUs whose quota says 32: the second can start only partially.
write("gang", [
    ps_gang("gang-a", 0, "team-a", 12, 1 * H),
    ps_gang("gang-b", 60, "team-a", 12, 1 * H),
])

# fair-sharing: team A floods the cohort (24 one-GPU jobs on 24 GPUs, 16 of them borrowed);
# team B (nominal 8) arrives at 10 min with 12 jobs.
write("fair-sharing",
      [single(f"a-{i:02d}", i, "team-a", 1, 2 * H) for i in range(24)] +
      [single(f"b-{i:02d}", 600 + i, "team-b", 1, 1 * H) for i in range(12)])

# topology: one-GPU jobs on every node, then a 12-worker gang that fits in one block.
write("topology",
      [single(f"filler-{i}", i, "team-a", 1, 4 * H) for i in range(4)] +
      [ps_gang("gang", 60, "team-a", 12, 2 * H)])

# fault-tolerance: an 8-worker training gang (JobSet), an MPI job (launcher + 4 workers) and a
# one-GPU job on three nodes; see its scenario.yaml for the faults.
write("fault-tolerance", [
    ps_gang("train", 0, "team-a", 8, 6 * H, maxRestarts=5),
    workload("mpi", 0, "team-a", "distributed_training", 3 * H, [cpu_pod("launcher", 1, 2), gpu_pod("worker", 4, 1)],
             gang=True, maxRestarts=3),
    single("solo", 0, "team-a", 1, 5 * H, maxRestarts=3),
])

# checkpoint-sweep: one 8-GPU training run of 48 h under frequent random faults.
write("checkpoint-sweep", [single("long-train", 0, "team-a", 8, 48 * H, maxRestarts=1000)])
