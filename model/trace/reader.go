package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/kueuelab/kueuelab/model/fielderr"
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
	// Reread skips the checks across records (duplicate ids, a workload's job records against
	// its workload record, records missing at the end), whose bookkeeping grows with the
	// trace: for a second pass over a file a first pass read whole with them (the sim engine
	// reads a million-workload trace again as its run goes). Each record is still checked;
	// Counts and Dropped then know nothing.
	Reread bool
}

// maxListed bounds how many skipped lines a Reader remembers; beyond it they are only counted.
const maxListed = 1000

// maxWarnedFields bounds the set of unknown fields already warned about.
const maxWarnedFields = 1000

// Record is one line of a trace: exactly one of Workload and Job is set. Records with equal
// requests share one Requests map: treat them as read-only (the generator's are shared too).
type Record struct {
	Line     int
	Workload *Workload
	Job      *Job
}

// Error is a problem with one line of a trace: "file:line: field path: what is wrong". Its ID is
// the logical workload the line belongs to, when it could be read.
type Error = fielderr.Error

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
	dec     *decoder
	okReqs  map[string]struct{} // canonical requests that passed validRequests
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
	r.led = newLedger()
	r.dec = newDecoder()
	r.okReqs = map[string]struct{}{}
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
	if e.ID != "" {
		r.led.taint(e.ID)
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
	err := r.dec.decode(line)
	var canon []string // canonical requests of the record's pod groups, or of its job's pod
	if err == nil {
		switch w := &r.dec.w; w.Type {
		case TypeWorkload:
			r.dec.warnUnknown(w.Type, r.unknownField)
			if rec.Workload, err = w.workload(r.unknownField); err == nil {
				for i := range r.dec.w.Pods {
					canon = append(canon, r.dec.w.Pods[i].canon)
				}
				err = r.checkRequests(canon, "pods", rec.Workload.Pods, nil)
			}
			if err == nil {
				err = rec.Workload.validate(skipRequests)
			}
		case TypeJob:
			r.dec.warnUnknown(w.Type, r.unknownField)
			if rec.Job, err = w.job(r.unknownField); err == nil {
				canon = append(canon, r.dec.w.templateCanon)
				err = r.checkRequests(canon, "podTemplate.requests", nil, rec.Job.PodTemplate.Requests)
			}
			if err == nil {
				err = rec.Job.validate(skipRequests)
			}
		case "":
			err = fieldErrf("type", "missing required field (want %q or %q)", TypeWorkload, TypeJob)
		default:
			err = fieldErrf("type", "unknown record type %s (want %q or %q)", quoteShort(w.Type), TypeWorkload, TypeJob)
		}
	}
	if err == nil && !r.opts.Reread {
		if rec.Workload != nil {
			err = r.led.addWorkload(rec.Line, rec.Workload, canon)
		} else {
			err = r.led.addJob(rec.Line, rec.Job, canon[0])
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
		e.ID = rec.Workload.WorkloadID
	case rec.Job != nil:
		e.ID = rec.Job.WorkloadID
	}
	return rec, e
}

// checkRequests validates the requests of a record's pod groups (or of a job's pod when pods is
// nil), whose canonical forms the decoder gave in canon. It remembers the canonical forms it
// accepted: a trace repeats a few shapes of requests in every record, so most records skip the
// parsing.
func (r *Reader) checkRequests(canon []string, field string, pods []PodGroup, job Requests) error {
	check := func(req Requests, c, field string) error {
		if _, ok := r.okReqs[c]; ok {
			return nil
		}
		if err := validRequests(req); err != nil {
			return under(field, err)
		}
		if len(r.okReqs) < maxInterned {
			r.okReqs[c] = struct{}{}
		}
		return nil
	}
	if pods == nil {
		return check(job, canon[0], field)
	}
	for i := range pods {
		if err := check(pods[i].Requests, canon[i], field+"["+strconv.Itoa(i)+"].requests"); err != nil {
			return err
		}
	}
	return nil
}

// skipRequests stands for validRequests where the Reader has checked the requests already.
func skipRequests(Requests) error { return nil }

// finish runs the end-of-input checks: strict mode returns the first problem, lenient mode lists
// them all and drops the workloads concerned.
func (r *Reader) finish() error {
	if r.opts.Reread {
		return io.EOF
	}
	for _, p := range r.led.endProblems() {
		e := &Error{File: r.name, Line: p.line, Field: p.field, ID: p.id, Err: p.err}
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
	return e.field + ": " + e.err.Error()
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
