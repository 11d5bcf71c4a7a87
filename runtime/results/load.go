package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Dir is a results directory read back: every file parsed.
type Dir struct {
	Path      string
	Summary   Summary
	Workloads []Record
	Events    []Event
	Series    []Sample
	// Waits are idle.csv's rows (quota held idle per workload).
	Waits []Wait
}

// Load reads and parses every results file of dir. A missing timeseries.csv is allowed (a run
// that never reached its first sample); the other files are required.
func Load(dir string) (*Dir, error) {
	d := &Dir{Path: dir}
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return nil, fmt.Errorf("results %s: %w", dir, err)
	}
	if err := json.Unmarshal(b, &d.Summary); err != nil {
		return nil, fmt.Errorf("results %s: %s: %w", dir, SummaryFile, err)
	}
	if d.Workloads, err = readFile(dir, WorkloadsFile, ReadWorkloadsCSV); err != nil {
		return nil, err
	}
	if d.Events, err = readFile(dir, EventsFile, ReadEvents); err != nil {
		return nil, err
	}
	d.Series, err = readFile(dir, TimeSeriesFile, ReadSeries)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// Directories written before idle.csv get quota held idle from their events, so a report
	// compares them with newer runs (without scheduler reasons: those events are newer too).
	d.Waits, err = readFile(dir, IdleFile, ReadIdleCSV)
	switch {
	case errors.Is(err, os.ErrNotExist) && d.Summary.ReservedIdle == nil:
		idle, waits := ReservedIdle(d.Events, d.Workloads, d.Summary.TraceSec, DefaultIdleThresholdSec)
		d.Summary.ReservedIdle, d.Waits = &idle, waits
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	return d, nil
}

func readFile[T any](dir, name string, parse func(r io.Reader, name string) ([]T, error)) ([]T, error) {
	p := filepath.Join(dir, name)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("results %s: %w", dir, err)
	}
	defer f.Close()
	return parse(f, p)
}
