package state

import (
	"strings"
	"testing"
)

const good = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterState
nowSec: 100
trace: workloads.jsonl
cluster: cluster.yaml
arrivals: none
workloads:
- id: a
  phase: Admitted
  createdSec: 10
  admittedSec: 20
  admission:
    clusterQueue: q
    podSets:
    - {name: main, count: 2, flavors: {nvidia.com/gpu: h100}}
  conditions:
  - {type: PodsReady, status: "True", reason: Started, sinceSec: 21}
  progress:
  - {role: main, remainingSec: 50, nodes: [n1, n2]}
- id: b
  phase: Pending
  createdSec: 30
  parked: true
history: history.jsonl
finished:
- id: h1
  createdSec: 0
  admittedSec: 2
  finishedSec: 40
  admission:
    clusterQueue: q
    podSets:
    - {name: main, count: 1, flavors: {nvidia.com/gpu: h100}}
  durationSec: 38
- id: h2
  createdSec: 5
  finishedSec: 6
`

func TestParse(t *testing.T) {
	s, err := Parse("state.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Find("a"); a == nil || a.Admission.PodSets[0].Count != 2 || a.Progress[0].Nodes[1] != "n2" {
		t.Errorf("workload a: %+v", a)
	}
	if b := s.Find("b"); b == nil || !b.Parked || b.OrderSec() != 30 {
		t.Errorf("workload b: %+v", b)
	}
	// What Marshal writes, Parse reads back the same.
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("again.yaml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(again.Workloads) != 2 || again.Find("a").Progress[0].RemainingSec != 50 || len(again.Finished) != 2 || *again.Finished[0].DurationSec != 38 {
		t.Errorf("round trip: %+v", again)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"unknown field", "  parked: true", "  parkd: true", "state.yaml:23: workloads[1].parkd: unknown field"},
		{"malformed number", "createdSec: 30", "createdSec: 3O", "state.yaml:22: workloads[1].createdSec: cannot unmarshal !!str `3O` into float64"},
		{"phase", "phase: Pending", "phase: Running", `state.yaml:21: workloads[1].phase: "Running": want Pending or Admitted`},
		{"admitted before created", "admittedSec: 20", "admittedSec: 5", "state.yaml:11: workloads[0].admittedSec: 5: want a time between createdSec and nowSec"},
		{"created after now", "createdSec: 30", "createdSec: 300", "state.yaml:22: workloads[1].createdSec: 300: want a time ≤ nowSec (100)"},
		{"no admission", "  admission:\n    clusterQueue: q\n    podSets:\n    - {name: main, count: 2, flavors: {nvidia.com/gpu: h100}}\n", "", "workloads[0].admission: missing"},
		{"pending parked admitted", "  admittedSec: 20\n", "  admittedSec: 20\n  parked: true\n", "workloads[0].parked: only a Pending workload is parked"},
		{"condition type", "type: PodsReady", "type: Admitted", "workloads[0].conditions[0].type: Admitted follows from phase and admission"},
		{"negative progress", "remainingSec: 50", "remainingSec: -1", "workloads[0].progress[0].remainingSec: -1: want seconds ≥ 0"},
		{"negative execution budget", "  parked: true", "  parked: true\n  maxExecutionSec: -5", "state.yaml:24: workloads[1].maxExecutionSec: -5: want seconds ≥ 0"},
		{"duplicate id", "- id: b", "- id: a", `workloads[1].id: "a" is also workloads[0]`},
		{"arrivals", "arrivals: none", "arrivals: some", `arrivals: "some": want none or recorded`},
		{"finished before admitted", "finishedSec: 40", "finishedSec: 1", "state.yaml:29: finished[0].finishedSec: 1: want a time between admittedSec (else createdSec) and nowSec"},
		{"finished after now", "finishedSec: 6", "finishedSec: 600", "finished[1].finishedSec: 600"},
		{"finished id of a live one", "- id: h2", "- id: b", `state.yaml:35: finished[1].id: "b" is also workloads[1]`},
		{"admission without a time", "  admittedSec: 2\n", "", "finished[0].admission: an admission needs admittedSec"},
		{"finished without history", "history: history.jsonl\n", "", "finished: needs history"},
		{"declared duration", "durationSec: 38", "durationSec: 0", "finished[0].durationSec: 0: want seconds > 0"},
		{"clock origin", "nowSec: 100\n", "nowSec: 100\nclockOrigin: 2026-12-07 09:00\n", `state.yaml:4: clockOrigin: "2026-12-07 09:00": want an RFC 3339 time`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(good, tc.from, tc.to, 1)
			if doc == good {
				t.Fatal("the case changes nothing")
			}
			_, err := Parse("state.yaml", []byte(doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
