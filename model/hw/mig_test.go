package hw

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The expectations below are read off NVIDIA's tables (MIG User Guide profile tables and
// nvidia-smi mig -lgipp output, go-nvml mock MiB), not off the code.

// h100Geometry is the -lgipp placement output: profile ID, compute slices, memory slices, starts.
var h100Geometry = []struct {
	id, compute, memory int
	starts              []int
}{
	{19, 1, 1, []int{0, 1, 2, 3, 4, 5, 6}},
	{15, 1, 2, []int{0, 2, 4, 6}},
	{14, 2, 2, []int{0, 2, 4}},
	{9, 3, 4, []int{0, 4}},
	{5, 4, 4, []int{0}},
	{0, 7, 8, []int{0}},
}

func mig(t testing.TB, family string) *MIG {
	t.Helper()
	g := gpu(t, family)
	if g.MIG == nil {
		t.Fatalf("%s has no MIG table", family)
	}
	return g.MIG
}

func TestDefaultCatalogMIG(t *testing.T) {
	c := mustDefault(t)
	tests := []struct {
		family     string
		names      []string
		mib        []int64
		smPerSlice int
	}{
		{"H100-SXM", []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}, []int64{10240, 20480, 20480, 40960, 40960, 81920}, 16},
		{"H100-NVL", []string{"1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}, []int64{12 << 10, 24 << 10, 24 << 10, 47 << 10, 47 << 10, 94 << 10}, 16},
		{"H200-SXM", []string{"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}, []int64{18432, 35840, 35840, 72704, 72704, 144384}, 16},
		{"A100-SXM", []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}, []int64{9856, 19968, 19968, 40192, 40192, 80384}, 14},
		{"A100-PCIE", []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}, []int64{9856, 19968, 19968, 40192, 40192, 80384}, 14},
		{"L40S", nil, nil, 0},
		{"L4", nil, nil, 0},
		{"MI300X", nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.family, func(t *testing.T) {
			g, ok := c.GPU(tt.family)
			if !ok {
				t.Fatalf("family %s missing", tt.family)
			}
			if tt.names == nil {
				if g.MIG != nil {
					t.Fatalf("%s has a MIG table, but the board has no MIG", tt.family)
				}
				return
			}
			m := g.MIG
			if m == nil || m.ComputeSlices != 7 || m.MemorySlices != 8 {
				t.Fatalf("MIG = %+v, want 7 compute and 8 memory slices", m)
			}
			if got := m.ProfileNames(); !slices.Equal(got, tt.names) {
				t.Fatalf("profiles = %v, want %v", got, tt.names)
			}
			for j, want := range h100Geometry {
				p := m.Profiles[j]
				if p.ProfileID != want.id || p.ComputeSlices != want.compute || p.MemorySlices != want.memory || !slices.Equal(p.Starts, want.starts) {
					t.Errorf("%s = id %d, %dc/%dm, starts %v; want id %d, %dc/%dm, starts %v",
						p.Name, p.ProfileID, p.ComputeSlices, p.MemorySlices, p.Starts, want.id, want.compute, want.memory, want.starts)
				}
				if p.MemoryMiB != tt.mib[j] || p.Multiprocessors != tt.smPerSlice*want.compute {
					t.Errorf("%s = %d MiB, %d SMs; want %d MiB, %d SMs", p.Name, p.MemoryMiB, p.Multiprocessors, tt.mib[j], tt.smPerSlice*want.compute)
				}
			}
			if f := m.Full(); f == nil || f.Name != tt.names[len(tt.names)-1] {
				t.Errorf("Full() = %v, want %s", f, tt.names[len(tt.names)-1])
			}
		})
	}
	// The two A100 boards share one yaml table; a caller editing one must not edit the other.
	if gpu(t, "A100-SXM").MIG == gpu(t, "A100-PCIE").MIG {
		t.Error("A100-SXM and A100-PCIE share one *MIG")
	}
}

func TestMIGProfileLookup(t *testing.T) {
	h := gpu(t, "H100-SXM")
	tests := []struct {
		gpu    *GPU
		name   string
		wantOK bool
	}{
		{h, "1g.10gb", true},
		{h, "7g.80gb", true},
		{h, "1g.10gb+me", false}, // media extensions are left out of the catalog
		{h, "1g.5gb", false},     // the A100-40GB name
		{h, "", false},
		{gpu(t, "L4"), "1g.10gb", false},
	}
	for _, tt := range tests {
		p, ok := tt.gpu.MIGProfile(tt.name)
		if ok != tt.wantOK || (p != nil) != tt.wantOK || ok && p.Name != tt.name {
			t.Errorf("%s.MIGProfile(%q) = %v, %v; want ok=%v", tt.gpu.Family, tt.name, p, ok, tt.wantOK)
		}
	}
	var none *MIG
	if none.ProfileNames() != nil || none.Full() != nil {
		t.Error("a nil MIG has profiles")
	}
	if _, ok := none.Smallest(0.5); ok {
		t.Error("a nil MIG has a smallest profile")
	}
	if _, err := none.Place([]string{"1g.10gb"}); err == nil {
		t.Error("a nil MIG placed a profile")
	}
}

func TestMIGSmallest(t *testing.T) {
	m := mig(t, "H100-SXM")
	tests := []struct {
		fraction float64
		want     string // "" = not ok
	}{
		{0.5, "4g.40gb"}, // 3/7 = 0.43 < 0.5 <= 4/7 = 0.57
		{0.1, "1g.10gb"}, // 1/7 = 0.14; 1g.10gb has fewer memory slices than 1g.20gb
		{1.0 / 7, "1g.10gb"},
		{0.3, "3g.40gb"},           // 2/7 = 0.286 < 0.3 <= 3/7
		{2 * (1.0 / 7), "2g.20gb"}, // one ulp above 2.0/7: still 2g
		{0.58, "7g.80gb"},          // above 4/7 and there is no 5g or 6g
		{1, "7g.80gb"},
		{1.2, ""},
		{0, ""},
		{-0.5, ""},
		{math.NaN(), ""},
	}
	for _, tt := range tests {
		p, ok := m.Smallest(tt.fraction)
		switch {
		case tt.want == "" && ok:
			t.Errorf("Smallest(%g) = %s, want not ok", tt.fraction, p.Name)
		case tt.want != "" && (!ok || p.Name != tt.want):
			t.Errorf("Smallest(%g) = %v, %v; want %s", tt.fraction, p, ok, tt.want)
		}
	}
}

// validLayout checks a layout against the geometry without going through Place.
func validLayout(t *testing.T, m *MIG, names []string, starts []int) {
	t.Helper()
	if len(starts) != len(names) {
		t.Fatalf("%d starts for %d profiles", len(starts), len(names))
	}
	var used [8]bool
	compute := 0
	for i, n := range names {
		p := m.profile(n)
		if !slices.Contains(p.Starts, starts[i]) {
			t.Errorf("%s at %d: not one of its starts %v", n, starts[i], p.Starts)
			continue
		}
		for s := starts[i]; s < starts[i]+p.MemorySlices; s++ {
			if used[s] {
				t.Errorf("%s at %d overlaps memory slice %d", n, starts[i], s)
			}
			used[s] = true
		}
		compute += p.ComputeSlices
	}
	if compute > 7 {
		t.Errorf("%d compute slices used", compute)
	}
}

func TestMIGPlace(t *testing.T) {
	rep := func(n int, name string) []string { return slices.Repeat([]string{name}, n) }
	tests := []struct {
		name     string
		profiles []string
		// wantStarts, sorted, as worked out on the -lgipp geometry; validLayout checks which
		// profile got which.
		wantStarts []int
		wantErr    []string
	}{
		// 4g.40gb only starts at 0 (slices 0-3), leaving 3g.40gb its start 4 (4-7); 4+3 = 7 compute.
		{"4g+3g", []string{"4g.40gb", "3g.40gb"}, []int{0, 4}, nil},
		{"3g+4g keeps input order", []string{"3g.40gb", "4g.40gb"}, []int{0, 4}, nil},
		// 1g.10gb starts at 0-6: seven instances use every start; slice 7 stays empty.
		{"7x1g.10gb", rep(7, "1g.10gb"), []int{0, 1, 2, 3, 4, 5, 6}, nil},
		// 2g.20gb at 0, 2 and 4 (slices 0-5); 1g.10gb at 6; 3·2+1 = 7 compute.
		{"3x2g.20gb+1g.10gb", append(rep(3, "2g.20gb"), "1g.10gb"), []int{0, 2, 4, 6}, nil},
		// 3g.40gb at 0 leaves 1g.10gb starts 4-6, three for four: it must go to 4.
		{"3g+4x1g.10gb needs backtracking", append([]string{"3g.40gb"}, rep(4, "1g.10gb")...), []int{0, 1, 2, 3, 4}, nil},
		// 3g.40gb at 0 leaves the 2g.20gb pair only start 4; at 4 they take 0 and 2.
		{"2x2g.20gb+3g", []string{"2g.20gb", "2g.20gb", "3g.40gb"}, []int{0, 2, 4}, nil},
		// 4g at 0 (0-3), 2g.20gb at 4 (4-5), 1g.20gb at 6 (6-7): all 8 memory and 7 compute slices.
		{"4g+2g.20gb+1g.20gb", []string{"1g.20gb", "2g.20gb", "4g.40gb"}, []int{0, 4, 6}, nil},
		{"7g alone", []string{"7g.80gb"}, []int{0}, nil},
		{"nothing", nil, []int{}, nil},
		// 4 + 4 = 8 compute slices > 7 (and 4g.40gb has the one start 0).
		{"2x4g.40gb", rep(2, "4g.40gb"), nil, []string{`profiles[1] "4g.40gb"`, "needs 4 compute slices", "only 3 of the GPU's 7"}},
		// 8 compute slices > 7 (and 1g.10gb has seven starts).
		{"8x1g.10gb", rep(8, "1g.10gb"), nil, []string{`profiles[7] "1g.10gb"`, "needs 1 compute slice,", "only 0 of the GPU's 7"}},
		// The two 3g.40gb take 0-3 and 4-7: compute 3+3+1 = 7 fits, memory 4+4+2 = 10 > 8 does not.
		{"2x3g.40gb+1g.20gb", []string{"3g.40gb", "3g.40gb", "1g.20gb"}, nil, []string{`profiles[2] "1g.20gb"`, "needs 2 memory slices", "only 0 of the GPU's 8"}},
		{"7g and anything", []string{"1g.10gb", "7g.80gb"}, nil, []string{`profiles[0] "1g.10gb"`, "needs 1 compute slice,", "only 0 of the GPU's 7"}},
		{"media extension", []string{"1g.10gb+me"}, nil, []string{`profiles[0] "1g.10gb+me"`, "no such MIG profile", "1g.10gb, 1g.20gb"}},
		{"A100-40GB name", []string{"3g.40gb", "1g.5gb"}, nil, []string{`profiles[1] "1g.5gb"`, "no such MIG profile"}},
	}
	for _, family := range []string{"H100-SXM", "A100-SXM"} {
		m := mig(t, family)
		for _, tt := range tests {
			t.Run(family+"/"+tt.name, func(t *testing.T) {
				starts, err := m.Place(tt.profiles)
				if tt.wantErr != nil {
					if err == nil {
						t.Fatalf("Place(%v) = %v, want an error", tt.profiles, starts)
					}
					for _, w := range tt.wantErr {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("error %q does not mention %q", err, w)
						}
					}
					return
				}
				if err != nil {
					t.Fatalf("Place(%v): %v", tt.profiles, err)
				}
				validLayout(t, m, tt.profiles, starts)
				sorted := slices.Sorted(slices.Values(starts))
				if !slices.Equal(sorted, tt.wantStarts) {
					t.Errorf("Place(%v) = %v, want the starts %v", tt.profiles, starts, tt.wantStarts)
				}
			})
		}
	}
}

