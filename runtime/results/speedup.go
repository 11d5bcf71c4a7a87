package results

import (
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Speedup caps trace seconds per wall second between events on the cluster engine; 0 is "max"
// (no cap: the clock jumps from event to event). It is the one type for --speedup, an
// experiment's speedup field and summary.json's speedup (a number there, 0 for max).
type Speedup float64

// ParseSpeedup reads "max" or a positive number.
func ParseSpeedup(s string) (Speedup, error) {
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("speedup: want \"max\" or a positive number, got %q", s)
	}
	return Speedup(v), nil
}

// String is "max" or the number.
func (s Speedup) String() string {
	if s == 0 {
		return "max"
	}
	return strconv.FormatFloat(float64(s), 'g', -1, 64)
}

// Max reports whether trace time is uncapped.
func (s Speedup) Max() bool { return s == 0 }

// Set parses a flag's value.
func (s *Speedup) Set(v string) error {
	p, err := ParseSpeedup(v)
	if err == nil {
		*s = p
	}
	return err
}

// Type is the flag's value type in --help.
func (*Speedup) Type() string { return "max|number" }

// UnmarshalYAML reads "max" or a positive number, naming the line.
func (s *Speedup) UnmarshalYAML(n *yaml.Node) error {
	p, err := ParseSpeedup(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = p
	return nil
}
