package experiment

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// KueueConfig are the Kueue Configuration settings a variant changes. They apply when Kueue
// starts, so a variant that sets them needs a fresh local cluster (not --kubeconfig).
//
// Every duration is in trace time. Kueue runs on wall time, so it gets each one divided by the
// run's timer scale (Scale); the runner then stops the trace clock at the trace time each timer is
// due and holds it until Kueue has acted (runtime/runner's timers), so the timers fire at their
// trace times whatever the clock does in between. Kueue reads these timers against API timestamps
// of one-second resolution, so a wall duration below one second cannot be exact: such a setting
// is refused, naming the field and the largest speedup that keeps it exact.
type KueueConfig struct {
	FairSharing          *KueueFairSharing     `yaml:"fairSharing,omitempty"`
	WaitForPodsReady     *WaitForPodsReady     `yaml:"waitForPodsReady,omitempty"`
	AdmissionFairSharing *AdmissionFairSharing `yaml:"admissionFairSharing,omitempty"`

	// kueueDefaults marks a configuration completed by WithKueueDefaults: a waitForPodsReady
	// with enable: false then turns Kueue's default off (its DisableWaitForPodsReady gate), and
	// the filled-in defaults may run at a lower timer scale than a numeric speedup (Scale).
	kueueDefaults bool
	// defaultWFPR: WaitForPodsReady holds Kueue's defaults, not settings the variant made.
	defaultWFPR bool
}

// Kueue v0.19's waitForPodsReady defaults (apis/config/v1beta2 SetDefaults_Configuration): on
// unless turned off, 30 min timeout, recoveryTimeout = timeout, requeuing backoff from 60 s
// doubling to 3,600 s, counted from the eviction, and no blocking of other admissions.
const (
	defaultPodsReadyTimeout = "30m"
	defaultRequeueTimestamp = "Eviction"
)

// WithKueueDefaults returns the configuration the cluster engine's Kueue (v0.19) runs for k,
// with Kueue's defaults made explicit in trace time: Kueue v0.19 turns waitForPodsReady on when
// its Configuration has no such section, with durations that are wall time to it, so a local
// cluster that left them to Kueue would time gangs out after 30 wall minutes (weeks of trace
// time at speedup 1000). Here a variant without waitForPodsReady gets Kueue's defaults as trace
// durations, scaled like any other setting; one with enable: false turns it off.
func (k *KueueConfig) WithKueueDefaults() *KueueConfig {
	out := &KueueConfig{kueueDefaults: true}
	if k != nil {
		out.FairSharing, out.WaitForPodsReady, out.AdmissionFairSharing = k.FairSharing, k.WaitForPodsReady, k.AdmissionFairSharing
	}
	if out.WaitForPodsReady == nil {
		no := false
		out.WaitForPodsReady = &WaitForPodsReady{Enable: true, Timeout: defaultPodsReadyTimeout, BlockAdmission: &no,
			RecoveryTimeout: defaultPodsReadyTimeout, RequeuingStrategy: &RequeuingStrategy{Timestamp: defaultRequeueTimestamp,
				BackoffBase: defaultBackoffBase.String(), BackoffMax: defaultBackoffMax.String()}}
		out.defaultWFPR = true
	}
	return out
}

// KueueFairSharing turns Kueue's fair sharing on. PreemptionStrategies default to
// [LessThanOrEqualToFinalShare, LessThanInitialShare], Kueue's documented default.
type KueueFairSharing struct {
	Enable               bool     `yaml:"enable"`
	PreemptionStrategies []string `yaml:"preemptionStrategies,omitempty"`
}

// WaitForPodsReady turns Kueue's all-or-nothing admission on. Durations are trace time ("10m").
type WaitForPodsReady struct {
	Enable          bool   `yaml:"enable"`
	Timeout         string `yaml:"timeout,omitempty"`
	BlockAdmission  *bool  `yaml:"blockAdmission,omitempty"`
	RecoveryTimeout string `yaml:"recoveryTimeout,omitempty"`
	// RequeuingStrategy is the backoff of a workload evicted for not getting ready in time.
	RequeuingStrategy *RequeuingStrategy `yaml:"requeuingStrategy,omitempty"`
}

// RequeuingStrategy is waitForPodsReady.requeuingStrategy with its backoff in trace time: Kueue
// waits backoffBase × 2^(n−1) (at most backoffMax) before requeuing a workload evicted n times.
type RequeuingStrategy struct {
	Timestamp         string `yaml:"timestamp,omitempty"`
	BackoffLimitCount *int32 `yaml:"backoffLimitCount,omitempty"`
	// BackoffBase defaults to Kueue's 60s, BackoffMax to its 3600s.
	BackoffBase string `yaml:"backoffBase,omitempty"`
	BackoffMax  string `yaml:"backoffMax,omitempty"`
}

