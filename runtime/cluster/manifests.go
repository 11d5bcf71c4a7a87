package cluster

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kueuelab/kueuelab/runtime/tools"
)

// completionStages are kueuelab's KWOK stages: annotation kueuelab.io/complete=true makes a Running
// pod Succeeded (exit 0), =fail makes it Failed (exit 1).
//
//go:embed stages-complete.yaml
var completionStages []byte

// faultStages is kueuelab's node-fault stage: label kueuelab.io/fault=node-down makes a node
// NotReady (runtime/runner's fault injector).
//
//go:embed stages-fault.yaml
var faultStages []byte

// ownStages decodes kueuelab's own stages: completion and node faults.
func ownStages() ([]*unstructured.Unstructured, error) {
	c, err := decodeYAML(bytes.NewReader(completionStages), "stages-complete.yaml")
	if err != nil {
		return nil, err
	}
	f, err := decodeYAML(bytes.NewReader(faultStages), "stages-fault.yaml")
	return append(c, f...), err
}

const kwokNodeAnnotation = "kwok.x-k8s.io/node"

const (
	kueueNamespace    = "kueue-system"
	trainingNamespace = "kubeflow"
	mpiNamespace      = "mpi-operator"
)

// decodeYAML splits a multi-document YAML stream into objects, skipping empty documents.
func decodeYAML(r io.Reader, source string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", source, i+1, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: document %d: no apiVersion/kind", source, i+1)
		}
		out = append(out, u)
	}
}

