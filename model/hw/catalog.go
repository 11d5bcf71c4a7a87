package hw

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"

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
	// MIG is the family's Multi-Instance GPU geometry; nil when the GPU cannot be partitioned.
	MIG *MIG `yaml:"mig,omitempty"`
}

// MIG is how one GPU of a family splits into MIG instances: compute slices (groups of SMs) and
// memory slices (each 1/MemorySlices of the memory, L2 and bandwidth), and the profiles NVIDIA
// offers. Placement is on the memory-slice axis, as nvidia-smi mig -lgipp prints it.
type MIG struct {
	ComputeSlices int          `yaml:"computeSlices"` // 7 on A100/H100/H200
	MemorySlices  int          `yaml:"memorySlices"`  // 8
	Profiles      []MIGProfile `yaml:"profiles"`      // smallest first
}

// MIGProfile is one GPU-instance profile ("1g.10gb") and where an instance of it may start.
type MIGProfile struct {
	Name            string `yaml:"name"`            // "1g.10gb"
	ProfileID       int    `yaml:"profileId"`       // NVML GPU-instance profile ID (nvidia-smi mig -lgip): 19, 15, 14, 9, 5, 0
	ComputeSlices   int    `yaml:"computeSlices"`   // the "Ng" of the name
	MemorySlices    int    `yaml:"memorySlices"`    // the placement size on the memory-slice axis
	MemoryMiB       int64  `yaml:"memoryMiB"`       // as NVML reports it (GpuInstanceProfileInfo.MemorySizeMB)
	Multiprocessors int    `yaml:"multiprocessors"` // SMs of the instance
	Starts          []int  `yaml:"starts"`          // valid placement starts on the memory-slice axis
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
	var doc *yaml.Node // the top-level mapping, for the lines of nested fields
	if root != nil && len(root.Content) > 0 {
		doc = root.Content[0]
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
		if g.MIG != nil {
			validateMIG(g.MIG, func(p yamldoc.Path, field, format string, args ...any) {
				line := yamldoc.Line(doc, append(yamldoc.Path{"gpus", i, "mig"}, p...))
				errs = append(errs, fielderr.New(name, line, fmt.Sprintf("gpus[%s].mig%s", id, field), format, args...))
			})
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

// migName is NVIDIA's GPU-instance profile naming: compute slices, then the memory in whole GB.
var migName = regexp.MustCompile(`^([1-7])g\.[0-9]+gb$`)

// validateMIG checks one family's MIG table. report takes the path below the family's mig key (for
// the line) and the field as printed after "gpus[FAMILY].mig".
func validateMIG(m *MIG, report func(p yamldoc.Path, field, format string, args ...any)) {
	if m.ComputeSlices <= 0 {
		report(yamldoc.Path{"computeSlices"}, ".computeSlices", "must be > 0, got %d", m.ComputeSlices)
	}
	if m.MemorySlices <= 0 {
		report(yamldoc.Path{"memorySlices"}, ".memorySlices", "must be > 0, got %d", m.MemorySlices)
	}
	if m.ComputeSlices <= 0 || m.MemorySlices <= 0 {
		return // every profile check below measures against these two
	}
	names := map[string]bool{}
	ids := map[int]string{}
	full := ""
	for j := range m.Profiles {
		p := &m.Profiles[j]
		id := p.Name
		if id == "" {
			id = strconv.Itoa(j)
		}
		at := func(field, format string, args ...any) {
			report(yamldoc.Path{"profiles", j, field}, fmt.Sprintf(".profiles[%s].%s", id, field), format, args...)
		}
		sub := migName.FindStringSubmatch(p.Name)
		switch {
		case sub == nil:
			at("name", "must be <compute slices>g.<GB>gb like 1g.10gb, got %q", p.Name)
		case names[p.Name]:
			at("name", "duplicate profile")
		case sub[1] != strconv.Itoa(p.ComputeSlices):
			at("name", "says %sg but computeSlices is %d", sub[1], p.ComputeSlices)
		}
		names[p.Name] = true
		switch other, dup := ids[p.ProfileID]; {
		case p.ProfileID < 0:
			at("profileId", "must be >= 0, got %d", p.ProfileID)
		case dup:
			at("profileId", "%d is also the ID of %s", p.ProfileID, other)
		}
		ids[p.ProfileID] = id
		if p.ComputeSlices <= 0 || p.ComputeSlices > m.ComputeSlices {
			at("computeSlices", "must be in [1, %d], got %d", m.ComputeSlices, p.ComputeSlices)
		}
		sizeOK := p.MemorySlices > 0 && p.MemorySlices <= m.MemorySlices
		if !sizeOK {
			at("memorySlices", "must be in [1, %d], got %d", m.MemorySlices, p.MemorySlices)
		}
		if len(p.Starts) == 0 {
			at("starts", "needs at least one placement start")
		}
		for k, s := range p.Starts {
			field := fmt.Sprintf(".profiles[%s].starts[%d]", id, k)
			where := yamldoc.Path{"profiles", j, "starts", k}
			switch {
			case sizeOK && (s < 0 || s > m.MemorySlices-p.MemorySlices):
				report(where, field, "%d does not leave room for %d memory slices: must be in [0, %d]", s, p.MemorySlices, m.MemorySlices-p.MemorySlices)
			case k > 0 && s <= p.Starts[k-1]:
				report(where, field, "starts must be strictly increasing: %d after %d", s, p.Starts[k-1])
			}
		}
		if p.MemoryMiB <= 0 {
			at("memoryMiB", "must be > 0, got %d", p.MemoryMiB)
		}
		if p.Multiprocessors <= 0 {
			at("multiprocessors", "must be > 0, got %d", p.Multiprocessors)
		}
		// Smallest first is the order ProfileNames promises (and nvidia-smi mig -lgip lists).
		if j > 0 {
			q := &m.Profiles[j-1]
			if p.ComputeSlices < q.ComputeSlices || p.ComputeSlices == q.ComputeSlices && p.MemorySlices < q.MemorySlices {
				at("computeSlices", "profiles must be listed smallest first (compute, then memory slices): %s comes after %s", id, q.Name)
			}
		}
		for k := range m.Profiles {
			q := &m.Profiles[k]
			if q.MemorySlices < p.MemorySlices && q.MemoryMiB > p.MemoryMiB {
				at("memoryMiB", "%d MiB on %d memory slices is less than %s's %d MiB on %d", p.MemoryMiB, p.MemorySlices, q.Name, q.MemoryMiB, q.MemorySlices)
				break
			}
		}
		if p.ComputeSlices == m.ComputeSlices && p.MemorySlices == m.MemorySlices {
			if full != "" {
				report(yamldoc.Path{"profiles", j}, fmt.Sprintf(".profiles[%s]", id), "a second full profile: %s already covers all %d compute and %d memory slices", full, m.ComputeSlices, m.MemorySlices)
			} else {
				full = id
			}
		}
	}
	if full == "" {
		report(yamldoc.Path{"profiles"}, ".profiles", "needs exactly one full profile (%d compute and %d memory slices), got none", m.ComputeSlices, m.MemorySlices)
	}
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
