package validate

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

//go:embed crds
var crdFiles embed.FS

// crdKind validates one served version of one CRD, holding what the API server builds per version.
type crdKind struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	// preserveUnknown marks a root schema that accepts anything (Katib's Experiment): such kinds
	// are validated by typed decoding instead.
	preserveUnknown bool
	structural      *structuralschema.Structural
	schema          apiservervalidation.SchemaValidator
	cel             *cel.Validator
}

// loadCRDs parses every embedded CRD and builds a validator per served version.
func loadCRDs() (map[schema.GroupVersionKind]*crdKind, error) {
	kinds := map[schema.GroupVersionKind]*crdKind{}
	err := fs.WalkDir(crdFiles, "crds", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".yaml" {
			return err
		}
		b, err := crdFiles.ReadFile(p)
		if err != nil {
			return err
		}
		crds, err := parseCRDs(b)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, crd := range crds {
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				k, err := newCRDKind(crd, v)
				if err != nil {
					return fmt.Errorf("%s: %s %s: %w", p, crd.Name, v.Name, err)
				}
				if _, dup := kinds[k.gvk]; dup {
					return fmt.Errorf("%s: %s defined twice", p, k.gvk)
				}
				kinds[k.gvk] = k
			}
		}
		return nil
	})
	return kinds, err
}

func parseCRDs(b []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, err
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("document of kind %q, want CustomResourceDefinition", crd.Kind)
		}
		out = append(out, crd)
	}
}

// newCRDKind mirrors what the apiextensions-apiserver's handler builds for a served version:
// the internal schema, its structural form with defaults pruned, the schema validator and the
// compiled CEL rules.
func newCRDKind(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion) (*crdKind, error) {
	k := &crdKind{
		gvk:        schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind},
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
	}
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, errors.New("no openAPIV3Schema")
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("convert schema: %w", err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("prune defaults: %w", err)
	}
	k.structural = s
	k.preserveUnknown = s.XPreserveUnknownFields && len(s.Properties) == 0
	if k.schema, _, err = apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema); err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	k.cel = cel.NewValidator(s, true, celconfig.PerCallLimit)
	return k, nil
}

// validate runs, on a private copy of content, the steps a create request goes through in the
// API server: strict decoding (unknown fields are errors, as with fieldValidation=Strict),
// schema defaulting, then the custom resource strategy's validation. Namespace may be forced for
// namespaced kinds whose manifest leaves it to kubectl.
func (k *crdKind) validate(ctx context.Context, ref objectRef, content map[string]any, embedded bool) Errors {
	var errs Errors
	metaUnknown, err := objectMetaUnknownFields(content)
	if err != nil {
		return Errors{ref.errorf("metadata", "%v", err)}
	}
	for _, p := range metaUnknown {
		errs = append(errs, ref.errorf(p, "unknown field"))
	}
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	for _, p := range structuralpruning.PruneWithOptions(content, k.structural, true, opts) {
		errs = append(errs, ref.errorf(p, "unknown field"))
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(content, k.structural)
	if ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, content, k.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true}); ferr != nil {
		errs = append(errs, ref.fromFieldErrors(nil, field.ErrorList{ferr})...)
	} else {
		for _, p := range paths {
			errs = append(errs, ref.errorf(p, "unknown field"))
		}
	}
	structuraldefaulting.Default(content, k.structural)

	u := &unstructured.Unstructured{Object: content}
	var fe field.ErrorList
	if u.GetAPIVersion() != k.gvk.GroupVersion().String() {
		fe = append(fe, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), "must be "+k.gvk.GroupVersion().String()))
	}
	if u.GetKind() != k.gvk.Kind {
		fe = append(fe, field.Invalid(field.NewPath("kind"), u.GetKind(), "must be "+k.gvk.Kind))
	}
	fe = append(fe, validateMeta(u, k.namespaced, embedded, metavalidation.NameIsDNSSubdomain)...)
	fe = append(fe, apiservervalidation.ValidateCustomResource(nil, content, k.schema)...)
	fe = append(fe, schemaobjectmeta.Validate(nil, content, k.structural, false)...)
	fe = append(fe, structurallisttype.ValidateListSetsAndMaps(nil, k.structural, content)...)
	if k.cel != nil {
		if blocking(fe) {
			fe = append(fe, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			celErrs, _ := k.cel.Validate(ctx, nil, k.structural, content, nil, celconfig.RuntimeCELCostBudget)
			fe = append(fe, celErrs...)
		}
	}
	return append(errs, ref.fromFieldErrors(nil, fe)...)
}

// blocking mirrors the API server: CEL rules are skipped when the object already has errors
// that make evaluating them meaningless.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// objectMetaUnknownFields strictly decodes the root metadata like the API server's decoder does,
// returning the unknown field paths inside it.
func objectMetaUnknownFields(content map[string]any) ([]string, error) {
	_, _, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(content, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, err
	}
	return unknown, nil
}
