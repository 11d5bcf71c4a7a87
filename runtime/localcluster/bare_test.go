package localcluster

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/tools"
)

// TestBareSurvivesTheSupervisor: a bare cluster's kube-controller-manager keeps upstream's Job
// batch period however its specs are derived, by Up or by the supervisor daemon from cluster.json
// (Supervise loads the state and calls specs again), and a normal cluster keeps the local one.
func TestBareSurvivesTheSupervisor(t *testing.T) {
	root := t.TempDir()
	for _, bare := range []bool{false, true} {
		s, err := prepare(Options{Root: root, Name: "bare-test", BinDir: t.TempDir(), PortBase: 31000, Bare: bare})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.save(); err != nil {
			t.Fatal(err)
		}
		loaded, ok, err := Load(root, "bare-test")
		if err != nil || !ok {
			t.Fatalf("load: %v %v", ok, err)
		}
		p, err := ensurePKI(filepath.Join(s.Dir, "pki"))
		if err != nil {
			t.Fatal(err)
		}
		bins := map[string]string{}
		for _, c := range Components() {
			bins[c] = "/bin/" + c
		}
		specs, err := loaded.specs(bins, p)
		if err != nil {
			t.Fatal(err)
		}
		env := specs[ControllerManager].env
		local := slices.Contains(env, tools.JobSyncBatchPeriodEnv+"="+jobSyncBatchPeriod.String())
		if loaded.Bare != bare || local == bare {
			t.Errorf("Bare %v: loaded state Bare %v, kube-controller-manager env %v", bare, loaded.Bare, env)
		}
		// Kueue's scheduler backoff is wall time the held trace clock pays for nothing.
		if kenv := specs[Kueue].env; !slices.Contains(kenv, tools.KueueCycleBackoffEnv+"="+kueueCycleBackoff.String()) {
			t.Errorf("Bare %v: Kueue env %v has no %s", bare, kenv, tools.KueueCycleBackoffEnv)
		}
		// The training-operator's webhook server finds its certificate under os.TempDir(),
		// whatever TMPDIR the caller runs with.
		if oenv := specs["training-operator"].env; !slices.Contains(oenv, "TMPDIR=/tmp") {
			t.Errorf("Bare %v: training-operator env %v has no TMPDIR=/tmp", bare, oenv)
		}
	}
}
