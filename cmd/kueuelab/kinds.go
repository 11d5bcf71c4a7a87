package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// Help texts name kinds and operators from render's registry, so they never fall behind it.

// kindList is "MPIJob, PyTorchJob, ..." in registration order.
func kindList() string {
	var names []string
	for _, in := range render.DefaultRegistry().Integrations() {
		names = append(names, in.Name())
	}
	return strings.Join(names, ", ")
}

// operatorList is "JobSet's jobset, ..." as component names.
func operatorList() string {
	var names []string
	for _, op := range render.DefaultRegistry().Operators() {
		names = append(names, op.Name)
	}
	return strings.Join(names, ", ")
}

// mappingHelp lists, per family with a choice, its default kind and the alternatives.
func mappingHelp() string {
	reg, def := render.DefaultRegistry(), render.DefaultMapping()
	var b strings.Builder
	b.WriteString("  kinds:\n")
	for _, f := range trace.Families {
		kinds := reg.FamilyKinds()[f]
		if len(kinds) < 2 {
			continue
		}
		alts := slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == def[f] })
		fmt.Fprintf(&b, "    %-36s # %s (default) | %s\n", string(f)+": "+alts[0], def[f], strings.Join(alts, " | "))
	}
	return strings.TrimRight(b.String(), "\n")
}

// targets lists the pinned versions: "Kubernetes v1.34.2, ..., kuberay-operator v1.5.1".
func targets() string {
	var parts []string
	seen := map[string]bool{}
	for _, c := range tools.Pinned().Components {
		name := c.Name
		if strings.HasPrefix(name, "kube-") {
			name = "Kubernetes"
		}
		if !seen[name] {
			seen[name] = true
			parts = append(parts, name+" "+c.Version)
		}
	}
	for _, in := range render.DefaultRegistry().Integrations() {
		for _, c := range in.CRDs {
			if len(in.Operators) == 0 && !seen[c.Module] {
				seen[c.Module] = true
				parts = append(parts, c.Module+" "+c.Version+" (API only)")
			}
		}
	}
	return strings.Join(parts, ", ")
}

// numPorts is the size of a local cluster's port block.
func numPorts() int { return localcluster.NumPorts() }