// AdmissionFairSharing configures Kueue's admission fair sharing (the ClusterQueues that use it
// set admissionScope). Its usage decays on wall time: the half-life and sampling interval are
// scaled like every other duration, which keeps the decay exact only while the trace clock runs at
// the timer scale; the clock jumps, so the decay between events is the documented approximation.
type AdmissionFairSharing struct {
	UsageHalfLifeTime     string             `yaml:"usageHalfLifeTime"`
	UsageSamplingInterval string             `yaml:"usageSamplingInterval,omitempty"`
	ResourceWeights       map[string]float64 `yaml:"resourceWeights,omitempty"`
}

// validStrategies are the strategy lists Kueue 0.15 accepts (pkg/config/validation.go).
var validStrategies = [][]string{
	{"LessThanOrEqualToFinalShare"},
	{"LessThanInitialShare"},
	{"LessThanOrEqualToFinalShare", "LessThanInitialShare"},
}

// Kueue's defaults for the requeuing backoff (pkg/controller/core: 60 s, 3600 s).
const (
	defaultBackoffBase = time.Minute
	defaultBackoffMax  = time.Hour
	// DefaultTimerScale is the timer scale at speedup max when the settings allow it.
	DefaultTimerScale = 1000
)

// timerField is one wall-time setting of the configuration.
type timerField struct {
	path  string        // its path in Kueue's Configuration
	trace time.Duration // its value in trace time
	whole bool          // Kueue takes whole seconds (an int32 *Seconds field)
	def   bool          // one of Kueue's defaults filled in by WithKueueDefaults
}

// defaultBackoffMaxScale bounds the scale of Kueue's default requeue backoff, which otherwise
// follows the run's timer scale (60 at speedup max: a 1 s backoff). Kueue counts the backoff from
// the eviction on wall time, to a requeueAt the API keeps to the second (so it may requeue up to a
// second early), while the trace clock stands at the eviction for its own steps and, a trace
// second later, for Kueue's inadmissible-requeue batch (a second of wall time,
// localcluster's kueueRequeueBatchPeriod): a 1 s backoff ran out there, and an evicted gang came
// back at 1,861 s instead of 1,920 s. At 12 the backoff is 5 to 300 s of wall time, which the
// runner holds the clock for only when a workload is evicted, while the timeout keeps the run's
// scale (30 s of wall time at 60).
const defaultBackoffMaxScale = 12

// backoffScale is the scale of the default requeue backoff at the run's scale: at most
// defaultBackoffMaxScale and exact for both backoff fields (0 when the backoff is the variant's own,
// which follows the run's scale).
func (k *KueueConfig) backoffScale(scale float64) float64 {
	if k == nil || !k.defaultWFPR {
		return 0
	}
	fields, _ := k.timerFields()
	s := math.Min(scale, defaultBackoffMaxScale)
	for changed := true; changed; {
		changed = false
		for _, f := range fields {
			if f.whole {
				if m := f.maxExact(s); m < s {
					s, changed = m, true
				}
			}
		}
	}
	return s
}

func parsePositive(field, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: want a positive trace-time duration such as 10m, got %q", field, v)
	}
	return d, nil
}

func (k *KueueConfig) check() error {
	if k == nil {
		return nil
	}
	var errs []error
	if fs := k.FairSharing; fs != nil && len(fs.PreemptionStrategies) > 0 {
		ok := slices.ContainsFunc(validStrategies, func(v []string) bool { return slices.Equal(v, fs.PreemptionStrategies) })
		if !ok {
			errs = append(errs, fmt.Errorf("fairSharing.preemptionStrategies: %v is not one of %v", fs.PreemptionStrategies, validStrategies))
		}
	}
	_, err := k.timerFields()
	return errors.Join(append(errs, err)...)
}

