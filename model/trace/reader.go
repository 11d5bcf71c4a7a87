package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kueuelab/kueuelab/model/work"
)

// Options tune how a trace is read.
type Options struct {
	// Lenient skips bad lines instead of failing; they are counted and listed (Reader.Skipped), and
	// every logical workload a bad line belongs to is dropped whole (Reader.Dropped).
	Lenient bool
	// Warn receives warnings that do not make a line bad (a field this reader does not know, said
	// once per distinct field). Nil discards them.
	Warn func(msg string)
	// Rates convert job work units back into a duration when workloads are rebuilt from job
	// records; the zero value means work.DefaultRates().
	Rates work.Rates
	// MaxLineBytes bounds the memory one line may take; 0 means 64 MiB.
	MaxLineBytes int
}

// maxListed bounds how many skipped lines a Reader remembers; beyond it they are only counted.
const maxListed = 1000

// maxWarnedFields bounds the set of unknown fields already warned about.
const maxWarnedFields = 1000

// Record is one line of a trace: exactly one of Workload and Job is set.
type Record struct {
	Line     int
	Workload *Workload
	Job      *Job
}

// Error is a problem with one line of a trace: "file:line: field path: what is wrong".
type Error struct {
	File string
	Line int
	// Field is the JSON path of the bad field ("pods[1].replicas"); empty when the line is not
	// valid JSON or the problem is not tied to one field.
	Field string
	// WorkloadID is the logical workload the line belongs to, when it could be read.
	WorkloadID string
	Err        error
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: field %s: %v", e.File, e.Line, e.Field, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Reader reads a trace record by record in constant memory per record. Besides the records it keeps
// a few bytes of bookkeeping per logical workload and job id, so that duplicate ids and records
// that contradict each other are found whatever the order of the lines.
//
// Cross-record checks run when a record arrives for everything already seen (duplicate ids, a job
// whose namespace, type, gang, intent class, role or requests disagree with its workload) and at
// the end of the input for what only the whole trace tells: a job whose workloadId has no workload
// record, and a role whose job records do not number the workload's pods[].replicas. Those
// end-of-input checks apply only when the trace has both workload and job records.
type Reader struct {
	name    string
	opts    Options
	src     *bufio.Reader
	closers []io.Closer
	line    int
	buf     []byte
	dec     lineDecoder
	led     ledger
	warned  map[string]bool

	skipped  []*Error
	nSkipped int
	err      error // sticky: the error Next returned last, io.EOF at the end
}

// Open opens a trace file for reading; "-" reads standard input. Gzip-compressed input is detected
// by its magic bytes, whatever the file name.
func Open(path string, opts Options) (*Reader, error) {
	if path == "-" {
		return newReader(os.Stdin, "stdin", opts, nil)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	r, err := newReader(f, path, opts, f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return r, nil
}

// NewReader reads a trace from src; name is used in error messages. Gzip input is detected by its
// magic bytes.
func NewReader(src io.Reader, name string, opts Options) (*Reader, error) {
	return newReader(src, name, opts, nil)
}

func newReader(src io.Reader, name string, opts Options, closer io.Closer) (*Reader, error) {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = 64 << 20
	}
	r := &Reader{name: name, opts: opts, warned: map[string]bool{}}
	if closer != nil {
		r.closers = append(r.closers, closer)
	}
	br := bufio.NewReaderSize(src, 256<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("read trace %s: %w", name, err)
		}
		r.closers = append(r.closers, gz)
		br = bufio.NewReaderSize(gz, 256<<10)
	}
	r.src = br
	r.dec = lineDecoder{intern: map[string]string{}, unknown: r.unknownField}
	r.led = newLedger()
	return r, nil
}

// Close releases the input (standard input stays open).
func (r *Reader) Close() error {
	var errs []error
	for i := len(r.closers) - 1; i >= 0; i-- {
		errs = append(errs, r.closers[i].Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close trace %s: %w", r.name, err)
	}
	return nil
}

// Name is the name the reader uses for its input in messages.
func (r *Reader) Name() string { return r.name }

// Next returns the next record, or io.EOF after the last one. In strict mode the first bad line, or
// the first problem found by the end-of-input checks, is returned as an *Error.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	for {
		line, err := r.readLine()
		if err == io.EOF {
			r.err = r.finish()
			return Record{}, r.err
		}
		if err != nil {
			r.err = &Error{File: r.name, Line: r.line, Err: err}
			return Record{}, r.err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec, lerr := r.decodeLine(line)
		if lerr == nil {
			return rec, nil
		}
		if !r.opts.Lenient {
			r.err = lerr
			return Record{}, r.err
		}
		r.skip(lerr)
	}
}

// Skipped lists the lines skipped in lenient mode (at most the first 1000; SkippedCount counts all),
// including the end-of-input problems that made a workload be dropped.
func (r *Reader) Skipped() []*Error { return r.skipped }

// SkippedCount is the number of problems found in lenient mode.
func (r *Reader) SkippedCount() int { return r.nSkipped }

// Dropped reports whether lenient mode dropped logical workload id: one of its lines was bad, or
// its records contradict each other. Records of a dropped workload may have been returned by Next
// before the problem was known, so a caller that keeps records filters them with Dropped after
// io.EOF.
func (r *Reader) Dropped(id string) bool { return r.led.tainted(id) }

// DroppedCount is the number of logical workloads lenient mode dropped.
func (r *Reader) DroppedCount() int { return r.led.droppedCount() }

// Counts returns how many workload and job records were read successfully.
func (r *Reader) Counts() (workloads, jobs int) { return r.led.nWorkloads, r.led.nJobs }

func (r *Reader) skip(e *Error) {
	r.nSkipped++
	if len(r.skipped) < maxListed {
		r.skipped = append(r.skipped, e)
	}
	if e.WorkloadID != "" {
		r.led.taint(e.WorkloadID)
	}
}

// readLine returns the next line without its line ending; the slice is valid until the next call.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.src.ReadSlice('\n')
		if len(r.buf)+len(chunk) > r.opts.MaxLineBytes {
			r.line++
			return nil, fmt.Errorf("line longer than %d bytes", r.opts.MaxLineBytes)
		}
		switch {
		case err == nil:
			r.line++
			if len(r.buf) == 0 {
				return chunk[:len(chunk)-1], nil
			}
			r.buf = append(r.buf, chunk[:len(chunk)-1]...)
			return r.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.buf = append(r.buf, chunk...)
		case err == io.EOF:
			if len(r.buf)+len(chunk) == 0 {
				return nil, io.EOF
			}
			r.line++
			r.buf = append(r.buf, chunk...)
			return r.buf, nil
		default:
			r.line++
			return nil, err
		}
	}
}

