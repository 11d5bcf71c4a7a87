package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

func TestReadArrivals(t *testing.T) {
	const head = "namespace,name,class,first_event_us,first_admitted_us,last_admitted_us,finished_us,evictions,dropped_events\n"
	for _, tc := range []struct {
		name, csv string
		want      map[string]float64
		err       string
	}{
		{
			name: "offsets from the earliest event, ids by cohort, queue, class and index",
			csv: head + "cq-0-2-cohort-4,large-2-44-0,large,1000002500000,0,0,0,0,0\n" +
				"cq-0-0-cohort-0,small-0-0-0,small,1000000000000,0,0,0,0,0\n",
			want: map[string]float64{"c4-q2-large-044": 2.5, "c0-q0-small-000": 0},
		},
		{name: "namespace", csv: head + "default,small-0-0-0,small,1,0,0,0,0,0\n", err: "w.csv:2: namespace: \"default\" is not a baseline harness namespace"},
		{name: "name", csv: head + "cq-0-0-cohort-0,tiny-0-0-0,small,1,0,0,0,0,0\n", err: "w.csv:2: name: \"tiny-0-0-0\" is not a baseline harness workload"},
		{name: "time", csv: head + "cq-0-0-cohort-0,small-0-0-0,small,soon,0,0,0,0,0\n", err: "w.csv:2: first_event_us: \"soon\": want Unix microseconds"},
		{name: "twice", csv: head + "cq-0-0-cohort-0,small-0-0-0,small,1,0,0,0,0,0\ncq-0-0-cohort-0,small-0-0-0,small,2,0,0,0,0,0\n", err: "w.csv:3: name: cq-0-0-cohort-0/small-0-0-0 appears twice"},
		{name: "column", csv: "namespace,name\n", err: "w.csv:1: first_event_us: missing column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readArrivals("w.csv", strings.NewReader(tc.csv))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for id, v := range tc.want {
				if got[id] != v {
					t.Errorf("%s: %g, want %g", id, got[id], v)
				}
			}
		})
	}
}

// The names kueueperf expects in a wlTimes.csv are the ones it reads back.
func TestHarnessNameRoundTrips(t *testing.T) {
	for _, cl := range classes {
		name := harnessName(3, 5, cl.name, 7)
		ns, wl, _ := strings.Cut(name, "/")
		at, err := readArrivals("x", strings.NewReader("namespace,name,first_event_us\n"+ns+","+wl+",5\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := at[workloadID(3, 5, cl.name, 7)]; !ok {
			t.Errorf("%s read back as %v, want %s", name, at, workloadID(3, 5, cl.name, 7))
		}
	}
}

// TestReadGenerator: the low-rate config's classes as its file states them, the baseline's as the
// built-in ones, and a file of another structure refused naming the field.
func TestReadGenerator(t *testing.T) {
	data, err := os.ReadFile("../kueue-harness/configs/low-rate/generator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readGenerator("low-rate.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	want := []class{
		{"small", 20, 3000, 10000, 1, trace.IntentEco},
		{"medium", 10, 6000, 15000, 5, trace.IntentStandard},
		{"large", 5, 12000, 30000, 20, trace.IntentPerformance},
	}
	if !slices.Equal(got, want) {
		t.Errorf("low-rate classes %+v, want %+v", got, want)
	}
	// Kueue v0.19.2's configs/baseline/generator.yaml, its numbers in the low-rate file's layout.
	baseline := data
	for _, r := range [][2]string{{"count: 20\n        creationIntervalMs: 3000", "count: 350\n        creationIntervalMs: 100"},
		{"count: 10\n        creationIntervalMs: 6000", "count: 100\n        creationIntervalMs: 500"},
		{"count: 5\n        creationIntervalMs: 12000", "count: 50\n        creationIntervalMs: 1200"},
		{"runtimeMs: 10000", "runtimeMs: 200"}, {"runtimeMs: 15000", "runtimeMs: 500"}, {"runtimeMs: 30000", "runtimeMs: 1000"}} {
		if !bytes.Contains(baseline, []byte(r[0])) {
			t.Fatalf("the low-rate file has no %q", r[0])
		}
		baseline = bytes.Replace(baseline, []byte(r[0]), []byte(r[1]), 1)
	}
	if got, err = readGenerator("baseline.yaml", baseline); err != nil || !slices.Equal(got, classes) {
		t.Errorf("baseline: %+v %v, want the built-in %+v", got, err, classes)
	}
	for _, tc := range []struct{ from, to, err string }{
		{"priority: 200", "priority: 300", "workloadsSets[2]: want one workload of class large, priority 200"},
		{"nominalQuota: 20", "nominalQuota: 40", "cohorts[0].queuesSets[0]: count 6, quota 40"},
		{"runtimeMs: 10000", "runtimeMs: 0", "workloadsSets[0]: count 20, interval 3000 ms, runtime 0 ms"},
		{"request: 5", "requests: 5", "field requests not found"},
	} {
		if _, err := readGenerator("g.yaml", []byte(strings.Replace(string(data), tc.from, tc.to, 1))); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s -> %s: %v, want %q", tc.from, tc.to, err, tc.err)
		}
	}
}
