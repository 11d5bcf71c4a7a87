//go:build unix

package gen

import (
	"syscall"
	"time"
)

// processCPUTime returns the user+system CPU time of the process, so a benchmark can report
// throughput per CPU-second, which other load on the machine does not distort like wall time.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
