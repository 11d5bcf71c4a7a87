package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fielderr"
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

// Parse is Load on bytes already read; name is used in error messages and its directory is what
// relative paths in the spec (scheduler.config) are relative to.
func Parse(name string, data []byte) (*Spec, error) {
	return ParseIn(filepath.Dir(name), name, data)
}

// ParseIn is Parse with relative paths in the spec resolved against dir, for a spec that is not a
// file (an experiment's patched spec).
func ParseIn(dir, name string, data []byte) (*Spec, error) {
	root, err := yamldoc.Root(name, "cluster spec", data)
	if err != nil {
		return nil, err
	}
	el := &errList{file: name, root: root}
	if root.Kind != yaml.MappingNode {
		el.add(nil, "a cluster spec is a mapping (apiVersion, kind, nodePools, ...)")
		return nil, el.err()
	}
	yamldoc.UnknownFields(root, reflect.TypeOf(Spec{}), func(_ *yaml.Node, p yamldoc.Path, known []string) {
		el.add(fieldPath(p), "unknown field (known fields: %s)", strings.Join(known, ", "))
	})
	if err := el.err(); err != nil {
		return nil, err
	}
	s := &Spec{file: name, dir: dir}
	if err := root.Decode(s); err != nil {
		return nil, yamldoc.ErrorsIn(name, root, err)
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
// fieldPath is a path into the spec, as printed in errors.
type fieldPath yamldoc.Path

func (p fieldPath) key(k string) fieldPath { return fieldPath(yamldoc.Path(p).Key(k)) }
func (p fieldPath) idx(i int) fieldPath    { return fieldPath(yamldoc.Path(p).Idx(i)) }
func (p fieldPath) String() string         { return yamldoc.Path(p).String() }

// errList collects validation errors (fielderr's one shape); each gets the line of the deepest
// node its path reaches.
type errList struct {
	file string
	root *yaml.Node
	errs fielderr.List
}

func (l *errList) add(p fieldPath, format string, args ...any) {
	l.errs = append(l.errs, fielderr.New(l.file, yamldoc.Line(l.root, yamldoc.Path(p)), p.String(), format, args...))
}

func (l *errList) err() error { return l.errs.Err() }
