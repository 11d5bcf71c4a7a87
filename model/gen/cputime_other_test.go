//go:build !unix

package gen

import "time"

// processCPUTime is not available here; benchmarks then report wall-time throughput only.
func processCPUTime() (time.Duration, bool) { return 0, false }
