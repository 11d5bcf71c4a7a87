package main

import (
	"strings"
	"testing"
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
