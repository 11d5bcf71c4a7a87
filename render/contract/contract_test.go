package contract

import (
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

func pod() *Pod {
	return &Pod{
		WorkloadID: "workload-000001", Family: trace.DistributedTraining, Role: trace.RoleWorker, GangSize: 5,
		Work: trace.Work{CPUUnits: 1024.5, GPUUnits: 6800}, DurationSec: 14400,
		Sensitivity:     &trace.Sensitivity{CPU: 0.65, GPU: 0.9},
		Profile:         trace.Profile{CPUUtilization: 0.28, GPUUtilization: 0.47, MemoryIntensity: 0.58, IOIntensity: 0.08, CPUFeedIntensityGPU: 0.56},
		SubmitOffsetSec: 12.4, IntentClass: trace.IntentEco, CheckpointIntervalSec: 900, CheckpointCostSec: 45.5,
		RestartOverheadSec: 600,
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Pod)
	}{
		{"full", func(*Pod) {}},
		{"no gang, no sensitivity, no checkpoint", func(p *Pod) {
			p.GangSize, p.Sensitivity, p.CheckpointIntervalSec, p.CheckpointCostSec, p.RestartOverheadSec = 0, nil, 0, 0, 0
		}},
		{"awkward floats", func(p *Pod) { p.Work.CPUUnits, p.SubmitOffsetSec = 0.1+0.2, 1e-9 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := pod()
			tc.edit(want)
			a := want.Annotations()
			for k := range a {
				if !strings.HasPrefix(k, Prefix) {
					t.Errorf("key %s lacks the prefix", k)
				}
			}
			got, err := Parse(a)
			if err != nil {
				t.Fatal(err)
			}
			if (got.Sensitivity == nil) != (want.Sensitivity == nil) || (got.Sensitivity != nil && *got.Sensitivity != *want.Sensitivity) {
				t.Fatalf("sensitivity %v, want %v", got.Sensitivity, want.Sensitivity)
			}
			got.Sensitivity, want.Sensitivity = nil, nil
			if *got != *want {
				t.Fatalf("Parse(Annotations()) = %+v, want %+v", got, want)
			}
		})
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		key, value string // value "" deletes the key
	}{
		{WorkloadID, ""},
		{Role, ""},
		{WorkCPUUnits, ""},
		{WorkGPUUnits, "many"},
		{DurationSec, "-1"},
		{ProfileGPUUtilization, "1.5"},
		{ProfileIO, "NaN"},
		{GangSize, "2.5"},
		{GangSize, "-3"},
		{SensitivityGPU, ""}, // one sensitivity without the other
		{SensitivityCPU, "2"},
		{Family, "quantum_annealing"},
		{CheckpointIntervalSec, "soon"},
		{SubmitOffsetSec, ""},
	} {
		a := pod().Annotations()
		if tc.value == "" {
			delete(a, tc.key)
		} else {
			a[tc.key] = tc.value
		}
		_, err := Parse(a)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s=%q: error %v, want one naming the key", tc.key, tc.value, err)
		}
	}
}

func TestUnrendered(t *testing.T) {
	tests := []struct {
		name      string
		ann       map[string]string
		cpu       float64
		gpus      int
		wantSec   float64
		wantGPU   bool
		wantError string
	}{
		{"defaults", nil, 1, 0, DefaultDurationSec, false, ""},
		{"user's run time", map[string]string{DurationSec: "90"}, 2, 1, 90, true, ""},
		{"zero", map[string]string{DurationSec: "0"}, 1, 0, 0, false, "annotation kueuelab.io/duration-sec: \"0\""},
		{"not a number", map[string]string{DurationSec: "10m"}, 1, 0, 0, false, "annotation kueuelab.io/duration-sec: \"10m\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if Rendered(tc.ann) {
				t.Fatalf("annotations %v read as rendered", tc.ann)
			}
			p, err := Unrendered(tc.ann, "my-job", tc.cpu, tc.gpus)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err = %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.DurationSec != tc.wantSec || p.WorkloadID != "my-job" || p.GangSize != 0 || p.Sensitivity == nil {
				t.Errorf("contract %+v", p)
			}
			if got := p.Work.GPUUnits > 0; got != tc.wantGPU || !(p.Work.CPUUnits > 0) {
				t.Errorf("work %+v for %g cores and %d GPUs", p.Work, tc.cpu, tc.gpus)
			}
		})
	}
	rendered := (&Pod{WorkloadID: "w"}).Annotations()
	if !Rendered(rendered) {
		t.Errorf("a rendered pod's annotations read as unrendered")
	}
}