func (r *Reader) decodeLine(line []byte) (Record, *Error) {
	if r.line == 1 {
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	}
	rec := Record{Line: r.line}
	typ, err := r.dec.recordType(line)
	if err == nil {
		switch typ {
		case TypeWorkload:
			rec.Workload = &Workload{}
			err = r.dec.workload(line, rec.Workload)
			if err == nil {
				err = rec.Workload.Validate()
			}
		case TypeJob:
			rec.Job = &Job{}
			err = r.dec.job(line, rec.Job)
			if err == nil {
				err = rec.Job.Validate()
			}
		}
	}
	if err == nil {
		if rec.Workload != nil {
			err = r.led.addWorkload(rec.Line, rec.Workload)
		} else {
			err = r.led.addJob(rec.Line, rec.Job)
		}
	}
	if err == nil {
		return rec, nil
	}
	e := &Error{File: r.name, Line: r.line, Err: err}
	var fe *fieldError
	if errors.As(err, &fe) {
		e.Field, e.Err = fe.field, fe.err
	}
	switch {
	case rec.Workload != nil:
		e.WorkloadID = rec.Workload.WorkloadID
	case rec.Job != nil:
		e.WorkloadID = rec.Job.WorkloadID
	}
	return rec, e
}

// finish runs the end-of-input checks: strict mode returns the first problem, lenient mode lists
// them all and drops the workloads concerned.
func (r *Reader) finish() error {
	for _, p := range r.led.endProblems() {
		e := &Error{File: r.name, Line: p.line, Field: p.field, WorkloadID: p.id, Err: p.err}
		if !r.opts.Lenient {
			return e
		}
		r.skip(e)
	}
	return io.EOF
}

