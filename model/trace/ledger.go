package trace

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
)

// ledger keeps what the cross-record checks need: per logical workload its identity and, per pod
// shape (a role with one set of requests), how many pods the workload record asks for and how many
// job records came; per job id 16 bytes.
//
// A workload may have several pod groups of one role that differ in their requests (one per HPO
// trial). Job records are matched to groups by role and requests (equal quantities, "1" = "1000m"),
// and counted per shape: the groups of one shape share its job records.
type ledger struct {
	hasher     idHasher
	wl         map[string]*wlEntry
	jobs       map[idHash]int32
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
	// complete: the workload record and all its job records are in; shapes is then released.
	complete bool
	shapes   []shape
}

// shape is one role with one set of requests.
type shape struct {
	role   string
	req    string // canonical requests
	want   int32  // pods the workload record's groups of this shape ask for; -1 until it is seen
	got    int32  // job records
	line   int32  // first record that named the shape
	podIdx int32  // the first pod group of this shape
	groups int32  // pod groups of this shape
}

// maxInterned bounds the table of interned canonical requests.
const maxInterned = 4096

func newLedger() ledger {
	return ledger{
		hasher:  idHasher{a: maphash.MakeSeed(), b: maphash.MakeSeed()},
		wl:      map[string]*wlEntry{},
		jobs:    map[idHash]int32{},
		dropped: map[string]bool{},
	}
}

func (l *ledger) taint(id string)        { l.dropped[id] = true }
func (l *ledger) tainted(id string) bool { return l.dropped[id] }
func (l *ledger) droppedCount() int      { return len(l.dropped) }

// shape returns the shape of role with requests req, nil when none.
func (e *wlEntry) shape(role, req string) *shape {
	for i := range e.shapes {
		if s := &e.shapes[i]; s.role == role && sameRequests(s.req, req) {
			return s
		}
	}
	return nil
}

// roleShapes lists the shapes of one role.
func (e *wlEntry) roleShapes(role string) []*shape {
	var out []*shape
	for i := range e.shapes {
		if e.shapes[i].role == role {
			out = append(out, &e.shapes[i])
		}
	}
	return out
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
	for _, s := range e.shapes {
		if s.got != s.want {
			return
		}
	}
	e.complete, e.shapes = true, nil
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
// reqs are the canonical requests of w's pod groups (canonicalRequests' form, from the decoder).
func (l *ledger) addWorkload(line int, w *Workload, reqs []string) error {
	e := l.wl[w.WorkloadID]
	// wants[k] is what the record asks of shape k seen in job records before it.
	var wants []int32
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
		wants = make([]int32, len(e.shapes))
		for k, s := range e.shapes {
			first := -1
			for i, p := range w.Pods {
				if p.Role != s.role {
					continue
				}
				if first < 0 {
					first = i
				}
				if sameRequests(reqs[i], s.req) {
					wants[k] += int32(p.Replicas)
				}
			}
			switch {
			case first < 0:
				return fieldErrf("pods", "no %q pod group, but the job record at line %d has podRole %q", s.role, s.line, s.role)
			case wants[k] == 0:
				return fieldErrf("pods["+strconv.Itoa(first)+"].requests", "{%s} differs from the job record at line %d ({%s})", reqs[first], s.line, s.req)
			case s.got > wants[k]:
				return fieldErrf("pods["+strconv.Itoa(first)+"].replicas", "%d, but there are already %d %q job records (first at line %d)", wants[k], s.got, s.role, s.line)
			}
		}
	} else {
		e = &wlEntry{line: int32(line), family: w.WorkloadType, ns: w.Namespace, intent: w.IntentClass}
		l.wl[w.WorkloadID] = e
	}
	e.wlLine, e.gang = int32(line), w.Gang
	for k := range wants {
		e.shapes[k].want = 0 // set again below from the groups, with podIdx and groups
	}
	for i, p := range w.Pods {
		if s := e.shape(p.Role, reqs[i]); s != nil {
			if s.groups == 0 {
				s.podIdx = int32(i)
			}
			s.want += int32(p.Replicas)
			s.groups++
			continue
		}
		e.shapes = append(e.shapes, shape{role: p.Role, req: reqs[i], want: int32(p.Replicas), line: int32(line), podIdx: int32(i), groups: 1})
	}
	e.checkComplete()
	l.nWorkloads++
	return nil
}

