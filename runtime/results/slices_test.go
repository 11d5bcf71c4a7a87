package results

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// What the MIG-partitioned GPUs did, worked out by hand: two 1g.10gb slices (1/7 of a GPU each)
// saturated for an hour, one 3g.40gb slice (3/7) 70 % busy for two hours, one whole GPU at 50 %
// for an hour; 8 of the 16 GPUs partitioned, a 2 h makespan.
func TestSlicesSummary(t *testing.T) {
	at := func(v float64) *float64 { return &v }
	recs := []Record{
		{ID: "a", Family: "debug_eval", Queue: "q", State: StateSucceeded, MIGProfile: "1g.10gb", SliceShare: 1.0 / 7,
			Submitted: at(0), Admitted: at(0), Finished: at(3600), GPUSeconds: 2.0 / 7 * 3600, GPUUtil: 1, EnergyJ: 3.6e6},
		{ID: "b", Family: "debug_eval", Queue: "q", State: StateSucceeded, MIGProfile: "3g.40gb", SliceShare: 3.0 / 7,
			Submitted: at(0), Admitted: at(0), Finished: at(7200), GPUSeconds: 3.0 / 7 * 7200, GPUUtil: 0.7, EnergyJ: 10.8e6},
		{ID: "c", Family: "single_gpu_training", Queue: "q", State: StateSucceeded, GPUs: 1,
			Submitted: at(0), Admitted: at(0), Finished: at(3600), GPUSeconds: 3600, GPUUtil: 0.5, EnergyJ: 3.6e6},
	}
	s := Summarize(recs, Meta{GPUCapacity: 16, PartitionedGPUs: 8})
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	mig := map[string]Group{}
	for _, g := range s.Groups {
		if g.Scope == ScopeMIG {
			mig[g.Name] = g
		}
	}
	if len(mig) != 2 {
		t.Fatalf("MIG groups %v, want 1g.10gb and 3g.40gb", mig)
	}
	near("1g.10gb slice-hours", mig["1g.10gb"].SliceHours, 2)
	near("1g.10gb slice utilisation", mig["1g.10gb"].DeviceUtilization, 1)
	near("1g.10gb GPU-hours", mig["1g.10gb"].GPUHours, 2.0/7)
	near("3g.40gb slice-hours", mig["3g.40gb"].SliceHours, 2)
	near("3g.40gb slice utilisation", mig["3g.40gb"].DeviceUtilization, 0.7)
	near("3g.40gb GPU-hours", mig["3g.40gb"].GPUHours, 6.0/7)
	sl := s.Slices
	if sl == nil || sl.PartitionedGPUs != 8 || sl.Workloads != 2 {
		t.Fatalf("slices %+v", sl)
	}
	near("slices GPU-hours", sl.GPUHours, 8.0/7)
	near("slices allocation", sl.Allocation, (8.0/7)/(8*2))                       // GPU-hours over 8 GPUs × 2 h
	near("slices effective", sl.Effective, (2.0/7*1+6.0/7*0.7)/(8*2))             // compute used over the same
	near("slices energy", sl.EnergyKWh, 4)                                        // the two slice workloads' 1 + 3 kWh
	near("slices energy per GPU", sl.EnergyKWhPerGPU, 0.5)                        // over 8 GPUs
	near("whole cluster allocation", s.Groups[0].GPUAllocation, (8.0/7+1)/(16*2)) // the slices count in it too
	var table bytes.Buffer
	if err := s.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"MIG: 8 partitioned GPUs, 2 workloads on slices: 7.1% allocated, 5.5% effective, 4.0 kWh on slices (0.50 kWh a GPU)",
		"1g.10gb  1      2.0    0.3      100.0%  1.0",
		"3g.40gb  1      2.0    0.9       70.0%  3.0",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}

	// Without partitioned GPUs and slices, nothing of it.
	plain := Summarize(recs[2:], Meta{GPUCapacity: 16})
	if plain.Slices != nil {
		t.Errorf("slices on a cluster without MIG: %+v", plain.Slices)
	}
	for _, g := range plain.Groups {
		if g.Scope == ScopeMIG {
			t.Errorf("MIG group %s without slices", g.Name)
		}
	}

	// workloads.csv keeps the profile and the share.
	var csv bytes.Buffer
	if err := WriteWorkloadsCSV(&csv, recs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadWorkloadsCSV(bytes.NewReader(csv.Bytes()), "w.csv")
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if back[i].MIGProfile != recs[i].MIGProfile || back[i].SliceShare != recs[i].SliceShare {
			t.Errorf("%s read back as %q, %v", recs[i].ID, back[i].MIGProfile, back[i].SliceShare)
		}
	}
}