func (r *Reader) unknownField(path string) {
	if r.warned[path] || r.opts.Warn == nil {
		return
	}
	if len(r.warned) == maxWarnedFields {
		r.warned[path] = true
		r.opts.Warn(fmt.Sprintf("%s:%d: more than %d distinct unknown fields; no longer warning about them", r.name, r.line, maxWarnedFields))
		return
	}
	if len(r.warned) > maxWarnedFields {
		return
	}
	r.warned[path] = true
	r.opts.Warn(fmt.Sprintf("%s:%d: ignoring unknown field %s (said once per field)", r.name, r.line, path))
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
	names := make([]string, 0, 4)
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

// quoteShort quotes s for a message, cut to a readable length.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// fieldError is a problem with one field of a record; field is its JSON path.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string {
	if e.field == "" {
		return e.err.Error()
	}
	return "field " + e.field + ": " + e.err.Error()
}

func (e *fieldError) Unwrap() error { return e.err }

func fieldErrf(field, format string, args ...any) error {
	return &fieldError{field: field, err: fmt.Errorf(format, args...)}
}

// under puts err below the field name: "requests" + "cpu" gives "requests.cpu".
func under(name string, err error) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return &fieldError{field: name, err: err}
	}
	switch {
	case fe.field == "":
		return &fieldError{field: name, err: fe.err}
	case fe.field[0] == '[':
		return &fieldError{field: name + fe.field, err: fe.err}
	default:
		return &fieldError{field: name + "." + fe.field, err: fe.err}
	}
}

// index puts err below array element i: "[1]" + "replicas" gives "[1].replicas".
func index(i int, err error) error {
	return under("["+strconv.Itoa(i)+"]", err)
}

// lineDecoder parses one JSON line into a Workload or Job in a single pass. It is hand-written so
// it can name the JSON path of a bad field, tell a missing field from a zero one, reject what
// encoding/json lets through (duplicate keys, NaN spelled out, numbers out of range) and still cost
// about a microsecond per record.
type lineDecoder struct {
	b       []byte
	i       int
	depth   int
	scratch []byte
	escaped bool // the last string read had escapes (strBytes returned scratch)
	// intern shares the strings that repeat across records (namespaces, roles, quantities).
	intern  map[string]string
	unknown func(path string)
}

// maxDepth bounds nesting in raw values (tags, affinity, unknown fields).
const maxDepth = 512

// maxInterned bounds the intern table.
const maxInterned = 4096

func (d *lineDecoder) reset(b []byte) {
	d.b, d.i, d.depth = b, 0, 0
}

// recordType finds the top-level "type" string, with a fast path for records that start with it.
func (d *lineDecoder) recordType(line []byte) (string, error) {
	switch {
	case bytes.HasPrefix(line, []byte(`{"type":"workload"`)):
		return TypeWorkload, nil
	case bytes.HasPrefix(line, []byte(`{"type":"job"`)):
		return TypeJob, nil
	}
	d.reset(line)
	typ, found := "", false
	d.ws()
	if err := d.open('{'); err != nil {
		return "", err
	}
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return "", err
		}
		if !more {
			break
		}
		if string(key) == "type" && !found {
			if typ, err = d.str(); err != nil {
				return "", under("type", err)
			}
			found = true
			continue
		}
		if err := d.skip(); err != nil {
			return "", under(string(key), err)
		}
	}
	switch {
	case !found:
		return "", fieldErrf("type", "missing required field (want %q or %q)", TypeWorkload, TypeJob)
	case typ != TypeWorkload && typ != TypeJob:
		return "", fieldErrf("type", "unknown record type %s (want %q or %q)", quoteShort(typ), TypeWorkload, TypeJob)
	}
	return typ, nil
}

// Field bits of the records, for duplicate and missing-field checks.
const (
	fType = 1 << iota
	fSchemaVersion
	fWorkloadID
	fSubmit
	fNamespace
	fWorkloadType
	fGang
	fDuration
	fClass
	fProfile
	fPods
	fIntent
	fTags
	fCheckpoint
	fCheckpointCost
	fRestartOverhead
	fMaxRestarts
	fJobID
	fPodRole
	fPodTemplate
	fWork
	fSensitivity
)

