package hw

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustDefault(t testing.TB) *Catalog {
	t.Helper()
	c, err := DefaultCatalog()
	if err != nil {
		t.Fatalf("embedded catalog: %v", err)
	}
	return c
}

func TestDefaultCatalogFamilies(t *testing.T) {
	c := mustDefault(t)
	tests := []struct {
		family            string
		maxW, minW, idleW float64
	}{
		{"H100-SXM", 700, 350, 100},
		{"H100-NVL", 400, 200, 60},
		{"H200-SXM", 700, 350, 100},
		{"A100-SXM", 400, 100, 55},
		{"A100-PCIE", 300, 150, 50},
		{"L40S", 350, 200, 35},
		{"L4", 72, 40, 16},
		{"MI300X", 750, 350, 120},
	}
	for _, tt := range tests {
		g, ok := c.GPU(tt.family)
		if !ok {
			t.Errorf("family %s missing", tt.family)
			continue
		}
		if g.MaxW != tt.maxW || g.MinCapW != tt.minW || g.IdleW != tt.idleW {
			t.Errorf("%s = max %g / min %g / idle %g, want %g / %g / %g", tt.family, g.MaxW, g.MinCapW, g.IdleW, tt.maxW, tt.minW, tt.idleW)
		}
	}
	if len(c.GPUs) != len(tests) {
		t.Errorf("catalog has %d GPU families, test knows %d", len(c.GPUs), len(tests))
	}
	for _, m := range []string{"2xEPYC-9654", "2xXeon-8480+", "generic"} {
		if _, ok := c.CPU(m); !ok {
			t.Errorf("cpu model %s missing", m)
		}
	}
	if m, ok := c.CPU("no-such-cpu"); ok || m == nil || m.Model != "generic" {
		t.Errorf("unknown cpu model: got %v ok=%v, want generic fallback", m, ok)
	}
	// Meta's Llama 3 figures: 419 unexpected interruptions in 54 days on 16,384 H100s, 58.7 % GPU.
	gpuHours, nodeHours := 54*24*16384.0, 54*24*2048.0
	if f := c.Faults; math.Abs(f.GPUMTBFHours-gpuHours/(0.587*419)) > 100 || math.Abs(f.NodeMTBFHours-nodeHours/(0.413*419)) > 100 || f.NodeRepairSec <= 0 {
		t.Errorf("fault rates %+v do not follow the Llama 3 report (%.0f GPU-hours, %.0f node-hours between faults)",
			f, gpuHours/(0.587*419), nodeHours/(0.413*419))
	}
	if _, ok := c.GPU("no-such-gpu"); ok {
		t.Error("unknown GPU family found")
	}
}

func TestLoadCatalogOverride(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.yaml")
	body := `gpus:
  - {family: X1, maxW: 500, minCapW: 200, idleW: 50, utilExponent: 1, memoryPowerDrop: 0, gamma: 1, memoryEpsilon: 0.2, memoryGamma: 2}
cpus:
  - {model: m, cores: 8, curveW: [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110], platformW: 5, dynamicExponent: 2, minFrequency: 0.5}
defaultCPU: m
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCatalog(path)
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	g, ok := c.GPU("X1")
	if !ok || g.NaturalPower(1, 0) != 500 {
		t.Errorf("override not applied: %+v", c.GPUs)
	}
	if _, ok := c.GPU("H100-SXM"); ok {
		t.Error("override file must replace the embedded catalog, not merge")
	}
}

func TestLoadCatalogErrors(t *testing.T) {
	const okGPU = `  - {family: G, maxW: 500, minCapW: 200, idleW: 50, utilExponent: 1, memoryPowerDrop: 0, gamma: 1, memoryEpsilon: 0.2, memoryGamma: 2}
`
	const okCPU = `cpus:
  - {model: m, cores: 8, curveW: [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110], platformW: 5, dynamicExponent: 2, minFrequency: 0.5}
defaultCPU: m
`
	tests := []struct {
		name, body string
		want       []string
	}{
		{"unknown field", "gpus:\n" + okGPU + okCPU + "extra: 1\n", []string{"hw.yaml", "hw.yaml:6:", "extra"}},
		{"unknown gpu field", "gpus:\n  - {family: G, maxW: 500, minCapW: 200, idleW: 50, utilExponent: 1, memoryPowerDrop: 0, gamma: 1, memoryEpsilon: 0.2, memoryGamma: 2, tdp: 3}\n" + okCPU, []string{"hw.yaml", "tdp"}},
		{"min cap above max", "gpus:\n  - {family: G, maxW: 500, minCapW: 600, idleW: 50, utilExponent: 1, memoryPowerDrop: 0, gamma: 1, memoryEpsilon: 0.2, memoryGamma: 2}\n" + okCPU, []string{"hw.yaml:2", "gpus[G].minCapW"}},
		{"idle above min cap", "gpus:\n  - {family: G, maxW: 500, minCapW: 200, idleW: 250, utilExponent: 1, memoryPowerDrop: 0, gamma: 1, memoryEpsilon: 0.2, memoryGamma: 2}\n" + okCPU, []string{"hw.yaml:2", "gpus[G].idleW"}},
		{"epsilon 1", "gpus:\n  - {family: G, maxW: 500, minCapW: 200, idleW: 50, utilExponent: 1, memoryPowerDrop: 0, gamma: 1, memoryEpsilon: 1, memoryGamma: 2}\n" + okCPU, []string{"gpus[G].memoryEpsilon"}},
		{"duplicate family", "gpus:\n" + okGPU + okGPU + okCPU, []string{"hw.yaml:3", "duplicate family"}},
		{"curve 10 points", "gpus:\n" + okGPU + "cpus:\n  - {model: m, cores: 8, curveW: [10, 20, 30, 40, 50, 60, 70, 80, 90, 100], platformW: 5, dynamicExponent: 2, minFrequency: 0.5}\ndefaultCPU: m\n", []string{"hw.yaml:4", "cpus[m].curveW", "11 points"}},
		{"curve decreasing", "gpus:\n" + okGPU + "cpus:\n  - {model: m, cores: 8, curveW: [10, 20, 30, 40, 35, 60, 70, 80, 90, 100, 110], platformW: 5, dynamicExponent: 2, minFrequency: 0.5}\ndefaultCPU: m\n", []string{"cpus[m].curveW[4]", "non-decreasing"}},
		{"unknown default cpu", "gpus:\n" + okGPU + strings.Replace(okCPU, "defaultCPU: m", "defaultCPU: z", 1), []string{"defaultCPU", `"z"`}},
		{"bad cap profile", "gpus:\n" + okGPU + okCPU + "capProfiles: {eco: 1.5}\n", []string{"capProfiles.eco"}},
		{"negative fault rate", "gpus:\n" + okGPU + okCPU + "faults: {gpuMTBFHours: -1, nodeMTBFHours: 10, nodeRepairSec: 60}\n", []string{"faults.gpuMTBFHours"}},
		{"empty", "", []string{"hw.yaml: empty catalog"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hw.yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadCatalog(path)
			if err == nil {
				t.Fatal("LoadCatalog accepted a bad catalog")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := LoadCatalog(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: err = %v", err)
	}
}
