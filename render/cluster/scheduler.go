package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"
	kschedv1 "k8s.io/kube-scheduler/config/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
)

// Scheduler is how kube-scheduler places the pods Kueue admitted: the NodeResourcesFit scoring
// strategy of its default profile (the shape of upstream's NodeResourcesFitArgs.scoringStrategy),
// or a whole KubeSchedulerConfiguration file for anything else. Kueue admits on quota alone; this
// decides whether the admitted pods then find a node, which is what fragments GPU nodes or not.
// The local cluster starts its kube-scheduler with it; a cluster behind --kubeconfig keeps its own.
type Scheduler struct {
	ScoringStrategy *ScoringStrategy `yaml:"scoringStrategy,omitempty"`
	// Config is a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file, relative to
	// the spec file; exclusive with ScoringStrategy. Load rewrites it to an absolute path. The
	// local cluster replaces its clientConnection, leaderElection and pod backoff settings.
	Config string `yaml:"config,omitempty"`

	config *kschedv1.KubeSchedulerConfiguration // Config decoded
}

// Scoring strategy types (upstream's kubescheduler.config.k8s.io/v1 ScoringStrategyType).
const (
	ScoringLeastAllocated           = string(kschedv1.LeastAllocated)
	ScoringMostAllocated            = string(kschedv1.MostAllocated)
	ScoringRequestedToCapacityRatio = string(kschedv1.RequestedToCapacityRatio)
)

// ScoringStrategy is upstream's NodeResourcesFitArgs.scoringStrategy: how NodeResourcesFit scores
// the nodes a pod fits on. LeastAllocated (the default) prefers the emptiest node and spreads pods;
// MostAllocated prefers the fullest and packs them; RequestedToCapacityRatio scores a node's
// utilisation after placement through Shape.
type ScoringStrategy struct {
	// Type is LeastAllocated (default), MostAllocated or RequestedToCapacityRatio.
	Type string `yaml:"type,omitempty"`
	// Resources are scored with their weights (1-100; 0 means 1); empty means upstream's default,
	// cpu and memory with weight 1.
	Resources []ResourceWeight `yaml:"resources,omitempty"`
	// RequestedToCapacityRatio is required with that type and refused with the others.
	RequestedToCapacityRatio *RequestedToCapacityRatio `yaml:"requestedToCapacityRatio,omitempty"`
}

// ResourceWeight is a resource scored and its weight.
type ResourceWeight struct {
	Name   string `yaml:"name"`
	Weight int64  `yaml:"weight,omitempty"`
}

// RequestedToCapacityRatio is the scoring function of that strategy: a broken line through Shape.
type RequestedToCapacityRatio struct {
	Shape []ShapePoint `yaml:"shape"`
}

// ShapePoint maps a utilisation (0-100 %, increasing along the shape) to a score (0-10).
type ShapePoint struct {
	Utilization int32 `yaml:"utilization"`
	Score       int32 `yaml:"score"`
}

// DefaultSchedulerName is the profile the pods kueuelab renders are scheduled by.
const DefaultSchedulerName = "default-scheduler"

// upstream's limits (k8s.io/kubernetes pkg/scheduler/apis/config/validation).
const (
	maxResourceWeight = 100
	maxShapeScore     = 10
	maxUtilization    = 100
)

// defaultScoringResources are upstream's when a strategy names none.
var defaultScoringResources = []ResourceWeight{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}

// Scoring is the NodeResourcesFit scoring strategy the kube-scheduler's default profile uses
// under this spec, with upstream's defaults filled in (LeastAllocated on cpu and memory without a
// scheduler section; weight 0 means 1). It is what a scheduler simulating this cluster scores
// nodes with. Plugins a configuration file enables or disables are not reflected.
func (s *Spec) Scoring() ScoringStrategy {
	var st *ScoringStrategy
	if sch := s.Scheduler; sch != nil {
		st = sch.ScoringStrategy
		if sch.config != nil {
			st = fileScoring(sch.config)
		}
	}
	out := ScoringStrategy{Type: ScoringLeastAllocated}
	if st != nil {
		out.Type = or(st.Type, ScoringLeastAllocated)
		out.Resources = slices.Clone(st.Resources)
		if r := st.RequestedToCapacityRatio; r != nil {
			out.RequestedToCapacityRatio = &RequestedToCapacityRatio{Shape: slices.Clone(r.Shape)}
		}
	}
	if len(out.Resources) == 0 {
		out.Resources = slices.Clone(defaultScoringResources)
	}
	for i := range out.Resources {
		if out.Resources[i].Weight == 0 {
			out.Resources[i].Weight = 1
		}
	}
	return out
}

