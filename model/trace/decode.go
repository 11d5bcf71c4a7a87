package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kueuelab/kueuelab/model/fielderr"
)

// Records are tokenized by jsontext, the decoder of github.com/go-json-experiment/json
// (encoding/json/v2): it checks JSON syntax and UTF-8 and tracks where a bad value is as a JSON
// pointer. Its reflection-based struct decoding (jsonv2.Unmarshal) reads the same records too, but
// BenchmarkRead measures it below the reader's floor of 300k records per CPU-second on its own,
// before any check, so three things are done by hand here, each because that benchmark asked:
// the members of a record are dispatched to fields on the library's tokens; duplicate member names
// are found by a bit per known field rather than the decoder's name table (~7%); and records with
// equal requests share one Requests map (the per-record map was the largest allocation, ~15%).
// With them the whole strict path runs at the speed of the bare library decoding.
//
// One line decodes into a wire: the fields of both record types, so a line is read in one pass
// whatever its type, then checked and copied into a Workload or a Job (wire.workload, wire.job).
// The numbers a record needs start as NaN (no JSON number decodes to NaN) and are still NaN when the
// line did not have them. A JSON null reads as the field's zero value, as in encoding/json.

type wire struct {
	Type, SchemaVersion, WorkloadID, JobID, WorkloadType, PodRole, Namespace, IntentClass string

	Gang                         bool
	Submit, Duration, Checkpoint float64
	// CheckpointCost and RestartOverhead are optional (NaN: absent), as are MaxRestarts.
	CheckpointCost, RestartOverhead float64
	MaxRestarts                     int
	Class                           Class
	Shared, Profile                 *Profile // nil: absent
	Pods                            []wirePod
	PodTemplate                     PodTemplate
	Work                            Work
	Sensitivity                     Sensitivity
	Tags                            json.RawMessage
	// Which objects the line had, for members of the other record type.
	hasPods, hasTemplate, hasWork, hasSens bool
	templateCanon                          string // canonical form of PodTemplate.Requests
}

type wirePod struct {
	PodGroup
	hasReplicas bool
	canon       string // canonical form of Requests (see canonicalRequests)
}

// blankWire is a wire before decoding: the required numbers NaN.
var blankWire = wire{
	Submit: math.NaN(), Duration: math.NaN(), Checkpoint: math.NaN(), CheckpointCost: math.NaN(), RestartOverhead: math.NaN(),
	Work:        Work{CPUUnits: math.NaN(), GPUUnits: math.NaN()},
	Sensitivity: Sensitivity{CPU: math.NaN(), GPU: math.NaN()},
}

// decoder decodes lines into a wire it reuses.
type decoder struct {
	w       wire
	buf     bytes.Buffer // the line, for the decoder to read in place
	dec     jsontext.Decoder
	shared  Profile
	profile Profile
	unknown []string          // unknown member paths of this line, without the record type
	intern  map[string]string // namespaces, families, roles, resource names, quantities
	reqs    map[string]sharedReq
	pairs   []reqPair
	reqKey  []byte
	last    [numSlots]string // the last string read at each interning call site
}

// Interning call sites: most records repeat the previous record's value at each, which a
// comparison finds faster than a hash.
const (
	noIntern = iota
	slotType
	slotSchema
	slotFamily
	slotRole
	slotNamespace
	slotIntent
	slotClassCPU
	slotClassGPU
	slotResource
	slotQuantity // one slot per position of a request in its object, up to maxQuantitySlots
	numSlots     = slotQuantity + maxQuantitySlots
)

// maxQuantitySlots bounds the positions of requests that get their own interning slot.
const maxQuantitySlots = 6

// newDecoder returns a decoder. The jsontext decoder runs with duplicate names allowed: object
// tells a record's known members apart anyway and rejects one read twice, requests and skipped
// members are checked as they are read, and raw values (tags, affinity) are validated whole; the
// decoder's own name table cost about 7% of BenchmarkRead.
func newDecoder() *decoder {
	return &decoder{intern: make(map[string]string, 64), reqs: make(map[string]sharedReq, 64)}
}

