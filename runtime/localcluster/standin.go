package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/kueuelab/kueuelab/runtime/rayjobapi"
	"github.com/kueuelab/kueuelab/runtime/realnode"
)

// A stand-in plays a part a KWOK cluster lacks for some operator (render.Operator.StandIn): the
// Ray head's job API for KubeRay. It is kueuelab itself, started again as a component of the
// cluster; the program that brings a cluster up (the kueuelab CLI, a test binary) calls
// RunStandIn first thing, so that started as a stand-in it serves instead.
const (
	standInEnv           = "KUEUELAB_STAND_IN"
	standInKubeconfigEnv = "KUEUELAB_STAND_IN_KUBECONFIG"
	standInAddrEnv       = "KUEUELAB_STAND_IN_ADDR"
	// standInArg is argv[1] of a stand-in: it names the process in ps and makes its command line
	// tell stand-ins of different clusters apart.
	standInArg = "kueuelab-stand-in"
)

// standIns are the stand-ins a local cluster can run, by the name operators give them.
var standIns = map[string]func(ctx context.Context, kubeconfig, addr string) error{
	"ray-job-api": rayjobapi.Serve,
}

// RunStandIn serves as the stand-in this process was started as, until SIGTERM, and reports
// ran=true with the exit code; it returns ran=false at once in any other process. Programs that
// call Up must call it before anything else (see the package comment on stand-ins).
func RunStandIn() (ran bool, code int) {
	if ran, code := realnode.RunIfNode(); ran {
		return true, code
	}
	name := os.Getenv(standInEnv)
	if name == "" {
		return false, 0
	}
	serve, ok := standIns[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "%s=%q: no such stand-in\n", standInEnv, name)
		return true, 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, os.Getenv(standInKubeconfigEnv), os.Getenv(standInAddrEnv)); err != nil {
		fmt.Fprintf(os.Stderr, "stand-in %s: %v\n", name, err)
		return true, 1
	}
	return true, 0
}

// standInSpec runs this very executable as stand-in name. Its command line holds the cluster's
// kubeconfig path, which is what tells it apart (the executable may be a test binary, or a
// kueuelab rebuilt since).
func (s *State) standInSpec(name, exe string, probe *http.Client) spec {
	port := s.Ports.Operators[name][standInPort]
	addr := hostPort(port)
	return spec{
		process: process{name: name, bin: standInArg + "\x00" + name + "\x00" + s.Kubeconfig(),
			argv: []string{exe, standInArg, name, s.Kubeconfig(), addr},
			env:  []string{standInEnv + "=" + name, standInKubeconfigEnv + "=" + s.Kubeconfig(), standInAddrEnv + "=" + addr}},
		ports:  []int{port},
		health: httpOK(probe, loopURL("http", port, "/healthz")),
	}
}

// selfExecutable is the executable stand-ins run.
func selfExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("stand-ins run this executable: %w", err)
	}
	return exe, nil
}

// addStandIns adds this executable as the binary of every stand-in.
func addStandIns(bins map[string]string) error {
	for _, op := range operators() {
		if op.StandIn == "" {
			continue
		}
		exe, err := selfExecutable()
		if err != nil {
			return err
		}
		bins[op.StandIn] = exe
	}
	return nil
}