// String is the strategy in one line: "MostAllocated nvidia.com/gpu=5,cpu=1".
func (st ScoringStrategy) String() string {
	parts := make([]string, len(st.Resources))
	for i, r := range st.Resources {
		parts[i] = r.Name + "=" + strconv.FormatInt(r.Weight, 10)
	}
	out := st.Type + " " + strings.Join(parts, ",")
	if r := st.RequestedToCapacityRatio; r != nil {
		pts := make([]string, len(r.Shape))
		for i, p := range r.Shape {
			pts[i] = fmt.Sprintf("%d%%:%d", p.Utilization, p.Score)
		}
		out += " shape " + strings.Join(pts, ",")
	}
	return out
}

// fileScoring is the scoring strategy of a configuration file's default profile (nil: defaults).
func fileScoring(c *kschedv1.KubeSchedulerConfiguration) *ScoringStrategy {
	for _, p := range c.Profiles {
		if or(ptrString(p.SchedulerName), DefaultSchedulerName) != DefaultSchedulerName {
			continue
		}
		for _, pc := range p.PluginConfig {
			args, ok := pc.Args.Object.(*kschedv1.NodeResourcesFitArgs)
			if pc.Name != "NodeResourcesFit" || !ok || args.ScoringStrategy == nil {
				continue
			}
			return fromUpstream(args.ScoringStrategy)
		}
	}
	return nil
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func fromUpstream(u *kschedv1.ScoringStrategy) *ScoringStrategy {
	st := &ScoringStrategy{Type: string(u.Type)}
	for _, r := range u.Resources {
		st.Resources = append(st.Resources, ResourceWeight{Name: r.Name, Weight: r.Weight})
	}
	if u.RequestedToCapacityRatio != nil {
		st.RequestedToCapacityRatio = &RequestedToCapacityRatio{}
		for _, p := range u.RequestedToCapacityRatio.Shape {
			st.RequestedToCapacityRatio.Shape = append(st.RequestedToCapacityRatio.Shape, ShapePoint{Utilization: p.Utilization, Score: p.Score})
		}
	}
	return st
}

// upstream is the strategy as NodeResourcesFitArgs.scoringStrategy, type defaulted.
func (st *ScoringStrategy) upstream() *kschedv1.ScoringStrategy {
	u := &kschedv1.ScoringStrategy{Type: kschedv1.ScoringStrategyType(or(st.Type, ScoringLeastAllocated))}
	for _, r := range st.Resources {
		u.Resources = append(u.Resources, kschedv1.ResourceSpec{Name: r.Name, Weight: r.Weight})
	}
	if r := st.RequestedToCapacityRatio; r != nil {
		u.RequestedToCapacityRatio = &kschedv1.RequestedToCapacityRatioParam{}
		for _, p := range r.Shape {
			u.RequestedToCapacityRatio.Shape = append(u.RequestedToCapacityRatio.Shape, kschedv1.UtilizationShapePoint{Utilization: p.Utilization, Score: p.Score})
		}
	}
	return u
}

// KubeSchedulerConfiguration is the kube-scheduler configuration this spec asks for, as the
// upstream typed API: the configuration file's, or one default-scheduler profile whose
// NodeResourcesFit plugin has the scoring strategy, or (no scheduler section) no profile at all,
// which is upstream's default. It is a copy; how to reach the API server, leader election and
// backoff are the caller's to set.
func (s *Spec) KubeSchedulerConfiguration() *kschedv1.KubeSchedulerConfiguration {
	sch := s.Scheduler
	if sch != nil && sch.config != nil {
		return sch.config.DeepCopy()
	}
	c := &kschedv1.KubeSchedulerConfiguration{TypeMeta: schedulerTypeMeta("KubeSchedulerConfiguration")}
	if sch == nil || sch.ScoringStrategy == nil {
		return c
	}
	args := &kschedv1.NodeResourcesFitArgs{TypeMeta: schedulerTypeMeta("NodeResourcesFitArgs"), ScoringStrategy: sch.ScoringStrategy.upstream()}
	name := DefaultSchedulerName
	c.Profiles = []kschedv1.KubeSchedulerProfile{{
		SchedulerName: &name,
		PluginConfig:  []kschedv1.PluginConfig{{Name: "NodeResourcesFit", Args: runtime.RawExtension{Object: args}}},
	}}
	return c
}

func schedulerTypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: kschedv1.SchemeGroupVersion.String(), Kind: kind}
}

