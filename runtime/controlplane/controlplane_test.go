package controlplane

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestClientWrites checks the token bucket against hand-computed cases: a bucket of burst b
// starts full and refills at qps tokens a second; a write that finds no token waits for the next,
// in the order writes asked; every write is seen one latency after its token.
func TestClientWrites(t *testing.T) {
	for _, tc := range []struct {
		name       string
		qps        float64
		burst      int
		latency    float64
		at         []float64 // issue times, in order
		want       []float64 // when each is answered
		wantWaited float64
	}{
		{"burst covers it", 10, 3, 0, []float64{0, 0, 0}, []float64{0, 0, 0}, 0},
		// The 4th and 5th find the bucket empty: tokens at 0.1 and 0.2 s.
		{"beyond the burst", 10, 3, 0, []float64{0, 0, 0, 0, 0}, []float64{0, 0, 0, 0.1, 0.2}, 0.3},
		{"latency", 10, 1, 0.005, []float64{0, 0}, []float64{0.005, 0.105}, 0.1},
		// At 1 s the bucket has refilled to its burst of 2 (not 10 tokens): two at once, the
		// third 1/qps later.
		{"refill caps at burst", 10, 2, 0, []float64{0, 0, 1, 1, 1}, []float64{0, 0, 1, 1, 1.1}, 0.1},
		// Writes asked later wait behind those asked earlier: 50 writes at 0 with burst 10 at 50
		// QPS, then one at 0.5 s, which waits for the 41st token after the burst (0.82 s).
		{"queue", 50, 10, 0, append(make([]float64, 50), 0.5), nil, 0},
		{"unlimited", -1, 0, 0.001, []float64{0, 0, 0}, []float64{0.001, 0.001, 0.001}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Model{Name: "t", QPS: tc.qps, Burst: tc.burst, WriteLatencySec: tc.latency}
			c, err := m.NewClient()
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			for _, at := range tc.at {
				got = append(got, c.Write(at))
			}
			if tc.name == "queue" {
				// The 50th write's token: (50-10)/50 = 0.8 s; the 51st asked at 0.5 s gets the
				// next, 0.82 s.
				if !near(got[49], 0.8) || !near(got[50], 0.82) {
					t.Fatalf("50th at %v, 51st at %v; want 0.8 and 0.82", got[49], got[50])
				}
				return
			}
			for i := range tc.want {
				if !near(got[i], tc.want[i]) {
					t.Fatalf("answered at %v, want %v", got, tc.want)
				}
			}
			n, waited := c.Writes()
			if n != int64(len(tc.at)) || !near(waited, tc.wantWaited) {
				t.Errorf("Writes() = %d, %v; want %d, %v", n, waited, len(tc.at), tc.wantWaited)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestClientIsClientGosBucket: for writes in time order, the client grants each token when
// client-go's own limiter (golang.org/x/time/rate, which its flowcontrol token bucket wraps)
// would: random bursts and pauses, several rates and bursts, seeded.
func TestClientIsClientGosBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	epoch := time.Unix(0, 0)
	for _, rb := range []struct {
		qps   float64
		burst int
	}{{50, 100}, {300, 500}, {20, 30}, {1, 1}, {0.5, 3}} {
		m := Model{Name: "t", QPS: rb.qps, Burst: rb.burst}
		c, err := m.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		lim := rate.NewLimiter(rate.Limit(rb.qps), rb.burst)
		now := 0.0
		for i := 0; i < 5000; i++ {
			if rng.IntN(4) == 0 {
				now += rng.ExpFloat64() * 3 * float64(rb.burst) / rb.qps
			}
			at := epoch.Add(time.Duration(now * 1e9))
			want := now + lim.ReserveN(at, 1).DelayFrom(at).Seconds()
			if got := c.Write(now); math.Abs(got-want) > 1e-6 {
				t.Fatalf("qps %g burst %d, write %d at %g: granted at %g, client-go's limiter %g", rb.qps, rb.burst, i, now, got, want)
			}
		}
	}
}

// TestClientWritesAhead: a writer that asks for a token ahead of another's earlier call (the
// model's sequential writes) does not make tokens out of nothing: the tokens granted over a span
// are never more than the burst plus the rate times the span.
func TestClientWritesAhead(t *testing.T) {
	m := Model{Name: "t", QPS: 10, Burst: 5}
	c, err := m.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	var granted []float64
	for i := 0; i < 200; i++ {
		at := float64(i) * 0.01
		if i%2 == 1 {
			at += 3 // far ahead
		}
		granted = append(granted, c.Write(at))
	}
	for _, g := range granted {
		n := 0
		for _, h := range granted {
			if h <= g+1e-9 {
				n++
			}
		}
		if limit := 5 + 10*g; float64(n) > limit+1e-6 {
			t.Fatalf("%d tokens granted by %g s, more than burst + rate × time = %g", n, g, limit)
		}
	}
}

// TestWorker: a single worker's writes are answered one write latency after the later of their
// asking and the answer to the one before.
func TestWorker(t *testing.T) {
	w := (&Model{HarnessWriteSec: 0.02}).NewWorker()
	for _, tc := range []struct{ at, want float64 }{{0, 0.02}, {0, 0.04}, {0.01, 0.06}, {1, 1.02}, {1.005, 1.04}} {
		if got := w.Write(tc.at); !near(got, tc.want) {
			t.Fatalf("write at %g answered at %g, want %g", tc.at, got, tc.want)
		}
	}
}

func TestCycleSec(t *testing.T) {
	m := Model{CycleBaseSec: 0.01, CyclePerHeadSec: 0.002}
	if got := m.CycleSec(30); !near(got, 0.07) {
		t.Errorf("CycleSec(30) = %v, want 0.07", got)
	}
}

func TestWithClient(t *testing.T) {
	if m := (Model{}).WithClient(300, 500); m.QPS != 300 || m.Burst != 500 {
		t.Errorf("a model without a rate limit takes Kueue's: %+v", m)
	}
	if m := (Model{QPS: 50, Burst: 100}).WithClient(300, 500); m.QPS != 50 || m.Burst != 100 {
		t.Errorf("a model's own rate limit stays: %+v", m)
	}
	if _, err := (&Model{Name: "x"}).NewClient(); err == nil {
		t.Error("a client without a rate limit was made")
	}
}

func TestResolve(t *testing.T) {
	if m, err := Resolve("none"); m != nil || err != nil {
		t.Errorf("none: %v, %v", m, err)
	}
	m, err := Resolve("kueue")
	if err != nil || m == nil || m.Name != DefaultName || m.Check() != nil {
		t.Errorf("kueue: %+v, %v", m, err)
	}
	path := filepath.Join("..", "..", "examples", "control-plane", "kueue-perf-harness.yaml")
	m, err = Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	// The harness's minimalkueue hard-codes QPS 50 / burst 100; its generator and runner write the
	// jobs' part.
	if m.Name != "kueue-perf-harness" || m.QPS != 50 || m.Burst != 100 || !m.HarnessJobs || m.HarnessWriteSec != 0.022 || m.Check() != nil {
		t.Errorf("%s: %+v", path, m)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", "apiVersion: kueuelab.io/v1alpha1\nkind: ControlPlane\nwriteLatncy: 2ms\n",
			[]string{"cp.yaml:3: writeLatncy: unknown field"}},
		{"bad values", `apiVersion: kueuelab.io/v1alpha1
kind: ControlPlane
metadata: {name: m}
clientConnection: {qps: 0, burst: 0}
writeLatency: -2ms
jobWrites: runner
harnessRunner: {write: 1ms}
cycle: {base: 10, perHead: 1ms}
`, []string{"cp.yaml:4: clientConnection.qps: 0", "cp.yaml:4: clientConnection.burst: 0", "cp.yaml:5: writeLatency: \"-2ms\"",
			"cp.yaml:6: jobWrites: \"runner\"", "cp.yaml:7: harnessRunner: only with jobWrites: harness", "cp.yaml:8: cycle.base: \"10\""}},
		{"harness without its runner", "apiVersion: kueuelab.io/v1alpha1\nkind: ControlPlane\njobWrites: harness\nwriteLatency: 1ms\ncycle: {base: 1ms, perHead: 0s}\n",
			[]string{"cp.yaml:3: jobWrites: jobWrites: harness needs harnessRunner.write"}},
		{"missing", "apiVersion: kueuelab.io/v1alpha1\nkind: ControlPlane\n",
			[]string{"writeLatency: missing", "cycle.base: missing", "cycle.perHead: missing"}},
		{"kind", "apiVersion: v1\nkind: Experiment\nwriteLatency: 1ms\ncycle: {base: 1ms, perHead: 0s}\n",
			[]string{"cp.yaml:1: apiVersion", "cp.yaml:2: kind"}},
		{"built-in name", "apiVersion: kueuelab.io/v1alpha1\nkind: ControlPlane\nmetadata: {name: none}\nwriteLatency: 1ms\ncycle: {base: 1ms, perHead: 0s}\n",
			[]string{"cp.yaml:3: metadata.name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("cp.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("a missing file: %v", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "slow.yaml")
	if err := os.WriteFile(p, []byte("apiVersion: kueuelab.io/v1alpha1\nkind: ControlPlane\nwriteLatency: 1ms\ncycle: {base: 1ms, perHead: 0s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := Load(p); err != nil || m.Name != "slow" || m.QPS != 0 || m.HarnessJobs {
		t.Errorf("a file without a name or a rate limit: %+v, %v", m, err)
	}
}
