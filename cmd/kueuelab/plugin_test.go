package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// asMain makes the test binary run kueuelab's main when started with it set: the plugin test
// runs this very binary under kubectl's plugin name, without building another.
const asMain = "KUEUELAB_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPluginName(t *testing.T) {
	for _, tc := range []struct {
		arg0, want string
		ok         bool
	}{
		{"/usr/local/bin/kubectl-kueuelab", "kubectl kueuelab", true},
		{"kubectl-kueue_lab", "kubectl kueue-lab", true},
		{"bin/kueuelab", "", false},
		{"kubectl-", "", false},
	} {
		if got, ok := pluginName(tc.arg0); got != tc.want || ok != tc.ok {
			t.Errorf("pluginName(%q) = %q, %v; want %q, %v", tc.arg0, got, ok, tc.want, tc.ok)
		}
	}
}

// TestKubectlPlugin runs kueuelab as kubectl runs a plugin: an executable named kubectl-kueuelab
// on PATH beside the real kubectl. kubectl lists it, and "kubectl kueuelab" prints kueuelab's
// help naming the command as typed.
func TestKubectlPlugin(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kubectl is not on PATH: %v", err)
		}
		t.Skipf("kubectl is not on PATH (%v): install it to test the plugin", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	plugin := filepath.Join(bin, "kubectl-kueuelab")
	if err := os.Symlink(self, plugin); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), asMain+"=1", "PATH="+bin+string(os.PathListSeparator)+filepath.Dir(kubectl),
		"KUBECONFIG="+filepath.Join(bin, "none"), "HOME="+bin)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), kubectl, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	dir, job := smallState(t)
	if out := run("kueuelab", "forecast", dir, "-f", job, "-n", "team-a", "--repeats", "1"); !strings.Contains(out, job+"/train") {
		t.Errorf("kubectl kueuelab forecast -f does not forecast the job:\n%s", out)
	}
	if out := run("plugin", "list"); !strings.Contains(out, plugin) {
		t.Errorf("kubectl plugin list does not list %s:\n%s", plugin, out)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"kueuelab", "--help"}, []string{"kueuelab generates realistic AI workload traces", "kubectl kueuelab [command]", "forecast"}},
		{[]string{"kueuelab", "forecast", "--help"}, []string{"kubectl kueuelab forecast [DIR | --kubeconfig K] [-f MANIFEST]...", "-f, --filename"}},
	} {
		out := run(tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl %s does not print %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
	}
}

// TestForecastManifestHTML: forecast -f on a state directory reports the job as submitted now
// and --html writes the page naming it.
func TestForecastManifestHTML(t *testing.T) {
	dir, job := smallState(t)
	page := filepath.Join(dir, "forecast.html")
	out, _, err := runTrace(t, "forecast", dir, "-f", job, "-n", "team-a", "--repeats", "2", "--html", page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, job+"/train") || !strings.Contains(out, "1 of them -f jobs") {
		t.Errorf("the table does not name the job:\n%s", out)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), job+"/train (submitted now)") {
		t.Errorf("%s does not name the job", page)
	}
	if _, _, err := runTrace(t, "forecast", dir, "-f", job, "-n", "team-b"); err == nil || !strings.Contains(err.Error(), "LocalQueue team-b/team-a-lq is not in the state's cluster spec") {
		t.Errorf("a namespace without the queue: %v", err)
	}
}

// smallState writes a state directory of examples/clusters/small.yaml with no live workload, and
// beside it job.yaml, a batch Job on team-a's LocalQueue without a namespace.
func smallState(t *testing.T) (dir, job string) {
	t.Helper()
	dir = t.TempDir()
	spec, err := os.ReadFile("../../examples/clusters/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"cluster.yaml":    string(spec),
		"workloads.jsonl": "",
		"state.yaml":      "apiVersion: kueuelab.io/v1alpha1\nkind: ClusterState\nnowSec: 50\ntrace: workloads.jsonl\ncluster: cluster.yaml\narrivals: none\nworkloads: []\n",
		"job.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: train
  labels: {kueue.x-k8s.io/queue-name: team-a-lq, kueue.x-k8s.io/priority-class: standard}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: trainer
        resources: {requests: {cpu: "1", memory: 1Gi}}
`,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "job.yaml")
}
