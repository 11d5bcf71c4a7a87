//go:build unix

package trace

import (
	"bytes"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRead reads a trace of ~100k records (workload and job records of 30k workloads). It
// reports records/s of wall time and of CPU time (user+system), the latter meaningful on a
// machine shared with other work.
func BenchmarkRead(b *testing.B) {
	ws, jobs := genTrace(30000, 11)
	data := encodeTrace(b, ws, jobs, true)
	records := bytes.Count(data, []byte("\n"))
	b.SetBytes(int64(len(data)))
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		r, err := NewReader(bytes.NewReader(data), "bench", Options{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != records {
			b.Fatalf("read %d records, want %d", n, records)
		}
	}
	b.StopTimer()
	total := float64(records * b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(total/(cpuTime(b)-cpu0).Seconds(), "records/cpu-s")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