// addJob checks a job record against what was seen of its workload, then records it; like
// addWorkload it records nothing when it fails. req is the canonical form of its requests.
func (l *ledger) addJob(line int, j *Job, req string) error {
	h := l.hasher.sum(j.JobID)
	if first, dup := l.jobs[h]; dup {
		return fieldErrf("jobId", "duplicate jobId %s (first at line %d)", quoteShort(j.JobID), first)
	}
	e := l.wl[j.WorkloadID]
	fresh := e == nil
	if fresh {
		e = &wlEntry{line: int32(line), family: j.WorkloadType, ns: j.Namespace, intent: j.IntentClass}
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
	s := e.shape(j.PodRole, req)
	switch {
	case s == nil && e.wlLine > 0:
		return noShape(e, j, req)
	case s == nil:
		// Before (or without) its workload record a new shape is a new pod group.
	case s.want >= 0 && s.got >= s.want:
		if s.groups == 1 {
			return fieldErrf("podRole", "more %q job records than the %d of pods[%d].replicas (workload record at line %d)", j.PodRole, s.want, s.podIdx, e.wlLine)
		}
		return fieldErrf("podRole", "more %q job records with requests {%s} than the %d pods of its %d pod groups (first pods[%d], workload record at line %d)", j.PodRole, req, s.want, s.groups, s.podIdx, e.wlLine)
	}
	if fresh {
		l.wl[j.WorkloadID] = e
	}
	if s == nil {
		e.shapes = append(e.shapes, shape{role: j.PodRole, req: req, want: -1, line: int32(line)})
		s = &e.shapes[len(e.shapes)-1]
	}
	s.got++
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

// noShape explains why a job record matches no pod group of its workload record.
func noShape(e *wlEntry, j *Job, req string) error {
	same := e.roleShapes(j.PodRole)
	switch len(same) {
	case 0:
		return fieldErrf("podRole", "%q is not a role of workload %s (pods at line %d)", j.PodRole, quoteShort(j.WorkloadID), e.wlLine)
	case 1:
		return fieldErrf("podTemplate.requests", "{%s} differs from the %q requests at line %d ({%s})", req, j.PodRole, same[0].line, same[0].req)
	}
	have := make([]string, len(same))
	for i, s := range same {
		have[i] = "{" + s.req + "}"
	}
	return fieldErrf("podTemplate.requests", "{%s} matches none of the %d %q pod groups of the workload record at line %d (%s)", req, len(same), j.PodRole, e.wlLine, strings.Join(have, ", "))
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
		for _, s := range e.shapes {
			if s.got == s.want {
				continue
			}
			p := endProblem{line: int(e.wlLine), field: "pods[" + strconv.Itoa(int(s.podIdx)) + "].replicas", id: id,
				err: fmt.Errorf("%d %q pods, but %d job records", s.want, s.role, s.got)}
			if s.groups > 1 {
				p.err = fmt.Errorf("%d %q pods with requests {%s} in %d pod groups, but %d job records", s.want, s.role, s.req, s.groups, s.got)
			}
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b endProblem) int {
		return cmp.Or(cmp.Compare(a.line, b.line), cmp.Compare(a.field, b.field))
	})
	return out
}

// idHash identifies a job id by two independent 64-bit hashes, so that the duplicate check keeps
// 16 bytes per job instead of the id (a false duplicate needs a 128-bit collision).
type idHash [2]uint64

type idHasher struct{ a, b maphash.Seed }

func (h idHasher) sum(s string) idHash {
	return idHash{maphash.String(h.a, s), maphash.String(h.b, s)}
}

// canonicalRequests renders requests with sorted names ("cpu=4,memory=12Gi") for comparisons and
// messages; two canonical forms that differ as strings may still be equal quantities (see sameRequests).
func canonicalRequests(r Requests, scratch []byte) []byte {
	var room [8]string
	names := room[:0]
	for k := range r {
		names = append(names, k)
	}
	slices.Sort(names)
	b := scratch[:0]
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = append(b, r[k]...)
	}
	return b
}

// sameRequests compares two canonical request strings by value, so "1" equals "1000m".
func sameRequests(a, b string) bool {
	if a == b {
		return true
	}
	pa, pb := strings.Split(a, ","), strings.Split(b, ",")
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		ka, qa, _ := strings.Cut(pa[i], "=")
		kb, qb, _ := strings.Cut(pb[i], "=")
		if ka != kb {
			return false
		}
		va, erra := ParseQuantity(qa)
		vb, errb := ParseQuantity(qb)
		if erra != nil || errb != nil || va != vb {
			return false
		}
	}
	return true
}

// SameRequests reports whether two sets of requests ask for the same quantities ("1" = "1000m").
func SameRequests(a, b Requests) bool {
	return sameRequests(string(canonicalRequests(a, nil)), string(canonicalRequests(b, nil)))
}
