package agent

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/agent/engine"
)

// The agent's reading of nodes and pods into the physics engine, for another simulator of the
// same objects (the sim engine, runtime/sim), so both engines model hardware and work alike.

// EngineNode returns the engine's spec of a node (its allocatable, GPU family and CPU model, as
// the agent reads them) with the node's GPU power cap from the contract.PowerCap label or annotation
// applied.
func EngineNode(n *corev1.Node, cat *hw.Catalog) (engine.NodeSpec, error) {
	s, err := nodeSpec(n, cat)
	if err != nil || s.GPUs == 0 {
		return s, err
	}
	g, _ := cat.GPU(s.GPUFamily)
	if s.GPUCapW, err = cat.ParseCap(capValue(n, contract.PowerCap), g); err != nil {
		return s, err
	}
	return s, nil
}

// EnginePod returns the engine's spec of a pod from its render contract and the agent's own
// annotations, and whether the pod fails when its work is done (InjectFailureAnnotation).
// failureRate and seed draw random failures as the agent's Config does.
func EnginePod(p *corev1.Pod, c *contract.Pod, failureRate float64, seed uint64) (engine.PodSpec, bool, error) {
	return podSpec(p, c, failureRate, seed)
}
