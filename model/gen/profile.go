package gen

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fielderr"
	"github.com/kueuelab/kueuelab/model/trace"
)

// ProfileVersion is the profile schema version this package reads.
const ProfileVersion = 1

// DefaultProfileName names the embedded default profile in messages.
const DefaultProfileName = "model/gen/profiles/default.yaml (embedded)"

//go:embed profiles/default.yaml
var defaultProfileYAML []byte

// probTolerance is how far a list of probabilities may sum from 1.
const probTolerance = 1e-9

// Profile holds every prior of the workload model. See profiles/default.yaml for the meaning of each field.
type Profile struct {
	Version                 int          `yaml:"version"`
	Arrival                 Arrival      `yaml:"arrival"`
	GPURatio                float64      `yaml:"gpuRatio"`
	Intent                  Intent       `yaml:"intent"`
	Teams                   []Team       `yaml:"teams"`
	GPUCount                []GPUCount   `yaml:"gpuCount"`
	GPUUtilizationHalfWidth float64      `yaml:"gpuUtilizationHalfWidth"`
	HPOTrials               IntRange     `yaml:"hpoTrials"`
	Work                    WorkRates    `yaml:"work"`
	Classes                 Thresholds   `yaml:"classes"`
	Families                []FamilySpec `yaml:"families"`
}

// Arrival is the day-shaped arrival process.
type Arrival struct {
	MeanInterArrivalSec float64   `yaml:"meanInterArrivalSec"`
	HourlyMultipliers   []float64 `yaml:"hourlyMultipliers"`
	Burst               Burst     `yaml:"burst"`
}

// Burst describes burst days.
type Burst struct {
	DayProbability float64 `yaml:"dayProbability"`
	Multiplier     float64 `yaml:"multiplier"`
	MeanJobs       float64 `yaml:"meanJobs"`
}

// Intent holds the shares of the performance and eco intent classes (the rest is standard).
type Intent struct {
	PerformanceRatio float64 `yaml:"performanceRatio"`
	EcoRatio         float64 `yaml:"ecoRatio"`
}

// Team is a namespace that submits a share of the workloads.
type Team struct {
	Namespace   string  `yaml:"namespace"`
	Probability float64 `yaml:"probability"`
}

// GPUCount is one value of the GPU footprint prior.
type GPUCount struct {
	GPUs            int     `yaml:"gpus"`
	Probability     float64 `yaml:"probability"`
	UtilizationMean float64 `yaml:"utilizationMean"`
}

// IntRange is an inclusive integer range.
type IntRange struct {
	Min int `yaml:"min"`
	Max int `yaml:"max"`
}

// WorkRates are the work units per busy core-second and per busy GPU-second.
type WorkRates struct {
	CPURatePerCore float64 `yaml:"cpuRatePerCore"`
	GPURatePerGPU  float64 `yaml:"gpuRatePerGPU"`
}

// Thresholds turn a shared profile into workloadClass labels (see Classify).
type Thresholds struct {
	GPUComputeBoundMin float64 `yaml:"gpuComputeBoundMin"`
	GPUMemoryBoundMin  float64 `yaml:"gpuMemoryBoundMin"`
	CPUIOBoundMin      float64 `yaml:"cpuIOBoundMin"`
	CPUComputeBoundMin float64 `yaml:"cpuComputeBoundMin"`
	CPULightMax        float64 `yaml:"cpuLightMax"`
}

// FamilySpec holds the priors of one workload family.
type FamilySpec struct {
	Name                trace.Family    `yaml:"name"`
	Probability         float64         `yaml:"probability"`
	Duration            DurationSpec    `yaml:"duration"`
	GPUUtilizationScale float64         `yaml:"gpuUtilizationScale"`
	CPUUtilization      Range           `yaml:"cpuUtilization"`
	MemoryIntensity     Range           `yaml:"memoryIntensity"`
	IOIntensity         Range           `yaml:"ioIntensity"`
	CPUFeedIntensityGPU Range           `yaml:"cpuFeedIntensityGpu"`
	Sensitivity         SensitivitySpec `yaml:"sensitivity"`
	Roles               Roles           `yaml:"roles"`
	// Checkpoint is how the family's workloads checkpoint and restart (omitted: never).
	Checkpoint CheckpointSpec `yaml:"checkpoint,omitempty"`
	// MaxRestarts is how often the owner of a workload restarts it after a pod failure.
	MaxRestarts int `yaml:"maxRestarts,omitempty"`
	// GPUShares, for debug_eval and single_gpu_training, are shares of a GPU that a workload
	// drawn with one GPU asks for instead (trace.ResourceGPUFraction), each with its
	// probability; with the rest it keeps the whole GPU. Omitted: whole GPUs only.
	GPUShares []ShareChoice `yaml:"gpuShares,omitempty"`
}

