package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultProfileIsValid(t *testing.T) {
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != ProfileVersion || len(p.Families) != 7 || len(p.Arrival.HourlyMultipliers) != 24 {
		t.Fatalf("unexpected default profile %+v", p)
	}
	// The model's specified priors, spot-checked so an edit of the YAML that changes the model is
	// noticed.
	checks := []struct {
		name      string
		got, want float64
	}{
		{"gpuRatio", p.GPURatio, 0.8},
		{"debug_eval probability", p.Family("debug_eval").Probability, 0.45},
		{"debug_eval median", p.Family("debug_eval").Duration.MedianSec, 206},
		{"distributed sigma", p.Family("distributed_training").Duration.Sigma, 1.2},
		{"distributed large factor", p.Family("distributed_training").Duration.LargeGPUFactor, 1.2},
		{"cpu_analytics max", p.Family("cpu_analytics").Duration.MaxSec, 86400},
		{"P(G=8)", p.GPUCount[3].Probability, 0.03},
		{"Philly mean G=4", p.GPUCount[2].UtilizationMean, 0.4518},
		{"multiplier 09:00", p.Arrival.HourlyMultipliers[9], 1.2},
		{"multiplier 19:00", p.Arrival.HourlyMultipliers[19], 0.95},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestProfileErrors(t *testing.T) {
	base := string(DefaultProfileYAML())
	tests := []struct {
		name     string
		old, new string // replaced once in the default profile
		want     []string
	}{
		{"unknown field", "gpuRatio: 0.8", "gpuRatio: 0.8\ngpuRatoi: 0.7", []string{"custom.yaml:44:", "gpuRatoi", "not found"}},
		{"wrong version", "version: 1", "version: 2", []string{"custom.yaml:4", "version", "unsupported profile version 2"}},
		{"probabilities do not sum to 1", "    probability: 0.45", "    probability: 0.46", []string{"families (GPU families)", "sum to 1.01"}},
		{"probability above 1", "gpuRatio: 0.8", "gpuRatio: 1.5", []string{"custom.yaml:43", "gpuRatio", "not in [0, 1]"}},
		{"clamps unordered", "minSec: 1200, maxSec: 1209600", "minSec: 1209600, maxSec: 1200", []string{"custom.yaml:141", "families[2].duration", "minSec 1.2096e+06 > maxSec 1200"}},
		{"median outside clamps", "medianSec: 206,", "medianSec: 2060,", []string{"custom.yaml:115", "families[0].duration.medianSec", "outside the clamps"}},
		{"sigma not positive", "sigma: 1.2", "sigma: 0", []string{"families[2].duration.sigma", "positive"}},
		{"range reversed", "cpuUtilization: [0.20, 0.40]", "cpuUtilization: [0.40, 0.20]", []string{"custom.yaml:117", "families[0].cpuUtilization", "min <= max"}},
		{"range outside [0,1]", "ioIntensity: [0.10, 0.30]", "ioIntensity: [0.10, 1.30]", []string{"families[0].ioIntensity"}},
		{"range not a pair", "ioIntensity: [0.10, 0.30]", "ioIntensity: [0.10]", []string{"custom.yaml:119:", "[min, max]"}},
		{"23 hourly multipliers", "    - 0.95 # 23:00\n", "", []string{"custom.yaml:10", "arrival.hourlyMultipliers", "needs 24 values"}},
		{"mean inter-arrival", "meanInterArrivalSec: 30", "meanInterArrivalSec: -1", []string{"custom.yaml:8", "arrival.meanInterArrivalSec"}},
		{"bad namespace", "namespace: team-b", "namespace: Team_B", []string{"custom.yaml:54", "teams[1].namespace", "DNS-1123"}},
		{"duplicate GPU count", "gpus: 8", "gpus: 4", []string{"custom.yaml:72", "gpuCount[3].gpus", "duplicate"}},
		{"role the family lacks", "main: {cpu: 2, cpuPerGPU: 2, memoryGi: 8, memoryGiPerGPU: 16}",
			"main: {cpu: 2, cpuPerGPU: 2, memoryGi: 8, memoryGiPerGPU: 16}\n      ps: {cpu: 1, memoryGi: 1}", []string{"families[0].roles.ps", "has no pod role"}},
		{"hpo range", "  min: 2", "  min: 9", []string{"custom.yaml:78", "hpoTrials"}},
		{"wrong type", "gpuRatio: 0.8", "gpuRatio: lots", []string{"custom.yaml:43:", "lots"}},
		{"cpu choices sum", "- {cores: 4, probability: 0.45}", "- {cores: 4, probability: 0.5}", []string{"families[6].roles.main.cpuChoices", "sum to"}},
		{"costly checkpoints too often", "intervalSec: 3600, costSec: 60, restartSec: 600", "intervalSec: 0.5, costSec: 60, restartSec: 600", []string{"custom.yaml:151", "families[2].checkpoint.intervalSec"}},
		{"share of a whole GPU", "      main: {cpu: 2, cpuPerGPU: 2, memoryGi: 8, memoryGiPerGPU: 16}\n\n  - name: single",
			"      main: {cpu: 2, cpuPerGPU: 2, memoryGi: 8, memoryGiPerGPU: 16}\n    gpuShares: [{share: 1, probability: 0.2}]\n\n  - name: single",
			[]string{"families[0].gpuShares[0].share", "must be a share of a GPU in thousandths, 0.001 to 0.999"}},
		{"shares more likely than certain", "      main: {cpu: 2, cpuPerGPU: 2, memoryGi: 8, memoryGiPerGPU: 16}\n\n  - name: single",
			"      main: {cpu: 2, cpuPerGPU: 2, memoryGi: 8, memoryGiPerGPU: 16}\n    gpuShares: [{share: 0.5, probability: 0.6}, {share: 0.25, probability: 0.6}]\n\n  - name: single",
			[]string{"families[0].gpuShares", "sum to 1.2"}},
		{"shares of a gang", "    maxRestarts: 3\n\n  - name: parameter", "    maxRestarts: 3\n    gpuShares: [{share: 0.5, probability: 0.1}]\n\n  - name: parameter",
			[]string{"families[2].gpuShares", "only debug_eval and single_gpu_training"}},
		{"negative restarts", "    maxRestarts: 3\n\n  - name: parameter", "    maxRestarts: -1\n\n  - name: parameter", []string{"families[2].maxRestarts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.old) {
				t.Fatalf("default profile has no %q", tt.old)
			}
			path := filepath.Join(t.TempDir(), "custom.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(base, tt.old, tt.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := LoadProfile(path)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append(tt.want, "custom.yaml") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestProfileErrorsAreAllReported(t *testing.T) {
	bad := strings.NewReplacer("gpuRatio: 0.8", "gpuRatio: 2", "sigma: 1.2", "sigma: -1").Replace(string(DefaultProfileYAML()))
	_, err := ParseProfile("x.yaml", []byte(bad))
	if err == nil || !strings.Contains(err.Error(), "gpuRatio") || !strings.Contains(err.Error(), "sigma") {
		t.Fatalf("want both problems reported, got %v", err)
	}
}

func TestProfileEmptyAndMissing(t *testing.T) {
	if _, err := ParseProfile("e.yaml", nil); err == nil || !strings.Contains(err.Error(), "e.yaml: empty") {
		t.Fatalf("empty profile: %v", err)
	}
	if _, _, err := LoadProfile(filepath.Join(t.TempDir(), "nope.yaml")); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("missing profile: %v", err)
	}
	if _, err := ParseProfile("two.yaml", append(DefaultProfileYAML(), []byte("\n---\nversion: 1\n")...)); err == nil {
		t.Fatal("two documents accepted")
	}
}

func TestValidateInCode(t *testing.T) {
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	p.Intent.PerformanceRatio, p.Intent.EcoRatio = 0.7, 0.6
	if err := p.Validate("flags"); err == nil || !strings.Contains(err.Error(), "flags: intent: performanceRatio + ecoRatio") {
		t.Fatalf("got %v", err)
	}
}