var workloadFields = []struct {
	bit  uint32
	name string
}{
	{fType, "type"}, {fSchemaVersion, "schemaVersion"}, {fWorkloadID, "workloadId"}, {fSubmit, "submitTimeOffsetSec"},
	{fNamespace, "namespace"}, {fWorkloadType, "workloadType"}, {fDuration, "durationSec"}, {fClass, "workloadClass"},
	{fProfile, "sharedIntensityProfile"}, {fPods, "pods"},
}

var jobFields = []struct {
	bit  uint32
	name string
}{
	{fType, "type"}, {fSchemaVersion, "schemaVersion"}, {fJobID, "jobId"}, {fWorkloadID, "workloadId"},
	{fWorkloadType, "workloadType"}, {fPodRole, "podRole"}, {fSubmit, "submitTimeOffsetSec"}, {fNamespace, "namespace"},
	{fPodTemplate, "podTemplate"}, {fWork, "work"}, {fSensitivity, "sensitivity"}, {fClass, "workloadClass"},
	{fProfile, "workloadProfile"},
}

func (d *lineDecoder) workload(line []byte, w *Workload) error {
	d.reset(line)
	d.ws()
	if err := d.open('{'); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		var bit uint32
		switch string(key) {
		case "type":
			bit, err = fType, d.skip()
		case "schemaVersion":
			bit = fSchemaVersion
			w.SchemaVersion, err = d.istr()
		case "workloadId":
			bit = fWorkloadID
			w.WorkloadID, err = d.str()
		case "submitTimeOffsetSec":
			bit = fSubmit
			w.SubmitTimeOffsetSec, err = d.num()
		case "namespace":
			bit = fNamespace
			w.Namespace, err = d.istr()
		case "workloadType":
			bit = fWorkloadType
			var s string
			s, err = d.istr()
			w.WorkloadType = Family(s)
		case "gang":
			bit = fGang
			w.Gang, err = d.optBool()
		case "durationSec":
			bit = fDuration
			w.DurationSec, err = d.num()
		case "workloadClass":
			bit = fClass
			err = d.class(&w.WorkloadClass, "workload.workloadClass")
		case "sharedIntensityProfile":
			bit = fProfile
			err = d.profile(&w.SharedIntensityProfile, "workload.sharedIntensityProfile")
		case "pods":
			bit = fPods
			w.Pods, err = d.pods()
		case "intentClass":
			bit = fIntent
			w.IntentClass, err = d.optStr()
		case "tags":
			bit = fTags
			w.Tags, err = d.raw()
		case "checkpointIntervalSec":
			bit = fCheckpoint
			w.CheckpointIntervalSec, err = d.optNum()
		case "checkpointCostSec":
			bit = fCheckpointCost
			w.CheckpointCostSec, err = d.optNum()
		case "restartOverheadSec":
			bit = fRestartOverhead
			w.RestartOverheadSec, err = d.optNum()
		case "maxRestarts":
			bit = fMaxRestarts
			w.MaxRestarts, err = d.integer()
		default:
			d.unknown("workload." + string(key))
			err = d.skip()
		}
		if err != nil {
			return under(string(key), err)
		}
		if seen&bit != 0 {
			return fieldErrf(string(key), "appears twice")
		}
		seen |= bit
	}
	if err := d.end(); err != nil {
		return err
	}
	for _, f := range workloadFields {
		if seen&f.bit == 0 {
			return fieldErrf(f.name, "missing required field")
		}
	}
	return nil
}

