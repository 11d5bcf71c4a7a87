package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// writerBufferSize is large enough that a trace of millions of records costs few write syscalls.
const writerBufferSize = 256 << 10

// Writer writes trace records as JSON Lines. It appends each record by hand into one reused buffer,
// in the field order of the schema, so output is deterministic and a record costs no allocation.
// Call Flush when done.
type Writer struct {
	out  *bufio.Writer
	buf  []byte
	reqs []reqPair    // reused to sort requests
	raw  bytes.Buffer // reused to compact raw JSON fields (tags, affinity)

	// The job records of a workload repeat its intensity profile: the last encoding is reused
	// when the next profile has the same value.
	lastProfile    Profile
	lastProfileOK  bool
	lastProfileEnc []byte
}

type reqPair struct{ name, quantity string }

// NewWriter returns a buffered Writer on w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{out: bufio.NewWriterSize(w, writerBufferSize), buf: make([]byte, 0, 4096)}
}

// WriteWorkload writes one type=workload record.
func (w *Writer) WriteWorkload(wl *Workload) error {
	b, err := w.appendWorkload(w.buf[:0], wl)
	if err != nil {
		return fmt.Errorf("write workload %s: %w", wl.WorkloadID, err)
	}
	w.buf = b
	_, err = w.out.Write(b)
	return err
}

// WriteJob writes one type=job record.
func (w *Writer) WriteJob(j *Job) error {
	b, err := w.appendJob(w.buf[:0], j)
	if err != nil {
		return fmt.Errorf("write job %s: %w", j.JobID, err)
	}
	w.buf = b
	_, err = w.out.Write(b)
	return err
}

// Flush writes buffered records to the underlying writer.
func (w *Writer) Flush() error { return w.out.Flush() }

// FileWriter is a Writer on a file (gzip-compressed when the name ends in ".gz") or on stdout ("-").
type FileWriter struct {
	*Writer
	gz   *gzip.Writer
	file *os.File // nil for stdout, which Close leaves open
	path string
}

// Create opens path for writing a trace: "-" is stdout, a name ending in ".gz" is gzip-compressed.
func Create(path string) (*FileWriter, error) {
	fw := &FileWriter{path: path}
	var dst io.Writer = os.Stdout
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("create trace: %w", err)
		}
		fw.file, dst = f, f
	}
	if strings.HasSuffix(path, ".gz") {
		// BestSpeed: traces are large and regenerated often; compression ratio matters less than time.
		gz, err := gzip.NewWriterLevel(dst, gzip.BestSpeed)
		if err != nil {
			if fw.file != nil {
				_ = fw.file.Close()
			}
			return nil, fmt.Errorf("create trace %s: %w", path, err)
		}
		fw.gz, dst = gz, gz
	}
	fw.Writer = NewWriter(dst)
	return fw, nil
}

// Close flushes the records, finishes the gzip stream and closes the file (stdout stays open).
func (f *FileWriter) Close() error {
	err := f.Flush()
	if f.gz != nil {
		err = errors.Join(err, f.gz.Close())
	}
	if f.file != nil {
		err = errors.Join(err, f.file.Close())
	}
	if err != nil {
		return fmt.Errorf("close trace %s: %w", f.path, err)
	}
	return nil
}

