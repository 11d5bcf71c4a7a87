package replay

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// ErrIncomplete is wrapped by a run's error when it stopped before every workload was terminal
// (a timeout, a stall, a trace-time limit, Ctrl-C, a preemption loop).
var ErrIncomplete = errors.New("run incomplete")

// ErrRejected is wrapped by a run's error when some workload could not be submitted: the API
// server refused its objects, or the cluster cannot place or render it.
var ErrRejected = errors.New("submission rejected")

// End is what an engine hands over when its run stops.
type End struct {
	// OutDir is the results directory; Records every workload's record; Meta the run's facts.
	OutDir  string
	Records []results.Record
	Meta    results.Meta
	// Events is the run's event log: flushed before quota held idle is read from it, then closed.
	Events *results.EventLog
	// Loop is the preemption loop that ended the run (nil: none); Meta.Incomplete then starts
	// with its text.
	Loop error
	// Out receives the summary table.
	Out io.Writer
}

// Finish writes what every engine writes at the end of a run: quota held idle (idle.csv and
// summary.reservedIdle, from the event log), workloads.csv, summary.json and the table. It returns
// the summary and the error of writing them.
func Finish(e End) (results.Summary, error) {
	s := results.Summarize(e.Records, e.Meta)
	err := e.Events.Flush()
	if err == nil {
		err = results.AddReservedIdle(e.OutDir, e.Records, &s, e.Meta.TraceSec)
	}
	err = errors.Join(err, results.WriteFiles(e.OutDir, e.Records, &s), e.Events.Close())
	if e.Out != nil {
		err = errors.Join(err, s.WriteTable(e.Out))
		fmt.Fprintf(e.Out, "results in %s\n", e.OutDir)
	}
	return s, err
}

// Outcome is the error of a run whose results were written: ErrIncomplete (wrapping the loop
// error, when a loop ended it) and ErrRejected, or nil when every workload ran to its end.
func Outcome(m results.Meta, loop error) error {
	var errs []error
	switch {
	case loop != nil: // the same words, wrapping the loop error so errors.Is finds it
		errs = append(errs, fmt.Errorf("%w: %w%s", ErrIncomplete, loop, strings.TrimPrefix(m.Incomplete, loop.Error())))
	case m.Incomplete != "":
		errs = append(errs, fmt.Errorf("%w: %s", ErrIncomplete, m.Incomplete))
	}
	if m.Rejected > 0 {
		errs = append(errs, fmt.Errorf("%w: %d workloads could not be submitted, the first: %s", ErrRejected, m.Rejected, m.FirstRejection))
	}
	return errors.Join(errs...)
}
