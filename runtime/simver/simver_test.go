package simver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/simver"
)

// binaries builds, once per test binary, a kueuelab binary per supported Kueue release: the
// default from this source tree, the others through simver.Binary (what `run --kueue-version`
// does). Building each release's sim is itself the check that its compat files and seams still
// compile and link against it.
var binaries = map[string]string{}

func binary(t *testing.T, v kueuever.Version) string {
	t.Helper()
	if b, ok := binaries[v.Name]; ok {
		return b
	}
	var b string
	if v.Tag == "" {
		src, err := simver.SourceDir()
		if err != nil {
			t.Fatal(err)
		}
		b = filepath.Join(os.TempDir(), fmt.Sprintf("kueuelab-simver-test-%d", os.Getpid()))
		cmd := exec.Command("go", "build", "-o", b, "./cmd/kueuelab")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build kueuelab: %v\n%s", err, out)
		}
	} else {
		var log bytes.Buffer
		var err error
		if b, err = simver.Binary(context.Background(), v, &log); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		if log.Len() > 0 {
			t.Log(log.String())
		}
	}
	binaries[v.Name] = b
	return b
}

func TestMain(m *testing.M) {
	code := m.Run()
	for name, b := range binaries {
		if v, _ := kueuever.Lookup(name); v.Tag == "" {
			os.Remove(b)
		}
	}
	os.Exit(code)
}

// event is one line of a run's events.jsonl.
type event struct {
	T        float64 `json:"t"`
	Workload string  `json:"workload"`
	Type     string  `json:"type"`
	Reason   string  `json:"reason"`
}

type run struct {
	cycles int
	events []event
}

var cyclesRE = regexp.MustCompile(`sim: \d+ workloads, \d+ events, (\d+) scheduling cycles`)

