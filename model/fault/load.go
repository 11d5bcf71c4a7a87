package fault

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
)

// Load reads a fault spec file (the fields of Spec at the top level); errors are "file:line:
// field: reason".
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	root, err := yamldoc.Root(path, "fault spec", data)
	if err != nil {
		return nil, err
	}
	var errs []error
	yamldoc.UnknownFields(root, reflect.TypeOf(Spec{}), func(key *yaml.Node, p yamldoc.Path, known []string) {
		errs = append(errs, fmt.Errorf("%s:%d: %s: unknown field (known fields: %s)", path, key.Line, p, strings.Join(known, ", ")))
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var s Spec
	if err := root.Decode(&s); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, m := range te.Errors {
				errs = append(errs, fmt.Errorf("%s:%s", path, strings.TrimPrefix(m, "line ")))
			}
			return nil, errors.Join(errs...)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, p := range s.Check() {
		errs = append(errs, fmt.Errorf("%s:%d: %s: %s", path, yamldoc.Line(root, yamldoc.Path(p.Path)), PathString(p.Path), p.Msg))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &s, nil
}