func (s *Spec) validateScheduler(l *errList, dir string) {
	sch := s.Scheduler
	if sch == nil {
		return
	}
	p := fieldPath{"scheduler"}
	switch {
	case sch.ScoringStrategy != nil && sch.Config != "":
		l.add(p, "give scoringStrategy or config, not both")
	case sch.ScoringStrategy == nil && sch.Config == "":
		l.add(p, "give scoringStrategy or config (or leave scheduler out for upstream's default, LeastAllocated on cpu and memory)")
	case sch.ScoringStrategy != nil:
		for _, e := range scoringErrors(sch.ScoringStrategy) {
			l.add(append(p.key("scoringStrategy"), e.path...), "%s", e.msg)
		}
	default:
		path := sch.Config
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		cfg, errs := loadSchedulerConfig(path)
		for _, e := range errs {
			l.add(p.key("config"), "%v", e)
		}
		if len(errs) == 0 {
			if abs, err := filepath.Abs(path); err == nil {
				sch.Config = abs
			}
			sch.config = cfg
		}
	}
}

// fieldErr is an error at a path below the value checked.
type fieldErr struct {
	path fieldPath
	msg  string
}

// scoringErrors checks a strategy as upstream's ValidateNodeResourcesFitArgs does, and refuses
// what upstream accepts but would fail on or ignore: a RequestedToCapacityRatio type without a
// shape (the scheduler dereferences it), a shape under another type, a resource named twice.
func scoringErrors(st *ScoringStrategy) []fieldErr {
	var out []fieldErr
	add := func(p fieldPath, format string, args ...any) {
		out = append(out, fieldErr{p, fmt.Sprintf(format, args...)})
	}
	typ := or(st.Type, ScoringLeastAllocated)
	types := []string{ScoringLeastAllocated, ScoringMostAllocated, ScoringRequestedToCapacityRatio}
	if !slices.Contains(types, typ) {
		add(fieldPath{"type"}, "%q is not one of %s", st.Type, strings.Join(types, ", "))
	}
	seen := map[string]bool{}
	for i, r := range st.Resources {
		rp := fieldPath{"resources"}.idx(i)
		if errs := validation.IsQualifiedName(r.Name); len(errs) > 0 {
			add(rp.key("name"), "invalid resource name %q: %s", r.Name, strings.Join(errs, "; "))
		}
		if seen[r.Name] {
			add(rp.key("name"), "%s is listed twice", r.Name)
		}
		seen[r.Name] = true
		if r.Weight < 0 || r.Weight > maxResourceWeight {
			add(rp.key("weight"), "%d is not in 1..%d (0 means 1)", r.Weight, maxResourceWeight)
		}
	}
	rp := fieldPath{"requestedToCapacityRatio"}
	switch r := st.RequestedToCapacityRatio; {
	case typ == ScoringRequestedToCapacityRatio && (r == nil || len(r.Shape) == 0):
		add(rp, "the RequestedToCapacityRatio type needs a shape: at least one {utilization, score} point")
	case typ != ScoringRequestedToCapacityRatio && r != nil:
		add(rp, "only with type RequestedToCapacityRatio (the %s scorer ignores it)", typ)
	case r != nil:
		sp := rp.key("shape")
		for i, pt := range r.Shape {
			if pt.Utilization < 0 || pt.Utilization > maxUtilization {
				add(sp.idx(i).key("utilization"), "%d is not in 0..%d", pt.Utilization, maxUtilization)
			}
			if pt.Score < 0 || pt.Score > maxShapeScore {
				add(sp.idx(i).key("score"), "%d is not in 0..%d", pt.Score, maxShapeScore)
			}
			if i > 0 && pt.Utilization <= r.Shape[i-1].Utilization {
				add(sp.idx(i).key("utilization"), "%d: utilizations must increase along the shape", pt.Utilization)
			}
		}
	}
	return out
}

