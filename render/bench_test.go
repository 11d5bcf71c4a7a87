package render

import (
	"math/rand/v2"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/model/trace"
)

const benchWorkloads = 100000

// benchChunk bounds how many finished objects are held at once (100,000 workloads' objects would
// take gigabytes).
const benchChunk = 1000

// BenchmarkRender100k renders 100,000 generator-shaped workloads (with job records) to YAML on one
// goroutine, and in the same run marshals the same finished objects with sigs.k8s.io/yaml alone:
// "ratio" is render-and-encode time over marshal-only time (target ≤ 1.3).
func BenchmarkRender100k(b *testing.B) {
	r, err := NewRenderer(DefaultRegistry(), DefaultMapping(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	placer := testPlacer{topology: "cloud.provider.com/topology-block"}
	rng := rand.New(rand.NewPCG(5, 5))
	ws := make([]*trace.Workload, benchWorkloads)
	jobs := make([][]*trace.Job, benchWorkloads)
	for i := range ws {
		ws[i] = randomWorkload(rng, i)
		jobs[i] = jobsOf(ws[i])
	}
	b.ResetTimer()
	var full, marshalOnly time.Duration
	var bytes int64
	for range b.N {
		for start := 0; start < len(ws); start += benchChunk {
			objs := make([]client.Object, 0, benchChunk)
			t0 := time.Now()
			for i := start; i < start+benchChunk; i++ {
				p, _ := placer.Place(ws[i])
				os, err := r.Render(ws[i], jobs[i], p)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range os {
					y, err := Marshal(o, YAML)
					if err != nil {
						b.Fatal(err)
					}
					bytes += int64(len(y))
				}
				objs = append(objs, os...)
			}
			t1 := time.Now()
			for _, o := range objs {
				if _, err := yaml.Marshal(o); err != nil {
					b.Fatal(err)
				}
			}
			full += t1.Sub(t0)
			marshalOnly += time.Since(t1)
		}
	}
	b.ReportMetric(float64(b.N*benchWorkloads)/full.Seconds(), "workloads/s")
	b.ReportMetric(float64(b.N*benchWorkloads)/marshalOnly.Seconds(), "marshal-only-workloads/s")
	b.ReportMetric(full.Seconds()/marshalOnly.Seconds(), "ratio")
	b.ReportMetric(float64(bytes)/float64(b.N*benchWorkloads), "yaml-bytes/workload")
}

// BenchmarkMarshalOnly is the baseline alone: sigs.k8s.io/yaml over finished objects (a 1,000
// workload sample, reported per workload).
func BenchmarkMarshalOnly(b *testing.B) {
	r, err := NewRenderer(DefaultRegistry(), DefaultMapping(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	placer := testPlacer{topology: "cloud.provider.com/topology-block"}
	rng := rand.New(rand.NewPCG(5, 5))
	var objs []client.Object
	for i := range benchChunk {
		w := randomWorkload(rng, i)
		p, _ := placer.Place(w)
		os, err := r.Render(w, jobsOf(w), p)
		if err != nil {
			b.Fatal(err)
		}
		objs = append(objs, os...)
	}
	b.ResetTimer()
	for range b.N {
		for _, o := range objs {
			if _, err := yaml.Marshal(o); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*benchChunk)/b.Elapsed().Seconds(), "workloads/s")
}