func (d *lineDecoder) job(line []byte, j *Job) error {
	d.reset(line)
	d.ws()
	if err := d.open('{'); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		var bit uint32
		switch string(key) {
		case "type":
			bit, err = fType, d.skip()
		case "schemaVersion":
			bit = fSchemaVersion
			j.SchemaVersion, err = d.istr()
		case "jobId":
			bit = fJobID
			j.JobID, err = d.str()
		case "workloadId":
			bit = fWorkloadID
			j.WorkloadID, err = d.str()
		case "workloadType":
			bit = fWorkloadType
			var s string
			s, err = d.istr()
			j.WorkloadType = Family(s)
		case "podRole":
			bit = fPodRole
			j.PodRole, err = d.istr()
		case "gang":
			bit = fGang
			j.Gang, err = d.optBool()
		case "submitTimeOffsetSec":
			bit = fSubmit
			j.SubmitTimeOffsetSec, err = d.num()
		case "namespace":
			bit = fNamespace
			j.Namespace, err = d.istr()
		case "podTemplate":
			bit = fPodTemplate
			err = d.podTemplate(&j.PodTemplate)
		case "work":
			bit = fWork
			err = d.work(&j.Work)
		case "sensitivity":
			bit = fSensitivity
			err = d.sensitivity(&j.Sensitivity)
		case "workloadClass":
			bit = fClass
			err = d.class(&j.WorkloadClass, "job.workloadClass")
		case "workloadProfile":
			bit = fProfile
			err = d.profile(&j.WorkloadProfile, "job.workloadProfile")
		case "intentClass":
			bit = fIntent
			j.IntentClass, err = d.optStr()
		case "tags":
			bit = fTags
			j.Tags, err = d.raw()
		default:
			d.unknown("job." + string(key))
			err = d.skip()
		}
		if err != nil {
			return under(string(key), err)
		}
		if seen&bit != 0 {
			return fieldErrf(string(key), "appears twice")
		}
		seen |= bit
	}
	if err := d.end(); err != nil {
		return err
	}
	for _, f := range jobFields {
		if seen&f.bit == 0 {
			return fieldErrf(f.name, "missing required field")
		}
	}
	return nil
}

func (d *lineDecoder) class(c *Class, path string) error {
	if err := d.open('{'); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		var bit uint32
		switch string(key) {
		case "cpu":
			bit = 1
			c.CPU, err = d.istr()
		case "gpu":
			bit = 2
			c.GPU, err = d.istr()
		default:
			d.unknown(path + "." + string(key))
			err = d.skip()
		}
		if err != nil {
			return under(string(key), err)
		}
		if seen&bit != 0 {
			return fieldErrf(string(key), "appears twice")
		}
		seen |= bit
	}
	return missing(seen, "cpu", "gpu")
}

// missing reports the first of names whose bit (1 << position) is not in seen.
func missing(seen uint32, names ...string) error {
	for i, n := range names {
		if seen&(1<<i) == 0 {
			return fieldErrf(n, "missing required field")
		}
	}
	return nil
}

func (d *lineDecoder) profile(p *Profile, path string) error {
	if err := d.open('{'); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		var bit uint32
		switch string(key) {
		case "cpuUtilization":
			bit = 1
			p.CPUUtilization, err = d.num()
		case "gpuUtilization":
			bit = 2
			p.GPUUtilization, err = d.num()
		case "memoryIntensity":
			bit = 4
			p.MemoryIntensity, err = d.num()
		case "ioIntensity":
			bit = 8
			p.IOIntensity, err = d.num()
		case "cpuFeedIntensityGpu":
			bit = 16
			p.CPUFeedIntensityGPU, err = d.num()
		default:
			d.unknown(path + "." + string(key))
			err = d.skip()
		}
		if err != nil {
			return under(string(key), err)
		}
		if seen&bit != 0 {
			return fieldErrf(string(key), "appears twice")
		}
		seen |= bit
	}
	return missing(seen, "cpuUtilization", "gpuUtilization", "memoryIntensity", "ioIntensity", "cpuFeedIntensityGpu")
}

func (d *lineDecoder) pods() ([]PodGroup, error) {
	if err := d.open('['); err != nil {
		return nil, err
	}
	pods := make([]PodGroup, 0, 2)
	for first := true; ; {
		more, err := d.nextElem(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		pods = append(pods, PodGroup{})
		if err := d.pod(&pods[len(pods)-1]); err != nil {
			return nil, index(len(pods)-1, err)
		}
	}
	return pods, nil
}

func (d *lineDecoder) pod(p *PodGroup) error {
	if err := d.open('{'); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		var bit uint32
		switch string(key) {
		case "role":
			bit = 1
			p.Role, err = d.istr()
		case "replicas":
			bit = 2
			p.Replicas, err = d.integer()
		case "requests":
			bit = 4
			p.Requests, err = d.requests()
		case "gang":
			bit = 8
			p.Gang, err = d.optBool()
		default:
			d.unknown("workload.pods[]." + string(key))
			err = d.skip()
		}
		if err != nil {
			return under(string(key), err)
		}
		if seen&bit != 0 {
			return fieldErrf(string(key), "appears twice")
		}
		seen |= bit
	}
	return missing(seen, "role", "replicas", "requests")
}

