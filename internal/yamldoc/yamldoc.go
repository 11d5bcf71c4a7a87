// Package yamldoc reads a YAML file that must hold exactly one document and keeps its node tree,
// so the strict decoders of kueuelab's own files (cluster specs, experiments) can name the line
// of every error.
package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/model/fielderr"
)

// Root decodes data as exactly one YAML document and returns its root node. name is the file
// in error messages and what the kind of file ("cluster spec", "experiment file"). Errors are
// fielderr errors naming the line.
func Root(name, what string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fielderr.New(name, 0, "", "empty %s", what)
		}
		return nil, Errors(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fielderr.New(name, extra.Line, "", "a %s is a single YAML document", what)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	return root, nil
}

// Strict decodes data, one YAML document holding a mapping, into out, a pointer to the struct
// the mapping decodes into. name is the file in errors, what the kind of file and fields its
// top-level fields as the error about a document that is not a mapping lists them. A field unknown
// at any depth is an error naming its line, path and the known fields, found before decoding. It
// returns the root node, for the caller's own checks to name lines with Line.
func Strict(name, what, fields string, data []byte, out any) (*yaml.Node, error) {
	root, err := Root(name, what, data)
	if err != nil {
		return nil, err
	}
	if root.Kind != yaml.MappingNode {
		return nil, fielderr.New(name, root.Line, "", "a %s is a mapping (%s)", what, fields)
	}
	var errs fielderr.List
	UnknownFields(root, reflect.TypeOf(out).Elem(), func(key *yaml.Node, p Path, known []string) {
		errs = append(errs, fielderr.New(name, key.Line, p.String(), "unknown field (known fields: %s)", strings.Join(known, ", ")))
	})
	if err := errs.Err(); err != nil {
		return nil, err
	}
	if err := root.Decode(out); err != nil {
		return nil, ErrorsIn(name, root, err)
	}
	return root, nil
}

// ErrorsIn is Errors for a document decoded from root: each type error also names the field its
// value is at, where one value on its line matches what the message quotes.
func ErrorsIn(file string, root *yaml.Node, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var l fielderr.List
		for _, m := range te.Errors {
			line, msg := lineOf(m)
			l = append(l, fielderr.New(file, line, fieldAt(root, line, msg).String(), "%s", msg))
		}
		return l.Err()
	}
	line, msg := lineOf(strings.TrimPrefix(err.Error(), "yaml: "))
	return fielderr.New(file, line, "", "%s", msg)
}

// unmarshalWhat reads yaml.v3's type error ("cannot unmarshal !!str `abc` into float64"): the
// value's tag and, for a scalar, its value (cut to 7 characters and "..." past 10).
var unmarshalWhat = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into ")

// fieldAt is the path from root of the value on line that msg is about: nil unless exactly one
// value there has the tag and value msg quotes (a flow mapping holds several on one line).
func fieldAt(root *yaml.Node, line int, msg string) Path {
	sm := unmarshalWhat.FindStringSubmatch(msg)
	if root == nil || sm == nil {
		return nil
	}
	tag, val := sm[1], sm[2]
	quoted := func(v string) bool {
		if short, ok := strings.CutSuffix(val, "..."); ok && len(v) > 10 {
			return strings.HasPrefix(v, short)
		}
		return v == val
	}
	var found []Path
	var walk func(n *yaml.Node, p Path)
	walk = func(n *yaml.Node, p Path) {
		if len(p) > 0 && n.Line == line && n.ShortTag() == tag && (n.Kind != yaml.ScalarNode || quoted(n.Value)) {
			found = append(found, p)
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], p.Key(n.Content[i].Value))
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, p.Idx(i))
			}
		}
	}
	walk(root, nil)
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

// Errors turns a YAML decoding error into fielderr errors of file: a yaml.TypeError's messages
// ("line 13: cannot unmarshal ...") one each, a syntax error ("yaml: line 4: ...") with its line.
// ErrorsIn also names the fields, given the document's root.
func Errors(file string, err error) error { return ErrorsIn(file, nil, err) }

// lineOf splits "line N: message" into N and the message (0 and m when m has no line).
func lineOf(m string) (int, string) {
	rest, ok := strings.CutPrefix(m, "line ")
	if !ok {
		return 0, m
	}
	num, msg, ok := strings.Cut(rest, ": ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0, m
	}
	return n, msg
}

// Path is a field path of string keys and int indexes, printed as a.b[0]["nvidia.com/gpu"].
type Path []any

// Key returns p extended by a mapping key, never sharing p's backing array.
func (p Path) Key(k string) Path { return append(p[:len(p):len(p)], k) }

// Idx returns p extended by a sequence index, never sharing p's backing array.
func (p Path) Idx(i int) Path { return append(p[:len(p):len(p)], i) }

func (p Path) String() string {
	var b strings.Builder
	for _, s := range p {
		switch v := s.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		case string:
			if isIdent(v) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(v)
			} else {
				fmt.Fprintf(&b, "[%s]", strconv.Quote(v))
			}
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

// Line walks p from n, through aliases, and returns the line of the deepest node it reaches
// (0 without a tree), so an error about a value that is missing points at its parent.
func Line(n *yaml.Node, p Path) int {
	if n == nil {
		return 0
	}
	line := n.Line
	for _, seg := range p {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		var next *yaml.Node
		switch v := seg.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == v {
						next = n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && v < len(n.Content) {
				next = n.Content[v]
			}
		}
		if next == nil {
			return line
		}
		n, line = next, next.Line
	}
	return line
}

// UnknownFields calls report for every mapping key under n that names no yaml-tagged field of
// the struct type it decodes into, with the key's node, its path from n and the known field
// names in order. It runs before decoding because yaml.v3's KnownFields names neither the path
// nor the fields, and does not reach into custom unmarshalers.
func UnknownFields(n *yaml.Node, t reflect.Type, report func(key *yaml.Node, p Path, known []string)) {
	unknownFields(n, t, nil, report)
}

func unknownFields(n *yaml.Node, t reflect.Type, p Path, report func(*yaml.Node, Path, []string)) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode { // a scalar form, or a type error Decode reports
			return
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			fields[name] = f.Type
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			ft, ok := fields[k]
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				sort.Strings(known)
				report(n.Content[i], p.Key(k), known)
				continue
			}
			unknownFields(n.Content[i+1], ft, p.Key(k), report)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			unknownFields(n.Content[i+1], t.Elem(), p.Key(n.Content[i].Value), report)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			unknownFields(c, t.Elem(), p.Idx(i), report)
		}
	}
}