// timerFields lists the wall-time settings k sets, checked.
func (k *KueueConfig) timerFields() ([]timerField, error) {
	if k == nil {
		return nil, nil
	}
	var out []timerField
	var errs []error
	add := func(path, v string, def time.Duration, whole bool) time.Duration {
		d := def
		if v != "" {
			var err error
			if d, err = parsePositive(path, v); err != nil {
				errs = append(errs, err)
				return 0
			}
		}
		if d > 0 {
			out = append(out, timerField{path: path, trace: d, whole: whole})
		}
		return d
	}
	nField := len(out)
	if w := k.WaitForPodsReady; w != nil && w.Enable {
		if w.Timeout == "" {
			_, err := parsePositive("waitForPodsReady.timeout", w.Timeout)
			errs = append(errs, err)
		}
		add("waitForPodsReady.timeout", w.Timeout, 0, false)
		add("waitForPodsReady.recoveryTimeout", w.RecoveryTimeout, 0, false)
		// Kueue's default backoff is wall time too: it is always set, scaled.
		rs := w.RequeuingStrategy
		if rs == nil {
			rs = &RequeuingStrategy{}
		}
		{
			base := add("waitForPodsReady.requeuingStrategy.backoffBaseSeconds", rs.BackoffBase, defaultBackoffBase, true)
			maxB := add("waitForPodsReady.requeuingStrategy.backoffMaxSeconds", rs.BackoffMax, defaultBackoffMax, true)
			if base > 0 && maxB > 0 && maxB < base {
				errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingStrategy: backoffMax %s < backoffBase %s", maxB, base))
			}
			if rs.Timestamp != "" && rs.Timestamp != "Eviction" && rs.Timestamp != "Creation" {
				errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingStrategy.timestamp: want Eviction or Creation, got %q", rs.Timestamp))
			}
		}
		for i := nField; i < len(out); i++ {
			out[i].def = k.defaultWFPR
		}
	}
	if a := k.AdmissionFairSharing; a != nil {
		if a.UsageHalfLifeTime == "" {
			errs = append(errs, errors.New("admissionFairSharing.usageHalfLifeTime: required"))
		}
		add("admissionFairSharing.usageHalfLifeTime", a.UsageHalfLifeTime, 0, false)
		add("admissionFairSharing.usageSamplingInterval", a.UsageSamplingInterval, 5*time.Minute, false)
	}
	return out, errors.Join(errs...)
}

// Empty reports whether k changes nothing in Kueue's configuration. A waitForPodsReady with
// enable: false turns Kueue v0.19's default off (WithKueueDefaults): a change.
func (k *KueueConfig) Empty() bool {
	return k == nil || ((k.FairSharing == nil || !k.FairSharing.Enable) && k.WaitForPodsReady == nil &&
		k.AdmissionFairSharing == nil)
}

// maxExact is the largest scale at which a setting is exact: at least a whole second of wall time,
// and for a whole-seconds field, a whole number of them.
func (f timerField) maxExact(limit float64) float64 {
	sec := f.trace.Seconds()
	if !f.whole {
		return math.Min(limit, sec)
	}
	// Exact scales are sec/n for whole n ≥ 1; the largest not above limit:
	return sec / math.Max(1, math.Ceil(sec/limit-1e-9))
}

func isWhole(v float64) bool { return math.Abs(v-math.Round(v)) < 1e-9 }

