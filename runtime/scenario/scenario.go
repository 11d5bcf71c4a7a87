// Package scenario is kueuelab's library of scheduling challenges, each runnable and checked: a
// scenario is an experiment (a trace or generator settings, a cluster spec, variants, faults)
// plus the outcomes it must show, stated as checks on the results ("without all-or-nothing
// admission a gang runs partially for more than an hour; with it, never more than the timeout").
// Run executes the experiment, evaluates every check and writes the results, a report and
// checks.json. The scenarios live in examples/scenarios, one directory each.
package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/runtime/experiment"
)

// Kind identifies a scenario document (apiVersion is experiment.APIVersion).
const Kind = "Scenario"

// FileName is a scenario's file in its directory.
const FileName = "scenario.yaml"

// Scenario is a scenario file: an experiment with the challenge it shows and its checks.
type Scenario struct {
	Name string
	// Challenge names the scheduling challenge of the CNCF cloud-native AI whitepaper it shows.
	Challenge string
	// CI says the end-to-end tests run it by default (small enough for `make test`).
	CI         bool
	Experiment *experiment.Experiment
	Checks     []Check

	file string
}

// File is the scenario's file.
func (s *Scenario) File() string { return s.file }

// fields are a scenario's own top-level fields; the others are its experiment's.
type fields struct {
	Challenge string  `yaml:"challenge"`
	CI        bool    `yaml:"ci,omitempty"`
	Expect    []Check `yaml:"expect"`
}

// Load reads and checks the scenario at path (a scenario.yaml, or the directory holding one).
func Load(path string) (*Scenario, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, FileName)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load on bytes already read; name is the file in errors and the base of its relative
// paths. Errors are "file:line: field: reason".
func Parse(name string, data []byte) (*Scenario, error) {
	root, err := yamldoc.Root(name, "scenario file", data)
	if err != nil {
		return nil, err
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: a scenario file is a mapping (apiVersion, kind, challenge, trace, cluster, variants, expect)", name, root.Line)
	}
	// Split the scenario's own fields off; the rest is an experiment whose nodes keep their lines.
	own := &yaml.Node{Kind: yaml.MappingNode, Line: root.Line}
	exp := &yaml.Node{Kind: yaml.MappingNode, Line: root.Line}
	ownKeys := map[string]bool{}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(fields{})) {
		k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		ownKeys[k] = true
	}
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case ownKeys[k.Value]:
			own.Content = append(own.Content, k, v)
		case k.Value == "kind":
			if v.Value != Kind {
				errs = append(errs, fmt.Errorf("%s:%d: kind: must be %q, got %q", name, v.Line, Kind, v.Value))
			}
			kv := *v
			kv.Value = experiment.Kind
			exp.Content = append(exp.Content, k, &kv)
		default:
			exp.Content = append(exp.Content, k, v)
		}
	}
	var f fields
	yamldoc.UnknownFields(own, reflect.TypeOf(fields{}), func(key *yaml.Node, p yamldoc.Path, known []string) {
		errs = append(errs, fmt.Errorf("%s:%d: %s: unknown field (known fields: %s)", name, key.Line, p, strings.Join(known, ", ")))
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := own.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	e, err := experiment.ParseNode(name, exp)
	if err != nil {
		return nil, err
	}
	s := &Scenario{Name: e.Metadata.Name, Challenge: f.Challenge, CI: f.CI, Experiment: e, Checks: f.Expect, file: name}
	if err := s.validate(root); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Scenario) validate(root *yaml.Node) error {
	var errs []error
	line := func(p ...any) string {
		if l := yamldoc.Line(root, yamldoc.Path(p)); l > 0 {
			return s.file + ":" + strconv.Itoa(l)
		}
		return s.file
	}
	if s.Name == "" {
		errs = append(errs, fmt.Errorf("%s: metadata.name: required", line("metadata")))
	}
	if s.Challenge == "" {
		errs = append(errs, fmt.Errorf("%s: challenge: required (the scheduling challenge the scenario shows)", line()))
	}
	if len(s.Checks) == 0 {
		errs = append(errs, fmt.Errorf("%s: expect: at least one check is required", line()))
	}
	variants := map[string]bool{}
	for _, v := range s.Experiment.Variants {
		variants[v.Name] = true
	}
	for i := range s.Checks {
		if err := s.Checks[i].check(variants, s.Experiment); err != nil {
			errs = append(errs, fmt.Errorf("%s: expect[%d]: %w", line("expect", i), i, err))
		}
	}
	return errors.Join(errs...)
}

// Entry is one scenario of a library directory.
type Entry struct {
	Name, Challenge, Description, Dir string
	CI                                bool
	Err                               error // the scenario does not load
}

// List reads every scenario directory under dir, sorted by name.
func List(dir string) ([]Entry, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	var out []Entry
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		p := filepath.Join(dir, de.Name())
		if _, err := os.Stat(filepath.Join(p, FileName)); err != nil {
			continue
		}
		e := Entry{Name: de.Name(), Dir: p}
		if s, err := Load(p); err != nil {
			e.Err = err
		} else {
			e.Name, e.Challenge, e.Description, e.CI = s.Name, s.Challenge, s.Experiment.Metadata.Description, s.CI
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// NotCovered lists the whitepaper's challenges no scenario shows yet, and why.
var NotCovered = []struct{ Challenge, Why string }{}
