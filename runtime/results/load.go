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
