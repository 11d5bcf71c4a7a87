package scenario

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/runtime/experiment"
)

// Check is one expected outcome: a metric of a variant's results compared with a value or with
// another measurement, or (YoungDaly) where a checkpoint-interval sweep's optimum lies.
type Check struct {
	Name    string `yaml:"name"`
	Variant string `yaml:"variant,omitempty"`
	// Metric is one of Metrics; Scope ("all", "queue <ClusterQueue>", "family <family>") picks the
	// workloads of a group metric, Workload the one workload of a workload metric.
	Metric   string `yaml:"metric,omitempty"`
	Scope    string `yaml:"scope,omitempty"`
	Workload string `yaml:"workload,omitempty"`
	// Op is <, <=, >, >=, == or !=.
	Op string `yaml:"op,omitempty"`
	// Value is a number, a duration ("1h", in seconds) or, for metric state, a state name.
	Value string `yaml:"value,omitempty"`
	// Than is another measurement to compare with; its fields default to this check's. Times
	// scales it (default 1): "op: <, than: {variant: b}, times: 0.5" is "less than half of b's".
	// Plus (a number or a duration) is added after Times: "op: <=, than: {variant: b}, plus: 1s"
	// allows a difference no larger than one second, e.g. one of Kueue's requeue batches.
	Than  *Operand `yaml:"than,omitempty"`
	Times float64  `yaml:"times,omitempty"`
	Plus  string   `yaml:"plus,omitempty"`
	// YoungDaly checks a sweep instead: see YoungDalyCheck.
	YoungDaly *YoungDalyCheck `yaml:"youngDaly,omitempty"`
}

// Operand is a measurement: a metric of a variant (of a scope or a workload).
type Operand struct {
	Variant  string `yaml:"variant,omitempty"`
	Metric   string `yaml:"metric,omitempty"`
	Scope    string `yaml:"scope,omitempty"`
	Workload string `yaml:"workload,omitempty"`
}

// YoungDalyCheck: among the variants that set workloads.checkpointInterval, the one with the
// lowest Metric (default faultOverheadGPUHours) must have an interval within a factor Within
// (default 2) of Young/Daly's √(2·C·M): C the variants' checkpoint cost, M the mean time between
// the faults that hit a job of GPUs GPUs on Nodes nodes at the experiment's random fault rates.
type YoungDalyCheck struct {
	Metric string  `yaml:"metric,omitempty"`
	GPUs   int     `yaml:"gpus"`
	Nodes  int     `yaml:"nodes"`
	Within float64 `yaml:"within,omitempty"`
}

// Result is a check's outcome.
type Result struct {
	Name     string `json:"name"`
	Pass     bool   `json:"pass"`
	Measured string `json:"measured"`
	Expected string `json:"expected"`
	Err      string `json:"error,omitempty"`
}

var ops = map[string]func(a, b float64) bool{
	"<": func(a, b float64) bool { return a < b }, "<=": func(a, b float64) bool { return a <= b },
	">": func(a, b float64) bool { return a > b }, ">=": func(a, b float64) bool { return a >= b },
	"==": func(a, b float64) bool { return a == b }, "!=": func(a, b float64) bool { return a != b },
}