// TestMIGPlaceInstanceCounts checks every MIG family against the guide's "Number of Instances
// Available": 7, 4, 3, 2, 1 and 1, and not one more.
func TestMIGPlaceInstanceCounts(t *testing.T) {
	counts := []int{7, 4, 3, 2, 1, 1}
	for _, g := range mustDefault(t).GPUs {
		if g.MIG == nil {
			continue
		}
		for j, p := range g.MIG.Profiles {
			if _, err := g.MIG.Place(slices.Repeat([]string{p.Name}, counts[j])); err != nil {
				t.Errorf("%s: %d × %s: %v", g.Family, counts[j], p.Name, err)
			}
			if s, err := g.MIG.Place(slices.Repeat([]string{p.Name}, counts[j]+1)); err == nil {
				t.Errorf("%s: %d × %s placed at %v", g.Family, counts[j]+1, p.Name, s)
			}
		}
	}
}

// TestMIGPlaceGeometryOnly covers a refusal no budget explains: both instances fit the slice
// counts, but the profile has one start.
func TestMIGPlaceGeometryOnly(t *testing.T) {
	m := &MIG{ComputeSlices: 2, MemorySlices: 4, Profiles: []MIGProfile{
		{Name: "1g.2gb", ComputeSlices: 1, MemorySlices: 2, MemoryMiB: 2048, Multiprocessors: 1, Starts: []int{0}},
		{Name: "2g.4gb", ComputeSlices: 2, MemorySlices: 4, MemoryMiB: 4096, Multiprocessors: 2, Starts: []int{0}},
	}}
	_, err := m.Place([]string{"1g.2gb", "1g.2gb"})
	for _, w := range []string{`profiles[1] "1g.2gb"`, "starts {0}", "has 2 memory slices free", "taken: {0,1}"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not mention %q", err, w)
		}
	}
}