func (d *lineDecoder) podTemplate(t *PodTemplate) error {
	if err := d.open('{'); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		var bit uint32
		switch string(key) {
		case "requests":
			bit = 1
			t.Requests, err = d.requests()
		case "affinity":
			bit = 2
			if d.peek() != '{' && d.peek() != 'n' {
				err = d.typeErr("an object")
				break
			}
			t.Affinity, err = d.raw()
		default:
			d.unknown("job.podTemplate." + string(key))
			err = d.skip()
		}
		if err != nil {
			return under(string(key), err)
		}
		if seen&bit != 0 {
			return fieldErrf(string(key), "appears twice")
		}
		seen |= bit
	}
	return missing(seen, "requests")
}

func (d *lineDecoder) work(w *Work) error {
	if err := d.open('{'); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		var bit uint32
		switch string(key) {
		case "cpuUnits":
			bit = 1
			w.CPUUnits, err = d.num()
		case "gpuUnits":
			bit = 2
			w.GPUUnits, err = d.num()
		default:
			d.unknown("job.work." + string(key))
			err = d.skip()
		}
		if err != nil {
			return under(string(key), err)
		}
		if seen&bit != 0 {
			return fieldErrf(string(key), "appears twice")
		}
		seen |= bit
	}
	return missing(seen, "cpuUnits", "gpuUnits")
}

func (d *lineDecoder) sensitivity(s *Sensitivity) error {
	if err := d.open('{'); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		var bit uint32
		switch string(key) {
		case "cpu":
			bit = 1
			s.CPU, err = d.num()
		case "gpu":
			bit = 2
			s.GPU, err = d.num()
		default:
			d.unknown("job.sensitivity." + string(key))
			err = d.skip()
		}
		if err != nil {
			return under(string(key), err)
		}
		if seen&bit != 0 {
			return fieldErrf(string(key), "appears twice")
		}
		seen |= bit
	}
	return missing(seen, "cpu", "gpu")
}

