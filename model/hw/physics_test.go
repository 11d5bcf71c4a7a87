package hw

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func gpu(t testing.TB, family string) *GPU {
	t.Helper()
	g, ok := mustDefault(t).GPU(family)
	if !ok {
		t.Fatalf("no family %s", family)
	}
	return g
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestGPUOperatingPoints(t *testing.T) {
	tests := []struct {
		name                 string
		family               string
		util, mem, capW      float64
		wantW, wantT, tolW   float64
		wantTMin, wantTMax   float64
		checkThroughputRange bool
	}{
		{name: "H100 full compute uncapped", family: "H100-SXM", util: 1, capW: 0, wantW: 700, wantT: 1},
		{name: "H100 idle", family: "H100-SXM", util: 0, wantW: 100, wantT: 1},
		{name: "H100 full compute capped 600", family: "H100-SXM", util: 1, capW: 600, wantW: 600, checkThroughputRange: true, wantTMin: 0.85, wantTMax: 0.90},
		{name: "H100 memory-bound draws less", family: "H100-SXM", util: 1, mem: 1, wantW: 610, wantT: 1},
		{name: "H100 cap below min clamps to 350", family: "H100-SXM", util: 1, capW: 100, wantW: 350, checkThroughputRange: true, wantTMin: 0.49, wantTMax: 0.51},
		{name: "L40S idle", family: "L40S", util: 0, capW: 250, wantW: 35, wantT: 1},
		{name: "L4 full", family: "L4", util: 1, wantW: 72, wantT: 1},
		{name: "MI300X idle", family: "MI300X", wantW: 120, wantT: 1},
		{name: "A100-SXM cap at min", family: "A100-SXM", util: 1, capW: 100, wantW: 100, checkThroughputRange: true, wantTMin: 0.24, wantTMax: 0.26},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, tp := gpu(t, tt.family).Operating(tt.util, tt.mem, tt.capW)
			if !near(p, tt.wantW, 1e-9) {
				t.Errorf("power = %.6f W, want %g", p, tt.wantW)
			}
			if tt.checkThroughputRange {
				if tp < tt.wantTMin || tp > tt.wantTMax {
					t.Errorf("throughput = %.4f, want in [%g, %g]", tp, tt.wantTMin, tt.wantTMax)
				}
			} else if !near(tp, tt.wantT, 1e-12) {
				t.Errorf("throughput = %.6f, want %g", tp, tt.wantT)
			}
		})
	}
}

// TestH100Anchor pins the calibration: 700 → 600 W costs a compute-bound training profile 10-15 %.
func TestH100Anchor(t *testing.T) {
	g := gpu(t, "H100-SXM")
	for _, u := range []float64{0.95, 1} {
		for _, m := range []float64{0, 0.05, 0.1} {
			tp := g.Throughput(u, m, 600)
			if loss := 1 - tp; loss < 0.10 || loss > 0.15 {
				t.Errorf("u=%.2f m=%.2f: capping 700→600 W loses %.1f %%, want 10–15 %%", u, m, 100*loss)
			}
		}
	}
	// Memory-bound work barely notices the same cap.
	if tp := g.Throughput(0.9, 0.9, 600); tp < 0.98 {
		t.Errorf("memory-bound throughput under 600 W = %.4f, want ≥ 0.98", tp)
	}
}