// Scale is the factor by which the run divides the Kueue settings: the speedup when it is a number
// (refused when a setting the variant made cannot be exact at it), else the largest scale up to
// DefaultTimerScale at which every setting is exact. Kueue's own defaults (WithKueueDefaults) are
// never refused: a numeric speedup at which one of them cannot be exact runs the timers at the
// largest exact scale below it. A lower scale only makes Kueue act later in trace time than the
// runner's timer, which holds the trace clock at the timer's trace time until Kueue has acted.
func (k *KueueConfig) Scale(speedup results.Speedup) (float64, error) {
	fields, err := k.timerFields()
	if err != nil || len(fields) == 0 {
		return math.Max(1, float64(speedup)), err
	}
	largestExact := func(scale float64) float64 {
		for changed := true; changed; {
			changed = false
			for _, f := range fields {
				if m := f.maxExact(scale); m < scale {
					scale, changed = m, true
				}
			}
		}
		return scale
	}
	if speedup == 0 {
		return largestExact(float64(DefaultTimerScale)), nil
	}
	var errs []string
	lower := false
	for _, f := range fields {
		wall := f.trace.Seconds() / float64(speedup)
		if wall < 1 || (f.whole && !isWhole(wall)) {
			if f.def {
				lower = true
				continue
			}
			unit := "at least 1 s"
			if f.whole {
				unit = "a whole number of seconds"
			}
			errs = append(errs, fmt.Sprintf("%s %s at speedup %g is %.3g s of wall time; Kueue needs %s: the largest speedup that keeps it exact is %g",
				f.path, f.trace, float64(speedup), wall, unit, f.maxExact(float64(speedup))))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return 0, errors.New(strings.Join(errs, "; "))
	}
	if lower {
		return largestExact(float64(speedup)), nil
	}
	return float64(speedup), nil
}

// Fields returns the top-level fields of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)
// that k sets, with every duration divided by scale, for localcluster.Options.KueueConfig. In v1beta2
// a section's presence enables it.
func (k *KueueConfig) Fields(scale float64) map[string]any {
	out := map[string]any{}
	if k == nil {
		return out
	}
	wallOf := func(v string, def time.Duration) time.Duration {
		d := def
		if v != "" {
			d, _ = time.ParseDuration(v) // checked by check
		}
		return time.Duration(float64(d) / scale).Round(time.Millisecond)
	}
	if fs := k.FairSharing; fs != nil && fs.Enable {
		s := fs.PreemptionStrategies
		if len(s) == 0 {
			s = validStrategies[2]
		}
		out["fairSharing"] = map[string]any{"preemptionStrategies": slices.Clone(s)}
	}
	if w := k.WaitForPodsReady; w != nil && !w.Enable && k.kueueDefaults {
		out["featureGates"] = map[string]any{"DisableWaitForPodsReady": true}
	}
	if w := k.WaitForPodsReady; w != nil && w.Enable {
		m := map[string]any{"timeout": wallOf(w.Timeout, 0).String()}
		if w.BlockAdmission != nil {
			m["blockAdmission"] = *w.BlockAdmission
		}
		if w.RecoveryTimeout != "" {
			m["recoveryTimeout"] = wallOf(w.RecoveryTimeout, 0).String()
		}
		rs := w.RequeuingStrategy
		if rs == nil {
			rs = &RequeuingStrategy{}
		}
		{
			bscale := scale
			if s := k.backoffScale(scale); s > 0 {
				bscale = s
			}
			backoffWall := func(v string, def time.Duration) int32 {
				d := def
				if v != "" {
					d, _ = time.ParseDuration(v) // checked by check
				}
				return int32(math.Round(d.Seconds() / bscale))
			}
			r := map[string]any{
				"backoffBaseSeconds": backoffWall(rs.BackoffBase, defaultBackoffBase),
				"backoffMaxSeconds":  backoffWall(rs.BackoffMax, defaultBackoffMax),
			}
			if rs.Timestamp != "" {
				r["timestamp"] = rs.Timestamp
			}
			if rs.BackoffLimitCount != nil {
				r["backoffLimitCount"] = *rs.BackoffLimitCount
			}
			m["requeuingStrategy"] = r
		}
		out["waitForPodsReady"] = m
	}
	if a := k.AdmissionFairSharing; a != nil {
		m := map[string]any{"usageHalfLifeTime": wallOf(a.UsageHalfLifeTime, 0).String(),
			"usageSamplingInterval": wallOf(a.UsageSamplingInterval, 5*time.Minute).String()}
		if len(a.ResourceWeights) > 0 {
			m["resourceWeights"] = a.ResourceWeights
		}
		out["admissionFairSharing"] = m
	}
	return out
}

// Meta is the summary's account of the local cluster's Kueue running k at scale.
func (k *KueueConfig) Meta(scale float64) *results.KueueMeta {
	qps, burst := localcluster.KueueClientRate()
	m := &results.KueueMeta{Version: tools.KueueVersion, Source: "the local cluster's Kueue configuration",
		ClientQPS: float64(qps), ClientBurst: int(burst), TimerScale: scale, BackoffTimerScale: k.backoffScale(scale)}
	if t := k.Timers(scale); t.PodsReadyTimeout > 0 {
		m.WaitForPodsReady = &results.PodsReadyMeta{TimeoutSec: t.PodsReadyTimeout, RecoveryTimeoutSec: t.RecoveryTimeout,
			BackoffBaseSec: t.BackoffBase, BackoffMaxSec: t.BackoffMax, BlockAdmission: ptr.Deref(k.WaitForPodsReady.BlockAdmission, false)}
	}
	return m
}

// Timers are the settings the runner tracks on the trace clock, at scale.
func (k *KueueConfig) Timers(scale float64) runner.KueueTimers {
	t := runner.KueueTimers{Scale: scale}
	if k == nil || k.WaitForPodsReady == nil || !k.WaitForPodsReady.Enable {
		return t
	}
	w := k.WaitForPodsReady
	sec := func(v string, def time.Duration) float64 {
		d := def
		if v != "" {
			d, _ = time.ParseDuration(v)
		}
		return d.Seconds()
	}
	t.PodsReadyTimeout = sec(w.Timeout, 0)
	t.RecoveryTimeout = sec(w.RecoveryTimeout, 0)
	rs := w.RequeuingStrategy
	if rs == nil {
		rs = &RequeuingStrategy{}
	}
	t.BackoffBase, t.BackoffMax = sec(rs.BackoffBase, defaultBackoffBase), sec(rs.BackoffMax, defaultBackoffMax)
	t.BackoffScale = k.backoffScale(scale)
	return t
}
