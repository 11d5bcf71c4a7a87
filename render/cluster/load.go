package cluster

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
)

// Load reads and validates the cluster spec at path. Unknown fields, wrong types and invalid
// values are reported together, each as "file:line: field.path: reason".
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster spec: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load on bytes already read; name is used in error messages.
func Parse(name string, data []byte) (*Spec, error) {
	root, err := yamldoc.Root(name, "cluster spec", data)
	if err != nil {
		return nil, err
	}
	el := &errList{file: name, root: root}
	if root.Kind != yaml.MappingNode {
		el.add(nil, "a cluster spec is a mapping (apiVersion, kind, nodePools, ...)")
		return nil, el.err()
	}
	checkKnown(root, reflect.TypeOf(Spec{}), nil, el)
	if err := el.err(); err != nil {
		return nil, err
	}
	s := &Spec{file: name}
	if err := root.Decode(s); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, m := range te.Errors {
				el.errs = append(el.errs, fmt.Errorf("%s:%s", name, strings.TrimPrefix(m, "line ")))
			}
			return nil, el.err()
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.validate(el)
	if err := el.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// UnmarshalYAML accepts a bare quantity as a nominal quota.
func (q *Quota) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		q.NominalQuota = n.Value
		return nil
	}
	type plain Quota
	return n.Decode((*plain)(q))
}

// fieldPath locates a value in the spec: string segments are mapping keys, ints list indexes.
type fieldPath []any

func (p fieldPath) key(k string) fieldPath { return append(p[:len(p):len(p)], k) }
func (p fieldPath) idx(i int) fieldPath    { return append(p[:len(p):len(p)], i) }

func (p fieldPath) String() string {
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

// errList collects validation errors; each gets the line of the deepest node its path reaches.
type errList struct {
	file string
	root *yaml.Node
	errs []error
}

func (l *errList) add(p fieldPath, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	loc := l.file
	if line := lineOf(l.root, p); line > 0 {
		loc = fmt.Sprintf("%s:%d", l.file, line)
	}
	if len(p) == 0 {
		l.errs = append(l.errs, fmt.Errorf("%s: %s", loc, msg))
		return
	}
	l.errs = append(l.errs, fmt.Errorf("%s: %s: %s", loc, p, msg))
}

func (l *errList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return errors.Join(l.errs...)
}

// lineOf walks p from n and returns the line of the deepest node found (0 without a tree).
func lineOf(n *yaml.Node, p fieldPath) int {
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

// checkKnown reports every mapping key that names no field of t, with its full path, before
// decoding (yaml.v3's own check names neither the path nor every field).
func checkKnown(n *yaml.Node, t reflect.Type, p fieldPath, l *errList) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode { // a scalar Quota, or a type error Decode reports
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
				l.add(p.key(k), "unknown field (known fields: %s)", strings.Join(known, ", "))
				continue
			}
			checkKnown(n.Content[i+1], ft, p.key(k), l)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkKnown(n.Content[i+1], t.Elem(), p.key(n.Content[i].Value), l)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			checkKnown(c, t.Elem(), p.idx(i), l)
		}
	}
}
