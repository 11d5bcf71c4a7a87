package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"

	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
	"github.com/kueuelab/kueuelab/runtime/simver"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

const kueueVersionHelp = `Kueue release to replay (default ` + kueuever.Default + `; sim engine: every supported release, each built from this source into the cache on first use; cluster engine: the releases its tools build)`

// pickKueue resolves --kueue-version for engine: the release, and whether this process links it
// (false: the command must run through that release's sim binary, runThroughRelease).
func pickKueue(flag string, engine results.Engine) (kueuever.Version, bool, error) {
	v, err := kueuever.Lookup(flag)
	if err != nil {
		return v, false, fmt.Errorf("--kueue-version: %w", err)
	}
	if engine == results.EngineCluster {
		if v.Name != tools.KueueVersion {
			return v, false, fmt.Errorf("--kueue-version %s: the cluster engine runs Kueue %s (the release its tools patch for the trace clock); --engine sim runs %s", v.Name, tools.KueueVersion, kueuever.Names())
		}
		return v, true, nil
	}
	return v, v.Name == kueuelib.KueueVersion, nil
}

// childExit is a release's sim binary that ended with a non-zero status: it printed its own
// error, and this process exits with its code.
type childExit struct {
	version string
	code    int
}

func (e childExit) Error() string {
	return fmt.Sprintf("(the sim linking Kueue %s exited with status %d)", e.version, e.code)
}
func (e childExit) ExitCode() int { return e.code }

// runThroughRelease runs the command line args through the kueuelab binary whose sim links
// release v (built on first use), which sees --kueue-version v as its own and runs in its
// process.
func runThroughRelease(ctx context.Context, v kueuever.Version, args []string, stdout, stderr io.Writer) error {
	bin, err := simver.Binary(ctx, v, stderr)
	if err != nil {
		return err
	}
	err = simver.Run(ctx, bin, args, stdout, stderr)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return childExit{version: v.Name, code: ee.ExitCode()}
	}
	return err
}