// ShareChoice is one share of a GPU (> 0, < 1) and the probability a one-GPU workload asks for it.
type ShareChoice struct {
	Share       float64 `yaml:"share"`
	Probability float64 `yaml:"probability"`
}

// CheckpointSpec is a family's checkpointing: every IntervalSec of work, at CostSec of pause per
// checkpoint, and RestartSec from a restart to resumed work. Values, not ranges: the same for
// every workload of the family, so the generator's random draws do not depend on them.
type CheckpointSpec struct {
	IntervalSec float64 `yaml:"intervalSec"`
	CostSec     float64 `yaml:"costSec"`
	RestartSec  float64 `yaml:"restartSec"`
}

// DurationSpec is a clamped lognormal duration.
type DurationSpec struct {
	MedianSec      float64 `yaml:"medianSec"`
	Sigma          float64 `yaml:"sigma"`
	MinSec         float64 `yaml:"minSec"`
	MaxSec         float64 `yaml:"maxSec"`
	LargeGPUMin    int     `yaml:"largeGPUMin"`
	LargeGPUFactor float64 `yaml:"largeGPUFactor"`
}

// SensitivitySpec holds the ranges of the CPU and GPU sensitivities.
type SensitivitySpec struct {
	CPU Range `yaml:"cpu"`
	GPU Range `yaml:"gpu"`
}

// Roles holds the requests of each pod role a family uses; the others stay nil.
type Roles struct {
	Main       *RoleSpec `yaml:"main"`
	Launcher   *RoleSpec `yaml:"launcher"`
	Worker     *RoleSpec `yaml:"worker"`
	PS         *RoleSpec `yaml:"ps"`
	Controller *RoleSpec `yaml:"controller"`
	Trial      *RoleSpec `yaml:"trial"`
}

// RoleSpec sizes a pod: cpu = CPU (or a draw from CPUChoices) + CPUPerGPU*gpus;
// memory in Gi = MemoryGi + MemoryGiPerGPU*gpus + MemoryGiPerCPU*cpu.
type RoleSpec struct {
	CPU            float64     `yaml:"cpu"`
	CPUPerGPU      float64     `yaml:"cpuPerGPU"`
	MemoryGi       float64     `yaml:"memoryGi"`
	MemoryGiPerGPU float64     `yaml:"memoryGiPerGPU"`
	MemoryGiPerCPU float64     `yaml:"memoryGiPerCPU"`
	CPUChoices     []CPUChoice `yaml:"cpuChoices"`
}

// CPUChoice is one value of a role's CPU prior.
type CPUChoice struct {
	Cores       float64 `yaml:"cores"`
	Probability float64 `yaml:"probability"`
}

// Range is a closed interval [Min, Max], written in YAML as a two-element list.
type Range struct {
	Min, Max float64
}

// UnmarshalYAML reads [min, max].
func (r *Range) UnmarshalYAML(n *yaml.Node) error {
	var v []float64
	if err := n.Decode(&v); err != nil || len(v) != 2 {
		return fmt.Errorf("line %d: a range is a list [min, max]", n.Line)
	}
	r.Min, r.Max = v[0], v[1]
	return nil
}

// MarshalYAML writes [min, max] on one line.
func (r Range) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, v := range []float64{r.Min, r.Max} {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(v, 'g', -1, 64)})
	}
	return n, nil
}

// YAML returns the profile as a profile file (what ParseProfile reads back).
func (p *Profile) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return buf.Bytes(), nil
}

// familyRoles lists the pod roles each family's structure uses (fixed by the model, not the profile).
func familyRoles(f trace.Family) []string {
	switch f {
	case trace.DistributedTraining:
		return []string{trace.RoleLauncher, trace.RoleWorker}
	case trace.ParameterServerTraining:
		return []string{trace.RolePS, trace.RoleWorker}
	case trace.HPOExperiment:
		return []string{trace.RoleController, trace.RoleTrial}
	default:
		return []string{trace.RoleMain}
	}
}