func (w *Writer) appendWorkload(b []byte, wl *Workload) ([]byte, error) {
	var err error
	b = append(b, `{"type":"workload","schemaVersion":`...)
	b = appendJSONString(b, writtenSchema(wl.SchemaVersion))
	b = append(b, `,"workloadId":`...)
	b = appendJSONString(b, wl.WorkloadID)
	if b, err = appendJSONFloatField(b, `,"submitTimeOffsetSec":`, wl.SubmitTimeOffsetSec, "", "submitTimeOffsetSec"); err != nil {
		return b, err
	}
	b = append(b, `,"namespace":`...)
	b = appendJSONString(b, wl.Namespace)
	b = append(b, `,"workloadType":`...)
	b = appendJSONString(b, string(wl.WorkloadType))
	if wl.Gang {
		b = append(b, `,"gang":true`...)
	}
	if b, err = appendJSONFloatField(b, `,"durationSec":`, wl.DurationSec, "", "durationSec"); err != nil {
		return b, err
	}
	b = appendJSONClass(b, wl.WorkloadClass)
	b = append(b, `,"sharedIntensityProfile":`...)
	if b, err = w.appendProfile(b, &wl.SharedIntensityProfile, "sharedIntensityProfile"); err != nil {
		return b, err
	}
	b = append(b, `,"pods":[`...)
	for i := range wl.Pods {
		p := &wl.Pods[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = appendJSONString(b, p.Role)
		b = append(b, `,"replicas":`...)
		b = strconv.AppendInt(b, int64(p.Replicas), 10)
		b = append(b, `,"requests":`...)
		b = w.appendRequests(b, p.Requests)
		if p.Gang {
			b = append(b, `,"gang":true`...)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if wl.IntentClass != "" {
		b = append(b, `,"intentClass":`...)
		b = appendJSONString(b, wl.IntentClass)
	}
	if len(wl.Tags) > 0 {
		if b, err = w.appendRaw(b, `,"tags":`, wl.Tags, "tags"); err != nil {
			return b, err
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"checkpointIntervalSec", wl.CheckpointIntervalSec}, {"checkpointCostSec", wl.CheckpointCostSec}, {"restartOverheadSec", wl.RestartOverheadSec}} {
		if f.v != 0 {
			if b, err = appendJSONFloatField(b, `,"`+f.name+`":`, f.v, "", f.name); err != nil {
				return b, err
			}
		}
	}
	if wl.MaxRestarts != 0 {
		b = append(b, `,"maxRestarts":`...)
		b = strconv.AppendInt(b, int64(wl.MaxRestarts), 10)
	}
	return append(b, '}', '\n'), nil
}

func (w *Writer) appendJob(b []byte, j *Job) ([]byte, error) {
	var err error
	b = append(b, `{"type":"job","schemaVersion":`...)
	b = appendJSONString(b, writtenSchema(j.SchemaVersion))
	b = append(b, `,"jobId":`...)
	b = appendJSONString(b, j.JobID)
	b = append(b, `,"workloadId":`...)
	b = appendJSONString(b, j.WorkloadID)
	b = append(b, `,"workloadType":`...)
	b = appendJSONString(b, string(j.WorkloadType))
	b = append(b, `,"podRole":`...)
	b = appendJSONString(b, j.PodRole)
	if j.Gang {
		b = append(b, `,"gang":true`...)
	}
	if b, err = appendJSONFloatField(b, `,"submitTimeOffsetSec":`, j.SubmitTimeOffsetSec, "", "submitTimeOffsetSec"); err != nil {
		return b, err
	}
	b = append(b, `,"namespace":`...)
	b = appendJSONString(b, j.Namespace)
	b = append(b, `,"podTemplate":{"requests":`...)
	b = w.appendRequests(b, j.PodTemplate.Requests)
	if len(j.PodTemplate.Affinity) > 0 {
		if b, err = w.appendRaw(b, `,"affinity":`, j.PodTemplate.Affinity, "podTemplate.affinity"); err != nil {
			return b, err
		}
	}
	if b, err = appendJSONFloatField(b, `},"work":{"cpuUnits":`, j.Work.CPUUnits, "work", "cpuUnits"); err != nil {
		return b, err
	}
	if b, err = appendJSONFloatField(b, `,"gpuUnits":`, j.Work.GPUUnits, "work", "gpuUnits"); err != nil {
		return b, err
	}
	if b, err = appendJSONFloatField(b, `},"sensitivity":{"cpu":`, j.Sensitivity.CPU, "sensitivity", "cpu"); err != nil {
		return b, err
	}
	if b, err = appendJSONFloatField(b, `,"gpu":`, j.Sensitivity.GPU, "sensitivity", "gpu"); err != nil {
		return b, err
	}
	b = append(b, '}')
	b = appendJSONClass(b, j.WorkloadClass)
	b = append(b, `,"workloadProfile":`...)
	if b, err = w.appendProfile(b, &j.WorkloadProfile, "workloadProfile"); err != nil {
		return b, err
	}
	if j.IntentClass != "" {
		b = append(b, `,"intentClass":`...)
		b = appendJSONString(b, j.IntentClass)
	}
	if len(j.Tags) > 0 {
		if b, err = w.appendRaw(b, `,"tags":`, j.Tags, "tags"); err != nil {
			return b, err
		}
	}
	return append(b, '}', '\n'), nil
}

// writtenSchema returns the schema version to write: a record built in code without one is written as v2.
func writtenSchema(v string) string {
	if v == "" {
		return SchemaVersion
	}
	return v
}

func appendJSONClass(b []byte, c Class) []byte {
	b = append(b, `,"workloadClass":{"cpu":`...)
	b = appendJSONString(b, c.CPU)
	b = append(b, `,"gpu":`...)
	b = appendJSONString(b, c.GPU)
	return append(b, '}')
}

func (w *Writer) appendProfile(b []byte, p *Profile, field string) ([]byte, error) {
	if w.lastProfileOK && *p == w.lastProfile {
		return append(b, w.lastProfileEnc...), nil
	}
	start := len(b)
	b, err := appendJSONProfile(b, p, field)
	if err != nil {
		return b, err
	}
	w.lastProfile, w.lastProfileOK = *p, true
	w.lastProfileEnc = append(w.lastProfileEnc[:0], b[start:]...)
	return b, nil
}

func appendJSONProfile(b []byte, p *Profile, field string) ([]byte, error) {
	var err error
	if b, err = appendJSONFloatField(b, `{"cpuUtilization":`, p.CPUUtilization, field, "cpuUtilization"); err != nil {
		return b, err
	}
	if b, err = appendJSONFloatField(b, `,"gpuUtilization":`, p.GPUUtilization, field, "gpuUtilization"); err != nil {
		return b, err
	}
	if b, err = appendJSONFloatField(b, `,"memoryIntensity":`, p.MemoryIntensity, field, "memoryIntensity"); err != nil {
		return b, err
	}
	if b, err = appendJSONFloatField(b, `,"ioIntensity":`, p.IOIntensity, field, "ioIntensity"); err != nil {
		return b, err
	}
	if b, err = appendJSONFloatField(b, `,"cpuFeedIntensityGpu":`, p.CPUFeedIntensityGPU, field, "cpuFeedIntensityGpu"); err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// appendRequests writes the requests object with its keys sorted (a handful of keys: insertion sort
// into a reused slice keeps this allocation-free).
func (w *Writer) appendRequests(b []byte, r Requests) []byte {
	pairs := w.reqs[:0]
	for k, v := range r {
		pairs = append(pairs, reqPair{k, v})
		for i := len(pairs) - 1; i > 0 && pairs[i].name < pairs[i-1].name; i-- {
			pairs[i], pairs[i-1] = pairs[i-1], pairs[i]
		}
	}
	w.reqs = pairs
	b = append(b, '{')
	for i, p := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, p.name)
		b = append(b, ':')
		b = appendJSONString(b, p.quantity)
	}
	return append(b, '}')
}

// appendRaw writes a verbatim JSON field compacted to one line, so a multi-line value cannot break JSONL.
func (w *Writer) appendRaw(b []byte, prefix string, raw json.RawMessage, field string) ([]byte, error) {
	w.raw.Reset()
	if err := json.Compact(&w.raw, raw); err != nil {
		return b, fmt.Errorf("%s: invalid JSON: %w", field, err)
	}
	b = append(b, prefix...)
	return append(b, w.raw.Bytes()...), nil
}

// appendJSONFloatField appends prefix and v; the field path is parent.name (name alone when parent is
// empty), joined only on error so the common path does not allocate.
func appendJSONFloatField(b []byte, prefix string, v float64, parent, name string) ([]byte, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		if parent != "" {
			name = parent + "." + name
		}
		return b, fmt.Errorf("%s: %v cannot be written as JSON", name, v)
	}
	b = append(b, prefix...)
	return appendJSONFloat(b, v), nil
}

// appendJSONFloat appends v in the shortest form that parses back to the same float64, without an
// exponent for ordinary magnitudes (1e-6 <= |v| < 1e21): the bytes encoding/json writes. v must be finite.
func appendJSONFloat(b []byte, v float64) []byte {
	abs := math.Abs(v)
	if abs >= 1e-6 && abs < 1e9 {
		// Fast path for decimals with at most 6 fraction digits (what the generator writes). If n/1e6
		// rounds to v, the decimal n*1e-6 is v's shortest form: below 1e9 an ulp is smaller than 1e-6, so
		// no other decimal with as few digits rounds to v.
		if n := math.Round(abs * 1e6); n/1e6 == abs {
			return appendMicros(b, v < 0, uint64(n))
		}
	}
	if abs == 0 || (abs >= 1e-6 && abs < 1e21) {
		return strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	b = strconv.AppendFloat(b, v, 'e', -1, 64)
	// Shorten "e-07" to "e-7" as encoding/json does.
	if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

// appendMicros appends n millionths as a decimal without trailing zeros.
func appendMicros(b []byte, neg bool, n uint64) []byte {
	if neg {
		b = append(b, '-')
	}
	b = strconv.AppendUint(b, n/1_000_000, 10)
	frac := n % 1_000_000
	if frac == 0 {
		return b
	}
	var d [7]byte
	d[0] = '.'
	for i := 6; i >= 1; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	end := len(d)
	for d[end-1] == '0' {
		end--
	}
	return append(b, d[:end]...)
}

// appendJSONString appends s as a JSON string. Plain printable ASCII (every string the generator
// produces) is copied as is, checked eight bytes at a time; anything else goes through full escaping.
func appendJSONString(b []byte, s string) []byte {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		// Byte loads the compiler merges into one 64-bit load.
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if needsEscape8(x) {
			return appendJSONEscaped(b, s)
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return appendJSONEscaped(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// needsEscape8 reports whether any of the 8 bytes in x is a control character, non-ASCII, '"' or '\\'
// (the classic "has a byte less than n / equal to v" bit tricks; exact as booleans).
func needsEscape8(x uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	hasZero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	lessThanSpace := (x - ones*0x20) & ^x & highs
	return (lessThanSpace|hasZero(x^(ones*'"'))|hasZero(x^(ones*'\\'))|x)&highs != 0
}

const jsonHexDigits = "0123456789abcdef"

// appendJSONEscaped escapes like encoding/json: control characters, quotes and backslashes are escaped,
// invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are escaped so the line is also valid JavaScript.
func appendJSONEscaped(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', jsonHexDigits[c>>4], jsonHexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', jsonHexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// WriteFile writes ws to path as a trace, each workload followed by its job records in jobs.
func WriteFile(path string, ws []*Workload, jobs map[string][]*Job) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if err := f.WriteWorkload(w); err != nil {
			return errors.Join(fmt.Errorf("write trace %s: %w", path, err), f.Close())
		}
		for _, j := range jobs[w.WorkloadID] {
			if err := f.WriteJob(j); err != nil {
				return errors.Join(fmt.Errorf("write trace %s: %w", path, err), f.Close())
			}
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write trace %s: %w", path, err)
	}
	return nil
}