func (d *lineDecoder) requests() (Requests, error) {
	if err := d.open('{'); err != nil {
		return nil, err
	}
	r := make(Requests, 4)
	for first := true; ; {
		key, more, err := d.nextKey(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		name := d.internBytes(key)
		if _, dup := r[name]; dup {
			return nil, fieldErrf(name, "appears twice")
		}
		q, err := d.istr()
		if err != nil {
			return nil, under(name, err)
		}
		r[name] = q
	}
	return r, nil
}

// end checks that nothing but white space follows the record.
func (d *lineDecoder) end() error {
	d.ws()
	if d.i < len(d.b) {
		return d.syntaxErr("unexpected data after the record")
	}
	return nil
}

func (d *lineDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func (d *lineDecoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *lineDecoder) syntaxErr(msg string) error {
	if d.i >= len(d.b) {
		return &fieldError{err: fmt.Errorf("invalid JSON: %s (line ends early)", msg)}
	}
	return &fieldError{err: fmt.Errorf("invalid JSON at column %d: %s", d.i+1, msg)}
}

// typeErr says what was wanted and what the value is.
func (d *lineDecoder) typeErr(want string) error {
	var got string
	rest := d.b[d.i:]
	switch c := d.peek(); {
	case c == 'N' || c == 'I' || bytes.HasPrefix(rest, []byte("-I")):
		return fmt.Errorf("want %s, got %s (NaN and Infinity are not JSON; numbers must be finite)", want, d.word())
	case c == '"':
		got = "a string"
	case c == '{':
		got = "an object"
	case c == '[':
		got = "an array"
	case bytes.HasPrefix(rest, []byte("true")) || bytes.HasPrefix(rest, []byte("false")):
		got = "a boolean"
	case bytes.HasPrefix(rest, []byte("null")):
		got = "null"
	case c == '-' || (c >= '0' && c <= '9'):
		got = "a number"
	case c == 0:
		return d.syntaxErr("missing value")
	default:
		return d.syntaxErr(fmt.Sprintf("unexpected character %q", c))
	}
	return fmt.Errorf("want %s, got %s", want, got)
}

// word returns the identifier-like text at the cursor, for messages.
func (d *lineDecoder) word() string {
	j := d.i
	for j < len(d.b) && j-d.i < 16 && (d.b[j] == '-' || d.b[j] == '+' || (d.b[j]|0x20 >= 'a' && d.b[j]|0x20 <= 'z')) {
		j++
	}
	return string(d.b[d.i:j])
}

func (d *lineDecoder) open(c byte) error {
	if d.peek() != c {
		if c == '{' {
			return d.typeErr("an object")
		}
		return d.typeErr("an array")
	}
	d.i++
	return nil
}

// nextKey advances to the next member of an object and returns its key (valid until the next
// string is read); more is false after the closing brace.
func (d *lineDecoder) nextKey(first *bool) (key []byte, more bool, err error) {
	d.ws()
	if d.peek() == '}' && *first {
		d.i++
		return nil, false, nil
	}
	if !*first {
		switch d.peek() {
		case '}':
			d.i++
			return nil, false, nil
		case ',':
			d.i++
			d.ws()
		default:
			return nil, false, d.syntaxErr("want ',' or '}' after an object member")
		}
	}
	*first = false
	if d.peek() != '"' {
		return nil, false, d.syntaxErr("want a quoted object key")
	}
	key, err = d.strBytes()
	if err != nil {
		return nil, false, err
	}
	if d.escaped {
		// The unescaped key lives in scratch, which the value may overwrite.
		key = bytes.Clone(key)
	}
	d.ws()
	if d.peek() != ':' {
		return nil, false, d.syntaxErr("want ':' after an object key")
	}
	d.i++
	d.ws()
	return key, true, nil
}

// nextElem advances to the next element of an array; more is false after the closing bracket.
func (d *lineDecoder) nextElem(first *bool) (more bool, err error) {
	d.ws()
	if d.peek() == ']' && *first {
		d.i++
		return false, nil
	}
	if !*first {
		switch d.peek() {
		case ']':
			d.i++
			return false, nil
		case ',':
			d.i++
			d.ws()
		default:
			return false, d.syntaxErr("want ',' or ']' after an array element")
		}
	}
	*first = false
	return true, nil
}

// strBytes reads a string and returns its unescaped bytes: a slice of the line when it has no
// escapes, of the scratch buffer otherwise. The input must be UTF-8 (RFC 8259).
func (d *lineDecoder) strBytes() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.typeErr("a string")
	}
	d.i++
	start := d.i
	ascii := true
	d.escaped = false
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				return nil, errors.New("invalid UTF-8 in string")
			}
			return s, nil
		case c == '\\':
			return d.strEscaped(start)
		case c < 0x20:
			return nil, d.syntaxErr("control character in string")
		case c >= 0x80:
			ascii = false
		}
		d.i++
	}
	return nil, d.syntaxErr("unterminated string")
}