// role returns the spec of a pod role, nil when the profile does not size it.
func (r *Roles) role(name string) *RoleSpec {
	switch name {
	case trace.RoleMain:
		return r.Main
	case trace.RoleLauncher:
		return r.Launcher
	case trace.RoleWorker:
		return r.Worker
	case trace.RolePS:
		return r.PS
	case trace.RoleController:
		return r.Controller
	case trace.RoleTrial:
		return r.Trial
	}
	return nil
}

var allRoles = []string{trace.RoleMain, trace.RoleLauncher, trace.RoleWorker, trace.RolePS, trace.RoleController, trace.RoleTrial}

// DefaultProfileYAML returns the embedded default profile as written.
func DefaultProfileYAML() []byte { return bytes.Clone(defaultProfileYAML) }

// DefaultProfile returns the embedded default profile, parsed and validated.
func DefaultProfile() (*Profile, error) { return ParseProfile(DefaultProfileName, defaultProfileYAML) }

// LoadProfile reads and validates the profile at path.
func LoadProfile(path string) (*Profile, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read profile: %w", err)
	}
	p, err := ParseProfile(path, data)
	return p, data, err
}

// ParseProfile decodes a profile strictly (unknown fields are errors) and validates it. Errors name
// name (the file), the line and the field path.
func ParseProfile(name string, data []byte) (*Profile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var p Profile
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fielderr.New(name, 0, "", "empty profile")
		}
		return nil, yamldoc.Errors(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fielderr.New(name, extra.Line, "", "a profile is a single YAML document")
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamldoc.Errors(name, err)
	}
	v := &validator{name: name, root: &root}
	p.validate(v)
	if err := v.errs.Err(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks a profile built or changed in code; name is used in messages.
func (p *Profile) Validate(name string) error {
	v := &validator{name: name}
	p.validate(v)
	return v.errs.Err()
}

// Family returns the spec of family f, nil when the profile has none.
func (p *Profile) Family(f trace.Family) *FamilySpec {
	for i := range p.Families {
		if p.Families[i].Name == f {
			return &p.Families[i]
		}
	}
	return nil
}

// validator collects errors, each naming the file, the line (when known) and the field path.
type validator struct {
	name string
	root *yaml.Node
	errs fielderr.List
}

func (v *validator) fail(path string, format string, args ...any) {
	v.errs = append(v.errs, fielderr.New(v.name, v.line(path), path, format, args...))
}

// line finds the line of a field path like "families[2].duration.sigma" in the YAML tree; for a
// missing field it returns the line of the nearest parent that exists.
func (v *validator) line(path string) int {
	if v.root == nil {
		return 0
	}
	n := v.root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, seg := range strings.Split(path, ".") {
		key, idx := seg, -1
		if i := strings.IndexByte(seg, '['); i >= 0 && strings.HasSuffix(seg, "]") {
			key = seg[:i]
			if k, err := strconv.Atoi(seg[i+1 : len(seg)-1]); err == nil {
				idx = k
			}
		}
		k, next := mappingEntry(n, key)
		if next == nil {
			return line
		}
		n, line = next, k.Line // the key's line: where a reader looks for the field
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
		}
	}
	return line
}

