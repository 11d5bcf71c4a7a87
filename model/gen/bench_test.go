package gen

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
)

// benchWorkloads is the trace size of BenchmarkGenerate1M.
const benchWorkloads = 1_000_000

func benchProfile(b *testing.B) *Profile {
	b.Helper()
	p, err := DefaultProfile()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// throughput measures a benchmark's job records per second of wall time and per CPU-second.
type throughput struct {
	wall    time.Time
	cpu     time.Duration
	records int
}

func startThroughput() *throughput {
	cpu, _ := processCPUTime()
	return &throughput{wall: time.Now(), cpu: cpu}
}

func (t *throughput) report(b *testing.B) {
	b.ReportMetric(float64(t.records)/time.Since(t.wall).Seconds(), "jobrecords/s")
	if cpu, ok := processCPUTime(); ok && cpu > t.cpu {
		b.ReportMetric(float64(t.records)/(cpu-t.cpu).Seconds(), "jobrecords/cpu-s")
	}
}

// generate1M writes benchWorkloads workloads (with workload records) of seed 7 through encode.
func generate1M(b *testing.B, encode func(wl *trace.Workload, jobs []trace.Job) error) int {
	g := New(benchProfile(b), 7)
	n := 0
	for range benchWorkloads {
		wl, jobs := g.Next()
		if err := encode(wl, jobs); err != nil {
			b.Fatal(err)
		}
		n += len(jobs)
	}
	return n
}

// BenchmarkGenerate1M generates 1,000,000 workloads to io.Discard through trace.Writer: the whole
// `kueuelab gen` path minus the file, without (gen's default) and with workload records. Memory per
// op stays flat as N grows (see TestGenerateMemoryIsConstant).
func BenchmarkGenerate1M(b *testing.B) {
	p := benchProfile(b)
	for _, emit := range []bool{false, true} {
		name := "jobs-only"
		if emit {
			name = "with-workload-records"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			tp := startThroughput()
			for b.Loop() {
				w := trace.NewWriter(io.Discard)
				st, err := Write(context.Background(), w, New(p, 7), Options{Workloads: benchWorkloads, EmitWorkloadRecords: emit})
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
				tp.records += st.Jobs
			}
			tp.report(b)
		})
	}
}

// The "type" discriminator is part of every line, so a plain encoding/json implementation wraps the records.
type (
	jsonWorkloadLine struct {
		Type string `json:"type"`
		*trace.Workload
	}
	jsonJobLine struct {
		Type string `json:"type"`
		*trace.Job
	}
)

// BenchmarkEncodeJSON compares trace.Writer with plain encoding/json on the same records:
// generate1M-* repeat BenchmarkGenerate1M/with-workload-records with each encoder (generation
// included on both sides);
// writer and encoding-json encode a cached sample of 2,000 generated workloads samplePasses times per
// op (encoding only, so -benchtime=1x still measures ~60,000 job records).
func BenchmarkEncodeJSON(b *testing.B) {
	run := func(b *testing.B, body func() int) {
		b.ReportAllocs()
		tp := startThroughput()
		for b.Loop() {
			tp.records += body()
		}
		tp.report(b)
	}
	b.Run("generate1M-writer", func(b *testing.B) {
		run(b, func() int {
			w := trace.NewWriter(io.Discard)
			n := generate1M(b, func(wl *trace.Workload, jobs []trace.Job) error { return writeWithWriter(w, wl, jobs) })
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			return n
		})
	})
	b.Run("generate1M-encoding-json", func(b *testing.B) {
		run(b, func() int {
			enc := json.NewEncoder(bufio.NewWriterSize(io.Discard, 256<<10))
			return generate1M(b, func(wl *trace.Workload, jobs []trace.Job) error { return writeWithEncodingJSON(enc, wl, jobs) })
		})
	})
	const samplePasses = 20
	wls, jobs := sampleRecords(b, 2_000)
	b.Run("writer", func(b *testing.B) {
		w := trace.NewWriter(io.Discard)
		run(b, func() int {
			for range samplePasses {
				for i := range wls {
					if err := writeWithWriter(w, &wls[i], jobs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			return samplePasses * countJobs(jobs)
		})
	})
	b.Run("encoding-json", func(b *testing.B) {
		enc := json.NewEncoder(bufio.NewWriterSize(io.Discard, 256<<10))
		run(b, func() int {
			for range samplePasses {
				for i := range wls {
					if err := writeWithEncodingJSON(enc, &wls[i], jobs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			return samplePasses * countJobs(jobs)
		})
	})
}

func writeWithWriter(w *trace.Writer, wl *trace.Workload, jobs []trace.Job) error {
	if err := w.WriteWorkload(wl); err != nil {
		return err
	}
	for i := range jobs {
		if err := w.WriteJob(&jobs[i]); err != nil {
			return err
		}
	}
	return nil
}

func writeWithEncodingJSON(enc *json.Encoder, wl *trace.Workload, jobs []trace.Job) error {
	if err := enc.Encode(jsonWorkloadLine{trace.TypeWorkload, wl}); err != nil {
		return err
	}
	for i := range jobs {
		if err := enc.Encode(jsonJobLine{trace.TypeJob, &jobs[i]}); err != nil {
			return err
		}
	}
	return nil
}

// sampleRecords returns n generated workloads and the jobs of each, copied out of the generator's buffers.
func sampleRecords(b *testing.B, n int) ([]trace.Workload, [][]trace.Job) {
	b.Helper()
	g := New(benchProfile(b), 7)
	wls := make([]trace.Workload, 0, n)
	jobs := make([][]trace.Job, 0, n)
	for range n {
		wl, js := g.Next()
		c := *wl
		c.Pods = append([]trace.PodGroup(nil), wl.Pods...)
		wls = append(wls, c)
		jobs = append(jobs, append([]trace.Job(nil), js...))
	}
	return wls, jobs
}

func countJobs(jobs [][]trace.Job) int {
	n := 0
	for _, js := range jobs {
		n += len(js)
	}
	return n
}
