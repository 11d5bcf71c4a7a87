package results

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
)

// Scopes of a time series row.
const (
	ScopeClusterQueue = "clusterqueue"
	ScopeFlavor       = "flavor"
)

// Sample is one row of timeseries.csv: the state of one ClusterQueue or ResourceFlavor at trace
// time T. Requested counts GPUs of workloads submitted and not finished (pending or admitted),
// Reserved GPUs of workloads holding quota, InUse GPUs of Running pods. Pending counts workloads
// waiting for quota (ClusterQueue rows only). NodePowerW is the agent-reported power of the
// flavor's nodes (flavor rows only); NaN when no node reports it.
type Sample struct {
	T          float64
	Scope      string
	Name       string
	Requested  int64
	Reserved   int64
	InUse      int64
	Pending    int
	NodePowerW float64
}

var seriesColumns = []string{"t_sec", "scope", "name", "gpus_requested", "gpus_reserved", "gpus_in_use", "pending_workloads", "node_power_w"}

// SeriesWriter appends samples to timeseries.csv (long format: one row per scope, name and time).
type SeriesWriter struct {
	mu sync.Mutex
	f  *os.File
	b  *bufio.Writer
	cw *csv.Writer
}

// CreateSeries creates path and writes the header.
func CreateSeries(path string) (*SeriesWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("time series: %w", err)
	}
	b := bufio.NewWriter(f)
	s := &SeriesWriter{f: f, b: b, cw: csv.NewWriter(b)}
	if err := s.cw.Write(seriesColumns); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return s, nil
}

// Write appends samples and flushes them to the file.
func (s *SeriesWriter) Write(samples []Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range samples {
		power := ""
		if !math.IsNaN(x.NodePowerW) {
			power = strconv.FormatFloat(x.NodePowerW, 'f', 1, 64)
		}
		row := []string{strconv.FormatFloat(x.T, 'f', 3, 64), x.Scope, x.Name,
			strconv.FormatInt(x.Requested, 10), strconv.FormatInt(x.Reserved, 10), strconv.FormatInt(x.InUse, 10),
			strconv.Itoa(x.Pending), power}
		if err := s.cw.Write(row); err != nil {
			return fmt.Errorf("time series: %w", err)
		}
	}
	s.cw.Flush()
	if err := s.cw.Error(); err != nil {
		return fmt.Errorf("time series: %w", err)
	}
	return s.b.Flush()
}

// Close flushes and closes the file.
func (s *SeriesWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cw.Flush()
	return errors.Join(s.cw.Error(), s.b.Flush(), s.f.Close())
}

// ReadSeries parses timeseries.csv; errors name the line and column.
func ReadSeries(r io.Reader, name string) ([]Sample, error) {
	return readCSV(r, name, seriesColumns, parseSample)
}

func parseSample(row []string) (Sample, error) {
	x := Sample{Scope: row[1], Name: row[2], NodePowerW: math.NaN()}
	if x.Scope != ScopeClusterQueue && x.Scope != ScopeFlavor {
		return x, fmt.Errorf("column scope: %q is not %s or %s", x.Scope, ScopeClusterQueue, ScopeFlavor)
	}
	var err error
	parse := func(i int, dst *int64) {
		if err == nil {
			if *dst, err = strconv.ParseInt(row[i], 10, 64); err != nil {
				err = fmt.Errorf("column %s: %q is not an integer", seriesColumns[i], row[i])
			}
		}
	}
	if x.T, err = strconv.ParseFloat(row[0], 64); err != nil {
		return x, fmt.Errorf("column t_sec: %q is not a number", row[0])
	}
	var pending int64
	parse(3, &x.Requested)
	parse(4, &x.Reserved)
	parse(5, &x.InUse)
	parse(6, &pending)
	if err != nil {
		return x, err
	}
	x.Pending = int(pending)
	if row[7] != "" {
		if x.NodePowerW, err = strconv.ParseFloat(row[7], 64); err != nil {
			return x, fmt.Errorf("column node_power_w: %q is not a number", row[7])
		}
	}
	return x, nil
}