// replay runs trace (testdata) on testdata/spec.yaml (or the spec extra's --cluster names)
// through release v's sim up to maxTrace seconds, with the flags extra, and checks that the run
// names v as its Kueue.
func replay(t *testing.T, v kueuever.Version, trace string, maxTrace int, extra ...string) run {
	t.Helper()
	out := t.TempDir()
	args := []string{"run", "--engine", "sim", "--kueue-version", v.Name,
		"--trace", filepath.Join("testdata", trace), "--cluster", filepath.Join("testdata", "spec.yaml"),
		"--sim-max-trace", strconv.Itoa(maxTrace) + "s", "--out", out}
	cmd := exec.Command(binary(t, v), append(args, extra...)...)
	stdout, err := cmd.CombinedOutput()
	// A run cut at the trace limit is incomplete, and says so in its exit code.
	if err != nil && !bytes.Contains(stdout, []byte("run incomplete: trace time limit")) {
		t.Fatalf("Kueue %s, %s: %v\n%s", v.Name, trace, err, stdout)
	}
	var r run
	m := cyclesRE.FindSubmatch(stdout)
	if m == nil {
		t.Fatalf("Kueue %s, %s: no cycle count in the output:\n%s", v.Name, trace, stdout)
	}
	r.cycles, _ = strconv.Atoi(string(m[1]))
	var sum struct {
		Kueue struct{ Version string } `json:"kueue"`
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	if err != nil || sum.Kueue.Version != v.Name {
		t.Fatalf("Kueue %s, %s: summary.json names Kueue %q (%v)", v.Name, trace, sum.Kueue.Version, err)
	}
	f, err := os.Open(filepath.Join(out, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		r.events = append(r.events, e)
	}
	return r
}

// first is the time of the first event of workload wl of type typ (and reason, when given); ok is
// false when there is none.
func (r run) first(wl, typ, reason string) (float64, bool) {
	for _, e := range r.events {
		if e.Workload == wl && e.Type == typ && (reason == "" || e.Reason == reason) {
			return e.T, true
		}
	}
	return 0, false
}

func (r run) count(typ, reason string) int {
	n := 0
	for _, e := range r.events {
		if e.Type == typ && (reason == "" || e.Reason == reason) {
			n++
		}
	}
	return n
}

// Each test below puts a small trace where one release's change bites through every supported
// release; the expected numbers come from Kueue's source, release by release.

// From v0.17 the queue manager no longer moves inadmissible workloads back to the heaps in the
// event handler that frees quota: it notifies a requeuer whose delaying queue moves them one
// batch period later (pkg/cache/queue getRequeueBatchPeriod: 1 s). v0.15's handlers call
// QueueInadmissibleWorkloads at once. b (8 GPUs) waits behind a (8 GPUs, 600 s) on a queue of 8:
// it is admitted with the cycle after a finishes on v0.15, one second later from v0.17.
func TestInadmissibleRequeueBatch(t *testing.T) {
	for _, v := range kueuever.Supported {
		t.Run(v.Name, func(t *testing.T) {
			r := replay(t, v, "requeue.jsonl", 7200)
			checkRequeueWait(t, r, map[bool]float64{false: 0, true: 1}[v.Has("v0.17.0")])
		})
	}
}

// With the SchedulerLongRequeueInterval gate (alpha from v0.17, off by default)
// getRequeueBatchPeriod is 10 s: b waits 10 s after a finishes. v0.15 has no such gate.
func TestLongRequeueIntervalGate(t *testing.T) {
	for _, v := range kueuever.Supported {
		t.Run(v.Name, func(t *testing.T) {
			if !v.Has("v0.17.0") {
				out, err := exec.Command(binary(t, v), "run", "--engine", "sim", "--kueue-version", v.Name,
					"--feature-gates", "SchedulerLongRequeueInterval=true", "--trace", filepath.Join("testdata", "requeue.jsonl"),
					"--cluster", filepath.Join("testdata", "spec.yaml"), "--out", t.TempDir()).CombinedOutput()
				if err == nil || !bytes.Contains(out, []byte("Kueue "+v.Name+" has no feature gate SchedulerLongRequeueInterval")) {
					t.Errorf("the gate on %s: %v\n%s", v.Name, err, out)
				}
				return
			}
			r := replay(t, v, "requeue.jsonl", 7200, "--feature-gates", "SchedulerLongRequeueInterval=true")
			checkRequeueWait(t, r, 10)
		})
	}
}

// checkRequeueWait checks that b was admitted want seconds after a finished (plus the sim's one
// 10 ms cycle).
func checkRequeueWait(t *testing.T, r run, want float64) {
	t.Helper()
	done, ok1 := r.first("a", "finished", "Succeeded")
	admitted, ok2 := r.first("b", "quota_reserved", "")
	if !ok1 || !ok2 {
		t.Fatalf("a finished %v, b admitted %v", ok1, ok2)
	}
	// The sim's cycle takes 10 ms of trace time.
	if wait := admitted - done; wait < want || wait > want+0.011 {
		t.Errorf("b admitted %.3f s after a finished, want %.0f s (+ one 10 ms cycle)", wait, want)
	}
}

// Scheduling equivalence hashing is on by default from v0.18 (the SchedulingEquivalenceHashing
// gate: Beta, off in v0.17, on in v0.18; absent in v0.15): once a head is NoFit, a pushed Workload
// with the same scheduling hash goes straight to the inadmissible workloads under BestEffortFIFO
// (ClusterQueue.PushOrUpdate), without a cycle. a holds the queue's 8 GPUs for an hour; b1..b5,
// identical 8-GPU workloads, arrive a second apart. By 30 minutes, v0.15 and v0.17 have run one
// cycle for a and one NoFit cycle for each b (6); v0.18 and v0.19 one for a and one for b1 (2).
func TestEquivalenceHashing(t *testing.T) {
	for _, v := range kueuever.Supported {
		t.Run(v.Name, func(t *testing.T) {
			r := replay(t, v, "hashing.jsonl", 1800)
			want := 6
			if v.Has("v0.18.0") {
				want = 2
			}
			if r.cycles != want {
				t.Errorf("%d scheduling cycles by 30 min, want %d", r.cycles, want)
			}
			if n := r.count("quota_reserved", ""); n != 1 {
				t.Errorf("%d admissions by 30 min, want 1 (a)", n)
			}
		})
	}
}

// waitForPodsReady is on by default from v0.19 (Configuration defaults: timeout 30 min, requeuing
// backoff 60 s): w, a gang of two 8-GPU workers admitted on queue "wide", gets one worker placed;
// the other waits for the node x holds for an hour. v0.19 evicts w 30 minutes after its admission
// (PodsReadyTimeout) and requeues it a backoff later; before v0.19 w stays admitted and runs once
// x's node frees.
func TestWaitForPodsReadyDefault(t *testing.T) {
	for _, v := range kueuever.Supported {
		t.Run(v.Name, func(t *testing.T) {
			r := replay(t, v, "podsready.jsonl", 7200)
			admitted, ok := r.first("w", "quota_reserved", "")
			if !ok {
				t.Fatal("w was not admitted")
			}
			evicted, ok := r.first("w", "evicted", "PodsReadyTimeout")
			if !v.Has("v0.19.0") {
				if ok {
					t.Errorf("w evicted by PodsReadyTimeout at %.2f s; waitForPodsReady is off by default before v0.19", evicted)
				}
				if _, done := r.first("w", "finished", "Succeeded"); !done {
					t.Error("w did not finish")
				}
				return
			}
			if !ok || math.Abs(evicted-admitted-1800) > 1e-6 {
				t.Errorf("w admitted at %.3f s, evicted by PodsReadyTimeout at %.3f s (found %v), want 1800 s later", admitted, evicted, ok)
			}
			if requeued, ok := r.first("w", "requeued", "BackoffFinished"); !ok || requeued < evicted+59 || requeued > evicted+61 {
				t.Errorf("w requeued at %.3f s (found %v), want about 60 s after its eviction at %.3f s", requeued, ok, evicted)
			}
		})
	}
}

// Under withinClusterQueue: LowerOrNewerEqualPriority a pending workload may preempt an
// equal-priority one whose queue-order timestamp is newer; with SchedulerTimestampPreemptionBuffer
// (alpha from v0.17, off by default; pkg/scheduler/preemption/common SatisfiesPreemptionPolicy)
// only one newer by more than 5 minutes. On a queue of 8 GPUs, r (4 GPUs) runs to 1,000 s; p (8
// GPUs, created at 10 s) waits; q (4 GPUs, created at 200 s, one hour) fits and runs. When r ends,
// p can preempt q, 190 s newer than p: it does without the gate (p admitted right after r ends, on
// the release's requeue), not with it (p waits for q, to 3,800 s).
func TestTimestampPreemptionBufferGate(t *testing.T) {
	for _, v := range kueuever.Supported {
		for _, on := range []bool{false, true} {
			if on && !v.Has("v0.17.0") {
				continue
			}
			t.Run(fmt.Sprintf("%s/gate=%v", v.Name, on), func(t *testing.T) {
				extra := []string{"--cluster", filepath.Join("testdata", "spec-newer.yaml")}
				if on {
					extra = append(extra, "--feature-gates", "SchedulerTimestampPreemptionBuffer=true")
				}
				r := replay(t, v, "buffer.jsonl", 7200, extra...)
				rEnd, _ := r.first("r", "finished", "Succeeded")
				qEnd, _ := r.first("q", "finished", "Succeeded")
				pAdmitted, ok := r.first("p", "quota_reserved", "")
				if !ok {
					t.Fatal("p was not admitted")
				}
				_, preempted := r.first("q", "preempted", "")
				switch {
				case !on && (!preempted || pAdmitted < rEnd || pAdmitted > rEnd+1.1):
					t.Errorf("q preempted %v, p admitted at %.2f s; want q preempted and p admitted within the requeue after r ends at %.2f s", preempted, pAdmitted, rEnd)
				case on && (preempted || pAdmitted < qEnd || pAdmitted > qEnd+1.1):
					t.Errorf("q preempted %v, p admitted at %.2f s; want q kept and p admitted after q ends at %.2f s", preempted, pAdmitted, qEnd)
				}
			})
		}
	}
}
