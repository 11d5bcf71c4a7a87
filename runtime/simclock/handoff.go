package simclock

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// The keys of holds that one side places and the other ends: the runner holds a pod's start until
// the agent has started it, the agent holds a pod's completion until the runner has seen it end,
// the fault injector holds a fault's step until the agent has acted on it. Both sides build the
// keys here, so a hold cannot be placed under one spelling and released under another.

// PodStart is the runner's hold on a pod not yet Running and started by the agent.
func PodStart(uid types.UID) Key { return Key{Kind: KindStart, ID: string(uid)} }

// PodGone is the runner's hold on a deleted pod the agent still simulates.
func PodGone(uid types.UID) Key { return Key{Kind: KindGone, ID: string(uid)} }

// PodDone is the agent's hold on a pod it completed that the runner has not seen terminal.
func PodDone(uid types.UID) Key { return Key{Kind: KindDone, ID: string(uid)} }

// NodeDown and NodeUp are the fault injector's holds on a node it took down or brought back,
// until the agent has stopped or may resume the node's pods.
func NodeDown(node string) Key { return agentFault("node-down", node) }

// NodeUp: see NodeDown.
func NodeUp(node string) Key { return agentFault("node-up", node) }

// PodFailed is the fault injector's hold on a pod it failed, until the agent stops simulating it.
func PodFailed(uid types.UID) Key { return agentFault("pod", string(uid)+"/failed") }

// PodRestart is the fault injector's hold on a pod whose container it crashed, until the agent
// has seen restart number n.
func PodRestart(uid types.UID, n int32) Key {
	return agentFault("pod", string(uid)+"/restart-"+strconv.Itoa(int(n)))
}

func agentFault(what, id string) Key { return Key{Kind: KindFault, ID: "agent/" + what + "/" + id} }