// decode decodes one line into d.w; the error is a *fieldError naming the field.
func (d *decoder) decode(line []byte) error {
	d.w = blankWire
	d.unknown = d.unknown[:0]
	d.buf.Reset()
	d.buf.Write(line)
	d.dec.Reset(&d.buf, jsontext.AllowDuplicateNames(true))
	if err := d.object("", d.member); err != nil {
		return d.fail(err, line)
	}
	off := int(d.dec.InputOffset())
	if rest := bytes.TrimLeft(line[off:], " \t\r\n"); len(rest) > 0 {
		return fmt.Errorf("invalid JSON at column %d: unexpected data after the record", len(line)-len(rest)+1)
	}
	return nil
}

// fail turns a decoding error into a fieldError naming the field.
func (d *decoder) fail(err error, line []byte) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return err
	}
	var sy *jsontext.SyntacticError
	if !errors.As(err, &sy) {
		return &fieldError{err: err}
	}
	field := fielderr.FromPointer(string(sy.JSONPointer))
	if errors.Is(sy.Err, jsontext.ErrDuplicateName) {
		return fieldErrf(field, "appears twice")
	}
	off := int(sy.ByteOffset)
	if off >= len(bytes.TrimRight(line, " \t\r\n")) {
		return &fieldError{field: field, err: errors.New("invalid JSON: the line ends early")}
	}
	for _, word := range []string{"NaN", "-Infinity", "Infinity"} {
		// A "-Infinity" fails at the "I", one byte after the number starts.
		if bytes.HasPrefix(line[off:], []byte(word)) || (off > 0 && bytes.HasPrefix(line[off-1:], []byte(word))) {
			return fieldErrf(field, "want a number, got %s (NaN and Infinity are not JSON; numbers must be finite)", word)
		}
	}
	if strings.Contains(sy.Err.Error(), "invalid UTF-8") {
		return fieldErrf(field, "invalid UTF-8 in a string (column %d)", off+1)
	}
	return &fieldError{field: field, err: fmt.Errorf("invalid JSON at column %d: %v", off+1, sy.Err)}
}

// path is the field path of the value about to be read (after its name).
func (d *decoder) path() string { return fielderr.FromPointer(string(d.dec.StackPointer())) }

// kindErr says what the value about to be read should have been; an empty field is the
// decoder's position (computed only now: a JSON pointer costs).
func (d *decoder) kindErr(field, want string) error {
	if field == "" {
		field = d.path()
	}
	k := d.dec.PeekKind()
	// Read the value first: a syntax error in it ("nul", "NaN") is the better message.
	if _, err := d.dec.ReadValue(); err != nil {
		return err
	}
	return fieldErrf(field, "want %s, got %s", want, kindName(k))
}

// valueKindErr says what a value already read should have been.
func (d *decoder) valueKindErr(raw jsontext.Value, want string) error {
	return fieldErrf(d.path(), "want %s, got %s", want, kindName(raw.Kind()))
}

// object reads an object, calling member with each name (the name's bytes are valid until the
// next read). field names the object in errors ("": the decoder's position). member returns the
// bit of the field it read (0 for a member it skipped): a field read twice is an error here,
// where the known members are told apart anyway, rather than in the decoder's name table (see
// newDecoder).
func (d *decoder) object(field string, member func(name []byte) (uint64, error)) error {
	if d.dec.PeekKind() != '{' {
		return d.kindErr(field, "an object")
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return err
	}
	var seen uint64
	for d.dec.PeekKind() == '"' {
		raw, err := d.dec.ReadValue() // the decoder checks the name's syntax
		if err != nil {
			return err
		}
		bit, err := member(unquoteRaw(raw))
		if err != nil {
			return err
		}
		if seen&bit != 0 {
			return fieldErrf(d.path(), "appears twice")
		}
		seen |= bit
	}
	_, err := d.dec.ReadToken() // '}', or the syntax error
	return err
}

// skip reads past a member this reader does not know and remembers its path; a member that
// appears twice is an error as for known ones.
func (d *decoder) skip(prefix string, name []byte) (uint64, error) {
	path := prefix + string(name)
	if slices.Contains(d.unknown, path) {
		return 0, fieldErrf(d.path(), "appears twice")
	}
	d.unknown = append(d.unknown, path)
	return 0, d.dec.SkipValue()
}

