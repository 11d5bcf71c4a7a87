package fault

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/model/hw"
)

// llama3 are the catalog's default rates (model/hw/catalog.yaml).
var llama3 = hw.FaultRates{GPUMTBFHours: 86300, NodeMTBFHours: 15300, NodeRepairSec: 7200}

func nodes(n, gpus int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{Name: "h100-" + string(rune('a'+i/26)) + string(rune('a'+i%26)), Pool: "h100", GPUs: gpus}
	}
	return out
}

func drain(t *testing.T, s *Schedule, until float64) []Event {
	t.Helper()
	var out []Event
	for s.Peek() <= until {
		e, ok := s.Next()
		if !ok {
			break
		}
		if e.At > until {
			break
		}
		out = append(out, e)
	}
	return out
}

func TestScheduleSeededAndDeterministic(t *testing.T) {
	spec := &Spec{Seed: 7, Random: &Random{Scale: 1000}}
	ns := nodes(12, 8)
	a, err := NewSchedule(spec, ns, llama3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSchedule(spec, ns, llama3)
	ea, eb := drain(t, a, 30*86400), drain(t, b, 30*86400)
	if len(ea) == 0 || !reflect.DeepEqual(ea, eb) {
		t.Fatalf("two schedules of one seed differ (%d vs %d events)", len(ea), len(eb))
	}
	for i := 1; i < len(ea); i++ {
		if ea[i].At < ea[i-1].At {
			t.Fatalf("events out of order: %v then %v", ea[i-1], ea[i])
		}
	}
	// Reading less of the schedule gives a prefix of the same events.
	c, _ := NewSchedule(spec, ns, llama3)
	if ec := drain(t, c, 10*86400); !reflect.DeepEqual(ec, ea[:len(ec)]) {
		t.Error("a shorter read is not a prefix of the longer one")
	}
	// A node's faults do not depend on the other nodes.
	d, _ := NewSchedule(spec, ns[:1], llama3)
	var only []Event
	for _, e := range ea {
		if e.Node == ns[0].Name {
			only = append(only, e)
		}
	}
	if ed := drain(t, d, 30*86400); !reflect.DeepEqual(ed, only) {
		t.Errorf("node %s alone: %d faults, among others: %d", ns[0].Name, len(ed), len(only))
	}
	// Another seed, other faults.
	e2, _ := NewSchedule(&Spec{Seed: 8, Random: &Random{Scale: 1000}}, ns, llama3)
	if reflect.DeepEqual(drain(t, e2, 30*86400), ea) {
		t.Error("seeds 7 and 8 gave the same faults")
	}
}

// TestScheduleRates checks the counts against the Poisson means: 64 nodes of 8 GPUs over 200
// days at 100× the Llama 3 rates expect 64·8·4800h·100/86300 = 2848 GPU faults and
// 64·4800h·100/15300 = 2008 node faults, less those dropped while a node is down (two hours of
// every 153). The seed is fixed, so the check is exact; the bounds are ±4 standard deviations.
func TestScheduleRates(t *testing.T) {
	ns := nodes(64, 8)
	s, err := NewSchedule(&Spec{Seed: 1, Random: &Random{Scale: 100}}, ns, llama3)
	if err != nil {
		t.Fatal(err)
	}
	horizon := 200 * 86400.0
	count := map[Kind]int{}
	gpus := map[int]int{}
	for _, e := range drain(t, s, horizon) {
		count[e.Kind]++
		if e.Kind == GPUFail {
			gpus[e.GPU]++
		}
		if !e.Random {
			t.Fatalf("explicit event from random faults: %v", e)
		}
	}
	up := 1 - 7200/(15300*3600/100.0) // share of time a node is up
	for _, c := range []struct {
		kind Kind
		mean float64
	}{
		{GPUFail, 64 * 8 * 4800 * 100 / 86300.0 * up},
		{NodeDown, 64 * 4800 * 100 / 15300.0 * up},
	} {
		if got := float64(count[c.kind]); math.Abs(got-c.mean) > 4*math.Sqrt(c.mean) {
			t.Errorf("%s faults: %v, want %.0f ± %.0f", c.kind, got, c.mean, 4*math.Sqrt(c.mean))
		}
	}
	if len(gpus) != 8 {
		t.Errorf("GPU faults hit GPU indexes %v, want all 8", gpus)
	}
	if s.Dropped == 0 {
		t.Error("no fault fell on a node that was down")
	}
}

func TestScheduleExplicitAndDownNodes(t *testing.T) {
	gpu := 3
	spec := &Spec{Events: []EventSpec{
		{At: 36 * 3600, Node: "h100-aa", For: 2 * 3600},
		{At: 3600, Workload: "w1", Role: "worker"},
		{At: 37 * 3600, Node: "h100-aa", GPU: &gpu}, // the node is down: dropped
		{At: 38 * 3600, Node: "h100-aa", GPU: &gpu}, // back up
		{At: 40 * 3600, Node: "h100-ab"},            // for: the catalog's repair time
	}}
	s, err := NewSchedule(spec, nodes(2, 8), llama3)
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, s, math.Inf(1))
	want := []Event{
		{At: 3600, Kind: PodFail, Workload: "w1", Role: "worker"},
		{At: 36 * 3600, Kind: NodeDown, Node: "h100-aa", DownSec: 7200},
		{At: 38 * 3600, Kind: GPUFail, Node: "h100-aa", GPU: 3},
		{At: 40 * 3600, Kind: NodeDown, Node: "h100-ab", DownSec: 7200},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %+v\nwant %+v", got, want)
	}
	if s.Dropped != 1 {
		t.Errorf("dropped %d, want 1", s.Dropped)
	}
	if _, ok := s.Next(); ok || !math.IsInf(s.Peek(), 1) {
		t.Error("schedule not exhausted")
	}
}

