package results

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// File names in a results directory.
const (
	EventsFile     = "events.jsonl"
	WorkloadsFile  = "workloads.csv"
	TimeSeriesFile = "timeseries.csv"
	SummaryFile    = "summary.json"
)

// EventLog appends events to events.jsonl through a buffer that is flushed every interval and on
// Close, so a crash loses at most one interval of events and never a partial line already flushed.
type EventLog struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	enc  *json.Encoder
	err  error
	stop chan struct{}
	done chan struct{}
}

// CreateEventLog creates (truncates) path and flushes it every interval (1 s when zero).
func CreateEventLog(path string, interval time.Duration) (*EventLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	if interval <= 0 {
		interval = time.Second
	}
	l := &EventLog{f: f, w: bufio.NewWriterSize(f, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	l.enc = json.NewEncoder(l.w)
	go l.flushLoop(interval)
	return l, nil
}

func (l *EventLog) flushLoop(interval time.Duration) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			_ = l.Flush() // a flush error is kept in l.err and returned by the next Write or Close
		}
	}
}

// Write appends one event.
func (l *EventLog) Write(e *Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if err := l.enc.Encode(e); err != nil {
		l.err = fmt.Errorf("event log %s: %w", l.f.Name(), err)
	}
	return l.err
}

// Flush writes buffered events to the file.
func (l *EventLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		if err := l.w.Flush(); err != nil {
			l.err = fmt.Errorf("event log %s: %w", l.f.Name(), err)
		}
	}
	return l.err
}

// Close stops the periodic flush, flushes and closes the file.
func (l *EventLog) Close() error {
	close(l.stop)
	<-l.done
	ferr := l.Flush()
	return errors.Join(ferr, l.f.Close())
}

// ReadEvents parses an events.jsonl stream; errors name the line.
func ReadEvents(r io.Reader, name string) ([]Event, error) {
	var out []Event
	err := ScanEvents(r, name, func(e *Event) { out = append(out, *e) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanEvents reads events.jsonl one event at a time, giving each to f (which must not keep the
// pointer); errors name the line.
func ScanEvents(r io.Reader, name string, f func(*Event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if e.Type == "" || (e.Workload == "" && !ControlPlaneEvent(e.Type)) {
			return fmt.Errorf("%s:%d: event without workload or type", name, line)
		}
		f(&e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