// member reads one top-level member of a record.
func (d *decoder) member(name []byte) (bit uint64, err error) {
	w := &d.w
	switch string(name) {
	case "type":
		bit = 1 << 0
		w.Type, err = d.str(slotType)
	case "schemaVersion":
		bit = 1 << 1
		w.SchemaVersion, err = d.str(slotSchema)
	case "workloadId":
		bit = 1 << 2
		w.WorkloadID, err = d.str(noIntern)
	case "jobId":
		bit = 1 << 3
		w.JobID, err = d.str(noIntern)
	case "workloadType":
		bit = 1 << 4
		w.WorkloadType, err = d.str(slotFamily)
	case "podRole":
		bit = 1 << 5
		w.PodRole, err = d.str(slotRole)
	case "namespace":
		bit = 1 << 6
		w.Namespace, err = d.str(slotNamespace)
	case "intentClass":
		bit = 1 << 7
		w.IntentClass, err = d.str(slotIntent)
	case "gang":
		bit = 1 << 8
		w.Gang, err = d.boolean()
	case "submitTimeOffsetSec":
		bit = 1 << 9
		w.Submit, err = d.num()
	case "durationSec":
		bit = 1 << 10
		w.Duration, err = d.num()
	case "checkpointIntervalSec":
		bit = 1 << 11
		w.Checkpoint, err = d.num()
	case "workloadClass":
		bit = 1 << 12
		err = d.class()
	case "sharedIntensityProfile":
		bit = 1 << 13
		d.shared = Profile{}
		w.Shared, err = d.intensities("sharedIntensityProfile", &d.shared)
	case "workloadProfile":
		bit = 1 << 14
		d.profile = Profile{}
		w.Profile, err = d.intensities("workloadProfile", &d.profile)
	case "pods":
		bit = 1 << 15
		w.hasPods = true
		err = d.pods()
	case "podTemplate":
		bit = 1 << 16
		w.hasTemplate = true
		err = d.podTemplate()
	case "work":
		bit = 1 << 17
		w.hasWork = true
		err = d.object("work", func(n []byte) (uint64, error) {
			switch string(n) {
			case "cpuUnits":
				w.Work.CPUUnits, err = d.num()
				return 1, err
			case "gpuUnits":
				w.Work.GPUUnits, err = d.num()
				return 2, err
			}
			return d.skip("work.", n)
		})
	case "sensitivity":
		bit = 1 << 18
		w.hasSens = true
		err = d.object("sensitivity", func(n []byte) (uint64, error) {
			switch string(n) {
			case "cpu":
				w.Sensitivity.CPU, err = d.num()
				return 1, err
			case "gpu":
				w.Sensitivity.GPU, err = d.num()
				return 2, err
			}
			return d.skip("sensitivity.", n)
		})
	case "tags":
		bit = 1 << 19
		w.Tags, err = d.raw()
	case "checkpointCostSec":
		bit = 1 << 20
		w.CheckpointCost, err = d.num()
	case "restartOverheadSec":
		bit = 1 << 21
		w.RestartOverhead, err = d.num()
	case "maxRestarts":
		bit = 1 << 22
		w.MaxRestarts, err = d.integer()
	default:
		return d.skip("", name)
	}
	return bit, err
}

func (d *decoder) class() error {
	return d.object("workloadClass", func(n []byte) (uint64, error) {
		var err error
		switch string(n) {
		case "cpu":
			d.w.Class.CPU, err = d.str(slotClassCPU)
			return 1, err
		case "gpu":
			d.w.Class.GPU, err = d.str(slotClassGPU)
			return 2, err
		}
		return d.skip("workloadClass.", n)
	})
}

// intensities reads the profile object named field into p; it returns nil for null (absent).
func (d *decoder) intensities(field string, p *Profile) (*Profile, error) {
	if d.dec.PeekKind() == 'n' {
		_, err := d.dec.ReadToken()
		return nil, err
	}
	err := d.object(field, func(n []byte) (uint64, error) {
		var err error
		switch string(n) {
		case "cpuUtilization":
			p.CPUUtilization, err = d.num()
			return 1, err
		case "gpuUtilization":
			p.GPUUtilization, err = d.num()
			return 2, err
		case "memoryIntensity":
			p.MemoryIntensity, err = d.num()
			return 4, err
		case "ioIntensity":
			p.IOIntensity, err = d.num()
			return 8, err
		case "cpuFeedIntensityGpu":
			p.CPUFeedIntensityGPU, err = d.num()
			return 16, err
		}
		return d.skip(field+".", n)
	})
	return p, err
}