func TestGPUProperties(t *testing.T) {
	c := mustDefault(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, g := range c.GPUs {
		for range 2000 {
			u1, u2 := rng.Float64(), rng.Float64()
			if u1 > u2 {
				u1, u2 = u2, u1
			}
			m := rng.Float64()
			c1 := g.MinCapW + rng.Float64()*(g.MaxW-g.MinCapW)
			c2 := c1 + rng.Float64()*(g.MaxW-c1)
			if p1, p2 := g.Power(u1, m, c1), g.Power(u2, m, c1); p1 > p2+1e-9 {
				t.Fatalf("%s: power falls with utilisation: P(%g)=%g > P(%g)=%g", g.Family, u1, p1, u2, p2)
			}
			if p1, p2 := g.Power(u2, m, c1), g.Power(u2, m, c2); p1 > p2+1e-9 {
				t.Fatalf("%s: power falls with cap: P(cap %g)=%g > P(cap %g)=%g", g.Family, c1, p1, c2, p2)
			}
			if p := g.Power(u2, m, c1); p > c1+1e-9 || p < g.IdleW-1e-9 {
				t.Fatalf("%s: power %g outside [idle, cap %g]", g.Family, p, c1)
			}
			t1, t2 := g.Throughput(u2, m, c1), g.Throughput(u2, m, c2)
			if t1 <= 0 || t1 > 1 || t2 <= 0 || t2 > 1 {
				t.Fatalf("%s: throughput outside (0, 1]: %g, %g", g.Family, t1, t2)
			}
			if t1 > t2+1e-12 {
				t.Fatalf("%s: throughput falls with cap: T(%g)=%g > T(%g)=%g", g.Family, c1, t1, c2, t2)
			}
		}
	}
}

func TestCPUPower(t *testing.T) {
	c := mustDefault(t)
	epyc, _ := c.CPU("2xEPYC-9654")
	tests := []struct {
		load, want float64
	}{
		{0, 128}, {0.1, 257}, {0.5, 410}, {0.55, 426}, {0.95, 757}, {1, 817}, {-1, 128}, {2, 817},
	}
	for _, tt := range tests {
		if got := epyc.Power(tt.load); !near(got, tt.want, 1e-9) {
			t.Errorf("EPYC power at %.2f = %g, want %g", tt.load, got, tt.want)
		}
	}
}

func TestCPUCapped(t *testing.T) {
	epyc, _ := mustDefault(t).CPU("2xEPYC-9654")
	tests := []struct {
		name              string
		load, frac        float64
		wantW, wantF, tol float64
	}{
		{"uncapped", 1, 0, 817, 1, 1e-9},
		{"cap above draw", 0.5, 0.6, 410, 1, 1e-9},
		// limit 0.6·817 = 490.2 W; f = ((490.2−128)/(817−128))^(1/2.5)
		{"cap binds at full load", 1, 0.6, 490.2, math.Pow(362.2/689, 0.4), 1e-9},
		// limit below idle: minimum frequency
		{"cap below idle", 1, 0.1, 128 + 689*math.Pow(0.4, 2.5), 0.4, 1e-9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, f := epyc.Capped(tt.load, tt.frac)
			if !near(p, tt.wantW, tt.tol) || !near(f, tt.wantF, tt.tol) {
				t.Errorf("Capped(%g, %g) = %g W, f=%g; want %g W, f=%g", tt.load, tt.frac, p, f, tt.wantW, tt.wantF)
			}
		})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		load, f1 := rng.Float64(), rng.Float64()
		f2 := f1 + rng.Float64()*(1-f1)
		p1, q1 := epyc.Capped(load, f1)
		p2, q2 := epyc.Capped(load, f2)
		if p1 > p2+1e-9 || q1 > q2+1e-12 || q1 < epyc.MinFrequency || q2 > 1 {
			t.Fatalf("cap %g→%g at load %g: power %g→%g, freq %g→%g", f1, f2, load, p1, p2, q1, q2)
		}
	}
}

func TestParseCap(t *testing.T) {
	c := mustDefault(t)
	h := gpu(t, "H100-SXM")
	tests := []struct {
		in      string
		want    float64
		wantErr string
	}{
		{"", 0, ""},
		{"performance", 700, ""},
		{"eco", 490, ""},
		{"balanced", 595, ""},
		{"80%", 560, ""},
		{"450", 450, ""},
		{"450W", 450, ""},
		{" 600 ", 600, ""},
		{"20%", 0, "outside [350, 700]"},
		{"900W", 0, "outside"},
		{"fast", 0, "want a profile (balanced, eco, performance)"},
		{"x%", 0, "not a percentage"},
	}
	for _, tt := range tests {
		got, err := c.ParseCap(tt.in, h)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCap(%q) err = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !near(got, tt.want, 1e-9) {
			t.Errorf("ParseCap(%q) = %g, %v; want %g", tt.in, got, err, tt.want)
		}
	}
	l4 := gpu(t, "L4")
	if got, _ := c.ParseCap("eco", l4); !near(got, 50.4, 1e-9) {
		t.Errorf("L4 eco = %g, want 50.4", got)
	}
}

func TestPodShare(t *testing.T) {
	tests := []struct {
		name                             string
		gpuW, req, total, cpuPlat, wantW float64
		running                          int
	}{
		{"by cpu share", 1400, 8, 32, 1000, 1650, 2},
		{"no cpu requests: equal split", 700, 0, 0, 900, 1000, 3},
		{"nothing running", 0, 0, 0, 900, 0, 0},
	}
	for _, tt := range tests {
		if got := PodShare(tt.gpuW, tt.req, tt.total, tt.running, tt.cpuPlat); !near(got, tt.wantW, 1e-9) {
			t.Errorf("%s: PodShare = %g, want %g", tt.name, got, tt.wantW)
		}
	}
}
