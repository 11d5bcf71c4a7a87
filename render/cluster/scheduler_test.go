package cluster

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	kschedv1 "k8s.io/kube-scheduler/config/v1"
)

// withScheduler is base with a scheduler section appended.
func withScheduler(section string) string { return base + "scheduler:\n" + section }

// baseLines is where an appended scheduler section starts.
var baseLines = strings.Count(base, "\n")

func TestSchedulerScoring(t *testing.T) {
	tests := []struct {
		name, section string
		want          string // Scoring().String()
	}{
		{"no section: upstream default", "", "LeastAllocated cpu=1,memory=1"},
		{"most allocated on gpus", "  scoringStrategy:\n    type: MostAllocated\n    resources: [{name: nvidia.com/gpu, weight: 5}, {name: cpu, weight: 1}]\n",
			"MostAllocated nvidia.com/gpu=5,cpu=1"},
		{"type defaults, weight 0 means 1", "  scoringStrategy:\n    resources: [{name: nvidia.com/gpu}]\n", "LeastAllocated nvidia.com/gpu=1"},
		{"resources default", "  scoringStrategy: {type: MostAllocated}\n", "MostAllocated cpu=1,memory=1"},
		{"ratio", "  scoringStrategy:\n    type: RequestedToCapacityRatio\n    resources: [{name: nvidia.com/gpu, weight: 3}]\n" +
			"    requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}\n",
			"RequestedToCapacityRatio nvidia.com/gpu=3 shape 0%:0,100%:10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			if tc.section != "" {
				in = withScheduler(tc.section)
			}
			s, err := Parse("base.yaml", []byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Scoring().String(); got != tc.want {
				t.Errorf("Scoring() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSchedulerErrors(t *testing.T) {
	line := func(n int) string { return "base.yaml:" + strconv.Itoa(baseLines+n) + ": " }
	tests := []struct {
		name, section string
		want          []string
	}{
		{"empty section", "  {}\n", []string{"base.yaml:", "scheduler: give scoringStrategy or config"}},
		{"both", "  config: x.yaml\n  scoringStrategy: {type: MostAllocated}\n", []string{"scheduler: give scoringStrategy or config, not both"}},
		{"unknown field", "  scoringStrategy:\n    typ: MostAllocated\n", []string{line(3) + "scheduler.scoringStrategy.typ: unknown field", "type"}},
		{"unknown type", "  scoringStrategy:\n    type: BinPacking\n", []string{line(3) + "scheduler.scoringStrategy.type: \"BinPacking\" is not one of LeastAllocated, MostAllocated, RequestedToCapacityRatio"}},
		{"weight range", "  scoringStrategy:\n    type: MostAllocated\n    resources:\n    - {name: cpu, weight: 1}\n    - {name: nvidia.com/gpu, weight: 500}\n",
			[]string{line(6) + "scheduler.scoringStrategy.resources[1].weight: 500 is not in 1..100"}},
		{"resource twice", "  scoringStrategy:\n    resources: [{name: cpu}, {name: cpu}]\n", []string{"scheduler.scoringStrategy.resources[1].name: cpu is listed twice"}},
		{"bad resource name", "  scoringStrategy:\n    resources: [{name: 'nvidia.com/g pu'}]\n", []string{"scheduler.scoringStrategy.resources[0].name: invalid resource name"}},
		{"ratio without shape", "  scoringStrategy:\n    type: RequestedToCapacityRatio\n", []string{"scheduler.scoringStrategy.requestedToCapacityRatio: the RequestedToCapacityRatio type needs a shape"}},
		{"shape on another type", "  scoringStrategy:\n    type: MostAllocated\n    requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}]}\n",
			[]string{line(4) + "scheduler.scoringStrategy.requestedToCapacityRatio: only with type RequestedToCapacityRatio"}},
		{"shape out of order and range", "  scoringStrategy:\n    type: RequestedToCapacityRatio\n    requestedToCapacityRatio:\n      shape:\n      - {utilization: 50, score: 11}\n      - {utilization: 20, score: 0}\n",
			[]string{line(6) + "scheduler.scoringStrategy.requestedToCapacityRatio.shape[0].score: 11 is not in 0..10",
				line(7) + "scheduler.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: 20: utilizations must increase"}},
		{"missing config file", "  config: does-not-exist.yaml\n", []string{line(2) + "scheduler.config:", "does-not-exist.yaml: no such file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("base.yaml", []byte(withScheduler(tc.section)))
			if err == nil {
				t.Fatalf("want error containing %q, got none", tc.want)
			}
			containsInOrder(t, err.Error(), tc.want)
		})
	}
}

func containsInOrder(t *testing.T, msg string, want []string) {
	t.Helper()
	at := 0
	for _, w := range want {
		i := strings.Index(msg[at:], w)
		if i < 0 {
			t.Fatalf("error %q\nlacks %q (after offset %d)", msg, w, at)
		}
		at += i + len(w)
	}
}

// schedulerFile is a full KubeSchedulerConfiguration: two profiles, the default one bin-packing GPUs.
const schedulerFile = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 50
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: nvidia.com/gpu, weight: 10}
  - name: PodTopologySpread
    args:
      defaultingType: List
- schedulerName: spread
`

func TestSchedulerConfigFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sched.yaml"), []byte(schedulerFile), 0o644); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(specPath, []byte(withScheduler("  config: sched.yaml\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Scheduler.Config, filepath.Join(dir, "sched.yaml"); got != want {
		t.Errorf("config path %q, want the absolute %q", got, want)
	}
	if got := s.Scoring().String(); got != "MostAllocated nvidia.com/gpu=10" {
		t.Errorf("Scoring() = %q", got)
	}
	c := s.KubeSchedulerConfiguration()
	if len(c.Profiles) != 2 || *c.PercentageOfNodesToScore != 50 {
		t.Fatalf("config %+v", c)
	}
	if _, ok := c.Profiles[0].PluginConfig[1].Args.Object.(*kschedv1.PodTopologySpreadArgs); !ok {
		t.Errorf("PodTopologySpread args decoded as %T", c.Profiles[0].PluginConfig[1].Args.Object)
	}

	bad := []struct {
		name, old, new string
		want           []string
	}{
		{"unknown field", "percentageOfNodesToScore: 50", "percentageOfNodesToScore: 50\nbogus: 1", []string{"sched.yaml:4: bogus: unknown field"}},
		{"unknown args field", "        type: MostAllocated", "        type: MostAllocated\n        typo: 1",
			[]string{"sched.yaml:11: profiles[0].pluginConfig[0].args.scoringStrategy.typo: unknown field"}},
		{"invalid weight", "weight: 10", "weight: 101", []string{"sched.yaml:12: profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: 101 is not in 1..100"}},
		{"out-of-tree plugin", "  - name: PodTopologySpread", "  - name: Coscheduling", []string{"sched.yaml:13: profiles[0].pluginConfig[1].name: \"Coscheduling\" has no args"}},
		{"no default profile", "- schedulerName: default-scheduler", "- schedulerName: packer", []string{"sched.yaml:5: profiles: no profile named default-scheduler"}},
		{"extenders", "percentageOfNodesToScore: 50", "percentageOfNodesToScore: 50\nextenders: [{urlPrefix: 'http://x'}]", []string{"extenders: extenders are HTTP services"}},
		{"wrong kind", "kind: KubeSchedulerConfiguration", "kind: KubeProxyConfiguration", []string{"sched.yaml:2: kind: no kind \"KubeProxyConfiguration\""}},
		{"wrong type", "percentageOfNodesToScore: 50", "percentageOfNodesToScore: fifty", []string{"sched.yaml:3: percentageOfNodesToScore: a string where a int32 belongs"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(schedulerFile, tc.old) {
				t.Fatalf("file has no %q", tc.old)
			}
			if err := os.WriteFile(filepath.Join(dir, "sched.yaml"), []byte(strings.Replace(schedulerFile, tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(specPath)
			if err == nil {
				t.Fatalf("want error containing %q, got none", tc.want)
			}
			containsInOrder(t, err.Error(), append([]string{"spec.yaml:" + strconv.Itoa(baseLines+2) + ": scheduler.config: "}, tc.want...))
		})
	}
}

// TestKubeSchedulerConfigurationRoundTrip: the section becomes a v1 KubeSchedulerConfiguration
// whose YAML strict-decodes back to the same typed object, NodeResourcesFit args included.
func TestKubeSchedulerConfigurationRoundTrip(t *testing.T) {
	s, err := Parse("base.yaml", []byte(withScheduler("  scoringStrategy:\n    type: RequestedToCapacityRatio\n"+
		"    resources: [{name: nvidia.com/gpu, weight: 5}, {name: cpu, weight: 1}]\n"+
		"    requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}\n")))
	if err != nil {
		t.Fatal(err)
	}
	c := s.KubeSchedulerConfiguration()
	data, err := MarshalKubeSchedulerConfiguration(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKubeSchedulerConfiguration("out.yaml", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	args, ok := back.Profiles[0].PluginConfig[0].Args.Object.(*kschedv1.NodeResourcesFitArgs)
	if !ok {
		t.Fatalf("args decoded as %T\n%s", back.Profiles[0].PluginConfig[0].Args.Object, data)
	}
	want := &kschedv1.ScoringStrategy{Type: kschedv1.RequestedToCapacityRatio,
		Resources:                []kschedv1.ResourceSpec{{Name: "nvidia.com/gpu", Weight: 5}, {Name: "cpu", Weight: 1}},
		RequestedToCapacityRatio: &kschedv1.RequestedToCapacityRatioParam{Shape: []kschedv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}}}
	if !reflect.DeepEqual(args.ScoringStrategy, want) {
		t.Errorf("round trip: %+v\nwant %+v\n%s", args.ScoringStrategy, want, data)
	}
	if *back.Profiles[0].SchedulerName != DefaultSchedulerName || back.Kind != "KubeSchedulerConfiguration" {
		t.Errorf("profile %v kind %q", *back.Profiles[0].SchedulerName, back.Kind)
	}
	// Without a section: no profile, which the scheduler fills with its defaults.
	plain, err := Parse("base.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if c := plain.KubeSchedulerConfiguration(); len(c.Profiles) != 0 || c.APIVersion != "kubescheduler.config.k8s.io/v1" {
		t.Errorf("default config %+v", c)
	}
}
