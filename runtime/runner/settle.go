package runner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// MetricsSource reads a component's Prometheus metrics in the text format.
type MetricsSource func(ctx context.Context) (io.ReadCloser, error)

// settler holds the clock from a poke until a component has caught up: Kueue's queues hold what
// the API shows (every pending Workload tried, every admission written), or kube-scheduler has
// decided on every unbound pod. Nothing in the API says so: a workload Kueue tried and left
// pending may get no update at all. Both components publish their queue lengths as metrics, and
// the settler compares them with the runner's own view until two reads in a row agree.
type settler struct {
	name     string
	clk      *simclock.Clock
	key      simclock.Key
	check    func(ctx context.Context) (bool, string, error)
	interval time.Duration

	mu      sync.Mutex
	gen     uint64
	kick    chan struct{}
	polls   int
	errors  int
	lastErr string
	last    string // why the last check disagreed
}

func newSettler(name string, clk *simclock.Clock, kind simclock.Kind, interval time.Duration,
	check func(ctx context.Context) (bool, string, error)) *settler {
	return &settler{name: name, clk: clk, key: simclock.Key{Kind: kind, ID: name}, check: check, interval: interval,
		kick: make(chan struct{}, 1)}
}

// poke holds the clock until the component has caught up with what happened before the poke.
func (s *settler) poke() {
	s.mu.Lock()
	s.gen++
	s.clk.Hold(s.key)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run checks after every poke until the component agrees twice in a row with no poke between
// (the second read closes the window in which a component has taken an event off its queue but
// not yet reported the result), then releases the hold.
func (s *settler) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		agreed, since := 0, uint64(0)
		start, reads := time.Now(), 0
		interval := s.interval
		for {
			s.mu.Lock()
			g := s.gen
			s.mu.Unlock()
			ok, why, err := s.check(ctx)
			reads++
			if err != nil {
				why = err.Error()
			}
			if !ok && why != "" && reads%50 == 0 {
				s.clk.Note("settling", fmt.Sprintf("%s %d reads %s: %s", s.name, reads, time.Since(start).Round(time.Millisecond), why))
			}
			s.mu.Lock()
			s.polls++
			if err != nil {
				s.errors++
				s.lastErr = err.Error()
			}
			if !ok && err == nil && why != s.last && time.Since(start) < maxSettleProgress {
				// The component's queues changed since the last read: it is working, not stuck.
				// A deep queue under load may take Kueue longer than the hold limit to sweep.
				s.clk.Extend(s.key, 0)
			}
			s.last = why
			switch {
			case err != nil || !ok || g != since:
				if g != since {
					interval = s.interval // a new poke: the component has something new to do
				}
				agreed, since = 0, g
				if err == nil && ok {
					agreed = 1
				}
			default:
				agreed++
			}
			if agreed >= 2 && s.gen == g {
				s.clk.Release(s.key)
				s.mu.Unlock()
				if d := time.Since(start); d > 100*time.Millisecond {
					s.clk.Note("settled", fmt.Sprintf("%s after %s, %d reads", s.name, d.Round(time.Millisecond), reads))
				}
				break
			}
			s.mu.Unlock()
			t.Reset(interval)
			if !ok {
				// A step that takes long (an eviction, a preemption) takes long: every read costs the
				// component its whole exposition, so read less often while it disagrees.
				interval = min(2*interval, maxSettleInterval)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-s.kick:
				if !t.Stop() {
					<-t.C
				}
			}
		}
	}
}

// maxSettleProgress bounds how long a settle that keeps progressing may renew its hold's limit:
// a component that changes its queues forever without agreeing is stuck too.
const maxSettleProgress = 10 * time.Minute

// maxSettleInterval bounds the back-off of a settler's reads while the component disagrees.
const maxSettleInterval = 16 * time.Millisecond

// settlerStats is what a settler did, for the run's summary.
type settlerStats struct {
	Polls, Errors int
	LastErr       string
}

func (s *settler) stats() settlerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return settlerStats{Polls: s.polls, Errors: s.errors, LastErr: s.lastErr}
}

// gauges reads the samples of the named metric families from a text exposition: for each family,
// the value by the values of its key labels joined with '/'. Only what the settlers need is parsed: the expositions of Kueue and
// kube-scheduler are ~100 kB each and are read every few milliseconds while a hold is active.
func gauges(r io.Reader, families map[string][]string) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		i := bytes.IndexAny(line, "{ ")
		if i < 0 {
			i = len(line)
		}
		if i == 0 {
			continue
		}
		keyLabels, ok := families[string(line[:i])]
		if !ok {
			continue
		}
		name := string(line[:i])
		var labels map[string]string
		rest := line[i:]
		if len(rest) > 0 && rest[0] == '{' {
			j := bytes.LastIndexByte(rest, '}')
			if j < 0 {
				return nil, fmt.Errorf("metric %s: unterminated labels", name)
			}
			var err error
			if labels, err = parseLabels(rest[1:j]); err != nil {
				return nil, fmt.Errorf("metric %s: %w", name, err)
			}
			rest = rest[j+1:]
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metric %s: no value", name)
		}
		v, err := strconv.ParseFloat(string(fields[0]), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: value %q: %w", name, fields[0], err)
		}
		key := ""
		for k, l := range keyLabels {
			if k > 0 {
				key += "/"
			}
			key += labels[l]
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][key] += v
	}
	return out, sc.Err()
}

// parseLabels reads name="value" pairs separated by commas (values may hold escaped quotes).
func parseLabels(b []byte) (map[string]string, error) {
	out := map[string]string{}
	for len(b) > 0 {
		eq := bytes.IndexByte(b, '=')
		if eq < 0 || eq+1 >= len(b) || b[eq+1] != '"' {
			return nil, fmt.Errorf("labels %q: want name=\"value\"", b)
		}
		name := string(bytes.TrimSpace(b[:eq]))
		b = b[eq+2:]
		var val []byte
		i := 0
		for ; i < len(b) && b[i] != '"'; i++ {
			if b[i] == '\\' && i+1 < len(b) {
				i++
				switch b[i] {
				case 'n':
					val = append(val, '\n')
				default:
					val = append(val, b[i])
				}
				continue
			}
			val = append(val, b[i])
		}
		if i >= len(b) {
			return nil, fmt.Errorf("labels: unterminated value of %s", name)
		}
		out[name] = string(val)
		b = bytes.TrimLeft(b[i+1:], ", ")
	}
	return out, nil
}

// readMetrics fetches and parses the families from src.
func readMetrics(ctx context.Context, src MetricsSource, families map[string][]string) (map[string]map[string]float64, error) {
	rc, err := src(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return gauges(rc, families)
}