func decodeFiles(paths ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		objs, err := decodeYAML(bytes.NewReader(b), p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// manifests are the upstream objects a cluster installs, read from the module cache.
type manifests struct {
	stageCRD   []*unstructured.Unstructured
	stages     []*unstructured.Unstructured
	jobCRDs    []*unstructured.Unstructured // every job kind's CRD and Kueue's own
	kueueHooks []*unstructured.Unstructured
	jobsetHook []*unstructured.Unstructured
	trainHook  []*unstructured.Unstructured
}

// kueueConversionCRDs are served in v1beta1 and v1beta2 and need Kueue's conversion webhook; they
// are also the CRDs Kueue's cert rotator injects its CA into before it starts.
var kueueConversionCRDs = []string{
	"localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io",
	"workloads.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io",
}

// kueueSkippedWebhooks belong to integrations this cluster does not enable; registering them
// would make the API server call paths Kueue does not serve.
var kueueSkippedWebhooks = []string{
	"mpod.kb.io", "vpod.kb.io", "mdeployment.kb.io", "vdeployment.kb.io", "mstatefulset.kb.io", "vstatefulset.kb.io",
	"mleaderworkerset.kb.io", "vleaderworkerset.kb.io", "mappwrapper.kb.io", "vappwrapper.kb.io",
	"mraycluster.kb.io", "vraycluster.kb.io", "mrayjob.kb.io", "vrayjob.kb.io",
	"mjaxjob.kb.io", "vjaxjob.kb.io", "mpaddlejob.kb.io", "vpaddlejob.kb.io", "mxgboostjob.kb.io", "vxgboostjob.kb.io",
}

// kueueFrameworks are the Kueue integrations enabled: one per job kind kueuelab renders.
var kueueFrameworks = []string{
	"batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/mpijob",
	"trainer.kubeflow.org/trainjob",
}

// storeVersion makes version the CRD's storage version. Kueue 0.15's controllers read and write
// v1beta2 while its CRDs store v1beta1, so every write and every watch event of a Workload,
// ClusterQueue or LocalQueue costs the API server a call to Kueue's conversion webhook: 22,909
// calls, 14 ms each, in a 300-workload run, with the API server the busiest process on the
// machine. A fresh local cluster has no v1beta1 objects to migrate, so it stores v1beta2, as
// Kueue 0.16 does (kubernetes-sigs/kueue#8020).
func storeVersion(crd *unstructured.Unstructured, version string) error {
	vs, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err != nil {
		return fmt.Errorf("crd %s: %w", crd.GetName(), err)
	}
	found := false
	for _, v := range vs {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("crd %s: spec.versions entry is %T", crd.GetName(), v)
		}
		m["storage"] = m["name"] == version
		found = found || m["name"] == version
	}
	if !found {
		return fmt.Errorf("crd %s: no version %s to store", crd.GetName(), version)
	}
	return unstructured.SetNestedSlice(crd.Object, vs, "spec", "versions")
}

func loadManifests(ctx context.Context, goBin string, s *State, p *pki) (*manifests, error) {
	dir := map[string]string{}
	for _, m := range tools.ManifestModules() {
		d, err := tools.ModuleDir(ctx, goBin, m)
		if err != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		dir[m] = d
	}
	glob := func(mod, pattern string, exclude ...string) ([]string, error) {
		ps, err := filepath.Glob(filepath.Join(dir[mod], pattern))
		if err != nil {
			return nil, err
		}
		ps = slices.DeleteFunc(ps, func(p string) bool { return slices.Contains(exclude, filepath.Base(p)) })
		if len(ps) == 0 {
			return nil, fmt.Errorf("manifests: nothing matches %s in %s", pattern, mod)
		}
		return ps, nil
	}
	m := &manifests{}
	var err error
	kw := func(rel string) string { return filepath.Join(dir[tools.KWOKModule], "kustomize", rel) }
	if m.stageCRD, err = decodeFiles(kw("crd/bases/kwok.x-k8s.io_stages.yaml")); err != nil {
		return nil, err
	}
	// The stock pod-complete stage is left out: pods complete only when kueuelab says so.
	if m.stages, err = decodeFiles(kw("stage/node/fast/node-initialize.yaml"), kw("stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"),
		kw("stage/pod/fast/pod-ready.yaml"), kw("stage/pod/fast/pod-delete.yaml")); err != nil {
		return nil, err
	}
	own, err := ownStages()
	if err != nil {
		return nil, err
	}
	m.stages = append(m.stages, own...)

	var crdFiles []string
	for _, g := range []struct {
		mod, pattern string
		exclude      []string
	}{
		{tools.KueueModule, "config/components/crd/bases/*.yaml", nil},
		{tools.JobSetModule, "config/components/crd/bases/*.yaml", nil},
		// training-operator's v1 MPIJob CRD has the same name as mpi-operator's v2beta1 one.
		{tools.TrainingModule, "manifests/base/crds/kubeflow.org_*.yaml", []string{"kubeflow.org_mpijobs.yaml"}},
		{tools.MPIModule, "manifests/base/kubeflow.org_mpijobs.yaml", nil},
		{tools.TrainerModule, "manifests/base/crds/trainer.kubeflow.org_*.yaml", nil},
		{tools.KatibModule, "manifests/v1beta1/components/crd/experiment.yaml", nil},
	} {
		ps, err := glob(g.mod, g.pattern, g.exclude...)
		if err != nil {
			return nil, err
		}
		crdFiles = append(crdFiles, ps...)
	}
	if m.jobCRDs, err = decodeFiles(crdFiles...); err != nil {
		return nil, err
	}
	kueueURL := loopURL("https", s.Ports.KueueWebhook, "")
	for _, crd := range m.jobCRDs {
		if slices.Contains(kueueConversionCRDs, crd.GetName()) {
			if err := unstructured.SetNestedField(crd.Object, map[string]any{
				"strategy": "Webhook",
				"webhook": map[string]any{
					"clientConfig":             map[string]any{"url": kueueURL + "/convert", "caBundle": b64(p.KueueCA.CertPEM)},
					"conversionReviewVersions": []any{"v1"},
				},
			}, "spec", "conversion"); err != nil {
				return nil, err
			}
			if err := storeVersion(crd, "v1beta2"); err != nil {
				return nil, err
			}
		}
	}

	hooks, err := decodeFiles(filepath.Join(dir[tools.KueueModule], "config/components/webhook/manifests.yaml"))
	if err != nil {
		return nil, err
	}
	if m.kueueHooks, err = urlWebhooks(hooks, "kueue-", kueueURL, p.KueueCA.CertPEM, kueueSkippedWebhooks); err != nil {
		return nil, err
	}
	if hooks, err = decodeFiles(filepath.Join(dir[tools.JobSetModule], "config/components/webhook/manifests.yaml")); err != nil {
		return nil, err
	}
	if m.jobsetHook, err = urlWebhooks(hooks, "jobset-", loopURL("https", s.Ports.JobSetWebhook, ""), p.CA.CertPEM, nil); err != nil {
		return nil, err
	}
	// As upstream's kustomize patch does: JobSet's pod webhooks only see JobSet pods, on create.
	for _, h := range m.jobsetHook {
		whs, _, _ := unstructured.NestedSlice(h.Object, "webhooks")
		for _, w := range whs {
			wm := w.(map[string]any)
			if n := wm["name"]; n == "mpod.kb.io" || n == "vpod.kb.io" {
				wm["objectSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}}}
				wm["rules"] = []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"pods"}}}
			}
		}
		if err := unstructured.SetNestedSlice(h.Object, whs, "webhooks"); err != nil {
			return nil, err
		}
	}
	if hooks, err = decodeFiles(filepath.Join(dir[tools.TrainingModule], "manifests/base/webhook/manifests.yaml")); err != nil {
		return nil, err
	}
	skipTrain := []string{"validator.jaxjob.training-operator.kubeflow.org", "validator.paddlejob.training-operator.kubeflow.org",
		"validator.xgboostjob.training-operator.kubeflow.org"}
	if m.trainHook, err = urlWebhooks(hooks, "", loopURL("https", s.Ports.TrainingWebhook, ""), p.TrainCA.CertPEM, skipTrain); err != nil {
		return nil, err
	}
	for _, h := range m.trainHook {
		// The name training-operator's cert rotator injects its CA into.
		h.SetName("validator.training-operator.kubeflow.org")
	}
	return m, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// urlWebhooks rewrites kubebuilder webhook configurations from in-cluster Services to URLs on
// 127.0.0.1 (the controllers run out of cluster), names them prefix+name, and drops skipped hooks.
func urlWebhooks(objs []*unstructured.Unstructured, prefix, baseURL string, ca []byte, skip []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if k := o.GetKind(); k != "MutatingWebhookConfiguration" && k != "ValidatingWebhookConfiguration" {
			continue
		}
		o.SetName(prefix + o.GetName())
		whs, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return nil, fmt.Errorf("webhook %s: %w", o.GetName(), err)
		}
		kept := whs[:0]
		for _, w := range whs {
			wm, ok := w.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("webhook %s: malformed entry", o.GetName())
			}
			if slices.Contains(skip, fmt.Sprint(wm["name"])) {
				continue
			}
			path, _, _ := unstructured.NestedString(wm, "clientConfig", "service", "path")
			wm["clientConfig"] = map[string]any{"url": strings.TrimSuffix(baseURL, "/") + path, "caBundle": b64(ca)}
			if _, ok := wm["namespaceSelector"]; !ok {
				wm["namespaceSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
					"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system"}}}}
			}
			kept = append(kept, wm)
		}
		if err := unstructured.SetNestedSlice(o.Object, kept, "webhooks"); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}