func (d *decoder) pods() error {
	if d.dec.PeekKind() == 'n' {
		_, err := d.dec.ReadToken()
		d.w.hasPods = false
		return err
	}
	if d.dec.PeekKind() != '[' {
		return d.kindErr("pods", "an array")
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return err
	}
	d.w.Pods = make([]wirePod, 0, 2)
	for i := 0; d.dec.PeekKind() != ']'; i++ {
		d.w.Pods = append(d.w.Pods, wirePod{})
		p := &d.w.Pods[i]
		err := d.object("", func(n []byte) (uint64, error) {
			var err error
			switch string(n) {
			case "role":
				p.Role, err = d.str(slotRole)
				return 1, err
			case "replicas":
				p.hasReplicas = true
				p.Replicas, err = d.integer()
				return 2, err
			case "requests":
				p.Requests, p.canon, err = d.requests()
				return 4, err
			case "gang":
				p.Gang, err = d.boolean()
				return 8, err
			}
			return d.skip("pods[].", n)
		})
		if err != nil {
			return err
		}
	}
	_, err := d.dec.ReadToken()
	return err
}

func (d *decoder) podTemplate() error {
	return d.object("podTemplate", func(n []byte) (uint64, error) {
		var err error
		switch string(n) {
		case "requests":
			d.w.PodTemplate.Requests, d.w.templateCanon, err = d.requests()
			return 1, err
		case "affinity":
			if k := d.dec.PeekKind(); k != '{' && k != 'n' {
				return 0, d.kindErr("", "an object")
			}
			d.w.PodTemplate.Affinity, err = d.raw()
			return 2, err
		}
		return d.skip("podTemplate.", n)
	})
}

// requests reads a requests object; null gives nil (absent).
func (d *decoder) requests() (Requests, string, error) {
	if d.dec.PeekKind() == 'n' {
		_, err := d.dec.ReadToken()
		return nil, "", err
	}
	d.pairs = d.pairs[:0]
	err := d.object("", func(n []byte) (uint64, error) {
		name := d.internAt(slotResource, n)
		for _, p := range d.pairs {
			if p.name == name {
				return 0, fieldErrf(d.path(), "appears twice")
			}
		}
		if d.dec.PeekKind() != '"' {
			return 0, d.kindErr("", "a string")
		}
		q, err := d.str(slotQuantity + min(len(d.pairs), maxQuantitySlots-1))
		d.pairs = append(d.pairs, reqPair{name, q})
		return 0, err
	})
	if err != nil {
		return nil, "", err
	}
	m, canon := d.sharedRequests()
	return m, canon, nil
}

// sharedRequests returns the requests in d.pairs as a map shared by every record with the same
// requests, and their canonical form: a trace repeats a few shapes in all its records, and a map
// per record was the reader's largest allocation. The maps are read-only, as the generator's are.
func (d *decoder) sharedRequests() (Requests, string) {
	ps := d.pairs
	for i := 1; i < len(ps); i++ { // insertion sort: a handful of names
		for j := i; j > 0 && ps[j].name < ps[j-1].name; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	key := d.reqKey[:0]
	for i, p := range ps { // canonicalRequests' form
		if i > 0 {
			key = append(key, ',')
		}
		key = append(append(append(key, p.name...), '='), p.quantity...)
	}
	d.reqKey = key
	if sr, ok := d.reqs[string(key)]; ok {
		return sr.m, sr.canon
	}
	sr := sharedReq{m: make(Requests, len(ps)), canon: string(key)}
	for _, p := range ps {
		sr.m[p.name] = p.quantity
	}
	if len(d.reqs) < maxInterned {
		d.reqs[sr.canon] = sr
	}
	return sr.m, sr.canon
}

type sharedReq struct {
	m     Requests
	canon string
}

// str reads a string (null gives ""); strings read at an interning slot are shared across records.
func (d *decoder) str(slot int) (string, error) {
	raw, err := d.dec.ReadValue() // read first, kind checked after: one call into the decoder, not two
	switch {
	case err != nil:
		return "", err
	case raw[0] == 'n':
		return "", nil
	case raw[0] != '"':
		return "", d.valueKindErr(raw, "a string")
	}
	if slot == noIntern {
		return string(unquoteRaw(raw)), nil
	}
	return d.internAt(slot, unquoteRaw(raw)), nil
}

// unquoteRaw returns the contents of a raw JSON string the decoder has validated. Without escapes
// (the common case) it is a slice of raw, valid until the next read.
func unquoteRaw(raw jsontext.Value) []byte {
	b := raw[1 : len(raw)-1]
	if !hasEscape(b) {
		return b
	}
	u, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return b // not reached: the decoder validated the string
	}
	return u
}

