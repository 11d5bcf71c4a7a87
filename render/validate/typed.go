package validate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// typedKind validates a kind that has no usable CRD schema by strict decoding into its upstream
// Go type (unknown and duplicate fields, wrong types) followed by kind-specific checks.
type typedKind struct {
	namespaced bool
	nameFn     metavalidation.ValidateNameFunc
	newObj     func() any
	// check runs on the decoded object; v is there for kinds that embed other objects.
	check func(ctx context.Context, v *Validator, obj any) field.ErrorList
	// nested validates objects embedded in obj against their own kinds.
	nested func(ctx context.Context, v *Validator, obj any) Errors
}

func typedKinds() map[schema.GroupVersionKind]*typedKind {
	kinds := map[schema.GroupVersionKind]*typedKind{
		batchv1.SchemeGroupVersion.WithKind("Job"): {
			namespaced: true, nameFn: metavalidation.NameIsDNSSubdomain,
			newObj: func() any { return &batchv1.Job{} },
			check:  func(_ context.Context, _ *Validator, obj any) field.ErrorList { return checkJob(obj.(*batchv1.Job)) },
		},
		corev1.SchemeGroupVersion.WithKind("Namespace"): {
			nameFn: metavalidation.ValidateNamespaceName,
			newObj: func() any { return &corev1.Namespace{} },
		},
		corev1.SchemeGroupVersion.WithKind("Node"): {
			nameFn: metavalidation.NameIsDNSSubdomain,
			newObj: func() any { return &corev1.Node{} },
		},
		katibv1beta1.SchemeGroupVersion.WithKind("Experiment"): {
			namespaced: true, nameFn: metavalidation.NameIsDNSSubdomain,
			newObj: func() any { return &katibv1beta1.Experiment{} },
			nested: func(ctx context.Context, v *Validator, obj any) Errors {
				return v.trialSpec(ctx, obj.(*katibv1beta1.Experiment))
			},
		},
	}
	for gvk, k := range draKinds() {
		kinds[gvk] = k
	}
	return kinds
}

func (t *typedKind) validate(ctx context.Context, v *Validator, ref objectRef, content map[string]any, embedded bool) Errors {
	b, err := json.Marshal(content)
	if err != nil {
		return Errors{ref.errorf("", "encode: %v", err)}
	}
	obj := t.newObj()
	strict, err := sigsjson.UnmarshalStrict(b, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Errors{ref.errorf(te.Field, "wrong type: got %s, want %s", te.Value, te.Type)}
		}
		return Errors{ref.errorf("", "decode: %v", err)}
	}
	var errs Errors
	for _, se := range strict {
		var fe interface{ FieldPath() string }
		if errors.As(se, &fe) {
			errs = append(errs, ref.errorf(fe.FieldPath(), "%s", se.Error()))
		} else {
			errs = append(errs, ref.errorf("", "%v", se))
		}
	}
	fe := validateMeta(&unstructured.Unstructured{Object: content}, t.namespaced, embedded, t.nameFn)
	if t.check != nil {
		fe = append(fe, t.check(ctx, v, obj)...)
	}
	errs = append(errs, ref.fromFieldErrors(nil, fe)...)
	if t.nested != nil {
		errs = append(errs, t.nested(ctx, v, obj)...)
	}
	return errs
}

// trialSpec validates a Katib trial template against its own kind, as the trials Katib creates
// from it must pass the API server.
func (v *Validator) trialSpec(ctx context.Context, exp *katibv1beta1.Experiment) Errors {
	tt := exp.Spec.TrialTemplate
	if tt == nil || tt.TrialSpec == nil {
		return nil
	}
	c, err := copyJSON(tt.TrialSpec.Object)
	if err != nil {
		return Errors{refOf(nil).errorf("spec.trialTemplate.trialSpec", "%v", err)}
	}
	ref := objectRef{Kind: exp.Kind, Namespace: exp.Namespace, Name: exp.Name}
	errs := v.validateContent(ctx, c.(map[string]any), "spec.trialTemplate.trialSpec", true)
	// Report the trial's problems against the Experiment, the object the user wrote.
	for _, e := range errs {
		e.Kind, e.Namespace, e.Name = ref.Kind, ref.Namespace, ref.Name
	}
	return errs
}

// checkJob is the part of the API server's batch/v1 Job validation that a rendered Job can get
// wrong; the full check lives in k8s.io/kubernetes, which kueuelab does not import.
func checkJob(job *batchv1.Job) field.ErrorList {
	var errs field.ErrorList
	// The Job controller puts the name in the batch.kubernetes.io/job-name label of its pods.
	for _, msg := range utilvalidation.IsValidLabelValue(job.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), job.Name, msg+" (it becomes the batch.kubernetes.io/job-name label value)"))
	}
	tp := field.NewPath("spec", "template")
	errs = append(errs, metav1validation.ValidateLabels(job.Spec.Template.Labels, tp.Child("metadata", "labels"))...)
	errs = append(errs, metavalidation.ValidateAnnotations(job.Spec.Template.Annotations, tp.Child("metadata", "annotations"))...)
	spec := job.Spec.Template.Spec
	sp := tp.Child("spec")
	if rp := spec.RestartPolicy; rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure {
		errs = append(errs, field.NotSupported(sp.Child("restartPolicy"), rp, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(sp.Child("containers"), ""))
	}
	names := sets.New[string]()
	for i, c := range spec.InitContainers {
		errs = append(errs, checkContainer(c, sp.Child("initContainers").Index(i), names)...)
	}
	for i, c := range spec.Containers {
		errs = append(errs, checkContainer(c, sp.Child("containers").Index(i), names)...)
	}
	return errs
}

func checkContainer(c corev1.Container, p *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(c.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
	}
	if names.Has(c.Name) {
		errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
	}
	names.Insert(c.Name)
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	rp := p.Child("resources")
	for name, req := range c.Resources.Requests {
		lim, hasLimit := c.Resources.Limits[name]
		switch {
		case isExtendedResource(name) && !hasLimit:
			errs = append(errs, field.Required(rp.Child("limits").Key(string(name)), "extended resources need a limit equal to the request"))
		case isExtendedResource(name) && req.Cmp(lim) != 0:
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), req.String(), "must be equal to "+string(name)+" limit of "+lim.String()))
		case hasLimit && req.Cmp(lim) > 0:
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), req.String(), "must be less than or equal to "+string(name)+" limit of "+lim.String()))
		}
		if req.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), req.String(), "must be greater than or equal to 0"))
		}
	}
	for name, lim := range c.Resources.Limits {
		if lim.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("limits").Key(string(name)), lim.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

// isExtendedResource is core validation's "not a native resource" test: extended resources
// (nvidia.com/gpu) cannot be overcommitted, so their request must equal their limit.
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	native := !strings.Contains(s, "/") || strings.HasPrefix(s, "kubernetes.io/") || strings.HasPrefix(s, "requests.")
	return !native && !strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(s, corev1.ResourceAttachableVolumesPrefix)
}
