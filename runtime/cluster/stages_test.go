package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kueuelab/kueuelab/render/contract"
)

func TestDecodeYAMLRejectsKindless(t *testing.T) {
	_, err := DecodeYAML(strings.NewReader("metadata: {name: x}\n"), "bad.yaml")
	if err == nil || !strings.Contains(err.Error(), "bad.yaml: document 1") {
		t.Fatalf("err = %v, want one naming bad.yaml document 1", err)
	}
}

func TestCompletionStagesUseKueuelabAnnotation(t *testing.T) {
	objs, err := DecodeYAML(strings.NewReader(string(completionStages)), "stages-complete.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kueuelab-pod-complete": "true", "kueuelab-pod-fail": "fail"}
	if len(objs) != len(want) {
		t.Fatalf("got %d stages, want %d", len(objs), len(want))
	}
	for _, o := range objs {
		got, _, _ := unstructured.NestedString(o.Object, "spec", "selector", "matchAnnotations", contract.Complete)
		if got != want[o.GetName()] {
			t.Errorf("stage %s matches %s=%q, want %q", o.GetName(), contract.Complete, got, want[o.GetName()])
		}
	}
}

// TestFaultStageSelectsFaultLabel: kueuelab's node-fault stage selects the fault label, outweighs
// KWOK's node stages and does not loop on the current time.
func TestFaultStageSelectsFaultLabel(t *testing.T) {
	objs, err := OwnStages()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetName() != "kueuelab-node-fault" {
			continue
		}
		got, _, _ := unstructured.NestedString(o.Object, "spec", "selector", "matchLabels", contract.Fault)
		wv, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "weight")
		w, _ := strconv.ParseFloat(fmt.Sprint(wv), 64)
		tmpl, _, _ := unstructured.NestedString(o.Object, "spec", "next", "statusTemplate")
		if got != contract.FaultNodeDown || w < 10000 || strings.Contains(tmpl, "Now") {
			t.Errorf("fault stage: selects %s=%q, weight %g, template uses Now: %v", contract.Fault, got, w, strings.Contains(tmpl, "Now"))
		}
		return
	}
	t.Fatal("no kueuelab-node-fault stage")
}
