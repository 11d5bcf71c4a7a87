//go:build unix

package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// BenchmarkRead reads a trace of ~100k records (workload and job records of 30k workloads) three
// ways in one run, so their ratios are measured under the same load:
//
//   - reader: Reader.Next, the whole strict path (decode, field checks, cross-record ledger);
//   - jsonv2: github.com/go-json-experiment/json's struct decoding of each line into a Workload or
//     a Job, nothing else (the library alone, what reader would cost without its hand dispatch);
//   - encoding-json: encoding/json decoding each line into a Workload or a Job, nothing else.
//
// Each reports records/s of wall time and records/cpu-s (user+system), the latter meaningful on a
// machine shared with other work. The floor for reader is 300k records/cpu-s.
func BenchmarkRead(b *testing.B) {
	ws, jobs := genTrace(30000, 11)
	data := encodeTrace(b, ws, jobs, true)
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	run := func(b *testing.B, read func() int) {
		b.SetBytes(int64(len(data)))
		cpu0 := cpuTime(b)
		b.ResetTimer()
		for range b.N {
			if n := read(); n != len(lines) {
				b.Fatalf("read %d records, want %d", n, len(lines))
			}
		}
		b.StopTimer()
		total := float64(len(lines) * b.N)
		b.ReportMetric(total/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(total/(cpuTime(b)-cpu0).Seconds(), "records/cpu-s")
	}
	b.Run("reader", func(b *testing.B) {
		run(b, func() int {
			r, err := NewReader(bytes.NewReader(data), "bench", Options{})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for {
				_, err := r.Next()
				if errors.Is(err, io.EOF) {
					return n
				}
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	})
	b.Run("jsonv2", func(b *testing.B) {
		run(b, func() int {
			for _, l := range lines {
				var v any = &Job{}
				if bytes.HasPrefix(l, []byte(`{"type":"workload"`)) {
					v = &Workload{}
				}
				if err := jsonv2.Unmarshal(l, v); err != nil {
					b.Fatal(err)
				}
			}
			return len(lines)
		})
	})
	b.Run("encoding-json", func(b *testing.B) {
		run(b, func() int {
			for _, l := range lines {
				var v any = &Job{}
				if bytes.HasPrefix(l, []byte(`{"type":"workload"`)) {
					v = &Workload{}
				}
				if err := json.Unmarshal(l, v); err != nil {
					b.Fatal(err)
				}
			}
			return len(lines)
		})
	})
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