func TestSliceOperating(t *testing.T) {
	c := mustDefault(t)
	// The full profile is the whole board, exactly.
	for _, g := range c.GPUs {
		if g.MIG == nil {
			continue
		}
		for _, u := range []float64{0, 0.05, 0.3, 0.77, 1, 1.5} {
			for _, m := range []float64{0, 0.4, 1, -1} {
				p, tp := g.SliceOperating(g.MIG.Full(), u, m)
				wp, wt := g.Operating(u, m, 0)
				if p != wp || tp != wt {
					t.Errorf("%s full profile at u=%g m=%g: %v W, %v; whole GPU %v W, %v", g.Family, u, m, p, tp, wp, wt)
				}
			}
		}
	}

	h := gpu(t, "H100-SXM") // idle 100 W, max 700 W, α 0.4, β 0.15
	one, _ := h.MIGProfile("1g.10gb")
	// Seven 1g slices saturated (u >= 1/7) share the board's idle and dynamic power: idle +
	// (max − idle)·(1 − β·m), which is maxW when m = 0.
	for _, tt := range []struct{ u, m, wantW float64 }{
		{1, 0, 700},
		{0.5, 0, 700},
		{1.0 / 7, 0, 700},
		{1, 1, 100 + 600*0.85},
	} {
		sum := 0.0
		for range 7 {
			p, _ := h.SliceOperating(one, tt.u, tt.m)
			sum += p
		}
		if !near(sum, tt.wantW, 1e-9) {
			t.Errorf("7 × 1g.10gb at u=%g m=%g draw %.9f W, want %g", tt.u, tt.m, sum, tt.wantW)
		}
	}

	tests := []struct {
		profile      string
		u, m         float64
		wantT, wantW float64
	}{
		// u = 0.1 < c = 1/7: the slice is not the bottleneck; it runs at u/c = 0.7 of its own SMs.
		{"1g.10gb", 0.1, 0, 1, 100.0/7 + 600.0/7*math.Pow(0.7, 0.4)},
		// A compute-bound whole-GPU job on 1/7 of the SMs: seven times slower, the slice saturated.
		{"1g.10gb", 1, 0, 1.0 / 7, 700.0 / 7},
		// A memory-bound one on 1/8 of the bandwidth: eight times slower.
		{"1g.10gb", 1, 1, 1.0 / 8, (100 + 600*0.85) / 7},
		// 1g.20gb doubles the memory slices: 2/8 of the bandwidth.
		{"1g.20gb", 1, 1, 1.0 / 4, (100 + 600*0.85) / 7},
		// c = 3/7, f = 1/2: S = 0.5·(0.5·7/3) + 0.5·max(1, 0.5·2) = 7/12 + 1/2 = 13/12.
		{"3g.40gb", 0.5, 0.5, 12.0 / 13, 3.0/7*100 + 600*3.0/7*(1-0.15*0.5)},
		{"4g.40gb", 0.2, 0, 1, 4.0/7*100 + 600*4.0/7*math.Pow(0.35, 0.4)},
		{"2g.20gb", 0, 0, 1, 2.0 / 7 * 100},
		// Inputs outside [0, 1] are clamped as on a whole GPU.
		{"1g.10gb", 3, -2, 1.0 / 7, 700.0 / 7},
	}
	for _, tt := range tests {
		p, _ := h.MIGProfile(tt.profile)
		w, tp := h.SliceOperating(p, tt.u, tt.m)
		if !near(tp, tt.wantT, 1e-12) || !near(w, tt.wantW, 1e-9) {
			t.Errorf("%s at u=%g m=%g: %.9f W, throughput %.12f; want %.9f W, %.12f", tt.profile, tt.u, tt.m, w, tp, tt.wantW, tt.wantT)
		}
	}

	// Without MIG, or without a slice, the pod has the whole board.
	l4 := gpu(t, "L4")
	if w, tp := l4.SliceOperating(nil, 1, 0); w != 72 || tp != 1 {
		t.Errorf("L4 without a slice: %g W, %g; want 72 W, 1", w, tp)
	}
	if w, tp := h.SliceOperating(nil, 1, 0); w != 700 || tp != 1 {
		t.Errorf("H100 without a slice: %g W, %g; want 700 W, 1", w, tp)
	}
}

