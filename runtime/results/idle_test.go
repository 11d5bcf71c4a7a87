package results

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

const fragMsg = "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu. " +
	"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."

// idleRun is a run with every way quota is held idle: a pod waiting for a whole node, a quick
// start, a gang re-admitted after an eviction, two Katib trials, a workload still waiting at the
// end, a CPU workload and one never admitted. The events are shuffled out of time order.
func idleRun() ([]Event, []Record) {
	h100 := map[string]string{"main": "h100-sxm"}
	recs := []Record{
		*NewRecord(wl("frag", trace.SingleGPUTraining, 1, 8, 0, 100, 0.8), "a-lq", "qa"),
		*NewRecord(wl("quick", trace.DebugEval, 1, 1, 0, 100, 0.8), "a-lq", "qa"),
		*NewRecord(wl("gang", trace.DistributedTraining, 4, 1, 0, 100, 0.8), "b-lq", "qb"),
		*NewRecord(wl("hpo", trace.HPOExperiment, 2, 1, 0, 100, 0.8), "b-lq", "qb"),
		*NewRecord(wl("stuck", trace.SingleGPUTraining, 1, 8, 0, 100, 0.8), "a-lq", "qa"),
		*NewRecord(wl("cpu", trace.CPUPreprocess, 1, 0, 0, 100, 0), "b-lq", "qb"),
		*NewRecord(wl("never", trace.SingleGPUTraining, 1, 8, 0, 100, 0.8), "a-lq", "qa"),
	}
	evs := []Event{
		{T: 3700, Workload: "frag", Type: EvAllPodsRunning},
		{T: 100, Workload: "frag", Type: EvQuotaReserved, Object: "ns/job-frag-1a2b3", Flavors: h100},
		{T: 101, Workload: "frag", Type: EvPodUnschedulable, Object: "ns/frag-x1y2z", Message: fragMsg},
		{T: 3700, Workload: "frag", Type: EvPodRunning, Object: "ns/frag-x1y2z"},

		{T: 10, Workload: "quick", Type: EvQuotaReserved, Flavors: h100},
		{T: 11, Workload: "quick", Type: EvAllPodsRunning},
		{T: 12, Workload: "quick", Type: EvFinished, Reason: StateSucceeded},

		{T: 0, Workload: "gang", Type: EvQuotaReserved, Object: "ns/mpijob-gang-aaaaa", Flavors: map[string]string{"launcher": "cpu", "worker": "h100-sxm"}},
		{T: 50, Workload: "gang", Type: EvAllPodsRunning},
		{T: 200, Workload: "gang", Type: EvEvicted, Object: "ns/mpijob-gang-aaaaa", Reason: "Preempted"},
		{T: 400, Workload: "gang", Type: EvQuotaReserved, Object: "ns/mpijob-gang-aaaaa", Flavors: map[string]string{"launcher": "cpu", "worker": "h100-sxm"}},
		{T: 1000, Workload: "gang", Type: EvAllPodsRunning},

		{T: 0, Workload: "hpo", Type: EvTrialCreated, Object: "ns/hpo-trial-0"},
		{T: 0, Workload: "hpo", Type: EvTrialCreated, Object: "ns/hpo-trial-1"},
		{T: 1, Workload: "hpo", Type: EvQuotaReserved, Object: "ns/job-hpo-trial-0-abcde", Flavors: h100},
		{T: 1, Workload: "hpo", Type: EvQuotaReserved, Object: "ns/job-hpo-trial-1-fghij", Flavors: h100},
		{T: 11, Workload: "hpo", Type: EvPodRunning, Object: "ns/hpo-trial-0-xyz12"},
		{T: 5, Workload: "hpo", Type: EvPodUnschedulable, Object: "ns/hpo-trial-1-qwe34", Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."},
		{T: 1001, Workload: "hpo", Type: EvPodRunning, Object: "ns/hpo-trial-1-qwe34"},

		{T: 5000, Workload: "stuck", Type: EvQuotaReserved, Flavors: h100},
		{T: 5001, Workload: "stuck", Type: EvPodUnschedulable, Object: "ns/stuck-aaaaa", Message: fragMsg},

		{T: 20, Workload: "cpu", Type: EvQuotaReserved, Flavors: map[string]string{"main": "cpu"}},
		{T: 21, Workload: "cpu", Type: EvAllPodsRunning},
		{T: 5, Workload: "unknown", Type: EvQuotaReserved},
	}
	return evs, recs
}

func TestReservedIdle(t *testing.T) {
	evs, recs := idleRun()
	idle, waits := ReservedIdle(evs, recs, 9000, DefaultIdleThresholdSec)
	reason := "Insufficient nvidia.com/gpu; node(s) didn't match Pod's node affinity/selector"
	f := func(v float64) *float64 { return &v }
	want := []Wait{
		{Workload: "frag", Queue: "qa", Flavor: "h100-sxm", GPUs: 8, Reservations: 1, FirstSec: f(3600), TotalSec: 3600, LongestSec: 3600,
			GPUHours: 8, Unschedulable: true, Reason: reason},
		{Workload: "quick", Queue: "qa", Flavor: "h100-sxm", GPUs: 1, Reservations: 1, FirstSec: f(1), TotalSec: 1, LongestSec: 1, GPUHours: 1.0 / 3600},
		{Workload: "gang", Queue: "qb", Flavor: "h100-sxm", GPUs: 4, Reservations: 2, FirstSec: f(50), TotalSec: 650, LongestSec: 600, GPUHours: 4 * 650.0 / 3600},
		{Workload: "hpo", Queue: "qb", Flavor: "h100-sxm", GPUs: 2, Reservations: 2, FirstSec: f(10), TotalSec: 1010, LongestSec: 1000,
			GPUHours: 1010.0 / 3600, Unschedulable: true, Reason: "Insufficient nvidia.com/gpu"},
		{Workload: "stuck", Queue: "qa", Flavor: "h100-sxm", GPUs: 8, Reservations: 1, TotalSec: 4000, LongestSec: 4000, GPUHours: 8 * 4000.0 / 3600,
			Waiting: true, Unschedulable: true, Reason: reason},
		{Workload: "cpu", Queue: "qb", Flavor: "cpu", Reservations: 1, FirstSec: f(1), TotalSec: 1, LongestSec: 1},
	}
	if len(waits) != len(want) {
		t.Fatalf("%d waits, want %d: %+v", len(waits), len(want), waits)
	}
	for i := range want {
		if !waitEqual(waits[i], want[i]) {
			t.Errorf("wait %s:\n got %+v\nwant %+v", want[i].Workload, fmtWait(waits[i]), fmtWait(want[i]))
		}
	}
	total := 8 + 1.0/3600 + 4*650.0/3600 + 1010.0/3600 + 8*4000.0/3600
	if math.Abs(idle.GPUHours-total) > 1e-9 || idle.OverThreshold != 4 || idle.Unschedulable != 3 || idle.StillWaiting != 1 {
		t.Errorf("idle %.4f GPU-h (want %.4f), %d over threshold (4), %d unschedulable (3), %d still waiting (1)",
			idle.GPUHours, total, idle.OverThreshold, idle.Unschedulable, idle.StillWaiting)
	}
	if l := idle.Longest; l == nil || l.Workload != "stuck" || l.LongestSec != 4000 {
		t.Errorf("longest %+v", l)
	}
	wantQueues := []IdleGroup{{Name: "qa", GPUHours: 8 + 1.0/3600 + 8*4000.0/3600, OverThreshold: 2, LongestSec: 4000},
		{Name: "qb", GPUHours: 4*650.0/3600 + 1010.0/3600, OverThreshold: 2, LongestSec: 1000}}
	wantFlavors := []IdleGroup{{Name: "cpu", LongestSec: 1}, {Name: "h100-sxm", GPUHours: total, OverThreshold: 4, LongestSec: 4000}}
	for _, g := range []struct{ got, want []IdleGroup }{{idle.Queues, wantQueues}, {idle.Flavors, wantFlavors}} {
		if len(g.got) != len(g.want) {
			t.Fatalf("groups %+v, want %+v", g.got, g.want)
		}
		for i := range g.want {
			a, b := g.got[i], g.want[i]
			if a.Name != b.Name || math.Abs(a.GPUHours-b.GPUHours) > 1e-9 || a.OverThreshold != b.OverThreshold || a.LongestSec != b.LongestSec {
				t.Errorf("group %+v, want %+v", a, b)
			}
		}
	}
	wantReasons := []ReasonCount{{reason, 2}, {"Insufficient nvidia.com/gpu", 1}, {noVerdict, 1}}
	if !reflect.DeepEqual(idle.Reasons, wantReasons) {
		t.Errorf("reasons %+v\nwant %+v", idle.Reasons, wantReasons)
	}
}

func waitEqual(a, b Wait) bool {
	fa, fb := a.FirstSec, b.FirstSec
	if (fa == nil) != (fb == nil) || (fa != nil && math.Abs(*fa-*fb) > 1e-9) || math.Abs(a.GPUHours-b.GPUHours) > 1e-9 {
		return false
	}
	a.FirstSec, b.FirstSec, a.GPUHours, b.GPUHours = nil, nil, 0, 0
	return reflect.DeepEqual(a, b)
}

func fmtWait(w Wait) string {
	first := "nil"
	if w.FirstSec != nil {
		first = num(*w.FirstSec)
	}
	w.FirstSec = nil
	return fmt.Sprintf("%+v firstSec=%s", w, first)
}

func TestSchedulingReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{fragMsg, "Insufficient nvidia.com/gpu; node(s) didn't match Pod's node affinity/selector"},
		{"0/5 nodes are available: 5 Insufficient cpu.", "Insufficient cpu"},
		// kube-scheduler 1.34's, with its dynamic-resource postscript before the preemption one.
		{"0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, " +
			"preemption: 0/8 nodes are available: 2 No preemption victims found for incoming pod, 6 Preemption is not helpful for scheduling.",
			"Insufficient nvidia.com/gpu; node(s) didn't match Pod's node affinity/selector"},
		{"0/4 nodes are available: 1 node(s) had untolerated taint {gpu: true}, 3 Insufficient cpu.", "Insufficient cpu; node(s) had untolerated taint {gpu: true}"},
		{"0/4 nodes are available: 2 Insufficient memory, 2 Insufficient nvidia.com/gpu. preemption: not eligible", "Insufficient memory; Insufficient nvidia.com/gpu"},
		{"no nodes available to schedule pods", "no nodes available to schedule pods"},
		{"", ""},
	} {
		if got := SchedulingReason(tc.in); got != tc.want {
			t.Errorf("SchedulingReason(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAddReservedIdle: from an events file to summary.json's reservedIdle, the table lines and an
// idle.csv that reads back; Load computes the same for a directory without idle.csv.
func TestAddReservedIdle(t *testing.T) {
	evs, recs := idleRun()
	dir := t.TempDir()
	log, err := CreateEventLog(filepath.Join(dir, EventsFile), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := log.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	s := Summarize(recs, Meta{TraceSec: 9000, Speedup: 1000, GPUCapacity: 16})
	if err := AddReservedIdle(dir, recs, &s, 9000); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := s.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"quota held idle (reserved by Kueue, pods not all running): 17.9 GPU-h (queues: qa 16.9, qb 1.0; flavors: h100-sxm 17.9)",
		"4 workloads waited > 5.0m admitted (3 with pods the scheduler rejected, 1 still waiting at the end); longest 66.7m: stuck (qa, 8 GPUs): Insufficient nvidia.com/gpu; node(s)",
	} {
		if !strings.Contains(table.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, table.String())
		}
	}
	f, err := os.Open(filepath.Join(dir, IdleFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	back, err := ReadIdleCSV(f, IdleFile)
	if err != nil {
		t.Fatal(err)
	}
	_, want := ReservedIdle(evs, recs, 9000, DefaultIdleThresholdSec)
	if len(back) != len(want) {
		t.Fatalf("idle.csv has %d rows, want %d", len(back), len(want))
	}
	for i := range want {
		want[i].GPUHours = math.Round(want[i].GPUHours*1e4) / 1e4 // idle.csv keeps 4 decimals
		back[i].GPUHours = math.Round(back[i].GPUHours*1e4) / 1e4
		if !waitEqual(back[i], want[i]) {
			t.Errorf("row %d: %+v, want %+v", i, back[i], want[i])
		}
	}
}