// schedulerCodecs strict-decode the kubescheduler.config.k8s.io/v1 API.
var schedulerCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	if err := kschedv1.AddToScheme(s); err != nil {
		panic(err) // a static registration: fails in every test or never
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// pluginArgs are the args types of the in-tree plugins in kubescheduler.config.k8s.io/v1.
var pluginArgs = map[string]func() runtime.Object{
	"DefaultPreemption":               func() runtime.Object { return &kschedv1.DefaultPreemptionArgs{} },
	"InterPodAffinity":                func() runtime.Object { return &kschedv1.InterPodAffinityArgs{} },
	"NodeResourcesBalancedAllocation": func() runtime.Object { return &kschedv1.NodeResourcesBalancedAllocationArgs{} },
	"NodeResourcesFit":                func() runtime.Object { return &kschedv1.NodeResourcesFitArgs{} },
	"PodTopologySpread":               func() runtime.Object { return &kschedv1.PodTopologySpreadArgs{} },
	"VolumeBinding":                   func() runtime.Object { return &kschedv1.VolumeBindingArgs{} },
	"NodeAffinity":                    func() runtime.Object { return &kschedv1.NodeAffinityArgs{} },
	"DynamicResources":                func() runtime.Object { return &kschedv1.DynamicResourcesArgs{} },
}

// loadSchedulerConfig reads a KubeSchedulerConfiguration strictly (unknown and duplicate fields
// are errors, as in kube-scheduler's own loader), decodes every plugin's args into its typed
// struct, and checks what the local cluster depends on. Errors name path:line: field. What only
// the scheduler's registry knows (plugin names, extension points) the real kube-scheduler checks
// when the local cluster starts it.
func loadSchedulerConfig(path string) (*kschedv1.KubeSchedulerConfiguration, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{err}
	}
	return decodeSchedulerConfig(path, data)
}