func (c *Check) check(variants map[string]bool, e *experiment.Experiment) error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("name: required (what the check shows)"))
	}
	if c.YoungDaly != nil {
		y := c.YoungDaly
		if y.GPUs < 1 || y.Nodes < 1 {
			errs = append(errs, errors.New("youngDaly: gpus and nodes must be >= 1"))
		}
		if y.Metric != "" && metrics[y.Metric].group == nil {
			errs = append(errs, fmt.Errorf("youngDaly.metric: %q is not a group metric", y.Metric))
		}
		if e.Faults == nil || e.Faults.Random == nil {
			errs = append(errs, errors.New("youngDaly: the experiment needs random faults (faults.random) for the MTBF"))
		}
		n := 0
		for _, v := range e.Variants {
			if v.Workloads != nil && v.Workloads.CheckpointInterval != nil && *v.Workloads.CheckpointInterval > 0 {
				n++
			}
		}
		if n < 2 {
			errs = append(errs, errors.New("youngDaly: needs at least two variants setting workloads.checkpointInterval"))
		}
		return errors.Join(errs...)
	}
	op := Operand{Variant: c.Variant, Metric: c.Metric, Scope: c.Scope, Workload: c.Workload}
	errs = append(errs, op.check("", variants))
	if _, ok := ops[c.Op]; !ok {
		errs = append(errs, fmt.Errorf("op: %q is not one of <, <=, >, >=, ==, !=", c.Op))
	}
	switch {
	case (c.Value == "") == (c.Than == nil):
		errs = append(errs, errors.New("give value or than"))
	case c.Than != nil:
		errs = append(errs, c.other().check("than.", variants))
	case c.Metric == "state":
		if c.Op != "==" && c.Op != "!=" {
			errs = append(errs, errors.New("op: a state compares with == or !="))
		}
	default:
		if _, err := number(c.Value); err != nil {
			errs = append(errs, fmt.Errorf("value: %w", err))
		}
	}
	if c.Times < 0 {
		errs = append(errs, fmt.Errorf("times: must be > 0, got %g", c.Times))
	}
	if c.Plus != "" {
		if c.Than == nil {
			errs = append(errs, errors.New("plus: only with than"))
		} else if _, err := number(c.Plus); err != nil {
			errs = append(errs, fmt.Errorf("plus: %w", err))
		}
	}
	return errors.Join(errs...)
}

// other is the Than operand with this check's fields as defaults.
func (c *Check) other() Operand {
	o := *c.Than
	if o.Variant == "" {
		o.Variant = c.Variant
	}
	if o.Metric == "" {
		o.Metric = c.Metric
	}
	if o.Scope == "" && o.Workload == "" {
		o.Scope, o.Workload = c.Scope, c.Workload
	}
	return o
}

func (o Operand) check(prefix string, variants map[string]bool) error {
	var errs []error
	if !variants[o.Variant] {
		errs = append(errs, fmt.Errorf("%svariant: no variant %q", prefix, o.Variant))
	}
	m, ok := metrics[o.Metric]
	switch {
	case !ok:
		errs = append(errs, fmt.Errorf("%smetric: unknown metric %q (metrics: %s)", prefix, o.Metric, strings.Join(MetricNames(), ", ")))
	case m.workload != nil && o.Workload == "":
		errs = append(errs, fmt.Errorf("%sworkload: metric %s is about one workload: name it", prefix, o.Metric))
	case m.workload == nil && o.Workload != "":
		errs = append(errs, fmt.Errorf("%sworkload: metric %s is about a group (scope), not a workload", prefix, o.Metric))
	}
	if o.Scope != "" {
		if s, _, _ := strings.Cut(o.Scope, " "); s != "all" && s != "queue" && s != "family" {
			errs = append(errs, fmt.Errorf("%sscope: %q: want all, \"queue <ClusterQueue>\" or \"family <family>\"", prefix, o.Scope))
		}
	}
	return errors.Join(errs...)
}

// number reads a number or a duration (seconds).
func number(s string) (float64, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v, nil
	}
	v, err := fault.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a number nor a duration", s)
	}
	return v, nil
}

