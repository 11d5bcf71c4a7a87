package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// newPauseCmd is the pause image's entrypoint (image.Pause), the sandbox container of a real
// node's pods: it holds the sandbox's namespaces by living, and as PID 1 of a pod's shared PID
// namespace it reaps the processes orphaned to it. SIGINT or SIGTERM end it with status 0, as
// they end upstream's pause.
func newPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "pause",
		Short:  "Hold a pod sandbox's namespaces until SIGINT or SIGTERM, reaping orphans",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// main cancels the context on SIGINT and SIGTERM; its handler is in place by now, so
			// a signal after this line ends the command instead of killing the process.
			fmt.Fprintln(cmd.ErrOrStderr(), "kueuelab pause: waiting for SIGINT or SIGTERM")
			return pause(cmd.Context())
		},
	}
}

// pause reaps exited children whenever one exits, until ctx ends.
func pause(ctx context.Context) error {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	for {
		// Children that exited before the handler was in place sent their SIGCHLD to no one.
		reap()
		select {
		case <-ctx.Done():
			return nil
		case <-chld:
		}
	}
}

// reap collects every child that has exited, without waiting for the running ones. One SIGCHLD
// may stand for several exits, so it collects until none is left.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no children; 0: none has exited
		}
	}
}
