package render

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Format is an output format.
type Format string

// Formats.
const (
	YAML Format = "yaml"
	JSON Format = "json"
)

// Encoder writes objects as a manifest stream: YAML documents separated by "---", or one JSON
// object per line (kubectl reads both). Status blocks, which the typed structs always marshal,
// are left out (see Marshal).
type Encoder struct {
	w      *bufio.Writer
	format Format
	n      int
}

// NewEncoder returns an encoder writing format to w. Call Flush when done.
func NewEncoder(w io.Writer, format Format) (*Encoder, error) {
	if format != YAML && format != JSON {
		return nil, fmt.Errorf("output format %q: want yaml or json", format)
	}
	return &Encoder{w: bufio.NewWriterSize(w, 1<<16), format: format}, nil
}

// Encode writes one object.
func (e *Encoder) Encode(obj any) error {
	b, err := Marshal(obj, e.format)
	if err != nil {
		return err
	}
	if e.format == YAML && e.n > 0 {
		if _, err := e.w.WriteString("---\n"); err != nil {
			return err
		}
	}
	e.n++
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	if e.format == JSON {
		return e.w.WriteByte('\n')
	}
	return nil
}

// WriteManifest writes a manifest encoded earlier in the same format (Result.Manifest).
func (e *Encoder) WriteManifest(m []byte) error {
	if len(m) == 0 {
		return nil
	}
	if e.format == YAML && e.n > 0 {
		if _, err := e.w.WriteString("---\n"); err != nil {
			return err
		}
	}
	e.n++
	_, err := e.w.Write(m)
	return err
}

// Flush writes buffered output.
func (e *Encoder) Flush() error { return e.w.Flush() }

// Marshal encodes one object without its status, except a Node's: a KWOK node gets its capacity
// from status.capacity and status.allocatable.
func Marshal(obj any, format Format) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("marshal: %w", err)
	}
	if _, node := obj.(*corev1.Node); !node {
		if j, err = stripStatus(j); err != nil {
			return nil, err
		}
	}
	if format == JSON {
		return j, nil
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return nil, fmt.Errorf("marshal: %w", err)
	}
	return y, nil
}

// stripStatus removes the top-level "status" member of a JSON object, in one pass over the bytes
// (decoding into a map and re-encoding would cost as much as the marshalling itself).
func stripStatus(j []byte) ([]byte, error) {
	depth, inStr, esc := 0, false, false
	keyStart := -1 // start of the current top-level key, when depth is 1
	for i := 0; i < len(j); i++ {
		c := j[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 1 && keyStart >= 0 && string(j[keyStart:i+1]) == `"status"` {
					return cutMember(j, keyStart, i+1)
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			if depth == 1 && (j[i-1] == '{' || j[i-1] == ',') {
				keyStart = i
			} else {
				keyStart = -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	return j, nil
}

// cutMember removes the member whose key spans j[start:keyEnd] together with its value and one
// adjoining comma.
func cutMember(j []byte, start, keyEnd int) ([]byte, error) {
	i := keyEnd
	if i >= len(j) || j[i] != ':' {
		return nil, fmt.Errorf("marshal: unexpected JSON after status key")
	}
	i++
	depth, inStr, esc := 0, false, false
	for ; i < len(j); i++ {
		c := j[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if depth == 0 && (c == ',' || c == '}') {
			break
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	end := i // j[end] is ',' or the closing '}'
	if j[end] == ',' {
		end++
	} else if j[start-1] == ',' {
		start--
	}
	out := make([]byte, 0, len(j)-(end-start))
	out = append(out, j[:start]...)
	return append(out, j[end:]...), nil
}