func decodeSchedulerConfig(path string, data []byte) (*kschedv1.KubeSchedulerConfiguration, []error) {
	root, err := yamldoc.Root(path, "KubeSchedulerConfiguration", data)
	if err != nil {
		return nil, []error{err}
	}
	at := func(p yamldoc.Path, format string, args ...any) error {
		loc := path
		if line := yamldoc.Line(root, p); line > 0 && len(p) > 0 {
			loc += ":" + strconv.Itoa(line)
		}
		msg := fmt.Sprintf(format, args...)
		if len(p) > 0 {
			msg = p.String() + ": " + msg
		}
		return fmt.Errorf("%s: %s", loc, msg)
	}
	want := kschedv1.SchemeGroupVersion.WithKind("KubeSchedulerConfiguration")
	obj, gvk, err := schedulerCodecs.UniversalDeserializer().Decode(data, &want, &kschedv1.KubeSchedulerConfiguration{})
	if err != nil {
		return nil, strictErrors(err, nil, at)
	}
	if *gvk != want {
		return nil, []error{at(yamldoc.Path{"kind"}, "want %s, %s; got %s", want.Kind, want.GroupVersion(), gvk)}
	}
	cfg := obj.(*kschedv1.KubeSchedulerConfiguration)
	var errs []error
	if len(cfg.Extenders) > 0 {
		errs = append(errs, at(yamldoc.Path{"extenders"}, "extenders are HTTP services the local cluster does not run"))
	}
	hasDefault := len(cfg.Profiles) == 0
	for i := range cfg.Profiles {
		prof := &cfg.Profiles[i]
		pp := yamldoc.Path{"profiles"}.Idx(i)
		if or(ptrString(prof.SchedulerName), DefaultSchedulerName) == DefaultSchedulerName {
			hasDefault = true
		}
		for j := range prof.PluginConfig {
			pc := &prof.PluginConfig[j]
			ap := pp.Key("pluginConfig").Idx(j).Key("args")
			newArgs, ok := pluginArgs[pc.Name]
			if !ok {
				errs = append(errs, at(pp.Key("pluginConfig").Idx(j).Key("name"), "%q has no args in kube-scheduler's in-tree plugins (%s)", pc.Name, strings.Join(sortedKeys(pluginArgs), ", ")))
				continue
			}
			if len(pc.Args.Raw) == 0 {
				continue
			}
			gvk := kschedv1.SchemeGroupVersion.WithKind(pc.Name + "Args")
			args, got, err := schedulerCodecs.UniversalDeserializer().Decode(pc.Args.Raw, &gvk, newArgs())
			if err != nil {
				errs = append(errs, strictErrors(err, ap, at)...)
				continue
			}
			if *got != gvk {
				errs = append(errs, at(ap.Key("kind"), "want %s, got %s", gvk.Kind, got.Kind))
				continue
			}
			pc.Args = runtime.RawExtension{Object: args}
			if fit, ok := args.(*kschedv1.NodeResourcesFitArgs); ok && fit.ScoringStrategy != nil {
				for _, e := range scoringErrors(fromUpstream(fit.ScoringStrategy)) {
					errs = append(errs, at(append(ap.Key("scoringStrategy"), e.path...), "%s", e.msg))
				}
			}
		}
	}
	if !hasDefault {
		errs = append(errs, at(yamldoc.Path{"profiles"}, "no profile named %s: the pods kueuelab renders are scheduled by it", DefaultSchedulerName))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return cfg, nil
}

// Fields named by decoding errors: strict decoding's unknown and duplicate fields, and
// encoding/json's type errors ("Go struct field KubeSchedulerConfiguration.parallelism of type").
var (
	strictField = regexp.MustCompile(`(unknown|duplicate) field "([^"]+)"`)
	typeField   = regexp.MustCompile(`cannot unmarshal (\w+) into Go struct field \w+\.(\S+) of type (\S+)`)
)

// strictErrors turns a decoding error into one error per field it names, each located in the
// file (field paths below base), or the error as it is.
func strictErrors(err error, base yamldoc.Path, at func(yamldoc.Path, string, ...any) error) []error {
	below := func(field string) yamldoc.Path { return append(base[:len(base):len(base)], parseJSONPath(field)...) }
	var out []error
	for _, m := range strictField.FindAllStringSubmatch(err.Error(), -1) {
		out = append(out, at(below(m[2]), "%s field", m[1]))
	}
	for _, m := range typeField.FindAllStringSubmatch(err.Error(), -1) {
		out = append(out, at(below(m[2]), "a %s where a %s belongs", m[1], m[3]))
	}
	if len(out) == 0 {
		p := base
		if strings.Contains(err.Error(), "no kind") {
			p = append(base[:len(base):len(base)], "kind")
		}
		return []error{at(p, "%s", strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: "))}
	}
	return out
}

// parseJSONPath reads the a.b[0].c field paths of strict decoding errors.
func parseJSONPath(s string) yamldoc.Path {
	var p yamldoc.Path
	for _, part := range strings.Split(s, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			p = p.Key(name)
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			n, err := strconv.Atoi(idx)
			if !ok || err != nil {
				return p
			}
			p = p.Idx(n)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return p
}

// MarshalKubeSchedulerConfiguration writes c as YAML with every plugin's args typed (apiVersion
// and kind set), as kube-scheduler's loader reads it.
func MarshalKubeSchedulerConfiguration(c *kschedv1.KubeSchedulerConfiguration) ([]byte, error) {
	c = c.DeepCopy()
	c.TypeMeta = schedulerTypeMeta("KubeSchedulerConfiguration")
	for i := range c.Profiles {
		for j := range c.Profiles[i].PluginConfig {
			pc := &c.Profiles[i].PluginConfig[j]
			if pc.Args.Object == nil {
				continue
			}
			gvk := kschedv1.SchemeGroupVersion.WithKind(pc.Name + "Args")
			pc.Args.Object.GetObjectKind().SetGroupVersionKind(gvk)
			raw, err := sigsyaml.Marshal(pc.Args.Object)
			if err != nil {
				return nil, fmt.Errorf("kube-scheduler config: %s args: %w", pc.Name, err)
			}
			if raw, err = sigsyaml.YAMLToJSON(raw); err != nil {
				return nil, fmt.Errorf("kube-scheduler config: %s args: %w", pc.Name, err)
			}
			pc.Args = runtime.RawExtension{Raw: raw}
		}
	}
	out, err := sigsyaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler config: %w", err)
	}
	return out, nil
}

// ParseKubeSchedulerConfiguration strict-decodes a kubescheduler.config.k8s.io/v1 document (as
// MarshalKubeSchedulerConfiguration writes it), plugin args typed; name is the file in errors.
func ParseKubeSchedulerConfiguration(name string, data []byte) (*kschedv1.KubeSchedulerConfiguration, error) {
	cfg, errs := decodeSchedulerConfig(name, data)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}
