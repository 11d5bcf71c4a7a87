package cluster

import (
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/fielderr"
)

// base is a valid spec; each error case edits one line of it.
const base = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
topology:
  gangLevel: rack
nodePools:
- name: cpu
  gpuFamily: CPU
  count: 2
  cpu: 64
  memory: 256Gi
- name: h100
  gpuFamily: H100-SXM
  count: 4
  gpusPerNode: 8
  cpu: 192
  memory: 2000Gi
  labels:
    zone: a
  taints:
  - {key: gpu, value: "true", effect: NoSchedule}
cohorts:
- name: all
clusterQueues:
- name: cq-a
  cohort: all
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority}
  quotas:
  - flavor: cpu
    resources: {cpu: 128, memory: 512Gi}
  - flavor: h100-sxm
    resources:
      cpu: 768
      memory: 8000Gi
      nvidia.com/gpu: {nominalQuota: 32, borrowingLimit: 8, lendingLimit: 16}
teams:
- name: team-a
  clusterQueue: cq-a
namespaceMapping:
  ml: team-a
defaultTeam: team-a
`

func TestParseValid(t *testing.T) {
	s, err := Parse("base.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Teams[0].LocalQueue; got != "team-a-lq" {
		t.Errorf("default LocalQueue = %q, want team-a-lq", got)
	}
	if got := *s.PriorityClasses.Eco.Value; got != 10 {
		t.Errorf("default eco priority = %d, want 10", got)
	}
	if got := s.Topology.RackLabel; got != defaultRackLabel {
		t.Errorf("default rack label = %q", got)
	}
	if got := s.ClusterQueues[0].Quotas[1].Resources["nvidia.com/gpu"]; got.NominalQuota != "32" || *got.LendingLimit != "16" {
		t.Errorf("gpu quota = %+v", got)
	}
	if got := s.ClusterQueues[0].Quotas[0].Resources["cpu"].NominalQuota; got != "128" {
		t.Errorf("scalar quota shorthand = %q, want 128", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     []string // substrings of the error, in order: location, field, reason
	}{
		{"unknown top-level field", "kind: ClusterSpec", "kind: ClusterSpec\nnodepools: []", []string{"base.yaml:3: nodepools: unknown field", "nodePools"}},
		{"unknown pool field", "  gpusPerNode: 8", "  gpuPerNode: 8", []string{"base.yaml:14: nodePools[1].gpuPerNode: unknown field"}},
		{"unknown quota field", "borrowingLimit: 8,", "borrowLimit: 8,", []string{`base.yaml:36: clusterQueues[0].quotas[1].resources["nvidia.com/gpu"].borrowLimit: unknown field`}},
		{"wrong type", "  count: 4", "  count: four", []string{"base.yaml:13: nodePools[1].count: cannot unmarshal"}},
		{"bad apiVersion", "apiVersion: kueuelab.io/v1alpha1", "apiVersion: v1", []string{"base.yaml:1: apiVersion: must be"}},
		{"unknown family", "gpuFamily: H100-SXM", "gpuFamily: H100", []string{"base.yaml:12: nodePools[1].gpuFamily: unknown GPU family \"H100\"", "H100-SXM"}},
		{"zero count", "  count: 4", "  count: 0", []string{"base.yaml:13: nodePools[1].count: must be > 0"}},
		{"gpu pool without gpus", "  gpusPerNode: 8", "  gpusPerNode: 0", []string{"nodePools[1].gpusPerNode: must be > 0 for GPU family H100-SXM"}},
		{"cpu pool with gpus", "  count: 2", "  count: 2\n  gpusPerNode: 4", []string{"nodePools[0].gpusPerNode: must be 0"}},
		{"bad cpu quantity", "  cpu: 192", "  cpu: lots", []string{"base.yaml:15: nodePools[1].cpu: invalid quantity"}},
		{"missing memory", "  memory: 256Gi\n", "", []string{"nodePools[0].memory: required"}},
		{"duplicate pool", "- name: h100", "- name: cpu", []string{"base.yaml:11: nodePools[1].name: duplicate pool name \"cpu\""}},
		{"bad pool name", "- name: h100", "- name: H100_pool", []string{"nodePools[1].name: invalid pool name"}},
		{"reserved label", "    zone: a", "    nvidia.com/gpu.product: x", []string{`nodePools[1].labels["nvidia.com/gpu.product"]: label is set by kueuelab`}},
		{"bad taint effect", "effect: NoSchedule}", "effect: Never}", []string{"base.yaml:20: nodePools[1].taints[0].effect: must be NoSchedule"}},
		{"unknown flavor", "  - flavor: h100-sxm", "  - flavor: a100-sxm", []string{"base.yaml:32: clusterQueues[0].quotas[1].flavor: unknown flavor \"a100-sxm\"", "cpu, h100-sxm"}},
		{"wrong gpu resource", "      nvidia.com/gpu: {", "      amd.com/gpu: {", []string{`clusterQueues[0].quotas[1].resources["amd.com/gpu"]: flavor h100-sxm provides nvidia.com/gpu`}},
		{"gpu on cpu flavor", "{cpu: 128, memory: 512Gi}", "{cpu: 128, memory: 512Gi, nvidia.com/gpu: 1}", []string{`clusterQueues[0].quotas[0].resources["nvidia.com/gpu"]: flavor cpu has no GPUs`}},
		{"bad quota", "cpu: 768", "cpu: -1", []string{`base.yaml:34: clusterQueues[0].quotas[1].resources.cpu.nominalQuota: must be >= 0`}},
		{"lending above nominal", "lendingLimit: 16", "lendingLimit: 64", []string{`resources["nvidia.com/gpu"].lendingLimit: 64 exceeds nominalQuota 32`}},
		{"borrowing without cohort", "  cohort: all\n", "", []string{`resources["nvidia.com/gpu"].borrowingLimit: needs a cohort`}},
		{"unknown cohort", "  cohort: all", "  cohort: none", []string{"base.yaml:25: clusterQueues[0].cohort: unknown cohort \"none\""}},
		{"preemption combination", "reclaimWithinCohort: Any", "reclaimWithinCohort: Never", []string{"clusterQueues[0].preemption.borrowWithinCohort.policy: needs reclaimWithinCohort"}},
		{"bad preemption value", "reclaimWithinCohort: Any", "reclaimWithinCohort: Always", []string{"base.yaml:27: clusterQueues[0].preemption.reclaimWithinCohort: must be one of Never, LowerPriority, Any"}},
		{"team unknown queue", "  clusterQueue: cq-a", "  clusterQueue: cq-b", []string{"base.yaml:39: teams[0].clusterQueue: unknown ClusterQueue \"cq-b\""}},
		{"bad team name", "- name: team-a", "- name: Team.A", []string{"teams[0].name: team name \"Team.A\" is not a valid namespace name"}},
		{"mapping unknown team", "  ml: team-a", "  ml: team-z", []string{"base.yaml:41: namespaceMapping.ml: unknown team \"team-z\""}},
		{"default unknown team", "defaultTeam: team-a", "defaultTeam: nobody", []string{"base.yaml:42: defaultTeam: unknown team"}},
		{"bad gang level", "  gangLevel: rack", "  gangLevel: zone", []string{"base.yaml:4: topology.gangLevel: must be block, rack or hostname"}},
		{"no topology is valid", "topology:\n  gangLevel: rack\n", "", nil},
		{"duplicate priority class", "defaultTeam: team-a", "defaultTeam: team-a\npriorityClasses:\n  eco: {name: standard}", []string{"priorityClasses.eco.name: class \"standard\" is also used by standard"}},
		{"cohort cycle", "- name: all", "- name: all\n  parent: b\n- name: b\n  parent: all", []string{"cohorts[0].parent: cohort \"all\" is part of a parent cycle"}},
		{"two documents", "defaultTeam: team-a", "defaultTeam: team-a\n---\nkind: x", []string{"single YAML document"}},
		{"bad fungibility preference", "  cohort: all\n", "  cohort: all\n  flavorFungibility: {whenCanBorrow: TryNextFlavor, preference: Cheapest}\n",
			[]string{"clusterQueues[0].flavorFungibility.preference: must be one of BorrowingOverPreemption, PreemptionOverBorrowing"}},
		{"preference while the search stops", "  cohort: all\n", "  cohort: all\n  flavorFungibility: {preference: PreemptionOverBorrowing}\n",
			[]string{"clusterQueues[0].flavorFungibility.preference: can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"}},
		{"bad admission mode", "  cohort: all\n", "  cohort: all\n  admissionScope: {admissionMode: Usage}\n", []string{"clusterQueues[0].admissionScope.admissionMode: must be one of UsageBasedAdmissionFairSharing, NoAdmissionFairSharing"}},
		{"admission scope is valid", "  cohort: all\n", "  cohort: all\n  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n", nil},
		{"selector misses team", "  cohort: all\n", "  cohort: all\n  namespaceSelector: {matchLabels: {tier: gold}}\n", []string{"teams[0].clusterQueue: ClusterQueue cq-a's namespaceSelector (tier=gold) does not select namespace team-a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.old) {
				t.Fatalf("base has no %q", tc.old)
			}
			in := strings.Replace(base, tc.old, tc.new, 1)
			_, err := Parse("base.yaml", []byte(in))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q, got none", tc.want)
			}
			msg := err.Error()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q\nlacks %q (after offset %d)", msg, w, at)
				}
				at += i + len(w)
			}
			checkFieldErrors(t, err, "base.yaml")
		})
	}
}

// checkFieldErrors fails unless err is made of fielderr.Errors only (nothing printed outside them)
// and each names file.
func checkFieldErrors(t *testing.T, err error, file string) {
	t.Helper()
	all := fielderr.All(err)
	parts := make([]string, len(all))
	for i, e := range all {
		if e.File != file {
			t.Errorf("%v: File = %q, want %q", e, e.File, file)
		}
		parts[i] = e.Error()
	}
	if got := strings.Join(parts, "\n"); got != err.Error() {
		t.Errorf("error %q\nis not only fielderr.Errors (they print %q)", err, got)
	}
}

func TestPoolTopologyNeedsSpecTopology(t *testing.T) {
	in := strings.Replace(base, "topology:\n  gangLevel: rack\n", "", 1)
	in = strings.Replace(in, "  gpusPerNode: 8", "  gpusPerNode: 8\n  topology: {nodesPerRack: 2}", 1)
	_, err := Parse("base.yaml", []byte(in))
	if err == nil || !strings.Contains(err.Error(), "nodePools[1].topology: needs a spec-level topology") {
		t.Fatalf("got %v", err)
	}
}

func TestValidateInCode(t *testing.T) {
	s := &Spec{APIVersion: APIVersion, Kind: Kind}
	err := s.Validate()
	for _, w := range []string{"cluster spec: nodePools: at least one node pool", "clusterQueues: at least one", "teams: at least one"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %v, want %q", err, w)
		}
	}
	if _, err := s.Objects(Options{}); err == nil {
		t.Error("Objects of an invalid spec succeeded")
	}
}
