package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fielderr"
	"github.com/kueuelab/kueuelab/model/trace"
)

// Mapping chooses the kind (a Registry name) that renders each family.
type Mapping map[trace.Family]string

// DefaultMapping returns the kind that renders each family when no mapping file chooses one
// (the README's Render section lists the same defaults).
func DefaultMapping() Mapping {
	return Mapping{
		trace.DistributedTraining:     "MPIJob",
		trace.ParameterServerTraining: "JobSet",
		trace.HPOExperiment:           "Experiment",
		trace.SingleGPUTraining:       "Job",
		trace.DebugEval:               "Job",
		trace.CPUPreprocess:           "Job",
		trace.CPUAnalytics:            "Job",
	}
}

// LoadMapping reads a mapping file over the defaults.
func LoadMapping(path string, reg *Registry) (Mapping, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mapping: %w", err)
	}
	return ParseMapping(data, path, reg)
}

// ParseMapping parses a mapping file ("kinds: {family: Kind, ...}") over the defaults. It is
// strict: an unknown top-level field, family or kind, or a kind that cannot render the family,
// is an error naming source, line and field.
func ParseMapping(data []byte, source string, reg *Registry) (Mapping, error) {
	m := DefaultMapping()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		return nil, yamldoc.Errors(source, err)
	}
	if len(doc.Content) == 0 {
		return m, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fielderr.New(source, root.Line, "", "want a mapping with a kinds field")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		if key.Value != "kinds" {
			return nil, fielderr.New(source, key.Line, key.Value, "unknown field (want kinds)")
		}
		if val.Kind != yaml.MappingNode {
			return nil, fielderr.New(source, val.Line, "kinds", "want a map of family to kind")
		}
		for j := 0; j+1 < len(val.Content); j += 2 {
			fk, kv := val.Content[j], val.Content[j+1]
			f := trace.Family(fk.Value)
			if !f.Known() {
				return nil, fielderr.New(source, fk.Line, "kinds."+fk.Value, "unknown family (want one of %s)", familyList())
			}
			if kv.Kind != yaml.ScalarNode {
				return nil, fielderr.New(source, kv.Line, "kinds."+fk.Value, "want a kind name")
			}
			if _, ok := reg.Kind(kv.Value); !ok {
				return nil, fielderr.New(source, kv.Line, "kinds."+fk.Value, "unknown kind %q (want one of %s)", kv.Value, strings.Join(reg.Names(), ", "))
			}
			if !reg.Supports(kv.Value, f) {
				return nil, fielderr.New(source, kv.Line, "kinds."+fk.Value, "kind %s cannot render this family", kv.Value)
			}
			m[f] = kv.Value
		}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fielderr.New(source, extra.Line, "", "want a single YAML document")
	}
	return m, nil
}

func familyList() string {
	s := make([]string, len(trace.Families))
	for i, f := range trace.Families {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}