// evaluate runs the check on the variants' results.
func (c *Check) evaluate(s *Scenario, data map[string]*variantData) Result {
	r := Result{Name: c.Name}
	fail := func(err error) Result { r.Err = err.Error(); return r }
	if c.YoungDaly != nil {
		return c.evaluateYoungDaly(s, data)
	}
	left := Operand{Variant: c.Variant, Metric: c.Metric, Scope: c.Scope, Workload: c.Workload}
	if c.Metric == "state" {
		st, err := data[c.Variant].state(c.Workload)
		if err != nil {
			return fail(err)
		}
		r.Measured, r.Expected = fmt.Sprintf("%s %s", left, st), fmt.Sprintf("%s %s", c.Op, c.Value)
		r.Pass = (st == c.Value) == (c.Op == "==")
		return r
	}
	a, err := data[c.Variant].measure(left)
	if err != nil {
		return fail(err)
	}
	r.Measured = fmt.Sprintf("%s = %s", left, show(a))
	var b float64
	if c.Than != nil {
		o := c.other()
		if b, err = data[o.Variant].measure(o); err != nil {
			return fail(err)
		}
		times := c.Times
		if times == 0 {
			times = 1
		}
		r.Expected = fmt.Sprintf("%s %s (%s = %s)", c.Op, times2(times, o.String()), o, show(b))
		b *= times
		if c.Plus != "" {
			plus, _ := number(c.Plus)
			r.Expected = fmt.Sprintf("%s %s + %s (%s = %s)", c.Op, times2(times, o.String()), c.Plus, o, show(b/times))
			b += plus
		}
	} else {
		b, _ = number(c.Value)
		r.Expected = fmt.Sprintf("%s %s", c.Op, c.Value)
	}
	r.Pass = ops[c.Op](a, b)
	return r
}

func times2(t float64, s string) string {
	if t == 1 {
		return s
	}
	return fmt.Sprintf("%g × %s", t, s)
}

func show(v float64) string {
	if math.Abs(v) >= 1e5 || (v != 0 && math.Abs(v) < 1e-3) {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (o Operand) String() string {
	s := o.Variant + ": " + o.Metric
	switch {
	case o.Workload != "":
		s += " of " + o.Workload
	case o.Scope != "" && o.Scope != "all":
		s += " (" + o.Scope + ")"
	}
	return s
}

func (c *Check) evaluateYoungDaly(s *Scenario, data map[string]*variantData) Result {
	y := c.YoungDaly
	r := Result{Name: c.Name}
	metric := y.Metric
	if metric == "" {
		metric = "faultOverheadGPUHours"
	}
	within := y.Within
	if within == 0 {
		within = 2
	}
	cat, err := hw.DefaultCatalog()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	rates, err := s.Experiment.Faults.Rates(cat.Faults)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	mtbf := rates.JobMTBFSec(y.GPUs, y.Nodes)
	type point struct {
		variant        string
		interval, cost float64
		value          float64
	}
	var pts []point
	for i := range s.Experiment.Variants {
		v := &s.Experiment.Variants[i]
		w := v.Workloads
		if w == nil || w.CheckpointInterval == nil || *w.CheckpointInterval <= 0 {
			continue
		}
		val, err := data[v.Name].measure(Operand{Variant: v.Name, Metric: metric, Scope: "all"})
		if err != nil {
			r.Err = err.Error()
			return r
		}
		cost := 0.0
		if w.CheckpointCost != nil {
			cost = float64(*w.CheckpointCost)
		}
		pts = append(pts, point{v.Name, float64(*w.CheckpointInterval), cost, val})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].interval < pts[j].interval })
	best := pts[0]
	var parts []string
	for _, p := range pts {
		if p.value < best.value {
			best = p
		}
		parts = append(parts, fmt.Sprintf("%s %s", fault.Duration(p.interval), show(p.value)))
	}
	tau := fault.YoungDaly(best.cost, mtbf)
	r.Measured = fmt.Sprintf("%s by interval: %s; lowest at %s (%s)", metric, strings.Join(parts, ", "), fault.Duration(best.interval), best.variant)
	r.Expected = fmt.Sprintf("within %g× of Young/Daly √(2·%s·%s) = %s", within, fault.Duration(best.cost), fault.Duration(math.Round(mtbf)), fault.Duration(math.Round(tau)))
	r.Pass = best.interval >= tau/within && best.interval <= tau*within
	return r
}
