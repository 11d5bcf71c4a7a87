package trace

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
)

// Validate checks the values of a workload record: known schema version and family, finite
// non-negative numbers, intensities in [0, 1], pods with unique roles, replicas >= 1 and valid
// quantities. The error names the JSON path of the first bad field.
func (w *Workload) Validate() error {
	if err := validSchema(w.SchemaVersion); err != nil {
		return err
	}
	if w.WorkloadID == "" {
		return fieldErrf("workloadId", "must not be empty")
	}
	if err := nonNegative("submitTimeOffsetSec", w.SubmitTimeOffsetSec); err != nil {
		return err
	}
	if err := validNamespace(w.Namespace); err != nil {
		return err
	}
	if !w.WorkloadType.Known() {
		return fieldErrf("workloadType", "unknown workload type %s (want one of %v)", quoteShort(string(w.WorkloadType)), Families)
	}
	if err := nonNegative("durationSec", w.DurationSec); err != nil {
		return err
	}
	if w.DurationSec == 0 {
		return fieldErrf("durationSec", "must be > 0")
	}
	if err := validProfile(&w.SharedIntensityProfile); err != nil {
		return under("sharedIntensityProfile", err)
	}
	if len(w.Pods) == 0 {
		return fieldErrf("pods", "must list at least one pod group")
	}
	for i, p := range w.Pods {
		if err := validPod(p, w.Pods[:i]); err != nil {
			return under("pods", index(i, err))
		}
	}
	if err := validIntent(w.IntentClass); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"checkpointIntervalSec", w.CheckpointIntervalSec}, {"checkpointCostSec", w.CheckpointCostSec}, {"restartOverheadSec", w.RestartOverheadSec}} {
		if err := nonNegative(f.name, f.v); err != nil {
			return err
		}
	}
	if w.CheckpointCostSec > 0 && w.CheckpointIntervalSec > 0 && w.CheckpointIntervalSec < 1 {
		return fieldErrf("checkpointIntervalSec", "must be >= 1 when checkpoints cost a pause, got %v", w.CheckpointIntervalSec)
	}
	if w.MaxRestarts < 0 {
		return fieldErrf("maxRestarts", "must be >= 0, got %d", w.MaxRestarts)
	}
	return nil
}

// Validate checks the values of a job record, like Workload.Validate.
func (j *Job) Validate() error {
	if err := validSchema(j.SchemaVersion); err != nil {
		return err
	}
	if j.JobID == "" {
		return fieldErrf("jobId", "must not be empty")
	}
	if j.WorkloadID == "" {
		return fieldErrf("workloadId", "must not be empty")
	}
	if !j.WorkloadType.Known() {
		return fieldErrf("workloadType", "unknown workload type %s (want one of %v)", quoteShort(string(j.WorkloadType)), Families)
	}
	if j.PodRole == "" {
		return fieldErrf("podRole", "must not be empty")
	}
	if err := nonNegative("submitTimeOffsetSec", j.SubmitTimeOffsetSec); err != nil {
		return err
	}
	if err := validNamespace(j.Namespace); err != nil {
		return err
	}
	if err := validRequests(j.PodTemplate.Requests); err != nil {
		return under("podTemplate.requests", err)
	}
	if err := nonNegative("work.cpuUnits", j.Work.CPUUnits); err != nil {
		return err
	}
	if err := nonNegative("work.gpuUnits", j.Work.GPUUnits); err != nil {
		return err
	}
	if err := unitInterval("sensitivity.cpu", j.Sensitivity.CPU); err != nil {
		return err
	}
	if err := unitInterval("sensitivity.gpu", j.Sensitivity.GPU); err != nil {
		return err
	}
	if err := validProfile(&j.WorkloadProfile); err != nil {
		return under("workloadProfile", err)
	}
	return validIntent(j.IntentClass)
}

func validSchema(v string) error {
	if v != SchemaVersion {
		return fieldErrf("schemaVersion", "unknown schema version %s (this reader reads %q)", quoteShort(v), SchemaVersion)
	}
	return nil
}

