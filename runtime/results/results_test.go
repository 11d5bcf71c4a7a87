package results

import (
	"bytes"
	"encoding/csv"
	"errors"
	"flag"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
)

var update = flag.Bool("update", false, "rewrite golden files")

// wl builds a trace workload: gpus per pod × pods, ideal duration dur.
func wl(id string, f trace.Family, pods int, gpus int, submit, dur, util float64) *trace.Workload {
	req := trace.Requests{"cpu": "4"}
	if gpus > 0 {
		req[trace.ResourceGPU] = strconv.Itoa(gpus)
	}
	return &trace.Workload{WorkloadID: id, Namespace: "ns", WorkloadType: f, DurationSec: dur, SubmitTimeOffsetSec: submit,
		SharedIntensityProfile: trace.Profile{GPUUtilization: util},
		Pods:                   []trace.PodGroup{{Role: trace.RoleWorker, Replicas: pods, Requests: req}}}
}

// synthetic is a small run: three finished GPU workloads on two queues, one failed CPU workload,
// one preempted-then-finished (whose preempted pod's energy the agent reports at the end), one
// never admitted, one that could not be submitted.
func synthetic(t *testing.T, log *EventLog) *Recorder {
	t.Helper()
	recs := []*Record{
		NewRecord(wl("a", trace.SingleGPUTraining, 1, 1, 0, 100, 0.8), "team-a-lq", "qa"),
		NewRecord(wl("b", trace.DistributedTraining, 2, 8, 10, 200, 0.9), "team-a-lq", "qa"),
		NewRecord(wl("c", trace.SingleGPUTraining, 1, 1, 20, 50, 0.5), "team-b-lq", "qb"),
		NewRecord(wl("d", trace.CPUPreprocess, 1, 0, 30, 40, 0), "team-b-lq", "qb"),
		NewRecord(wl("e", trace.DistributedTraining, 2, 4, 40, 100, 0.7), "team-b-lq", "qb"),
		NewRecord(wl("f", trace.DebugEval, 1, 1, 50, 10, 0.2), "team-a-lq", "qa"),
		NewRecord(wl("g", trace.DebugEval, 1, 1, 60, 10, 0.2), "team-a-lq", "qa"),
	}
	rc, err := NewRecorder(recs, log)
	if err != nil {
		t.Fatal(err)
	}
	gpu := map[string]string{"main": "h100-sxm"}
	evs := []Event{
		{T: 0.5, Workload: "a", Type: EvSubmitted, Object: "ns/a"},
		{T: 0.6, Workload: "a", Type: EvWorkloadCreated},
		{T: 1, Workload: "a", Type: EvQuotaReserved, Flavors: gpu},
		{T: 1.2, Workload: "a", Type: EvAdmitted, Flavors: gpu},
		{T: 2, Workload: "a", Type: EvPodRunning, Object: "ns/a-0"},
		{T: 2, Workload: "a", Type: EvAllPodsRunning},
		{T: 102, Workload: "a", Type: EvPodFinished, EnergyJ: 70000, GPUSeconds: 100},
		{T: 103, Workload: "a", Type: EvFinished, Reason: StateSucceeded},
		{T: 10, Workload: "b", Type: EvSubmitted},
		{T: 40, Workload: "b", Type: EvAdmitted, Flavors: map[string]string{"launcher": "cpu", "worker": "h100-sxm"}},
		{T: 41, Workload: "b", Type: EvPodRunning},
		{T: 42, Workload: "b", Type: EvAllPodsRunning},
		{T: 250, Workload: "b", Type: EvPodFinished, EnergyJ: 3.6e6, GPUSeconds: 3328},
		{T: 250, Workload: "b", Type: EvFinished, Reason: StateSucceeded},
		{T: 20, Workload: "c", Type: EvSubmitted},
		{T: 21, Workload: "c", Type: EvAdmitted, Flavors: gpu},
		{T: 22, Workload: "c", Type: EvPodRunning},
		{T: 72, Workload: "c", Type: EvPodFinished, EnergyJ: 20000, GPUSeconds: 50},
		{T: 72, Workload: "c", Type: EvFinished, Reason: StateSucceeded},
		{T: 30, Workload: "d", Type: EvSubmitted},
		{T: 30.5, Workload: "d", Type: EvAdmitted, Flavors: map[string]string{"main": "cpu"}},
		{T: 31, Workload: "d", Type: EvPodRunning},
		{T: 50, Workload: "d", Type: EvFinished, Reason: StateFailed},
		{T: 40, Workload: "e", Type: EvSubmitted},
		{T: 41, Workload: "e", Type: EvAdmitted, Flavors: gpu},
		{T: 42, Workload: "e", Type: EvAllPodsRunning},
		{T: 60, Workload: "e", Type: EvPreempted, Reason: "InClusterQueue"},
		{T: 60, Workload: "e", Type: EvEvicted, Reason: "Preempted"},
		{T: 60.5, Workload: "e", Type: EvPodFinished, GPUSeconds: 148, EnergyJ: 1000},
		{T: 61, Workload: "e", Type: EvRequeued, Reason: "Preempted"},
		{T: 80, Workload: "e", Type: EvAdmitted, Flavors: map[string]string{"main": "other"}},
		{T: 190, Workload: "e", Type: EvPodFinished, GPUSeconds: 800, EnergyJ: 500000},
		{T: 190, Workload: "e", Type: EvFinished, Reason: StateSucceeded},
		{T: 190.5, Workload: "e", Type: EvFinished, Reason: StateFailed}, // a second finish changes nothing
		{T: 50, Workload: "f", Type: EvSubmitted},
		{T: 50.1, Workload: "f", Type: EvWorkloadCreated},
		{T: 60, Workload: "g", Type: EvSubmitFailed, Message: "namespaces \"ns\" not found"},
		{T: 61, Workload: "zz", Type: EvSubmitted},
		{T: 260, Workload: "e", Type: EvLostEnergy, EnergyJ: 180000},
	}
	for _, e := range evs {
		if _, err := rc.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	return rc
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var meta = Meta{Trace: "t.jsonl", Cluster: "small.yaml", Speedup: 100, WallSec: 2.5, TraceSec: 260, GPUCapacity: 32}

func TestGoldenFiles(t *testing.T) {
	rc := synthetic(t, nil)
	wantStates := map[string]int{StateSucceeded: 4, StateFailed: 1, StateRejected: 1, StatePending: 1}
	if c := rc.Counts(); c.Total != 7 || c.Submitted != 6 || c.Admitted != 5 || c.Finished() != 6 || !maps.Equal(c.States, wantStates) {
		t.Errorf("counts %+v, want 7 in all, 6 submitted, 5 admitted, states %v", c, wantStates)
	}
	if p := rc.Pending(); p != 1 {
		t.Errorf("pending %d, want 1 (f)", p)
	}
	recs := rc.Records()
	var csvBuf bytes.Buffer
	if err := WriteWorkloadsCSV(&csvBuf, recs); err != nil {
		t.Fatal(err)
	}
	golden(t, "workloads.csv", csvBuf.Bytes())
	s := Summarize(recs, meta)
	var js, table bytes.Buffer
	if err := s.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.json", js.Bytes())
	if err := s.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.txt", table.Bytes())
}

func TestSummaryNumbers(t *testing.T) {
	s := Summarize(synthetic(t, nil).Records(), meta)
	all := s.Groups[0]
	if all.Scope != "all" || all.Workloads != 7 || all.Succeeded != 4 || all.Failed != 1 || all.Rejected != 1 || all.Unfinished != 1 {
		t.Fatalf("all group %+v", all)
	}
	// Admitted: a 0.7, b 30, c 1, d 0.5, e 1 → sorted 0.5 0.7 1 1 30; empirical p50 is the 3rd.
	if got := *all.TimeToAdmissionSec.P50; got != 1 {
		t.Errorf("TTA p50 %g, want 1", got)
	}
	if got := *all.TimeToAdmissionSec.P99; got != 30 {
		t.Errorf("TTA p99 %g, want 30", got)
	}
	// Makespan: first submission 0.5, last finish 250.
	if s.MakespanSec != 249.5 {
		t.Errorf("makespan %g, want 249.5", s.MakespanSec)
	}
	wantAlloc := (100 + 3328 + 50 + 148 + 800) / (32 * 249.5)
	if d := all.GPUAllocation - wantAlloc; d > 1e-12 || d < -1e-12 {
		t.Errorf("allocation %g, want %g", all.GPUAllocation, wantAlloc)
	}
	if all.Preemptions != 1 || all.Evictions != 1 || all.Requeues != 1 {
		t.Errorf("preemptions %d evictions %d requeues %d, want 1 1 1", all.Preemptions, all.Evictions, all.Requeues)
	}
	if got := all.EnergyKWh; got < 1.214 || got > 1.215 { // (70000+3.6e6+20000+1000+500000+180000) J
		t.Errorf("energy %g kWh", got)
	}
	if got := all.LostEnergyKWh; got != 0.05 { // 180000 J of e
		t.Errorf("lost energy %g kWh, want 0.05", got)
	}
	names := []string{}
	for _, g := range s.Groups[1:] {
		names = append(names, g.Scope+"/"+g.Name)
	}
	want := []string{"queue/qa", "queue/qb", "family/cpu_preprocess", "family/debug_eval", "family/distributed_training", "family/single_gpu_training"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("groups %v, want %v", names, want)
	}
}

func TestQuantilesEmpirical(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(100 - i) // unsorted on purpose
	}
	q := quantiles(v)
	if *q.P50 != 50 || *q.P95 != 95 || *q.P99 != 99 {
		t.Errorf("quantiles of 1..100: %g %g %g, want 50 95 99", *q.P50, *q.P95, *q.P99)
	}
	if q := quantiles(nil); q.N != 0 || q.P50 != nil {
		t.Errorf("empty quantiles %+v", q)
	}
}

func TestWriteAndLoadDir(t *testing.T) {
	dir := t.TempDir()
	log, err := CreateEventLog(filepath.Join(dir, EventsFile), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rc := synthetic(t, log)
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	recs := rc.Records()
	f, err := os.Create(filepath.Join(dir, WorkloadsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteWorkloadsCSV(f, recs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := Summarize(recs, meta)
	f, _ = os.Create(filepath.Join(dir, SummaryFile))
	if err := s.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sw, err := CreateSeries(filepath.Join(dir, TimeSeriesFile))
	if err != nil {
		t.Fatal(err)
	}
	samples := []Sample{{T: 60, Scope: ScopeClusterQueue, Name: "qa", Requested: 9, Reserved: 8, InUse: 8, Pending: 1, NodePowerW: nan()},
		{T: 60, Scope: ScopeFlavor, Name: "h100-sxm", Reserved: 8, InUse: 8, NodePowerW: 4321.5}}
	if err := sw.Write(samples); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}

	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Events) != 39 {
		t.Errorf("%d events read back, want 39", len(d.Events))
	}
	if !reflect.DeepEqual(d.Workloads, recs) {
		t.Errorf("workloads.csv round trip:\n got %+v\nwant %+v", d.Workloads, recs)
	}
	if !reflect.DeepEqual(d.Summary.Groups, s.Groups) || !reflect.DeepEqual(d.Summary.Meta, s.Meta) {
		t.Errorf("summary.json round trip differs")
	}
	if len(d.Series) != 2 || d.Series[1].NodePowerW != 4321.5 || !math.IsNaN(d.Series[0].NodePowerW) {
		t.Errorf("series round trip %+v", d.Series)
	}
}

func nan() float64 { return math.NaN() }

// TestEventLogFlushesPeriodically checks that events reach the file without Close (a crashed run
// keeps them): the file is polled until the event appears.
func TestEventLogFlushesPeriodically(t *testing.T) {
	p := filepath.Join(t.TempDir(), EventsFile)
	log, err := CreateEventLog(p, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := log.Write(&Event{T: 1, Workload: "a", Type: EvSubmitted}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if evs, err := ReadEvents(bytes.NewReader(b), p); err == nil && len(evs) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event not flushed; file holds %q", b)
		}
		time.Sleep(5 * time.Millisecond) // polling the file, not waiting for a fixed time
	}
}

func TestReadErrorsNameLine(t *testing.T) {
	tests := []struct {
		name, in, want string
		read           func(string) error
	}{
		{"events", "{\"t\":1,\"workload\":\"a\",\"type\":\"submitted\"}\n{bad\n", "x:2:", func(s string) error { _, err := ReadEvents(strings.NewReader(s), "x"); return err }},
		{"workloads", strings.Join(workloadColumns, ",") + "\n" + strings.Repeat("x,", len(workloadColumns)-1) + "x\n", "x:2: column pods", func(s string) error {
			_, err := ReadWorkloadsCSV(strings.NewReader(s), "x")
			return err
		}},
		{"series", strings.Join(seriesColumns, ",") + "\n1,bogus,q,1,1,1,1,\n", "x:2: column scope", func(s string) error { _, err := ReadSeries(strings.NewReader(s), "x"); return err }},
		{"series integer", strings.Join(seriesColumns, ",") + "\n1,flavor,h100,1,1,1,1,\n2,flavor,h100,1,2.5,1,1,\n", "x:3: column gpus_reserved: \"2.5\" is not an integer", func(s string) error { _, err := ReadSeries(strings.NewReader(s), "x"); return err }},
		{"series power", strings.Join(seriesColumns, ",") + "\n1,flavor,h100,1,1,1,1,watts\n", "x:2: column node_power_w", func(s string) error { _, err := ReadSeries(strings.NewReader(s), "x"); return err }},
		{"series header", "a,b,c,d,e,f,g,h\n", "x:1: header", func(s string) error { _, err := ReadSeries(strings.NewReader(s), "x"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.read(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, 10, false, time.Nanosecond)
	p.Update(Status{Counts: Counts{Total: 10, States: map[string]int{StateUnsubmitted: 7, StateRunning: 2, StateSucceeded: 1}}, TraceSec: 90061})
	p.Done(Status{Counts: Counts{Total: 10, States: map[string]int{StateSucceeded: 9, StateRejected: 1}}, TraceSec: 90100})
	want := "trace 1d01:01:01  unsubmitted 7 running 2 succeeded 1  (of 10)\ntrace 1d01:01:40  rejected 1 succeeded 9  (of 10)\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestApplyEnergy(t *testing.T) {
	tests := []struct {
		name            string
		evs             []Event
		energy, lostEng float64
	}{
		{"no energy", []Event{{Type: EvPodFinished, GPUSeconds: 10}}, 0, 0},
		{"finished pods only", []Event{{Type: EvPodFinished, EnergyJ: 100}, {Type: EvPodFinished, EnergyJ: 50}}, 150, 0},
		{"lost only", []Event{{Type: EvLostEnergy, EnergyJ: 30}}, 30, 30},
		{"finished and lost", []Event{{Type: EvPodFinished, EnergyJ: 100}, {Type: EvLostEnergy, EnergyJ: 30}, {Type: EvLostEnergy, EnergyJ: 5}}, 135, 35},
		{"lost after finished workload", []Event{{Type: EvFinished, Reason: StateSucceeded}, {Type: EvLostEnergy, EnergyJ: 7}}, 7, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRecord(wl("a", trace.SingleGPUTraining, 1, 1, 0, 100, 0.8), "lq", "q")
			for i := range tt.evs {
				r.apply(&tt.evs[i], nil)
			}
			if r.EnergyJ != tt.energy || r.LostEnergyJ != tt.lostEng {
				t.Errorf("energy %g J, lost %g J; want %g, %g", r.EnergyJ, r.LostEnergyJ, tt.energy, tt.lostEng)
			}
		})
	}
}

// TestReadWorkloadsCSVColumns checks which headers workloads.csv may have: the current one, or
// one written before lost_energy_j existed (the column then reads as 0); nothing else.
func TestReadWorkloadsCSVColumns(t *testing.T) {
	recs := synthetic(t, nil).Records()
	var buf bytes.Buffer
	if err := WriteWorkloadsCSV(&buf, recs); err != nil {
		t.Fatal(err)
	}
	// without drops column name from every line of the CSV written above.
	without := func(name string) string {
		rows, err := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(rows[0], name)
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		for _, row := range rows {
			if err := w.Write(slices.Delete(row, i, i+1)); err != nil {
				t.Fatal(err)
			}
		}
		w.Flush()
		return b.String()
	}
	older := slices.Clone(recs)
	for i := range older {
		older[i].LostEnergyJ = 0
	}
	tests := []struct {
		name, in string
		want     []Record
		err      string
	}{
		{name: "current", in: buf.String(), want: recs},
		{name: "before lost_energy_j", in: without("lost_energy_j"), want: older},
		{name: "other column missing", in: without("gpu_seconds"), err: "x:1: header"},
		{name: "row narrower than header", in: strings.Join(workloadColumns, ",") + "\na,b\n", err: "wrong number of fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadWorkloadsCSV(strings.NewReader(tt.in), "x")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("read back:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestSummaryEngine(t *testing.T) {
	recs := synthetic(t, nil).Records()
	m := meta
	m.Engine = EngineSim
	s := Summarize(recs, m)
	var table bytes.Buffer
	if err := s.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(table.String(), "\n"); !strings.Contains(first, "sim engine") || strings.Contains(first, "speedup") {
		t.Errorf("table header %q: want the sim engine named and no speedup", first)
	}
}

// TestSealReadsBack: sealed records come back from Release and Records exactly as they were
// (times of 0 stay set, absent ones absent), and an event after the seal is refused.
func TestSealReadsBack(t *testing.T) {
	want := synthetic(t, nil).Records()
	rc := synthetic(t, nil)
	for _, id := range []string{"a", "b", "e", "g"} {
		if err := rc.Seal(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.Seal("nope"); err == nil {
		t.Error("Seal of an unknown workload: no error")
	}
	if _, err := rc.Record(Event{T: 300, Workload: "b", Type: EvRequeued}); !errors.Is(err, ErrSealed) {
		t.Errorf("event after the seal: error %v, want ErrSealed", err)
	}
	if got := rc.Records(); !reflect.DeepEqual(got, want) {
		t.Errorf("Records after sealing:\n%+v\nwant\n%+v", got, want)
	}
	got, err := rc.Release()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Release after sealing:\n%+v\nwant\n%+v", got, want)
	}
}