func mappingEntry(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

func (v *validator) prob(path string, x float64) {
	if !(x >= 0 && x <= 1) {
		v.fail(path, "probability %v is not in [0, 1]", x)
	}
}

func (v *validator) sumsToOne(path string, sum float64) {
	if math.Abs(sum-1) > probTolerance {
		v.fail(path, "probabilities sum to %v, not 1", sum)
	}
}

func (v *validator) positive(path string, x float64) {
	if !(x > 0) || math.IsInf(x, 0) {
		v.fail(path, "must be a positive number, got %v", x)
	}
}

func (v *validator) nonNegative(path string, x float64) {
	if !(x >= 0) || math.IsInf(x, 0) {
		v.fail(path, "must be >= 0, got %v", x)
	}
}

func (v *validator) unitRange(path string, r Range) {
	if !(r.Min >= 0 && r.Max <= 1 && r.Min <= r.Max) {
		v.fail(path, "range [%v, %v] must satisfy 0 <= min <= max <= 1", r.Min, r.Max)
	}
}

func (p *Profile) validate(v *validator) {
	if p.Version != ProfileVersion {
		v.fail("version", "unsupported profile version %d (this kueuelab reads version %d)", p.Version, ProfileVersion)
	}
	v.positive("arrival.meanInterArrivalSec", p.Arrival.MeanInterArrivalSec)
	if len(p.Arrival.HourlyMultipliers) != 24 {
		v.fail("arrival.hourlyMultipliers", "needs 24 values (one per hour of the day), got %d", len(p.Arrival.HourlyMultipliers))
	}
	for i, m := range p.Arrival.HourlyMultipliers {
		v.positive(fmt.Sprintf("arrival.hourlyMultipliers[%d]", i), m)
	}
	v.prob("arrival.burst.dayProbability", p.Arrival.Burst.DayProbability)
	v.positive("arrival.burst.multiplier", p.Arrival.Burst.Multiplier)
	if !(p.Arrival.Burst.MeanJobs >= 1) || math.IsInf(p.Arrival.Burst.MeanJobs, 0) {
		v.fail("arrival.burst.meanJobs", "must be >= 1, got %v", p.Arrival.Burst.MeanJobs)
	}
	v.prob("gpuRatio", p.GPURatio)
	v.prob("intent.performanceRatio", p.Intent.PerformanceRatio)
	v.prob("intent.ecoRatio", p.Intent.EcoRatio)
	if p.Intent.PerformanceRatio+p.Intent.EcoRatio > 1+probTolerance {
		v.fail("intent", "performanceRatio + ecoRatio = %v exceeds 1", p.Intent.PerformanceRatio+p.Intent.EcoRatio)
	}

	if len(p.Teams) == 0 {
		v.fail("teams", "needs at least one team")
	}
	sum := 0.0
	seenNS := map[string]bool{}
	for i, t := range p.Teams {
		path := fmt.Sprintf("teams[%d]", i)
		if !validNamespace(t.Namespace) {
			v.fail(path+".namespace", "%q is not a valid namespace name (DNS-1123 label)", t.Namespace)
		}
		if seenNS[t.Namespace] {
			v.fail(path+".namespace", "duplicate namespace %q", t.Namespace)
		}
		seenNS[t.Namespace] = true
		v.prob(path+".probability", t.Probability)
		sum += t.Probability
	}
	if len(p.Teams) > 0 {
		v.sumsToOne("teams", sum)
	}

	if len(p.GPUCount) == 0 {
		v.fail("gpuCount", "needs at least one value")
	}
	sum = 0
	seenG := map[int]bool{}
	for i, g := range p.GPUCount {
		path := fmt.Sprintf("gpuCount[%d]", i)
		if g.GPUs < 1 {
			v.fail(path+".gpus", "must be >= 1, got %d", g.GPUs)
		}
		if seenG[g.GPUs] {
			v.fail(path+".gpus", "duplicate GPU count %d", g.GPUs)
		}
		seenG[g.GPUs] = true
		v.prob(path+".probability", g.Probability)
		if !(g.UtilizationMean >= 0 && g.UtilizationMean <= 1) {
			v.fail(path+".utilizationMean", "%v is not in [0, 1]", g.UtilizationMean)
		}
		sum += g.Probability
	}
	if len(p.GPUCount) > 0 {
		v.sumsToOne("gpuCount", sum)
	}
	if !seenG[1] {
		v.fail("gpuCount", "needs an entry for 1 GPU (HPO trials and per-trial utilisation use it)")
	}
	if !(p.GPUUtilizationHalfWidth >= 0 && p.GPUUtilizationHalfWidth <= 0.5) {
		v.fail("gpuUtilizationHalfWidth", "must be in [0, 0.5], got %v", p.GPUUtilizationHalfWidth)
	}
	if p.HPOTrials.Min < 1 || p.HPOTrials.Min > p.HPOTrials.Max {
		v.fail("hpoTrials", "needs 1 <= min <= max, got [%d, %d]", p.HPOTrials.Min, p.HPOTrials.Max)
	}
	v.positive("work.cpuRatePerCore", p.Work.CPURatePerCore)
	v.positive("work.gpuRatePerGPU", p.Work.GPURatePerGPU)
	for _, t := range []struct {
		path string
		x    float64
	}{
		{"classes.gpuComputeBoundMin", p.Classes.GPUComputeBoundMin},
		{"classes.gpuMemoryBoundMin", p.Classes.GPUMemoryBoundMin},
		{"classes.cpuIOBoundMin", p.Classes.CPUIOBoundMin},
		{"classes.cpuComputeBoundMin", p.Classes.CPUComputeBoundMin},
		{"classes.cpuLightMax", p.Classes.CPULightMax},
	} {
		if !(t.x >= 0 && t.x <= 1) {
			v.fail(t.path, "threshold %v is not in [0, 1]", t.x)
		}
	}
	if p.Classes.CPULightMax > p.Classes.CPUComputeBoundMin {
		v.fail("classes.cpuLightMax", "%v exceeds cpuComputeBoundMin %v", p.Classes.CPULightMax, p.Classes.CPUComputeBoundMin)
	}
	p.validateFamilies(v)
}

func (p *Profile) validateFamilies(v *validator) {
	seen := map[trace.Family]bool{}
	gpuSum, cpuSum := 0.0, 0.0
	for i := range p.Families {
		f := &p.Families[i]
		path := fmt.Sprintf("families[%d]", i)
		if !f.Name.Known() {
			v.fail(path+".name", "unknown family %q", f.Name)
			continue
		}
		if seen[f.Name] {
			v.fail(path+".name", "duplicate family %q", f.Name)
		}
		seen[f.Name] = true
		v.prob(path+".probability", f.Probability)
		if f.Name.GPU() {
			gpuSum += f.Probability
		} else {
			cpuSum += f.Probability
		}
		d := f.Duration
		dp := path + ".duration"
		v.positive(dp+".minSec", d.MinSec)
		v.positive(dp+".maxSec", d.MaxSec)
		if d.MinSec > d.MaxSec {
			v.fail(dp, "minSec %v > maxSec %v", d.MinSec, d.MaxSec)
		}
		v.positive(dp+".medianSec", d.MedianSec)
		if d.MedianSec < d.MinSec || d.MedianSec > d.MaxSec {
			v.fail(dp+".medianSec", "median %v is outside the clamps [%v, %v]", d.MedianSec, d.MinSec, d.MaxSec)
		}
		v.positive(dp+".sigma", d.Sigma)
		if d.LargeGPUMin < 0 {
			v.fail(dp+".largeGPUMin", "must be >= 0, got %d", d.LargeGPUMin)
		}
		if d.LargeGPUMin > 0 {
			v.positive(dp+".largeGPUFactor", d.LargeGPUFactor)
		} else if d.LargeGPUFactor != 0 {
			v.fail(dp+".largeGPUFactor", "set without largeGPUMin")
		}
		v.unitRange(path+".cpuUtilization", f.CPUUtilization)
		v.unitRange(path+".memoryIntensity", f.MemoryIntensity)
		v.unitRange(path+".ioIntensity", f.IOIntensity)
		v.unitRange(path+".cpuFeedIntensityGpu", f.CPUFeedIntensityGPU)
		v.unitRange(path+".sensitivity.cpu", f.Sensitivity.CPU)
		v.unitRange(path+".sensitivity.gpu", f.Sensitivity.GPU)
		if f.Name.GPU() {
			v.positive(path+".gpuUtilizationScale", f.GPUUtilizationScale)
			for j, g := range p.GPUCount {
				lo, hi := p.gpuUtilizationBounds(f, g.UtilizationMean)
				if lo < 0 || hi > 1 {
					v.fail(path+".gpuUtilizationScale", "gpuCount[%d] utilizationMean %v x %v +- %v = [%v, %v] leaves [0, 1]",
						j, g.UtilizationMean, f.GPUUtilizationScale, p.GPUUtilizationHalfWidth, lo, hi)
				}
			}
		} else if f.GPUUtilizationScale != 0 {
			v.fail(path+".gpuUtilizationScale", "a CPU family has no GPU utilisation")
		}
		p.validateRoles(v, path+".roles", f)
		c := f.Checkpoint
		v.nonNegative(path+".checkpoint.intervalSec", c.IntervalSec)
		v.nonNegative(path+".checkpoint.costSec", c.CostSec)
		v.nonNegative(path+".checkpoint.restartSec", c.RestartSec)
		if c.CostSec > 0 && c.IntervalSec < 1 {
			v.fail(path+".checkpoint.intervalSec", "must be >= 1 when checkpoints cost a pause, got %v", c.IntervalSec)
		}
		if f.MaxRestarts < 0 {
			v.fail(path+".maxRestarts", "must be >= 0, got %d", f.MaxRestarts)
		}
		if len(f.GPUShares) > 0 && f.Name != trace.DebugEval && f.Name != trace.SingleGPUTraining {
			v.fail(path+".gpuShares", "only debug_eval and single_gpu_training pods run on one GPU and can ask for a share of it")
		}
		var shareSum float64
		for j, c := range f.GPUShares {
			// Traces write a share to the thousandth of a GPU.
			if !(c.Share >= 0.001 && c.Share <= 0.999) || math.Round(c.Share*1000) != c.Share*1000 {
				v.fail(fmt.Sprintf("%s.gpuShares[%d].share", path, j), "must be a share of a GPU in thousandths, 0.001 to 0.999, got %v", c.Share)
			}
			v.prob(fmt.Sprintf("%s.gpuShares[%d].probability", path, j), c.Probability)
			shareSum += c.Probability
		}
		if shareSum > 1+1e-9 {
			v.fail(path+".gpuShares", "probabilities sum to %v, more than 1", shareSum)
		}
	}
	for _, fam := range trace.Families {
		if !seen[fam] {
			v.fail("families", "family %q is missing (give it probability 0 to disable it)", fam)
		}
	}
	v.sumsToOne("families (GPU families)", gpuSum)
	v.sumsToOne("families (CPU families)", cpuSum)
}

func (p *Profile) validateRoles(v *validator, path string, f *FamilySpec) {
	used := familyRoles(f.Name)
	for _, name := range allRoles {
		r := f.Roles.role(name)
		rp := path + "." + name
		isUsed := false
		for _, u := range used {
			isUsed = isUsed || u == name
		}
		switch {
		case r == nil && isUsed:
			v.fail(rp, "family %s needs requests for role %q", f.Name, name)
			continue
		case r == nil:
			continue
		case !isUsed:
			v.fail(rp, "family %s has no pod role %q (it uses %s)", f.Name, name, strings.Join(used, ", "))
			continue
		}
		for _, x := range []struct {
			field string
			val   float64
		}{{"cpu", r.CPU}, {"cpuPerGPU", r.CPUPerGPU}, {"memoryGi", r.MemoryGi}, {"memoryGiPerGPU", r.MemoryGiPerGPU}, {"memoryGiPerCPU", r.MemoryGiPerCPU}} {
			v.nonNegative(rp+"."+x.field, x.val)
		}
		podGPUs := 0.0
		if f.Name.GPU() && (name == trace.RoleMain || name == trace.RoleWorker || name == trace.RoleTrial) {
			podGPUs = 1
		}
		if len(r.CPUChoices) > 0 {
			if r.CPU != 0 {
				v.fail(rp+".cpu", "set together with cpuChoices")
			}
			sum := 0.0
			for j, c := range r.CPUChoices {
				cp := fmt.Sprintf("%s.cpuChoices[%d]", rp, j)
				v.positive(cp+".cores", c.Cores)
				v.prob(cp+".probability", c.Probability)
				sum += c.Probability
			}
			v.sumsToOne(rp+".cpuChoices", sum)
		} else if !(r.CPU+r.CPUPerGPU*podGPUs > 0) {
			v.fail(rp, "requests no CPU (set cpu, cpuPerGPU or cpuChoices)")
		}
		if !(r.MemoryGi+r.MemoryGiPerGPU*podGPUs+r.MemoryGiPerCPU > 0) {
			v.fail(rp, "requests no memory (set memoryGi, memoryGiPerGPU or memoryGiPerCPU)")
		}
	}
}

// gpuUtilizationBounds returns the support of a family's gpuUtilization at a GPU count's mean.
func (p *Profile) gpuUtilizationBounds(f *FamilySpec, mean float64) (lo, hi float64) {
	c := float64(mean * f.GPUUtilizationScale)
	return c - p.GPUUtilizationHalfWidth, c + p.GPUUtilizationHalfWidth
}

// validNamespace reports whether s is a DNS-1123 label, the rule for Kubernetes namespace names.
func validNamespace(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