// validNamespace requires a DNS-1123 label, as Kubernetes does for namespace names.
func validNamespace(ns string) error {
	ok := ns != "" && len(ns) <= 63 && ns[0] != '-' && ns[len(ns)-1] != '-'
	for i := 0; ok && i < len(ns); i++ {
		c := ns[i]
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
	}
	if !ok {
		return fieldErrf("namespace", "%s is not a valid namespace name (lower-case letters, digits and '-', at most 63)", quoteShort(ns))
	}
	return nil
}

func validIntent(c string) error {
	switch c {
	case "", IntentPerformance, IntentStandard, IntentEco:
		return nil
	}
	return fieldErrf("intentClass", "unknown intent class %s (want %q, %q or %q)", quoteShort(c), IntentPerformance, IntentStandard, IntentEco)
}

func nonNegative(field string, v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fieldErrf(field, "must be finite, got %v", v)
	case v < 0:
		return fieldErrf(field, "must be >= 0, got %v", v)
	}
	return nil
}

func unitInterval(field string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return fieldErrf(field, "must be in [0, 1], got %v", v)
	}
	return nil
}

func validProfile(p *Profile) error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"cpuUtilization", p.CPUUtilization}, {"gpuUtilization", p.GPUUtilization}, {"memoryIntensity", p.MemoryIntensity},
		{"ioIntensity", p.IOIntensity}, {"cpuFeedIntensityGpu", p.CPUFeedIntensityGPU},
	} {
		if err := unitInterval(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func validPod(p PodGroup, before []PodGroup) error {
	if p.Role == "" {
		return fieldErrf("role", "must not be empty")
	}
	for _, q := range before {
		if q.Role == p.Role {
			return fieldErrf("role", "%s appears in two pod groups", quoteShort(p.Role))
		}
	}
	if p.Replicas < 1 {
		return fieldErrf("replicas", "must be >= 1, got %d", p.Replicas)
	}
	if err := validRequests(p.Requests); err != nil {
		return under("requests", err)
	}
	return nil
}

// validRequests checks resource names (Kubernetes qualified-name characters, which also keeps the
// canonical "name=value,..." form unambiguous) and quantities: parseable, >= 0, whole GPUs.
func validRequests(r Requests) error {
	for name := range r {
		if validRequest(r, name) != nil {
			// Report the first bad name in sorted order, so the message does not depend on map order.
			for _, n := range r.Names() {
				if err := validRequest(r, n); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func validRequest(r Requests, name string) error {
	{
		ok := name != ""
		for i := 0; ok && i < len(name); i++ {
			c := name[i]
			ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' || c == '/'
		}
		if !ok {
			return fieldErrf(name, "bad resource name %s", quoteShort(name))
		}
		v, err := ParseQuantity(r[name])
		switch {
		case err != nil:
			return &fieldError{field: name, err: err}
		case v < 0:
			return fieldErrf(name, "must be >= 0, got %q", r[name])
		case name == ResourceGPU && v != math.Trunc(v):
			return fieldErrf(name, "must be a whole number of GPUs, got %q", r[name])
		}
	}
	return nil
}

// ledger keeps what the cross-record checks need: per logical workload its identity, a canonical
// form of each role's requests and the count of job records per role; per job id 16 bytes.
type ledger struct {
	hasher     idHasher
	wl         map[string]*wlEntry
	jobs       map[idHash]int32
	reqs       map[string]string // interned canonical requests
	scratch    []byte
	dropped    map[string]bool
	nWorkloads int
	nJobs      int
}

type wlEntry struct {
	line   int32 // first record of this workload
	wlLine int32 // its workload record, 0 while none
	family Family
	ns     string
	intent string
	gang   bool // the workload record's
	// gangYes and gangNo say whether job records with gang true and false were seen.
	gangYes, gangNo bool
	// complete: the workload record and all its job records are in; roles is then released.
	complete bool
	roles    []roleEntry
}

type roleEntry struct {
	role   string
	req    string // canonical requests
	want   int32  // pods[].replicas, -1 until the workload record is seen
	got    int32  // job records
	line   int32  // first record that named the role
	podIdx int32
}

func newLedger() ledger {
	return ledger{
		hasher:  idHasher{a: maphash.MakeSeed(), b: maphash.MakeSeed()},
		wl:      map[string]*wlEntry{},
		jobs:    map[idHash]int32{},
		reqs:    map[string]string{},
		dropped: map[string]bool{},
	}
}

func (l *ledger) taint(id string)         { l.dropped[id] = true }
func (l *ledger) tainted(id string) bool  { return l.dropped[id] }
func (l *ledger) droppedCount() int       { return len(l.dropped) }
func (l *ledger) canon(r Requests) string { return l.intern(canonicalRequests(r, l.scratch)) }

func (l *ledger) intern(b []byte) string {
	l.scratch = b
	if s, ok := l.reqs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(l.reqs) < maxInterned {
		l.reqs[s] = s
	}
	return s
}

func (e *wlEntry) role(name string) *roleEntry {
	for i := range e.roles {
		if e.roles[i].role == name {
			return &e.roles[i]
		}
	}
	return nil
}

// source names the record that established e's identity, for contradiction messages.
func (e *wlEntry) source() string {
	if e.wlLine > 0 {
		return fmt.Sprintf("workload record at line %d", e.wlLine)
	}
	return fmt.Sprintf("job records of this workload (first at line %d)", e.line)
}

func (e *wlEntry) checkComplete() {
	if e.wlLine == 0 {
		return
	}
	for _, r := range e.roles {
		if r.got != r.want {
			return
		}
	}
	e.complete, e.roles = true, nil
}

func sameIdentity(e *wlEntry, family Family, ns, intent string) error {
	switch {
	case family != e.family:
		return fieldErrf("workloadType", "%q contradicts the %s (%q)", family, e.source(), e.family)
	case ns != e.ns:
		return fieldErrf("namespace", "%q contradicts the %s (%q)", ns, e.source(), e.ns)
	case intentOf(intent) != intentOf(e.intent):
		return fieldErrf("intentClass", "%q contradicts the %s (%q)", intentOf(intent), e.source(), intentOf(e.intent))
	}
	return nil
}

func intentOf(c string) string {
	if c == "" {
		return IntentStandard
	}
	return c
}

// addWorkload checks a workload record against what was seen of its workload, then records it.
// Nothing is recorded when it returns an error, so a line skipped in lenient mode leaves no trace.
func (l *ledger) addWorkload(line int, w *Workload) error {
	e := l.wl[w.WorkloadID]
	reqs := make([]string, len(w.Pods))
	for i, p := range w.Pods {
		reqs[i] = l.canon(p.Requests)
	}
	if e != nil {
		if e.wlLine > 0 {
			return fieldErrf("workloadId", "duplicate workloadId %s (first workload record at line %d)", quoteShort(w.WorkloadID), e.wlLine)
		}
		if err := sameIdentity(e, w.WorkloadType, w.Namespace, w.IntentClass); err != nil {
			return err
		}
		if (w.Gang && e.gangNo) || (!w.Gang && e.gangYes) {
			return fieldErrf("gang", "%v contradicts the %s", w.Gang, e.source())
		}
		for _, r := range e.roles {
			i := slices.IndexFunc(w.Pods, func(p PodGroup) bool { return p.Role == r.role })
			switch {
			case i < 0:
				return fieldErrf("pods", "no %q pod group, but the job record at line %d has podRole %q", r.role, r.line, r.role)
			case !sameRequests(reqs[i], r.req):
				return fieldErrf("pods["+strconv.Itoa(i)+"].requests", "{%s} differs from the job record at line %d ({%s})", reqs[i], r.line, r.req)
			case int(r.got) > w.Pods[i].Replicas:
				return fieldErrf("pods["+strconv.Itoa(i)+"].replicas", "%d, but there are already %d %q job records (first at line %d)", w.Pods[i].Replicas, r.got, r.role, r.line)
			}
		}
	} else {
		e = &wlEntry{line: int32(line), family: w.WorkloadType, ns: w.Namespace, intent: w.IntentClass}
		l.wl[w.WorkloadID] = e
	}
	e.wlLine, e.gang = int32(line), w.Gang
	for i, p := range w.Pods {
		if r := e.role(p.Role); r != nil {
			r.want, r.podIdx = int32(p.Replicas), int32(i)
			continue
		}
		e.roles = append(e.roles, roleEntry{role: p.Role, req: reqs[i], want: int32(p.Replicas), line: int32(line), podIdx: int32(i)})
	}
	e.checkComplete()
	l.nWorkloads++
	return nil
}

// addJob checks a job record against what was seen of its workload, then records it; like
// addWorkload it records nothing when it fails.
func (l *ledger) addJob(line int, j *Job) error {
	h := l.hasher.sum(j.JobID)
	if first, dup := l.jobs[h]; dup {
		return fieldErrf("jobId", "duplicate jobId %s (first at line %d)", quoteShort(j.JobID), first)
	}
	req := l.canon(j.PodTemplate.Requests)
	e := l.wl[j.WorkloadID]
	if e == nil {
		e = &wlEntry{line: int32(line), family: j.WorkloadType, ns: j.Namespace, intent: j.IntentClass}
		e.roles = []roleEntry{{role: j.PodRole, req: req, want: -1, line: int32(line)}}
		l.wl[j.WorkloadID] = e
	}
	if e.complete {
		return fieldErrf("workloadId", "workload %s already has the job records its pods ask for (workload record at line %d)", quoteShort(j.WorkloadID), e.wlLine)
	}
	if err := sameIdentity(e, j.WorkloadType, j.Namespace, j.IntentClass); err != nil {
		return err
	}
	if e.wlLine > 0 && j.Gang != e.gang {
		return fieldErrf("gang", "%v contradicts the workload record at line %d (%v)", j.Gang, e.wlLine, e.gang)
	}
	r := e.role(j.PodRole)
	switch {
	case r == nil && e.wlLine > 0:
		return fieldErrf("podRole", "%q is not a role of workload %s (pods at line %d)", j.PodRole, quoteShort(j.WorkloadID), e.wlLine)
	case r == nil:
		e.roles = append(e.roles, roleEntry{role: j.PodRole, req: req, want: -1, line: int32(line)})
		r = &e.roles[len(e.roles)-1]
	case !sameRequests(req, r.req):
		return fieldErrf("podTemplate.requests", "{%s} differs from the %q requests at line %d ({%s})", req, j.PodRole, r.line, r.req)
	case r.want >= 0 && r.got >= r.want:
		return fieldErrf("podRole", "more %q job records than the %d of pods[%d].replicas (workload record at line %d)", j.PodRole, r.want, r.podIdx, e.wlLine)
	}
	r.got++
	if j.Gang {
		e.gangYes = true
	} else {
		e.gangNo = true
	}
	e.checkComplete()
	l.jobs[h] = int32(line)
	l.nJobs++
	return nil
}

type endProblem struct {
	line  int
	field string
	id    string
	err   error
}

// endProblems runs the checks that need the whole trace. They apply only when it has both workload
// and job records: a trace of job records only is rebuilt, one of workload records only is taken as is.
func (l *ledger) endProblems() []endProblem {
	if l.nWorkloads == 0 || l.nJobs == 0 {
		return nil
	}
	var out []endProblem
	for id, e := range l.wl {
		if e.complete || l.dropped[id] {
			continue
		}
		if e.wlLine == 0 {
			out = append(out, endProblem{line: int(e.line), field: "workloadId", id: id,
				err: fmt.Errorf("no workload record for workload %s, and the trace has workload records", quoteShort(id))})
			continue
		}
		for _, r := range e.roles {
			if r.got != r.want {
				out = append(out, endProblem{line: int(e.wlLine), field: "pods[" + strconv.Itoa(int(r.podIdx)) + "].replicas", id: id,
					err: fmt.Errorf("%d %q pods, but %d job records", r.want, r.role, r.got)})
			}
		}
	}
	slices.SortFunc(out, func(a, b endProblem) int {
		return cmp.Or(cmp.Compare(a.line, b.line), cmp.Compare(a.field, b.field))
	})
	return out
}