func TestLoadCatalogMIGErrors(t *testing.T) {
	// Line 1 gpus, 2 the family, 3 mig, 4-9 the profiles, one per line.
	const okMIG = `gpus:
  - {family: G, maxW: 500, minCapW: 200, idleW: 50, utilExponent: 1, memoryPowerDrop: 0, gamma: 1, memoryEpsilon: 0.2, memoryGamma: 2,
     mig: {computeSlices: 7, memorySlices: 8, profiles: [
       {name: 1g.10gb, profileId: 19, computeSlices: 1, memorySlices: 1, memoryMiB: 10240, multiprocessors: 16, starts: [0, 1, 2, 3, 4, 5, 6]},
       {name: 1g.20gb, profileId: 15, computeSlices: 1, memorySlices: 2, memoryMiB: 20480, multiprocessors: 16, starts: [0, 2, 4, 6]},
       {name: 2g.20gb, profileId: 14, computeSlices: 2, memorySlices: 2, memoryMiB: 20480, multiprocessors: 32, starts: [0, 2, 4]},
       {name: 3g.40gb, profileId: 9, computeSlices: 3, memorySlices: 4, memoryMiB: 40960, multiprocessors: 48, starts: [0, 4]},
       {name: 4g.40gb, profileId: 5, computeSlices: 4, memorySlices: 4, memoryMiB: 40960, multiprocessors: 64, starts: [0]},
       {name: 7g.80gb, profileId: 0, computeSlices: 7, memorySlices: 8, memoryMiB: 81920, multiprocessors: 112, starts: [0]}]}}
cpus:
  - {model: m, cores: 8, curveW: [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110], platformW: 5, dynamicExponent: 2, minFrequency: 0.5}
defaultCPU: m
`
	const full = `       {name: 7g.80gb, profileId: 0, computeSlices: 7, memorySlices: 8, memoryMiB: 81920, multiprocessors: 112, starts: [0]}]}}`
	tests := []struct {
		name     string
		old, new string // the edit to okMIG
		want     []string
	}{
		{"start past the end", "memorySlices: 4, memoryMiB: 40960, multiprocessors: 48, starts: [0, 4]", "memorySlices: 4, memoryMiB: 40960, multiprocessors: 48, starts: [0, 5]",
			[]string{"hw.yaml:7:", "gpus[G].mig.profiles[3g.40gb].starts[1]", "must be in [0, 4]"}},
		{"negative start", "starts: [0, 2, 4]", "starts: [-2, 0, 2]", []string{"hw.yaml:6:", "gpus[G].mig.profiles[2g.20gb].starts[0]"}},
		{"starts unordered", "starts: [0, 2, 4, 6]", "starts: [0, 4, 2, 6]", []string{"gpus[G].mig.profiles[1g.20gb].starts[2]", "increasing"}},
		{"no starts", "starts: [0, 2, 4]", "starts: []", []string{"gpus[G].mig.profiles[2g.20gb].starts", "at least one"}},
		{"duplicate profile", "name: 1g.20gb, profileId: 15", "name: 1g.10gb, profileId: 15", []string{"hw.yaml:5:", "gpus[G].mig.profiles[1g.10gb].name", "duplicate profile"}},
		{"duplicate profile ID", "profileId: 15", "profileId: 19", []string{"hw.yaml:5:", "gpus[G].mig.profiles[1g.20gb].profileId", "also the ID of 1g.10gb"}},
		{"two full profiles", full, strings.TrimSuffix(full, "]}}") + ",\n" + strings.ReplaceAll(strings.ReplaceAll(full, "7g.80gb", "7g.81gb"), "profileId: 0", "profileId: 1"),
			[]string{"hw.yaml:10:", "gpus[G].mig.profiles[7g.81gb]", "second full profile", "7g.80gb already covers"}},
		{"no full profile", "memorySlices: 8, memoryMiB: 81920", "memorySlices: 7, memoryMiB: 81920", []string{"gpus[G].mig.profiles:", "exactly one full profile"}},
		{"bad name", "name: 4g.40gb", "name: 4g.40GB", []string{"gpus[G].mig.profiles[4g.40GB].name", "like 1g.10gb"}},
		{"media extension name", "name: 1g.20gb", "name: 1g.20gb+me", []string{"gpus[G].mig.profiles[1g.20gb+me].name"}},
		{"name against slices", "name: 2g.20gb", "name: 3g.20gb", []string{"gpus[G].mig.profiles[3g.20gb].name", "says 3g but computeSlices is 2"}},
		{"too many compute slices", "name: 4g.40gb, profileId: 5, computeSlices: 4", "name: 8g.40gb, profileId: 5, computeSlices: 8",
			[]string{"gpus[G].mig.profiles[8g.40gb].computeSlices", "[1, 7]"}},
		{"zero memory slices", "memorySlices: 2, memoryMiB: 20480, multiprocessors: 32", "memorySlices: 0, memoryMiB: 20480, multiprocessors: 32",
			[]string{"gpus[G].mig.profiles[2g.20gb].memorySlices", "[1, 8]"}},
		{"memory shrinks", "memorySlices: 4, memoryMiB: 40960, multiprocessors: 48", "memorySlices: 4, memoryMiB: 10000, multiprocessors: 48",
			[]string{"gpus[G].mig.profiles[3g.40gb].memoryMiB", "less than 1g.10gb's 10240 MiB on 1"}},
		{"zero MiB", "memoryMiB: 10240,", "memoryMiB: 0,", []string{"gpus[G].mig.profiles[1g.10gb].memoryMiB", "> 0"}},
		{"zero SMs", "multiprocessors: 64", "multiprocessors: 0", []string{"gpus[G].mig.profiles[4g.40gb].multiprocessors", "> 0"}},
		{"largest first", "name: 1g.10gb, profileId: 19, computeSlices: 1, memorySlices: 1, memoryMiB: 10240, multiprocessors: 16, starts: [0, 1, 2, 3, 4, 5, 6]},\n       {name: 1g.20gb, profileId: 15, computeSlices: 1, memorySlices: 2, memoryMiB: 20480, multiprocessors: 16, starts: [0, 2, 4, 6]}",
			"name: 1g.20gb, profileId: 15, computeSlices: 1, memorySlices: 2, memoryMiB: 20480, multiprocessors: 16, starts: [0, 2, 4, 6]},\n       {name: 1g.10gb, profileId: 19, computeSlices: 1, memorySlices: 1, memoryMiB: 10240, multiprocessors: 16, starts: [0, 1, 2, 3, 4, 5, 6]}",
			[]string{"gpus[G].mig.profiles[1g.10gb].computeSlices", "smallest first"}},
		{"zero compute slices", "mig: {computeSlices: 7,", "mig: {computeSlices: 0,", []string{"hw.yaml:3:", "gpus[G].mig.computeSlices", "> 0"}},
		{"unknown field", "starts: [0]}]}}", "starts: [0], size: 8}]}}", []string{"hw.yaml", "size"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(okMIG, tt.old) {
				t.Fatalf("test edit %q matches nothing", tt.old)
			}
			body := strings.Replace(okMIG, tt.old, tt.new, 1)
			_, err := ParseCatalog("hw.yaml", []byte(body))
			if err == nil {
				t.Fatal("ParseCatalog accepted a bad MIG table")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// The unedited table loads, from a file too.
	path := filepath.Join(t.TempDir(), "hw.yaml")
	if err := os.WriteFile(path, []byte(okMIG), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCatalog(path)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	if g, _ := c.GPU("G"); g.MIG.Full() == nil || g.MIG.Full().Name != "7g.80gb" {
		t.Errorf("loaded MIG = %+v", g.MIG)
	}
}

func TestHeld(t *testing.T) {
	h, l4 := gpu(t, "H100-SXM"), gpu(t, "L4")
	tests := []struct {
		gpu     *GPU
		whole   int64
		profile string
		slices  int
		want    float64
	}{
		{h, 2, "", 0, 2},
		{h, 0, "1g.10gb", 7, 1},       // seven 1g slices: one GPU
		{h, 0, "3g.40gb", 1, 3.0 / 7}, // 3 of 7 compute slices
		{h, 0, "4g.40gb", 2, 8.0 / 7},
		{h, 0, "7g.80gb", 1, 1},
		{h, 0, "1g.5gb", 3, 0}, // not an H100 profile
		{l4, 0, "1g.10gb", 1, 0},
	}
	for _, tt := range tests {
		if got := tt.gpu.Held(tt.whole, tt.profile, tt.slices); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s.Held(%d, %q, %d) = %v, want %v", tt.gpu.Family, tt.whole, tt.profile, tt.slices, got, tt.want)
		}
	}
}
