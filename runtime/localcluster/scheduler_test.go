package localcluster

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	kschedv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/kueuelab/kueuelab/internal/testutil"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// schedulerBinary is the kube-scheduler of the tools cache (`make test` builds the tools before
// the unit tests); without it the test is skipped, or fails under CI=true.
func schedulerBinary(t *testing.T) string {
	t.Helper()
	dir, err := tools.BinDir("", tools.Pinned())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tools.Pinned().Components {
		if c.Name == Scheduler {
			// The cache names a patched build by its own file (kube-scheduler-tiebyname).
			return testutil.ToolsBinary(t, filepath.Join(dir, c.FileName()))
		}
	}
	t.Fatalf("the pinned tools have no %s", Scheduler)
	return ""
}

// schedulerState is a cluster state dir with a kubeconfig the scheduler can load (never contacted).
func schedulerState(t *testing.T) *State {
	t.Helper()
	s := &State{Name: "t", Dir: t.TempDir()}
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	if err := os.WriteFile(s.Kubeconfig(), []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

const specHead = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
nodePools:
- {name: gpu, gpuFamily: H100-SXM, count: 2, gpusPerNode: 8, cpu: 32, memory: 256Gi}
clusterQueues:
- name: cq
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 16}
teams:
- {name: t, clusterQueue: cq}
`

// TestSchedulerAcceptsSpecSection: every scoring strategy a spec can hold, written as the local
// cluster writes it, is accepted by the real kube-scheduler, whose completed configuration has
// exactly the strategy Spec.Scoring reports (so upstream's defaults and kueuelab's agree), the
// backoff the local cluster sets and no leader election.
func TestSchedulerAcceptsSpecSection(t *testing.T) {
	bin := schedulerBinary(t)
	s := schedulerState(t)
	for _, tc := range []struct{ name, section string }{
		{"no section", ""},
		{"most allocated", "scheduler:\n  scoringStrategy:\n    type: MostAllocated\n    resources: [{name: nvidia.com/gpu, weight: 5}, {name: cpu, weight: 1}]\n"},
		{"least allocated on gpus", "scheduler:\n  scoringStrategy:\n    resources: [{name: nvidia.com/gpu}]\n"},
		{"ratio", "scheduler:\n  scoringStrategy:\n    type: RequestedToCapacityRatio\n    resources: [{name: nvidia.com/gpu, weight: 3}]\n" +
			"    requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := rcluster.Parse("spec.yaml", []byte(specHead+tc.section))
			if err != nil {
				t.Fatal(err)
			}
			data, replaced, err := s.schedulerConfig(spec.KubeSchedulerConfiguration())
			if err != nil || len(replaced) > 0 {
				t.Fatalf("config: %v, replaced %v", err, replaced)
			}
			completed, err := ValidateSchedulerConfig(t.Context(), bin, data)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			c, err := rcluster.ParseKubeSchedulerConfiguration("completed.yaml", completed)
			if err != nil {
				t.Fatalf("the completed configuration does not decode: %v\n%s", err, completed)
			}
			if *c.PodInitialBackoffSeconds != schedulerBackoffSec || *c.PodMaxBackoffSeconds != schedulerBackoffSec || *c.LeaderElection.LeaderElect ||
				c.ClientConnection.Kubeconfig != s.Kubeconfig() || c.ClientConnection.QPS != clientQPS {
				t.Errorf("local settings lost: backoff %d/%d, leader election %v, client %+v",
					*c.PodInitialBackoffSeconds, *c.PodMaxBackoffSeconds, *c.LeaderElection.LeaderElect, c.ClientConnection)
			}
			got := completedScoring(t, c)
			want := spec.Scoring()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("kube-scheduler scores with %s, the spec says %s", got, want)
			}
		})
	}
}

// completedScoring is the NodeResourcesFit strategy of a completed configuration's default profile.
func completedScoring(t *testing.T, c *kschedv1.KubeSchedulerConfiguration) rcluster.ScoringStrategy {
	t.Helper()
	spec := &rcluster.Spec{Scheduler: &rcluster.Scheduler{}}
	for _, p := range c.Profiles {
		if *p.SchedulerName != rcluster.DefaultSchedulerName {
			continue
		}
		for _, pc := range p.PluginConfig {
			if a, ok := pc.Args.Object.(*kschedv1.NodeResourcesFitArgs); ok {
				spec.Scheduler.ScoringStrategy = &rcluster.ScoringStrategy{Type: string(a.ScoringStrategy.Type)}
				st := spec.Scheduler.ScoringStrategy
				for _, r := range a.ScoringStrategy.Resources {
					st.Resources = append(st.Resources, rcluster.ResourceWeight{Name: r.Name, Weight: r.Weight})
				}
				if r := a.ScoringStrategy.RequestedToCapacityRatio; r != nil {
					st.RequestedToCapacityRatio = &rcluster.RequestedToCapacityRatio{}
					for _, p := range r.Shape {
						st.RequestedToCapacityRatio.Shape = append(st.RequestedToCapacityRatio.Shape, rcluster.ShapePoint{Utilization: p.Utilization, Score: p.Score})
					}
				}
				return spec.Scoring()
			}
		}
	}
	t.Fatal("no NodeResourcesFit args in the default profile")
	return rcluster.ScoringStrategy{}
}

// TestSchedulerRefusesInvalid: what the spec loader would refuse, built in code, is refused by
// the real scheduler with its reason; a user's backoff is replaced and said so.
func TestSchedulerRefusesInvalid(t *testing.T) {
	bin := schedulerBinary(t)
	s := schedulerState(t)
	name := rcluster.DefaultSchedulerName
	bad := &kschedv1.KubeSchedulerConfiguration{PodMaxBackoffSeconds: ptr.To[int64](10), Profiles: []kschedv1.KubeSchedulerProfile{{
		SchedulerName: &name,
		PluginConfig: []kschedv1.PluginConfig{{Name: "NodeResourcesFit", Args: runtimeObject(&kschedv1.NodeResourcesFitArgs{
			ScoringStrategy: &kschedv1.ScoringStrategy{Type: kschedv1.MostAllocated, Resources: []kschedv1.ResourceSpec{{Name: "nvidia.com/gpu", Weight: 500}}}})}},
	}}}
	data, replaced, err := s.schedulerConfig(bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(replaced) != 1 || !strings.Contains(replaced[0], "podMaxBackoffSeconds 10 replaced by 1") {
		t.Errorf("replaced = %q", replaced)
	}
	_, err = ValidateSchedulerConfig(t.Context(), bin, data)
	if err == nil || !strings.Contains(err.Error(), "resource weight of nvidia.com/gpu not in valid range") {
		t.Fatalf("err = %v, want kube-scheduler's weight range error", err)
	}
}

func runtimeObject(o runtime.Object) runtime.RawExtension { return runtime.RawExtension{Object: o} }
