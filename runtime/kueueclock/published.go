package kueueclock

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// A replay on kueuelab's local cluster publishes its trace clock in a ConfigMap, so that a reader
// of the cluster (kueuelab snapshot) can put the times Kueue writes on the trace clock: while
// Kueue follows the replay, its condition times and its precise creation times are Epoch plus
// trace time, and the API server's own timestamps are wall time.
const (
	PublishedNamespace = "kube-system"
	PublishedName      = "kueuelab-clock"
)

// The ConfigMap's keys.
const (
	keyEpoch   = "epoch"    // RFC 3339 ns: trace time 0 on Kueue's clock
	keyTrace   = "traceSec" // trace seconds at keyWall
	keyWall    = "wallTime" // RFC 3339 ns
	keyRate    = "rate"     // trace s per wall s while the clock moves, 0 while it stands
	keyCap     = "capSec"   // trace seconds at which the moving clock stops ("" none)
	keyRunning = "running"  // "false" once the replay ended: the position is where it stopped
)

// Published is a replay's trace clock as the ConfigMap holds it.
type Published struct {
	Epoch    time.Time
	Position simclock.Position
	Running  bool
}

// Data is p as the ConfigMap's data.
func (p Published) Data() map[string]string {
	d := map[string]string{
		keyEpoch: p.Epoch.UTC().Format(time.RFC3339Nano), keyTrace: strconv.FormatFloat(p.Position.Now, 'f', -1, 64),
		keyWall: p.Position.Base.UTC().Format(time.RFC3339Nano), keyRate: strconv.FormatFloat(p.Position.Rate, 'f', -1, 64),
		keyRunning: strconv.FormatBool(p.Running),
	}
	if !math.IsInf(p.Position.Cap, 1) {
		d[keyCap] = strconv.FormatFloat(p.Position.Cap, 'f', -1, 64)
	}
	return d
}

// ParsePublished reads the ConfigMap's data.
func ParsePublished(d map[string]string) (Published, error) {
	var p Published
	var err error
	bad := func(k string, e error) error {
		return fmt.Errorf("ConfigMap %s/%s: %s %q: %w", PublishedNamespace, PublishedName, k, d[k], e)
	}
	if p.Epoch, err = time.Parse(time.RFC3339Nano, d[keyEpoch]); err != nil {
		return p, bad(keyEpoch, err)
	}
	if p.Position.Base, err = time.Parse(time.RFC3339Nano, d[keyWall]); err != nil {
		return p, bad(keyWall, err)
	}
	if p.Position.Now, err = strconv.ParseFloat(d[keyTrace], 64); err != nil {
		return p, bad(keyTrace, err)
	}
	if p.Position.Rate, err = strconv.ParseFloat(d[keyRate], 64); err != nil {
		return p, bad(keyRate, err)
	}
	p.Position.Cap = math.Inf(1)
	if v, ok := d[keyCap]; ok {
		if p.Position.Cap, err = strconv.ParseFloat(v, 64); err != nil {
			return p, bad(keyCap, err)
		}
	}
	if p.Running, err = strconv.ParseBool(d[keyRunning]); err != nil {
		return p, bad(keyRunning, err)
	}
	return p, nil
}

// Trace is the trace time of t, a time Kueue wrote while it followed the replay.
func (p Published) Trace(t time.Time) float64 { return t.Sub(p.Epoch).Seconds() }