func TestSpecErrors(t *testing.T) {
	gpu, bigGPU := 0, 8
	tests := []struct {
		name string
		spec Spec
		want []string
	}{
		{"neither node nor workload", Spec{Events: []EventSpec{{At: 1}}}, []string{"faults.events[0]", "node"}},
		{"both", Spec{Events: []EventSpec{{At: 1, Node: "h100-aa", Workload: "w"}}}, []string{"faults.events[0]"}},
		{"pod fault with for", Spec{Events: []EventSpec{{At: 1, Workload: "w", For: 3}}}, []string{"faults.events[0]", "no for"}},
		{"gpu fault with for", Spec{Events: []EventSpec{{At: 1, Node: "h100-aa", GPU: &gpu, For: 3}}}, []string{"faults.events[0].for"}},
		{"unknown node", Spec{Events: []EventSpec{{At: 1, Node: "a100-000"}}}, []string{"faults.events[0].node", "a100-000"}},
		{"gpu index", Spec{Events: []EventSpec{{At: 1, Node: "h100-aa", GPU: &bigGPU}}}, []string{"faults.events[0].gpu", "8 GPUs"}},
		{"unknown pool", Spec{Random: &Random{Pools: []string{"a100"}}}, []string{"faults.random.pools[0]", "a100"}},
		{"negative rate", Spec{Random: &Random{GPUMTBFHours: -1}}, []string{"faults.random.gpuMTBFHours"}},
		{"exit code", Spec{ExitCode: 300}, []string{"faults.exitCode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSchedule(&tt.spec, nodes(2, 8), llama3)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := NewSchedule(&Spec{Random: &Random{}}, nodes(1, 8), hw.FaultRates{}); err == nil || !strings.Contains(err.Error(), "gpuMTBFHours") {
		t.Errorf("no rates anywhere: err %v", err)
	}
}

func TestDurationYAML(t *testing.T) {
	var s Spec
	doc := "seed: 3\nevictAfter: 90s\nevents:\n- {at: 36h, node: h100-003, for: 2h}\n- {at: 5400, workload: w1}\n- {at: 1h30m, node: n, gpu: 2}\n"
	if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	if s.Events[0].At != 36*3600 || s.Events[0].For != 7200 || s.Events[1].At != 5400 || s.Events[2].At != 5400 || s.EvictAfterSec() != 90 {
		t.Errorf("parsed %+v", s)
	}
	if err := yaml.Unmarshal([]byte("evictAfter: soon\n"), &s); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad duration: %v", err)
	}
	for d, want := range map[Duration]string{7200: "2h", 5400: "90m", 10: "10s", 0: "0s", 90.5: "90.5s"} {
		if d.String() != want {
			t.Errorf("Duration(%g) = %s, want %s", float64(d), d, want)
		}
	}
}

// TestYoungDaly pins the reference of a checkpoint sweep: a checkpoint of 1 minute under a job
// MTBF of 8 hours is best taken every √(2·60·28800) = 1859 s, Daly's higher-order optimum is
// close to it, and both are where Daly's expected runtime is lowest.
func TestYoungDaly(t *testing.T) {
	c, m := 60.0, 8*3600.0
	if got := YoungDaly(c, m); math.Abs(got-1859.03) > 0.01 {
		t.Errorf("YoungDaly = %g", got)
	}
	d := Daly(c, m)
	if math.Abs(d-YoungDaly(c, m)) > 0.05*d {
		t.Errorf("Daly %g far from Young %g with C << M", d, YoungDaly(c, m))
	}
	work, restart := 48*3600.0, 300.0
	best, bestTau := math.Inf(1), 0.0
	for tau := 60.0; tau < 6*3600; tau += 10 {
		if rt := ExpectedRuntime(work, tau, c, restart, m); rt < best {
			best, bestTau = rt, tau
		}
	}
	if math.Abs(bestTau-d) > 20 {
		t.Errorf("expected runtime is lowest at τ = %g s, Daly says %g s", bestTau, d)
	}
	if ExpectedRuntime(work, 3600, c, restart, math.Inf(1)) != work*(3600+c)/3600 {
		t.Error("without failures the runtime is the work plus its checkpoints")
	}
	if Daly(100, 40) != 40 || !math.IsInf(YoungDaly(0, m), 1) {
		t.Error("degenerate cases")
	}
	for _, tc := range []struct {
		work, every float64
		want        int
	}{{3600, 1800, 1}, {3601, 1800, 2}, {100, 1800, 0}, {100, 0, 0}} {
		if got := Checkpoints(tc.work, tc.every); got != tc.want {
			t.Errorf("Checkpoints(%g, %g) = %d, want %d", tc.work, tc.every, got, tc.want)
		}
	}
	r := Rates{GPUPerSec: 1 / (86300 * 3600.0), NodePerSec: 1 / (15300 * 3600.0)}
	if got := r.JobMTBFSec(8, 1) / 3600; math.Abs(got-1/(8/86300.0+1/15300.0)) > 1e-6 {
		t.Errorf("JobMTBF of an 8-GPU node: %g h", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := dir + "/f.yaml"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s, err := Load(write("seed: 5\nevents:\n- {at: 36h, node: h100-003, for: 2h}\nrandom: {scale: 10, pools: [h100]}\n"))
	if err != nil || s.Seed != 5 || s.Events[0].For != 7200 || s.Random.Scale != 10 {
		t.Fatalf("%+v, %v", s, err)
	}
	for body, want := range map[string]string{
		"seed: 5\nevent: []\n":           "f.yaml:2: event: unknown field",
		"events:\n- {at: 2h}\n":          "f.yaml:2: events[0]: give node",
		"events:\n- {at: 2x, node: n}\n": "f.yaml:2: duration \"2x\"",
		"random: {gpuMTBFHours: -4}\n":   "f.yaml:1: random.gpuMTBFHours",
	} {
		if _, err := Load(write(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", body, err, want)
		}
	}
}
