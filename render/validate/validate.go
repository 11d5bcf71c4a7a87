package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Validator validates objects against the embedded upstream schemas. It is built once by New,
// never changes afterwards, and is safe for concurrent use.
type Validator struct {
	scheme *runtime.Scheme
	crds   map[schema.GroupVersionKind]*crdKind
	typed  map[schema.GroupVersionKind]*typedKind
}

// New parses the embedded CRDs and compiles their schemas and CEL rules. addToScheme registers
// the Go types of the job kinds (render.Registry.AddToScheme), so that typed objects without
// apiVersion and kind are recognised; core, batch and Kueue v1beta2 types (the version render
// emits) always are. Objects of any version the CRDs serve (Kueue's deprecated v1beta1 in a
// user's manifest, say) are validated when they carry their apiVersion and kind.
func New(addToScheme ...func(*runtime.Scheme) error) (*Validator, error) {
	crds, err := loadCRDs()
	if err != nil {
		return nil, fmt.Errorf("load CRDs: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{
		batchv1.AddToScheme, corev1.AddToScheme, kueue.AddToScheme, resourceapi.AddToScheme,
		// The typed validator decodes Katib Experiments, whose CRD has no schema.
		katibv1beta1.AddToScheme,
	}, addToScheme...) {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	v := &Validator{scheme: scheme, crds: crds, typed: typedKinds()}
	for gvk, k := range crds {
		if k.preserveUnknown && v.typed[gvk] == nil {
			return nil, fmt.Errorf("CRD for %s has no schema and there is no typed validator for it", gvk)
		}
	}
	return v, nil
}

// Known reports whether objects of gvk can be validated.
func (v *Validator) Known(gvk schema.GroupVersionKind) bool {
	return v.typed[gvk] != nil || v.crds[gvk] != nil
}

// Validate validates one object, typed (its status is dropped, as render never emits it) or
// *unstructured.Unstructured (a status block is an error). The error, if any, is Errors.
func (v *Validator) Validate(obj runtime.Object) error {
	if errs := v.validateObject(context.Background(), obj); len(errs) > 0 {
		return errs
	}
	return nil
}

func (v *Validator) validateObject(ctx context.Context, obj runtime.Object) Errors {
	var content map[string]any
	switch o := obj.(type) {
	case nil:
		return Errors{{Detail: "nil object"}}
	case *unstructured.Unstructured:
		c, err := copyJSON(o.Object)
		if err != nil {
			return Errors{refOf(o.Object).errorf("", "%v", err)}
		}
		content = c.(map[string]any)
	default:
		gvk := obj.GetObjectKind().GroupVersionKind()
		if gvk.Empty() {
			gvks, _, err := v.scheme.ObjectKinds(obj)
			if err != nil {
				return Errors{{Detail: fmt.Sprintf("no schema for Go type %T: %v", obj, err)}}
			}
			gvk = gvks[0]
		}
		c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return Errors{{Detail: fmt.Sprintf("convert %T to unstructured: %v", obj, err)}}
		}
		if !statusAllowed(gvk) {
			delete(c, "status")
		}
		c["apiVersion"], c["kind"] = gvk.GroupVersion().String(), gvk.Kind
		content = c
	}
	return v.validateContent(ctx, content, "", false)
}

// validateContent validates a private copy of an object's content, which it may modify.
// Embedded objects (a Katib trial template) have no name of their own; prefix locates them.
func (v *Validator) validateContent(ctx context.Context, content map[string]any, prefix string, embedded bool) Errors {
	u := &unstructured.Unstructured{Object: content}
	ref := refOf(content)
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || u.GetAPIVersion() == "" {
		return prefixed(prefix, Errors{ref.errorf("", "apiVersion and kind must be set")})
	}
	// A Node is the one kind whose status a manifest carries: the API server keeps it on create
	// (that is how a kubelet registers), and KWOK nodes get their capacity only from it.
	if _, ok := content["status"]; ok && !statusAllowed(gvk) {
		return prefixed(prefix, Errors{ref.errorf("status", "must not be set in a manifest (the API server drops it)")})
	}
	if t := v.typed[gvk]; t != nil {
		return prefixed(prefix, t.validate(ctx, v, ref, content, embedded))
	}
	if k := v.crds[gvk]; k != nil {
		return prefixed(prefix, k.validate(ctx, ref, content, embedded))
	}
	return prefixed(prefix, Errors{ref.errorf("", "no schema for %s", gvk)})
}

// prefixed moves errors of an embedded object under the field that holds it.
func prefixed(p string, errs Errors) Errors {
	if p != "" {
		for _, e := range errs {
			if e.Field == "" {
				e.Field = p
			} else {
				e.Field = p + "." + e.Field
			}
		}
	}
	return errs
}

func refOf(content map[string]any) objectRef {
	var r objectRef
	r.Kind, _ = content["kind"].(string)
	if md, ok := content["metadata"].(map[string]any); ok {
		r.Name, _ = md["name"].(string)
		r.Namespace, _ = md["namespace"].(string)
	}
	return r
}

// validateMeta is the API server's ObjectMeta validation. Namespaced manifests may leave the
// namespace to kubectl; embedded templates have no name of their own, so only their name (if
// any), labels and annotations are checked.
func validateMeta(u *unstructured.Unstructured, namespaced, embedded bool, nameFn metavalidation.ValidateNameFunc) field.ErrorList {
	p := field.NewPath("metadata")
	if embedded {
		var errs field.ErrorList
		if n := u.GetName(); n != "" {
			for _, msg := range nameFn(n, false) {
				errs = append(errs, field.Invalid(p.Child("name"), n, msg))
			}
		}
		errs = append(errs, metav1validation.ValidateLabels(u.GetLabels(), p.Child("labels"))...)
		return append(errs, metavalidation.ValidateAnnotations(u.GetAnnotations(), p.Child("annotations"))...)
	}
	if namespaced && u.GetNamespace() == "" {
		u.SetNamespace(metav1.NamespaceDefault)
	}
	return metavalidation.ValidateObjectMetaAccessor(u, namespaced, nameFn, p)
}

// copyJSON deep-copies an unstructured value, accepting the Go number types callers commonly put
// in hand-built maps and rejecting anything JSON cannot carry.
func copyJSON(x any) (any, error) {
	switch x := x.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			c, err := copyJSON(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			c, err := copyJSON(v)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	case nil, string, bool, int64, float64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		return x.Float64()
	default:
		return nil, errors.New("value of type " + fmt.Sprintf("%T", x) + " cannot be serialized")
	}
}

// statusAllowed reports whether a manifest of kind gvk may carry a status block.
func statusAllowed(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Node"
}
