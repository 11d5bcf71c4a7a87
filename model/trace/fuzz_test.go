package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the reader in both modes: it must never panic, and a single
// line it accepts without warnings must decode to exactly what encoding/json decodes (which checks
// the field dispatch of decode.go, field by field).
func FuzzReader(f *testing.F) {
	for _, l := range specTrace(f) {
		f.Add([]byte(l))
	}
	f.Add([]byte(strings.Join(specTrace(f), "\n")))
	f.Add([]byte(`{"type":"job","tags":{"a":[1,2.5e3,"\u00e9\ud83d\ude00",true,null]}}`))
	f.Add([]byte(`{"type":"workload","durationSec":NaN}`))
	f.Add([]byte("\x1f\x8b\x08\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lenient := range []bool{false, true} {
			var warned bool
			r, err := NewReader(bytes.NewReader(data), "f", Options{Lenient: lenient, Warn: func(string) { warned = true }, MaxLineBytes: 1 << 20})
			if err != nil {
				continue
			}
			var recs []Record
			for {
				rec, err := r.Next()
				if err != nil {
					if !errors.Is(err, io.EOF) && lenient {
						var e *Error
						if !errors.As(err, &e) || !strings.Contains(e.Error(), "f:") {
							t.Fatalf("lenient mode returned %v", err)
						}
					}
					break
				}
				if rec.Workload == nil == (rec.Job == nil) {
					t.Fatalf("record %+v has not exactly one of workload and job", rec)
				}
				recs = append(recs, rec)
			}
			if lenient || warned || len(recs) != 1 || bytes.Count(bytes.TrimSpace(data), []byte("\n")) > 0 || data[0] == 0x1f {
				continue
			}
			var want any = &Job{}
			got := any(recs[0].Job)
			if recs[0].Workload != nil {
				want, got = &Workload{}, recs[0].Workload
			}
			if err := json.Unmarshal(data, want); err != nil {
				t.Fatalf("accepted %q, encoding/json refuses it: %v", data, err)
			}
			compactRaw(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q:\nreader       %+v\nencoding/json %+v", data, got, want)
			}
		}
	})
}

// compactRaw brings encoding/json's verbatim raw fields to the reader's form: compacted, null absent.
func compactRaw(v any) {
	fix := func(m *json.RawMessage) {
		if string(*m) == "null" {
			*m = nil
			return
		}
		var buf bytes.Buffer
		if *m != nil && json.Compact(&buf, *m) == nil {
			*m = buf.Bytes()
		}
	}
	switch r := v.(type) {
	case *Workload:
		fix(&r.Tags)
	case *Job:
		fix(&r.Tags)
		fix(&r.PodTemplate.Affinity)
	}
}
