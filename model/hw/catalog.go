package hw

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fielderr"
)

//go:embed catalog.yaml
var defaultCatalog []byte

// CurvePoints is the number of SPECpower load levels: 0, 10, …, 100 %.
const CurvePoints = 11

// GPU is one GPU family: power limits and the cap→throughput parameters (see package doc).
type GPU struct {
	Family          string  `yaml:"family"`
	MaxW            float64 `yaml:"maxW"`
	MinCapW         float64 `yaml:"minCapW"`
	IdleW           float64 `yaml:"idleW"`
	UtilExponent    float64 `yaml:"utilExponent"`
	MemoryPowerDrop float64 `yaml:"memoryPowerDrop"`
	Gamma           float64 `yaml:"gamma"`
	MemoryEpsilon   float64 `yaml:"memoryEpsilon"`
	MemoryGamma     float64 `yaml:"memoryGamma"`
}

// CPU is one CPU node model: its SPECpower curve and the platform constant.
type CPU struct {
	Model           string    `yaml:"model"`
	Cores           float64   `yaml:"cores"`
	CurveW          []float64 `yaml:"curveW"`
	PlatformW       float64   `yaml:"platformW"`
	DynamicExponent float64   `yaml:"dynamicExponent"`
	MinFrequency    float64   `yaml:"minFrequency"`
}

// Catalog is the whole hardware catalog.
type Catalog struct {
	GPUs        []GPU              `yaml:"gpus"`
	CPUs        []CPU              `yaml:"cpus"`
	DefaultCPU  string             `yaml:"defaultCPU"`
	CapProfiles map[string]float64 `yaml:"capProfiles"`
	// Faults are the default rates of random faults; optional in a catalog file (zero: none).
	Faults FaultRates `yaml:"faults,omitempty"`
}

// FaultRates are the default rates of random faults (model/fault): one GPU fault per
// GPUMTBFHours GPU-hours, one node fault per NodeMTBFHours node-hours, and a failed node back in
// service after NodeRepairSec.
type FaultRates struct {
	GPUMTBFHours  float64 `yaml:"gpuMTBFHours"`
	NodeMTBFHours float64 `yaml:"nodeMTBFHours"`
	NodeRepairSec float64 `yaml:"nodeRepairSec"`
}

// DefaultCatalog returns the embedded catalog (a fresh copy each call).
func DefaultCatalog() (*Catalog, error) {
	return parseCatalog("catalog.yaml (embedded)", defaultCatalog)
}

// LoadCatalog reads and validates a catalog file that replaces the embedded one.
func LoadCatalog(path string) (*Catalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load catalog: %w", err)
	}
	return parseCatalog(path, b)
}

// ParseCatalog decodes and validates catalog YAML; name is used in error messages.
func ParseCatalog(name string, data []byte) (*Catalog, error) { return parseCatalog(name, data) }

func parseCatalog(name string, data []byte) (*Catalog, error) {
	var c Catalog
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fielderr.New(name, 0, "", "empty catalog")
		}
		return nil, yamldoc.Errors(name, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamldoc.Errors(name, err)
	}
	if err := c.validate(name, &root); err != nil {
		return nil, err
	}
	return &c, nil
}

// lineOf returns the line of item i of the top-level sequence key (0 when unknown).
func lineOf(root *yaml.Node, key string, i int) int {
	if root == nil || len(root.Content) == 0 {
		return 0
	}
	m := root.Content[0]
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key {
			seq := m.Content[j+1]
			if i < len(seq.Content) {
				return seq.Content[i].Line
			}
			return seq.Line
		}
	}
	return 0
}

