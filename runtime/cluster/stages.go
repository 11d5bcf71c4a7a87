package cluster

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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

// OwnStages decodes kueuelab's own stages: completion and node faults.
func OwnStages() ([]*unstructured.Unstructured, error) {
	c, err := DecodeYAML(bytes.NewReader(completionStages), "stages-complete.yaml")
	if err != nil {
		return nil, err
	}
	f, err := DecodeYAML(bytes.NewReader(faultStages), "stages-fault.yaml")
	return append(c, f...), err
}

// KWOKNodeAnnotation marks the nodes the KWOK controller manages; kwokTaintKey is KWOK's taint
// (NoSchedule, value fake) that keeps real pods off fake nodes.
const (
	KWOKNodeAnnotation = "kwok.x-k8s.io/node"
	kwokTaintKey       = "kwok.x-k8s.io/node"
)

// KueueNamespace is the namespace of Kueue's release manifests and of the local cluster's Kueue.
const KueueNamespace = "kueue-system"

// DecodeYAML splits a multi-document YAML stream into objects, skipping empty documents.
func DecodeYAML(r io.Reader, source string) ([]*unstructured.Unstructured, error) {
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

// DecodeFiles decodes the YAML files at paths, in order.
func DecodeFiles(paths ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		objs, err := DecodeYAML(bytes.NewReader(b), p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// kwokStageFiles are KWOK's stages (under its kustomize/) a cluster needs: nodes become Ready and
// keep their lease, pods run and go when deleted. The stock pod-complete stage is left out: pods
// complete only when kueuelab says so (stages-complete.yaml).
var kwokStageFiles = []string{
	"stage/node/fast/node-initialize.yaml", "stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"stage/pod/fast/pod-ready.yaml", "stage/pod/fast/pod-delete.yaml",
}

// KWOKStagesIn decodes KWOK's lifecycle stages (kwokStageFiles) from its module at dir.
func KWOKStagesIn(dir string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, f := range kwokStageFiles {
		files = append(files, filepath.Join(dir, "kustomize", f))
	}
	return DecodeFiles(files...)
}
