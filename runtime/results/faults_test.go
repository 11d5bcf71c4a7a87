package results

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

func TestFaultsFoldIntoRecordsAndGroups(t *testing.T) {
	w := &trace.Workload{WorkloadID: "w", Namespace: "ns", WorkloadType: trace.DistributedTraining, DurationSec: 7200,
		CheckpointIntervalSec: 1800, CheckpointCostSec: 60, Pods: []trace.PodGroup{{Role: "worker", Replicas: 2, Requests: trace.Requests{"nvidia.com/gpu": "4"}}}}
	r := NewRecord(w, "lq", "cq")
	// Alone on an idle node it takes its work and three checkpoints (at 30, 60, 90 min of work).
	if r.IdealSec != 7200+3*60 {
		t.Errorf("ideal %g s, want 7380", r.IdealSec)
	}
	other := NewRecord(&trace.Workload{WorkloadID: "v", WorkloadType: trace.DebugEval, DurationSec: 10}, "lq", "cq")
	rec, err := NewRecorder([]*Record{r, other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Event{
		{T: 10, Workload: "w", Type: EvFault, Reason: "node", Node: "h100-001", Object: "ns/w-worker-0"},
		{T: 10, Workload: "w", Type: EvFault, Reason: "node", Node: "h100-001", Object: "ns/w-worker-1"},
		{T: 500, Workload: "w", Type: EvFaultCost, Restarts: 2, LostGPUSec: 7200, CheckpointGPUSec: 1440, RestartGPUSec: 4800},
	} {
		if _, err := rec.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	got := rec.Records()[0].FaultTolerance
	if want := (FaultTolerance{Faults: 2, Restarts: 2, LostGPUSec: 7200, CheckpointGPUSec: 1440, RestartGPUSec: 4800}); got != want {
		t.Errorf("record %+v, want %+v", got, want)
	}
	s := Summarize(rec.Records(), Meta{GPUCapacity: 8, Faults: &FaultMeta{Node: 1, HitPods: 2}})
	all := s.Groups[0].FaultTotals
	if all.Faults != 2 || all.Restarts != 2 || all.LostGPUHours != 2 || all.CheckpointGPUHours != 0.4 || all.RestartGPUHours != 4800.0/3600 {
		t.Errorf("group totals %+v", all)
	}
	var table bytes.Buffer
	if err := s.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"faults: 1 node, 0 GPU, 0 pod; 2 pods hit", "restarts 2; GPU-hours lost (work redone) 2.00, checkpointing 0.40, restarting 1.33"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	// workloads.csv keeps them, and a file written before the fault and MIG columns still reads.
	var csv bytes.Buffer
	if err := WriteWorkloadsCSV(&csv, rec.Records()); err != nil {
		t.Fatal(err)
	}
	back, err := ReadWorkloadsCSV(bytes.NewReader(csv.Bytes()), "w.csv")
	if err != nil || back[0].FaultTolerance != got {
		t.Fatalf("read back %+v, %v", back, err)
	}
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	cut := func(l string) string { return l[:strings.LastIndex(l, ",faults,restarts")] }
	older := cut(lines[0]) + "\n"
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		older += strings.Join(f[:len(f)-9], ",") + "\n"
	}
	if back, err := ReadWorkloadsCSV(strings.NewReader(older), "old.csv"); err != nil || back[0].Faults != 0 || back[0].ID != "w" {
		t.Fatalf("older file: %+v, %v", back, err)
	}
}
