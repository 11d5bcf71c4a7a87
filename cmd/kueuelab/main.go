// Command kueuelab generates realistic AI workload traces, renders them into the objects a
// Kueue-managed cluster runs, and replays them on a real control plane with simulated GPU nodes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kueuelab/kueuelab/runtime/localcluster"
)

func main() {
	// The local cluster runs stand-ins (the Ray job API) as this very program.
	if ran, code := localcluster.RunStandIn(); ran {
		os.Exit(code)
	}
	// controller-runtime's clients log through a logger that must be set once, or they print a
	// stack trace on first use; every error they meet is returned to the command, which reports it.
	ctrllog.SetLogger(logr.Discard())
	// The first Ctrl-C cancels the context so long commands flush what they have; a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kueuelab:", err)
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}
