package trace

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// ParseQuantity parses a Kubernetes resource quantity ("4", "500m", "12Gi", "1e3") into its value.
// model/ does not import Kubernetes, so this is the grammar of k8s.io/apimachinery's
// resource.ParseQuantity (a test cross-checks the two) reduced to what a trace needs: a float value.
func ParseQuantity(s string) (float64, error) {
	if s == "" {
		return 0, fmt.Errorf("bad quantity %q: empty", s)
	}
	i := 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	digits, dot := 0, false
	for ; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			digits++
			continue
		}
		if c == '.' && !dot {
			dot = true
			continue
		}
		break
	}
	if digits == 0 {
		return 0, fmt.Errorf("bad quantity %q: no digits", s)
	}
	num, suffix := s[:i], s[i:]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bad quantity %q: %w", s, err)
	}
	mult, ok := quantitySuffixes[suffix]
	if !ok {
		if len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
			exp, err := strconv.ParseInt(suffix[1:], 10, 32)
			if err != nil {
				return 0, fmt.Errorf("bad quantity %q: bad exponent %q", s, suffix)
			}
			mult = math.Pow10(int(exp))
		} else {
			return 0, fmt.Errorf("bad quantity %q: unknown suffix %q", s, suffix)
		}
	}
	r := v * mult
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, fmt.Errorf("bad quantity %q: out of range for a float64", s)
	}
	return r, nil
}

var quantitySuffixes = map[string]float64{
	"": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}

// Value returns the parsed value of resource name, 0 when absent or malformed.
func (r Requests) Value(name string) float64 {
	q, ok := r[name]
	if !ok {
		return 0
	}
	v, err := ParseQuantity(q)
	if err != nil {
		return 0
	}
	return v
}

// GPUs returns the whole GPUs requested over every GPU resource (0 when absent or malformed).
func (r Requests) GPUs() int64 {
	var n float64
	for _, name := range GPUResources {
		n += r.Value(name)
	}
	return int64(math.Round(n))
}

// GPUResource returns the GPU resource these requests ask a non-zero amount of, "" when none.
func (r Requests) GPUResource() string {
	for _, name := range GPUResources {
		if r.Value(name) > 0 {
			return name
		}
	}
	return ""
}

// Names returns the resource names in sorted order (the order the writer emits).
func (r Requests) Names() []string {
	names := make([]string, 0, len(r))
	for k := range r {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
