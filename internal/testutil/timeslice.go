package testutil

import "fmt"

// TimeSliceSpec is the cluster spec of the time-slicing case both engines replay (runtime/sim's
// and test/e2e's TestTimeSlicedGPU), relative to a package two directories below the repository's
// root.
const TimeSliceSpec = "../../testdata/timeslice/spec.yaml"

// TimeSliceWant is what a workload of the time-slicing case must do: its JCT, the GPU-seconds it
// holds (a replica is a quarter of the GPU) and the compute it uses, in GPU-seconds.
type TimeSliceWant struct{ JCT, Held, Busy float64 }

// TimeSliceCase is the case's trace and its expectations, derived by hand from the
// processor-sharing model of runtime/agent/engine/timeslice.go: three one-replica debug_eval pods
// (GPU utilisation 0.6, GPU sensitivity 0.6) submitted together ask 1.8 of the GPU, so each
// progresses at pace 1/1.8 there and at speed 1 − 0.6·(1 − 1/1.8) = 0.7333: JCT 600/0.7333 =
// 818.18 s, holding a quarter of the GPU and using 0.6/1.8 of it. A fourth later alone takes
// exactly its 600 s using 0.6 of the GPU; a half share of a GPU goes to a replica and, alone,
// takes its 600 s using 0.3.
func TimeSliceCase() (lines []string, want map[string]TimeSliceWant) {
	const u, d, sens = 0.6, 600.0, 0.6
	w := func(id string, at float64, req string) string {
		return fmt.Sprintf(`{"type":"workload","schemaVersion":"v2","workloadId":%q,"submitTimeOffsetSec":%g,"namespace":"ts","workloadType":"debug_eval","durationSec":%g,"workloadClass":{"cpu":"cpu.light","gpu":"gpu.light"},"sharedIntensityProfile":{"cpuUtilization":0.2,"gpuUtilization":%g,"memoryIntensity":0.3,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.1},"pods":[{"role":"main","replicas":1,"requests":{"cpu":"2","memory":"4Gi",%s}}]}`,
			id, at, d, u, req)
	}
	pace := 1 / 1.8
	shared := d / (1 - sens*(1-pace))
	want = map[string]TimeSliceWant{}
	for _, id := range []string{"ts-a", "ts-b", "ts-c"} {
		lines = append(lines, w(id, 60, `"nvidia.com/gpu":"1"`))
		want[id] = TimeSliceWant{JCT: shared, Held: 0.25 * shared, Busy: u * pace * shared}
	}
	lines = append(lines, w("ts-alone", 3000, `"nvidia.com/gpu":"1"`), w("ts-half", 6000, `"kueuelab.io/gpu-fraction":"0.5"`))
	want["ts-alone"] = TimeSliceWant{JCT: d, Held: 0.25 * d, Busy: u * d}
	want["ts-half"] = TimeSliceWant{JCT: d, Held: 0.25 * d, Busy: 0.5 * u * d}
	return lines, want
}
