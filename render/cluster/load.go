package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
// fieldPath is a path into the spec, as printed in errors.
type fieldPath yamldoc.Path

func (p fieldPath) key(k string) fieldPath { return fieldPath(yamldoc.Path(p).Key(k)) }
func (p fieldPath) idx(i int) fieldPath    { return fieldPath(yamldoc.Path(p).Idx(i)) }
func (p fieldPath) String() string         { return yamldoc.Path(p).String() }

// errList collects validation errors; each gets the line of the deepest node its path reaches.
type errList struct {
	file string
	root *yaml.Node
	errs []error
}

func (l *errList) add(p fieldPath, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	loc := l.file
	if line := yamldoc.Line(l.root, yamldoc.Path(p)); line > 0 {
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
