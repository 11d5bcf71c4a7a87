package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// syncBuffer is a bytes.Buffer safe for the watcher's goroutine and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestControlPlaneOutage plays a supervisor's status file through a Kueue crash, its restart and a
// crash loop: the clock holds exactly while a component is not ready, the restart and the outage
// are events and counters, and the crash loop is the run's fatal error with the component's log.
func TestControlPlaneOutage(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "logs", "kueue.log"), []byte("starting\nerror: bad config\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	status := func(state localcluster.ComponentState, restarts int) {
		t.Helper()
		h := localcluster.Health{Cluster: "c", Components: []localcluster.ComponentHealth{
			{Name: "kube-apiserver", State: localcluster.StateReady},
			{Name: "kueue", State: state, Restarts: restarts, LastExit: &localcluster.Exit{Code: -1, Signal: "SIGKILL"}},
		}, Policy: localcluster.PolicySummary{CrashLoopRestarts: 5, CrashLoopWindowSeconds: 120}}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "status.json.tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "status.json")); err != nil {
			t.Fatal(err)
		}
	}
	status(localcluster.StateReady, 0)
	evPath := filepath.Join(dir, "events.jsonl")
	evlog, err := results.CreateEventLog(evPath, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clk := simclock.New(simclock.Options{Settle: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.Start(ctx)
	var out syncBuffer
	cp := newControlPlane(dir, clk, evlog, &out)
	done := make(chan struct{})
	go func() { defer close(done); cp.run(ctx) }()
	key := simclock.Key{Kind: simclock.KindOutage, ID: "control-plane"}

	await(t, "the supervisor's absence reported", func() bool { return strings.Contains(out.String(), "supervisor is not running") })
	if clk.Held(key) {
		t.Fatal("held while every component is ready (a dead supervisor alone holds nothing)")
	}
	status(localcluster.StateRestarting, 1)
	await(t, "outage hold", func() bool { return clk.Held(key) })
	if got := cp.unhealthy(); len(got) != 1 || got[0] != "kueue restarting" {
		t.Errorf("unhealthy() = %q", got)
	}
	status(localcluster.StateReady, 1)
	await(t, "hold released", func() bool { return !clk.Held(key) })
	status(localcluster.StateCrashLooping, 6)
	var fatal error
	select {
	case fatal = <-cp.fatal:
	case <-time.After(time.Minute):
		t.Fatal("no fatal error for a crash-looping component")
	}
	var cle *localcluster.CrashLoopError
	if !errors.As(fatal, &cle) || cle.Component.Name != "kueue" || !strings.Contains(fatal.Error(), "error: bad config") {
		t.Errorf("fatal = %v, want kueue's crash loop with its log's last lines", fatal)
	}
	cancel()
	<-done
	var m results.Meta
	cp.meta(&m)
	if m.Restarts["kueue"] != 6 || m.Outages != 2 || m.OutageWallSec <= 0 {
		t.Errorf("meta: restarts %v outages %d (%.3fs), want kueue 6 restarts in 2 outages", m.Restarts, m.Outages, m.OutageWallSec)
	}
	if err := evlog.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(evPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := results.ReadEvents(f, evPath)
	if err != nil {
		t.Fatal(err)
	}
	count := map[results.EventType]int{}
	for _, e := range evs {
		count[e.Type]++
	}
	if count[results.EvComponentRestarted] != 6 || count[results.EvControlPlaneDown] != 2 || count[results.EvControlPlaneReady] != 1 {
		t.Errorf("events %v, want 6 restarts, 2 outages, 1 recovery", count)
	}
}

// TestOnlyLocalGoImportsLocalCluster: the runner reaches kueuelab's local control plane from
// local.go alone (the local cluster's metrics and supervisor status), so what a run on another
// cluster goes through stays apart from the process supervisor.
func TestOnlyLocalGoImportsLocalCluster(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const local = `"github.com/kueuelab/kueuelab/runtime/localcluster"`
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "local.go" {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if imp.Path.Value == local {
				t.Errorf("%s imports runtime/localcluster: reach the local control plane through local.go", f)
			}
		}
	}
}
