package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// env is the cluster every test of the package shares.
type env struct {
	kubeconfig string
	state      *localcluster.State // the local cluster: its component metrics settle the trace clock
	client     client.Client
	scheme     *runtime.Scheme
	// up are the options the cluster was started with: Up with them again (changed) reconfigures it.
	up localcluster.Options
	// timers are Kueue v0.19's default timers (waitForPodsReady) in trace time, as `kueuelab run`
	// gives the local cluster and the runner.
	timers runner.KueueTimers
}

var shared *env // set once by TestMain before any test runs, read-only afterwards

// timers are the cluster's Kueue timers, from TestMain's start to runTests.
var timers runner.KueueTimers

func TestMain(m *testing.M) {
	// The cluster runs its stand-ins (the Ray job API) as this test binary.
	if ran, code := localcluster.RunStandIn(); ran {
		os.Exit(code)
	}
	// Errors reach the tests as return values; without a logger controller-runtime prints a stack trace.
	ctrllog.SetLogger(logr.Discard())
	// Re-executed as a test cluster's supervisor daemon (see testDaemon).
	if spec := os.Getenv(superviseEnv); spec != "" {
		os.Exit(superviseMain(spec))
	}
	if os.Getenv("KUEUELAB_E2E") == "0" {
		fmt.Println("e2e: skipped because KUEUELAB_E2E=0")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	set := tools.Pinned()
	bin, err := tools.BinDir("", set)
	if err == nil {
		_, err = tools.Locate(bin, set)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n(set KUEUELAB_E2E=0 to skip the end-to-end tests)\n", err)
		return 1
	}
	root, err := os.MkdirTemp("", "kueuelab-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	name := fmt.Sprintf("e2e-%d", os.Getpid())
	base, err := freePortBlock(27400, localcluster.NumPorts())
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	t0 := time.Now()
	// Kueue v0.19's defaults in trace time, as `kueuelab run` starts the local cluster.
	kc := (*experiment.KueueConfig)(nil).WithKueueDefaults(kueuever.MustLookup(kueuever.Default))
	timers = kc.Timers()
	// Configured, as a cluster running NVIDIA's DRA driver would be, to charge MIG slices
	// (TestMIGSlices); a spec without MIG pools never meets the mapping.
	fields := kc.Fields()
	fields["resources"] = rcluster.MIGKueueResources()
	opts := localcluster.Options{Root: root, Name: name, BinDir: bin, PortBase: base, Timeout: 3 * time.Minute, Out: os.Stdout,
		KueueConfig: fields}
	cl, err := localcluster.Up(ctx, opts)
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cluster up: %v\n", err)
	} else {
		fmt.Printf("e2e: cluster %s up in %s (ports from %d)\n", name, time.Since(t0).Round(100*time.Millisecond), base)
		code = runTests(m, cl, opts)
	}
	if err := localcluster.Down(context.Background(), root, name, false, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cluster down:", err)
		code = 1
	}
	if code != 0 || os.Getenv("KUEUELAB_E2E_KEEP") == "1" {
		fmt.Printf("e2e: state (logs, configs) kept in %s\n", filepath.Join(root, name))
		return code
	}
	if err := os.RemoveAll(root); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	}
	return code
}

func runTests(m *testing.M, cl *localcluster.Cluster, opts localcluster.Options) int {
	scheme, err := cluster.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	c, err := client.New(cl.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	shared = &env{kubeconfig: cl.State.Kubeconfig(), state: cl.State, client: c, scheme: scheme, up: opts, timers: timers}
	t0 := time.Now()
	code := m.Run()
	fmt.Printf("e2e: tests took %s\n", time.Since(t0).Round(100*time.Millisecond))
	if err := stopSupCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	return code
}

// freePortBlock finds n consecutive free loopback ports, trying blocks from start upwards.
func freePortBlock(start, n int) (int, error) {
	for base := start; base+n < 65000; base += 100 {
		ok := true
		for p := base; p < base+n && ok; p++ {
			ok = localcluster.PortFree(p) == nil
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports from %d", n, start)
}