// internAt returns b as a shared string: the slot's last one when equal, else from the table.
// hasEscape reports a backslash in b; a loop beats bytes.IndexByte's call on the short strings of
// a record.
func hasEscape(b []byte) bool {
	if len(b) > 32 {
		return bytes.IndexByte(b, '\\') >= 0
	}
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

func (d *decoder) internAt(slot int, b []byte) string {
	if string(b) == d.last[slot] {
		return d.last[slot]
	}
	s, ok := d.intern[string(b)]
	if !ok {
		s = string(b)
		if len(d.intern) < maxInterned {
			d.intern[s] = s
		}
	}
	d.last[slot] = s
	return s
}

func (d *decoder) boolean() (bool, error) {
	raw, err := d.dec.ReadValue()
	switch {
	case err != nil:
		return false, err
	case raw[0] == 't' || raw[0] == 'f' || raw[0] == 'n':
		return raw[0] == 't', nil
	}
	return false, d.valueKindErr(raw, "a boolean")
}

// num reads a finite number (null gives 0).
func (d *decoder) num() (float64, error) {
	raw, err := d.dec.ReadValue()
	switch {
	case err != nil:
		return 0, err
	case raw[0] == 'n':
		return 0, nil
	case raw[0] != '-' && (raw[0] < '0' || raw[0] > '9'):
		return 0, d.valueKindErr(raw, "a number")
	}
	if v, ok := smallInt(raw); ok {
		return float64(v), nil
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, fieldErrf(d.path(), "number %s is out of range", quoteShort(string(raw)))
	}
	return v, nil
}

// integer reads an integer literal (null gives 0); 4.0 is refused, as encoding/json does for an int.
func (d *decoder) integer() (int, error) {
	switch d.dec.PeekKind() {
	case '0':
	case 'n':
		_, err := d.dec.ReadToken()
		return 0, err
	default:
		return 0, d.kindErr("", "an integer")
	}
	raw, err := d.dec.ReadValue()
	if err != nil {
		return 0, err
	}
	if bytes.ContainsAny(raw, ".eE") {
		return 0, fieldErrf(d.path(), "want an integer, got %s", quoteShort(string(raw)))
	}
	v, err := strconv.ParseInt(string(raw), 10, 32)
	if err != nil {
		return 0, fieldErrf(d.path(), "integer %s is out of range", quoteShort(string(raw)))
	}
	return int(v), nil
}

// smallInt parses an integer literal of at most 15 digits, which a float64 holds exactly.
func smallInt(raw []byte) (int64, bool) {
	neg := len(raw) > 0 && raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	if len(raw) == 0 || len(raw) > 15 {
		return 0, false
	}
	var v int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// raw reads any value verbatim, compacted; null gives nil (absent). Its member names must be
// unique, as everywhere in a record (the decoder does not check them, see newDecoder).
func (d *decoder) raw() (json.RawMessage, error) {
	v, err := d.dec.ReadValue()
	if err != nil || string(v) == "null" {
		return nil, err
	}
	if (v.Kind() == '{' || v.Kind() == '[') && !v.IsValid() {
		field := d.path()
		_, err := jsontext.NewDecoder(bytes.NewReader(v)).ReadValue()
		var sy *jsontext.SyntacticError
		if errors.As(err, &sy) {
			return nil, fieldErrf(fielderr.Join(field, fielderr.FromPointer(string(sy.JSONPointer))), "appears twice")
		}
		return nil, fieldErrf(field, "invalid value")
	}
	out := bytes.Clone(v)
	if bytes.ContainsAny(out, " \t\r\n") {
		_ = (*jsontext.Value)(&out).Compact() // valid JSON already: the decoder checked it
	}
	return out, nil
}

// kindName names a JSON kind for messages.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "an invalid value"
}

// missingErr is the error of a required field the line does not have.
func missingErr(field string) error { return fieldErrf(field, "missing required field") }

// required returns v, or an error naming field when the line did not have it.
func required(field string, v float64) (float64, error) {
	if math.IsNaN(v) {
		return 0, missingErr(field)
	}
	return v, nil
}

// warnUnknown reports the unknown members of the line under the record type's name.
func (d *decoder) warnUnknown(typ string, warn func(path string)) {
	for _, p := range d.unknown {
		warn(typ + "." + p)
	}
}

// workload checks what a workload record needs and copies it out of the wire.
func (w *wire) workload(warn func(path string)) (*Workload, error) {
	wl := &Workload{
		SchemaVersion: w.SchemaVersion, WorkloadID: w.WorkloadID, Namespace: w.Namespace,
		WorkloadType: Family(w.WorkloadType), Gang: w.Gang, IntentClass: w.IntentClass,
		WorkloadClass: w.Class, Tags: w.Tags,
	}
	var err error
	if wl.SubmitTimeOffsetSec, err = required("submitTimeOffsetSec", w.Submit); err != nil {
		return wl, err
	}
	if wl.DurationSec, err = required("durationSec", w.Duration); err != nil {
		return wl, err
	}
	if !math.IsNaN(w.Checkpoint) {
		wl.CheckpointIntervalSec = w.Checkpoint
	}
	if !math.IsNaN(w.CheckpointCost) {
		wl.CheckpointCostSec = w.CheckpointCost
	}
	if !math.IsNaN(w.RestartOverhead) {
		wl.RestartOverheadSec = w.RestartOverhead
	}
	wl.MaxRestarts = w.MaxRestarts
	if w.Shared == nil {
		return wl, missingErr("sharedIntensityProfile")
	}
	wl.SharedIntensityProfile = *w.Shared
	if !w.hasPods {
		return wl, missingErr("pods")
	}
	wl.Pods = make([]PodGroup, len(w.Pods))
	for i := range w.Pods {
		p := &w.Pods[i]
		switch {
		case !p.hasReplicas:
			return wl, missingErr(fielderr.Index("pods", i) + ".replicas")
		case p.Requests == nil:
			return wl, missingErr(fielderr.Index("pods", i) + ".requests")
		}
		wl.Pods[i] = p.PodGroup
	}
	// Members of the other record type are unknown here.
	for _, f := range []struct {
		name    string
		present bool
	}{
		{"jobId", w.JobID != ""}, {"podRole", w.PodRole != ""}, {"podTemplate", w.hasTemplate},
		{"work", w.hasWork}, {"sensitivity", w.hasSens}, {"workloadProfile", w.Profile != nil},
	} {
		if f.present {
			warn("workload." + f.name)
		}
	}
	return wl, nil
}

// job checks what a job record needs and copies it out of the wire.
func (w *wire) job(warn func(path string)) (*Job, error) {
	j := &Job{
		SchemaVersion: w.SchemaVersion, JobID: w.JobID, WorkloadID: w.WorkloadID, WorkloadType: Family(w.WorkloadType),
		PodRole: w.PodRole, Gang: w.Gang, Namespace: w.Namespace, IntentClass: w.IntentClass,
		WorkloadClass: w.Class, Tags: w.Tags, PodTemplate: w.PodTemplate,
	}
	var err error
	if j.SubmitTimeOffsetSec, err = required("submitTimeOffsetSec", w.Submit); err != nil {
		return j, err
	}
	if j.PodTemplate.Requests == nil {
		return j, missingErr("podTemplate.requests")
	}
	if !w.hasWork {
		return j, missingErr("work")
	}
	if j.Work.CPUUnits, err = required("work.cpuUnits", w.Work.CPUUnits); err != nil {
		return j, err
	}
	if j.Work.GPUUnits, err = required("work.gpuUnits", w.Work.GPUUnits); err != nil {
		return j, err
	}
	if !w.hasSens {
		return j, missingErr("sensitivity")
	}
	if j.Sensitivity.CPU, err = required("sensitivity.cpu", w.Sensitivity.CPU); err != nil {
		return j, err
	}
	if j.Sensitivity.GPU, err = required("sensitivity.gpu", w.Sensitivity.GPU); err != nil {
		return j, err
	}
	if w.Profile == nil {
		return j, missingErr("workloadProfile")
	}
	j.WorkloadProfile = *w.Profile
	for _, f := range []struct {
		name    string
		present bool
	}{
		{"durationSec", !math.IsNaN(w.Duration)}, {"checkpointIntervalSec", !math.IsNaN(w.Checkpoint)},
		{"checkpointCostSec", !math.IsNaN(w.CheckpointCost)}, {"restartOverheadSec", !math.IsNaN(w.RestartOverhead)},
		{"sharedIntensityProfile", w.Shared != nil}, {"pods", w.hasPods},
	} {
		if f.present {
			warn("job." + f.name)
		}
	}
	return j, nil
}