func (c *Catalog) validate(name string, root *yaml.Node) error {
	var errs fielderr.List
	bad := func(key string, i int, id, field, format string, args ...any) {
		errs = append(errs, fielderr.New(name, lineOf(root, key, i), fmt.Sprintf("%s[%s].%s", key, id, field), format, args...))
	}
	top := func(field, format string, args ...any) {
		errs = append(errs, fielderr.New(name, 0, field, format, args...))
	}
	if len(c.GPUs) == 0 {
		top("gpus", "at least one GPU family is required")
	}
	seen := map[string]bool{}
	for i, g := range c.GPUs {
		id := g.Family
		switch {
		case id == "":
			bad("gpus", i, fmt.Sprint(i), "family", "must not be empty")
		case seen[id]:
			bad("gpus", i, id, "family", "duplicate family")
		}
		seen[id] = true
		if g.MaxW <= 0 {
			bad("gpus", i, id, "maxW", "must be > 0, got %g", g.MaxW)
		}
		if g.MinCapW <= 0 || g.MinCapW > g.MaxW {
			bad("gpus", i, id, "minCapW", "must be in (0, maxW=%g], got %g", g.MaxW, g.MinCapW)
		}
		if g.IdleW < 0 || g.IdleW >= g.MaxW || g.IdleW >= g.MinCapW {
			bad("gpus", i, id, "idleW", "must be in [0, min(maxW=%g, minCapW=%g)), got %g", g.MaxW, g.MinCapW, g.IdleW)
		}
		if g.UtilExponent <= 0 {
			bad("gpus", i, id, "utilExponent", "must be > 0, got %g", g.UtilExponent)
		}
		if g.MemoryPowerDrop < 0 || g.MemoryPowerDrop >= 1 {
			bad("gpus", i, id, "memoryPowerDrop", "must be in [0, 1), got %g", g.MemoryPowerDrop)
		}
		if g.Gamma <= 0 {
			bad("gpus", i, id, "gamma", "must be > 0, got %g", g.Gamma)
		}
		if g.MemoryEpsilon < 0 || g.MemoryEpsilon >= 1 {
			bad("gpus", i, id, "memoryEpsilon", "must be in [0, 1) so throughput stays > 0, got %g", g.MemoryEpsilon)
		}
		if g.MemoryGamma <= 0 {
			bad("gpus", i, id, "memoryGamma", "must be > 0, got %g", g.MemoryGamma)
		}
	}
	if len(c.CPUs) == 0 {
		top("cpus", "at least one CPU model is required")
	}
	seen = map[string]bool{}
	for i, m := range c.CPUs {
		id := m.Model
		switch {
		case id == "":
			bad("cpus", i, fmt.Sprint(i), "model", "must not be empty")
		case seen[id]:
			bad("cpus", i, id, "model", "duplicate model")
		}
		seen[id] = true
		if m.Cores <= 0 {
			bad("cpus", i, id, "cores", "must be > 0, got %g", m.Cores)
		}
		if len(m.CurveW) != CurvePoints {
			bad("cpus", i, id, "curveW", "needs %d points (0, 10, …, 100 %% load), got %d", CurvePoints, len(m.CurveW))
		} else {
			for k, w := range m.CurveW {
				if w <= 0 {
					bad("cpus", i, id, fmt.Sprintf("curveW[%d]", k), "must be > 0, got %g", w)
				}
				if k > 0 && w < m.CurveW[k-1] {
					bad("cpus", i, id, fmt.Sprintf("curveW[%d]", k), "curve must be non-decreasing: %g < %g at the previous load level", w, m.CurveW[k-1])
				}
			}
			if m.CurveW[0] >= m.CurveW[CurvePoints-1] {
				bad("cpus", i, id, "curveW", "idle (%g) must be below full load (%g)", m.CurveW[0], m.CurveW[CurvePoints-1])
			}
		}
		if m.PlatformW < 0 {
			bad("cpus", i, id, "platformW", "must be >= 0, got %g", m.PlatformW)
		}
		if m.DynamicExponent < 1 {
			bad("cpus", i, id, "dynamicExponent", "must be >= 1, got %g", m.DynamicExponent)
		}
		if m.MinFrequency <= 0 || m.MinFrequency > 1 {
			bad("cpus", i, id, "minFrequency", "must be in (0, 1], got %g", m.MinFrequency)
		}
	}
	if c.DefaultCPU == "" {
		top("defaultCPU", "must name one of cpus")
	} else if !seen[c.DefaultCPU] {
		top("defaultCPU", "%q is not a model in cpus", c.DefaultCPU)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"gpuMTBFHours", c.Faults.GPUMTBFHours}, {"nodeMTBFHours", c.Faults.NodeMTBFHours}, {"nodeRepairSec", c.Faults.NodeRepairSec}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			top("faults."+f.name, "must be a finite number >= 0, got %g", f.v)
		}
	}
	profiles := make([]string, 0, len(c.CapProfiles))
	for p := range c.CapProfiles {
		profiles = append(profiles, p)
	}
	sort.Strings(profiles)
	for _, p := range profiles {
		if f := c.CapProfiles[p]; f <= 0 || f > 1 {
			top("capProfiles."+p, "fraction of maxW must be in (0, 1], got %g", f)
		}
	}
	return errs.Err()
}

// GPU returns the family's entry.
func (c *Catalog) GPU(family string) (*GPU, bool) {
	for i := range c.GPUs {
		if c.GPUs[i].Family == family {
			return &c.GPUs[i], true
		}
	}
	return nil, false
}

// CPU returns the model's entry, falling back to DefaultCPU for an empty or unknown model; ok
// reports whether model itself was found.
func (c *Catalog) CPU(model string) (cpu *CPU, ok bool) {
	for i := range c.CPUs {
		if c.CPUs[i].Model == model {
			return &c.CPUs[i], true
		}
	}
	for i := range c.CPUs {
		if c.CPUs[i].Model == c.DefaultCPU {
			return &c.CPUs[i], false
		}
	}
	return nil, false
}
