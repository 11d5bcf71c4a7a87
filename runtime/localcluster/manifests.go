package localcluster

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// manifests are the upstream objects a cluster installs, read from the module cache.
type manifests struct {
	stageCRD   []*unstructured.Unstructured
	stages     []*unstructured.Unstructured
	jobCRDs    []*unstructured.Unstructured // every job kind's CRD and Kueue's own
	kueueHooks []*unstructured.Unstructured
	// opHooks and opObjects are each operator's webhook configurations and install objects.
	opHooks   map[string][]*unstructured.Unstructured
	opObjects map[string][]*unstructured.Unstructured
}

// kueueConversionCRDs are served in v1beta1 and v1beta2 (stored in v1beta2) and need Kueue's
// conversion webhook for v1beta1 clients; they are also the CRDs Kueue's cert rotator injects its
// CA into before it starts.
var kueueConversionCRDs = []string{
	"localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io",
	"workloads.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io",
}

// kueueFrameworks are the Kueue integrations enabled: those of every kind in the registry.
func kueueFrameworks() []string {
	var out []string
	for _, k := range render.DefaultRegistry().KueueIntegrations() {
		out = append(out, k.Framework)
	}
	return out
}

// kueueWebhookNeeded keeps Kueue's webhooks for its own objects and for the job kinds whose
// integration is enabled; the rest belong to integrations this cluster does not enable
// (Deployments, plain pods, AppWrappers, ...), and registering them would make the API server call
// paths Kueue does not serve.
func kueueWebhookNeeded(webhook map[string]any) bool {
	enabled := map[string]bool{}
	for _, k := range render.DefaultRegistry().KueueIntegrations() {
		enabled[k.Kind.Group+"/"+k.Resource] = true
	}
	rules, _, _ := unstructured.NestedSlice(webhook, "rules")
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(rm, "apiGroups")
		resources, _, _ := unstructured.NestedStringSlice(rm, "resources")
		for _, g := range groups {
			for _, res := range resources {
				res, _, _ = strings.Cut(res, "/") // a subresource belongs to its resource
				if g != kueuewl.Group && !enabled[g+"/"+res] {
					return false
				}
			}
		}
	}
	return len(rules) > 0
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
	in := func(mod string, rel ...string) []string {
		out := make([]string, len(rel))
		for i, r := range rel {
			out[i] = filepath.Join(dir[mod], r)
		}
		return out
	}
	m := &manifests{opHooks: map[string][]*unstructured.Unstructured{}, opObjects: map[string][]*unstructured.Unstructured{}}
	var err error
	kw := func(rel string) string { return filepath.Join(dir[tools.KWOKModule], "kustomize", rel) }
	if m.stageCRD, err = cluster.DecodeFiles(kw("crd/bases/kwok.x-k8s.io_stages.yaml")); err != nil {
		return nil, err
	}
	if m.stages, err = cluster.KWOKStagesIn(dir[tools.KWOKModule]); err != nil {
		return nil, err
	}
	own, err := cluster.OwnStages()
	if err != nil {
		return nil, err
	}
	m.stages = append(m.stages, own...)

	crdFiles, err := filepath.Glob(filepath.Join(dir[tools.KueueModule], "config/components/crd/bases/*.yaml"))
	if err != nil || len(crdFiles) == 0 {
		return nil, fmt.Errorf("manifests: no Kueue CRDs in %s (%v)", tools.KueueModule, err)
	}
	reg := render.DefaultRegistry()
	for _, src := range reg.CRDs() {
		crdFiles = append(crdFiles, in(src.ModuleVersion(), src.Files...)...)
	}
	if m.jobCRDs, err = cluster.DecodeFiles(crdFiles...); err != nil {
		return nil, err
	}
	kueueURL := loopURL("https", s.Ports.KueueWebhook, "")
	// Kueue in a pod (kind mode) is reached through its webhook Service, as its manifests have it.
	clientConfig := func(path string) map[string]any {
		if s.kindMode() {
			return map[string]any{"service": map[string]any{"namespace": cluster.KueueNamespace, "name": kueueWebhookService,
				"path": path, "port": int64(443)}, "caBundle": b64(p.KueueCA.CertPEM)}
		}
		return map[string]any{"url": kueueURL + path, "caBundle": b64(p.KueueCA.CertPEM)}
	}
	for _, crd := range m.jobCRDs {
		if slices.Contains(kueueConversionCRDs, crd.GetName()) {
			if err := unstructured.SetNestedField(crd.Object, map[string]any{
				"strategy": "Webhook",
				"webhook": map[string]any{
					"clientConfig":             clientConfig("/convert"),
					"conversionReviewVersions": []any{"v1"},
				},
			}, "spec", "conversion"); err != nil {
				return nil, err
			}
		}
	}

	hooks, err := cluster.DecodeFiles(filepath.Join(dir[tools.KueueModule], "config/components/webhook/manifests.yaml"))
	if err != nil {
		return nil, err
	}
	kh := urlHooks{prefix: "kueue-", baseURL: kueueURL, ca: p.KueueCA.CertPEM, keep: kueueWebhookNeeded}
	if s.kindMode() {
		kh.clientConfig = clientConfig
	}
	if m.kueueHooks, err = urlWebhooks(hooks, kh); err != nil {
		return nil, err
	}
	for _, op := range reg.Operators() {
		mod := op.Module + "@" + op.Version
		if w := op.Webhooks; w != nil {
			hooks, err := cluster.DecodeFiles(in(mod, w.File)...)
			if err != nil {
				return nil, err
			}
			u := urlHooks{prefix: w.NamePrefix, name: w.Name, baseURL: loopURL("https", s.Ports.Operators[op.Name]["webhook"], ""),
				ca: p.CA.CertPEM, adjust: w.Adjust,
				keep: func(h map[string]any) bool { return !slices.Contains(w.Skip, fmt.Sprint(h["name"])) }}
			if w.RotatorSecret != "" {
				u.ca = p.rotators[rotatorCertName(op)].CA.CertPEM
			}
			if m.opHooks[op.Name], err = urlWebhooks(hooks, u); err != nil {
				return nil, err
			}
		}
		if len(op.InstallObjects) > 0 {
			if m.opObjects[op.Name], err = cluster.DecodeFiles(in(mod, op.InstallObjects...)...); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// urlHooks says how urlWebhooks rewrites one operator's webhook configurations.
type urlHooks struct {
	// prefix is prepended to each configuration's name, or name replaces it.
	prefix, name string
	baseURL      string
	ca           []byte
	// keep selects the webhooks kept (nil: all); adjust edits each kept one (nil: none).
	keep   func(map[string]any) bool
	adjust func(map[string]any)
	// clientConfig, when set, gives each webhook's client config by its path instead of a URL
	// under baseURL.
	clientConfig func(path string) map[string]any
}

// urlWebhooks rewrites kubebuilder webhook configurations from in-cluster Services to URLs on
// 127.0.0.1 (the controllers run out of cluster), names them, and drops the webhooks not kept.
func urlWebhooks(objs []*unstructured.Unstructured, u urlHooks) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if k := o.GetKind(); k != "MutatingWebhookConfiguration" && k != "ValidatingWebhookConfiguration" {
			continue
		}
		if u.name != "" {
			o.SetName(u.name)
		} else {
			o.SetName(u.prefix + o.GetName())
		}
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
			if u.keep != nil && !u.keep(wm) {
				continue
			}
			path, _, _ := unstructured.NestedString(wm, "clientConfig", "service", "path")
			wm["clientConfig"] = map[string]any{"url": strings.TrimSuffix(u.baseURL, "/") + path, "caBundle": b64(u.ca)}
			if u.clientConfig != nil {
				wm["clientConfig"] = u.clientConfig(path)
			}
			if _, ok := wm["namespaceSelector"]; !ok {
				wm["namespaceSelector"] = map[string]any{"matchExpressions": []any{map[string]any{
					"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system"}}}}
			}
			if u.adjust != nil {
				u.adjust(wm)
			}
			kept = append(kept, wm)
		}
		if len(kept) == 0 {
			continue
		}
		if err := unstructured.SetNestedSlice(o.Object, kept, "webhooks"); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}