// strEscaped finishes a string that has escapes, decoding them the way encoding/json does (an
// unpaired surrogate becomes U+FFFD).
func (d *lineDecoder) strEscaped(start int) ([]byte, error) {
	d.escaped = true
	out := append(d.scratch[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			d.scratch = out
			if !utf8.Valid(out) {
				return nil, errors.New("invalid UTF-8 in string")
			}
			return out, nil
		case c < 0x20:
			return nil, d.syntaxErr("control character in string")
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return nil, d.syntaxErr("unterminated string")
		}
		e := d.b[d.i+1]
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(d.b[d.i+2:])
			if r < 0 {
				return nil, d.syntaxErr("bad \\u escape")
			}
			d.i += 6
			if utf16.IsSurrogate(r) {
				if r2 := d.u4(); r2 >= 0 {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						d.i += 6
						out = utf8.AppendRune(out, dec)
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, d.syntaxErr(fmt.Sprintf("bad escape \\%c", e))
		}
		d.i += 2
	}
	return nil, d.syntaxErr("unterminated string")
}

// u4 returns the rune of a \uXXXX escape at the cursor, or -1.
func (d *lineDecoder) u4() rune {
	if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
		return hex4(d.b[d.i+2:])
	}
	return -1
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// str reads a string value into a new string (ids: they do not repeat).
func (d *lineDecoder) str() (string, error) {
	b, err := d.strBytes()
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// istr reads a string value that is likely to repeat across records, sharing one copy of it.
func (d *lineDecoder) istr() (string, error) {
	b, err := d.strBytes()
	if err != nil {
		return "", err
	}
	return d.internBytes(b), nil
}

func (d *lineDecoder) internBytes(b []byte) string {
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(s) <= 64 && len(d.intern) < maxInterned {
		d.intern[s] = s
	}
	return s
}

// optStr reads an optional string; null means absent.
func (d *lineDecoder) optStr() (string, error) {
	if d.null() {
		return "", nil
	}
	return d.istr()
}

// null consumes a null literal.
func (d *lineDecoder) null() bool {
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// optBool reads an optional boolean; null means false.
func (d *lineDecoder) optBool() (bool, error) {
	rest := d.b[d.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		d.i += 4
		return true, nil
	case bytes.HasPrefix(rest, []byte("false")):
		d.i += 5
		return false, nil
	case d.null():
		return false, nil
	}
	return false, d.typeErr("a boolean")
}

// numberEnd scans a JSON number at the cursor and returns its end and whether it is an integer
// literal; ok is false when the text is not a JSON number.
func (d *lineDecoder) numberEnd() (end int, integer, ok bool) {
	b, i := d.b, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, false, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, integer, true
}

// num reads a finite number. Small integers skip strconv.
func (d *lineDecoder) num() (float64, error) {
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') || bytes.HasPrefix(d.b[d.i:], []byte("-I")) {
		return 0, d.typeErr("a number")
	}
	end, integer, ok := d.numberEnd()
	if !ok {
		d.i = end
		return 0, d.syntaxErr("malformed number")
	}
	lit := d.b[d.i:end]
	d.i = end
	if integer && len(lit) <= 15 {
		neg := lit[0] == '-'
		if neg {
			lit = lit[1:]
		}
		var v int64
		for _, c := range lit {
			v = v*10 + int64(c-'0')
		}
		if neg {
			return -float64(v), nil
		}
		return float64(v), nil
	}
	v, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return 0, fmt.Errorf("number %s is out of range", quoteShort(string(lit)))
	}
	return v, nil
}

// optNum reads an optional number; null means 0.
func (d *lineDecoder) optNum() (float64, error) {
	if d.null() {
		return 0, nil
	}
	return d.num()
}

// integer reads an integer literal (like encoding/json does for an int field: 4.0 is refused).
func (d *lineDecoder) integer() (int, error) {
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, d.typeErr("an integer")
	}
	end, integer, ok := d.numberEnd()
	if !ok {
		d.i = end
		return 0, d.syntaxErr("malformed number")
	}
	lit := string(d.b[d.i:end])
	d.i = end
	if !integer {
		return 0, fmt.Errorf("want an integer, got %s", quoteShort(lit))
	}
	v, err := strconv.ParseInt(lit, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("integer %s is out of range", quoteShort(lit))
	}
	return int(v), nil
}

// skip validates and skips any JSON value.
func (d *lineDecoder) skip() error {
	switch c := d.peek(); {
	case c == '"':
		_, err := d.strBytes()
		return err
	case c == '{':
		return d.skipNested(func() error {
			for first := true; ; {
				key, more, err := d.nextKey(&first)
				if err != nil || !more {
					return err
				}
				if err := d.skip(); err != nil {
					return under(string(key), err)
				}
			}
		})
	case c == '[':
		return d.skipNested(func() error {
			for first, n := true, 0; ; n++ {
				more, err := d.nextElem(&first)
				if err != nil || !more {
					return err
				}
				if err := d.skip(); err != nil {
					return index(n, err)
				}
			}
		})
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
				d.i += len(lit)
				return nil
			}
		}
		return d.syntaxErr(fmt.Sprintf("unexpected %q", d.word()))
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := d.num()
		return err
	default:
		return d.typeErr("a value")
	}
}

func (d *lineDecoder) skipNested(body func() error) error {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxDepth {
		return d.syntaxErr(fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	d.i++ // the opening brace or bracket
	return body()
}

// raw returns a copy of the next value, compacted; null gives nil (absent).
func (d *lineDecoder) raw() ([]byte, error) {
	if d.null() {
		return nil, nil
	}
	start := d.i
	if err := d.skip(); err != nil {
		return nil, err
	}
	v := d.b[start:d.i]
	if bytes.ContainsAny(v, " \t\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return bytes.Clone(v), nil
}
