package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kueuelab/kueuelab/render/contract"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// FieldOwner is the server-side apply field manager of everything kueuelab applies.
const FieldOwner = "kueuelab"

// RESTConfig loads a kubeconfig with client rate limits high enough for bulk applies.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

func newClient(cfg *rest.Config, scheme *runtime.Scheme) (client.Client, error) {
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// ApplyCRDs applies CRDs a few at a time, skipping those whose applied content is unchanged.
func ApplyCRDs(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, crd := range crds {
		g.Go(func() error {
			crd = crd.DeepCopy()
			b, err := json.Marshal(crd.Object)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			h := hex.EncodeToString(sum[:8])
			cur := &metav1.PartialObjectMetadata{}
			cur.SetGroupVersionKind(crd.GroupVersionKind())
			if err := c.Get(gctx, client.ObjectKey{Name: crd.GetName()}, cur); err == nil && cur.GetAnnotations()[contract.AppliedHash] == h {
				return nil
			}
			ann := crd.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[contract.AppliedHash] = h
			crd.SetAnnotations(ann)
			return ApplyUnstructured(gctx, c, []*unstructured.Unstructured{crd})
		})
	}
	return g.Wait()
}

// noMatchWait bounds how long an apply waits for its kind to appear in the API server's
// discovery: a CRD reported Established can be missing from discovery for a moment on a loaded
// machine, and the client then finds no such kind.
const noMatchWait = 30 * time.Second

// ApplyUnstructured server-side applies objects in order, taking ownership of conflicting fields.
func ApplyUnstructured(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		var err error
		werr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, noMatchWait, true, func(ctx context.Context) (bool, error) {
			err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldOwner), client.ForceOwnership)
			return !meta.IsNoMatchError(err), nil
		})
		if err == nil {
			err = werr
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// ApplyObjects server-side applies typed objects (nodes, flavors, queues, workloads) in order. A
// new Node is created whole, status (capacity, allocatable) included, as a kubelet registers its
// node: KWOK's node-initialize stage fills a node's empty allocatable with its own (1k cpu, 1Ti
// memory), and when that patch landed after a separate status write it replaced the spec's on
// some nodes (a run then saw one of two equal nodes with 30 times the other's cpu). An existing
// Node's status is applied through the status subresource, since that is what the scheduler and
// Kueue read for fake KWOK nodes.
func ApplyObjects(ctx context.Context, cfg *rest.Config, objs []client.Object) error {
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	c, err := newClient(cfg, scheme)
	if err != nil {
		return err
	}
	allFake, err := allNodesFake(ctx, c, objs)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			if allFake {
				n = withoutKWOKTaint(n)
			}
			whole := n.DeepCopy()
			whole.ResourceVersion, whole.CreationTimestamp = "", metav1.Time{}
			err := c.Create(ctx, whole, client.FieldOwner(FieldOwner))
			if err == nil {
				continue
			}
			if !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create Node %s: %w", n.Name, err)
			}
			o = n
		}
		u, err := toUnstructured(o, c.Scheme())
		if err != nil {
			return err
		}
		delete(u.Object["metadata"].(map[string]any), "creationTimestamp")
		status, hasStatus := u.Object["status"]
		delete(u.Object, "status")
		if err := ApplyUnstructured(ctx, c, []*unstructured.Unstructured{u}); err != nil {
			return err
		}
		if _, isNode := o.(*corev1.Node); isNode && hasStatus {
			su := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
				"metadata": map[string]any{"name": u.GetName()}, "status": status}}
			if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(su), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
				return fmt.Errorf("apply status of Node %s: %w", u.GetName(), err)
			}
		}
	}
	return nil
}

func toUnstructured(o client.Object, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(o, scheme)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", o.GetName(), err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// WaitEstablished waits until every named CRD reports Established=True.
func WaitEstablished(ctx context.Context, c client.Client, names []string, timeout time.Duration) error {
	pending := ""
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd := &unstructured.Unstructured{}
			crd.SetAPIVersion("apiextensions.k8s.io/v1")
			crd.SetKind("CustomResourceDefinition")
			if err := c.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				pending = n + ": " + err.Error()
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			ok := false
			for _, cond := range conds {
				cm, _ := cond.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					ok = true
				}
			}
			if !ok {
				pending = n
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not Established: %w", pending, err)
	}
	return nil
}

// GPUProduct is the node label the default nodes (and the default flavor) use.
const GPUProduct = "NVIDIA-H100-80GB-HBM3"

// DefaultNodes are the KWOK GPU nodes a cluster gets when no cluster spec is given.
func DefaultNodes(n, gpus int) []client.Object {
	out := make([]client.Object, n)
	for i := range n {
		name := "kwok-gpu-" + strconv.Itoa(i)
		res := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("96"),
			corev1.ResourceMemory: resource.MustParse("1024Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
			"nvidia.com/gpu":      *resource.NewQuantity(int64(gpus), resource.DecimalSI),
		}
		out[i] = &corev1.Node{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{KWOKNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels: map[string]string{
					"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
					"type": "kwok", "nvidia.com/gpu.product": GPUProduct, "nvidia.com/gpu.count": strconv.Itoa(gpus),
				},
			},
			Status: corev1.NodeStatus{
				Capacity: res, Allocatable: res,
				NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake", ContainerRuntimeVersion: "fake"},
			},
		}
	}
	return out
}

// WaitNodesSchedulable waits until each node is Ready, has the allocatable resources it was
// given (KWOK's node-initialize stage may replace them, see ApplyObjects), and is free of the node controller's
// condition taints (node.kubernetes.io/not-ready and the like): a node new to the cluster keeps
// node.kubernetes.io/not-ready for a moment after it reports Ready, and pods created meanwhile
// all go to the other nodes, whatever the scheduler's scoring. It returns the latest time one of
// them was created or became Ready, as the API records it (to the second).
func WaitNodesSchedulable(ctx context.Context, rc *rest.Config, nodes []*corev1.Node, timeout time.Duration) (time.Time, error) {
	c, err := NewClient(rc)
	if err != nil {
		return time.Time{}, err
	}
	var waiting string
	var changed time.Time
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		changed = time.Time{}
		for _, want := range nodes {
			name := want.Name
			var n corev1.Node
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
				if apierrors.IsNotFound(err) {
					waiting = name + " (not found)"
					return false, nil
				}
				return false, err
			}
			if why := whyUnschedulable(&n); why != "" {
				waiting = name + " (" + why + ")"
				return false, nil
			}
			if r, ok := allocatableDiffers(want, &n); ok {
				waiting = fmt.Sprintf("%s (allocatable %s %s, the spec's %s)", name, r, quantity(n.Status.Allocatable, r), quantity(want.Status.Allocatable, r))
				return false, nil
			}
			if t := n.CreationTimestamp.Time; t.After(changed) {
				changed = t
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.LastTransitionTime.After(changed) {
					changed = cond.LastTransitionTime.Time
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("node %s not Ready and schedulable: %w", waiting, err)
	}
	return changed, nil
}

// WaitNodesReady waits until every KWOK node is Ready and has no node.kubernetes.io/ taint, and
// returns how many are.
func WaitNodesReady(ctx context.Context, c client.Client, timeout time.Duration) (int, error) {
	ready, total := 0, 0
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		ready, total, waiting = 0, 0, ""
		for _, n := range nodes.Items {
			if n.Annotations[KWOKNodeAnnotation] != "fake" {
				continue
			}
			total++
			why := whyUnschedulable(&n)
			if why == "" {
				ready++
			} else if waiting == "" {
				waiting = fmt.Sprintf("; %s: %s", n.Name, why)
			}
		}
		return total > 0 && ready == total, nil
	})
	if err != nil {
		return ready, fmt.Errorf("KWOK nodes not Ready and schedulable (%d of %d are%s): %w", ready, total, waiting, err)
	}
	return ready, nil
}

// The local cluster marks itself with this ConfigMap: every node of it is a KWOK node.
const (
	localMarkerNamespace = "kube-public"
	localMarkerName      = "kueuelab-local-cluster"
)

// LocalMarker is the ConfigMap the local control plane (runtime/localcluster) creates.
func LocalMarker() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: localMarkerNamespace, Name: localMarkerName},
		Data: map[string]string{"allNodesFake": "true", "why": "every node of a kueuelab local cluster is a KWOK node: " +
			"nodes applied here carry no " + kwokTaintKey + " taint, so pods nobody rendered for KWOK (a user's own manifests) run on them"},
	}
}

// allNodesFake reports whether objs hold Nodes and the cluster is a kueuelab local cluster, whose
// nodes are all KWOK nodes.
func allNodesFake(ctx context.Context, c client.Client, objs []client.Object) (bool, error) {
	if !slices.ContainsFunc(objs, func(o client.Object) bool { _, ok := o.(*corev1.Node); return ok }) {
		return false, nil
	}
	var cm corev1.ConfigMap
	switch err := c.Get(ctx, client.ObjectKey{Namespace: localMarkerNamespace, Name: localMarkerName}, &cm); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s/%s: %w", localMarkerNamespace, localMarkerName, err)
	}
	return cm.Data["allNodesFake"] == "true", nil
}

// withoutKWOKTaint is n without KWOK's taint. The taint keeps real pods off fake nodes; where
// every node is fake it keeps nothing off that should stay off, only pods not written for KWOK
// (upstream samples, a user's production YAML), which must run as on a real cluster. Tolerating
// it through the ResourceFlavors instead would make Kueue v0.15 delete such a job's Workload once
// it finished (the flavor's toleration injected into the job then differs from the Workload's
// pod sets), and mpi-operator creates an MPIJob's launcher before Kueue injects anything.
func withoutKWOKTaint(n *corev1.Node) *corev1.Node {
	n = n.DeepCopy()
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == kwokTaintKey })
	return n
}

// allocatableDiffers returns a resource of want's allocatable that n does not have in that
// quantity.
func allocatableDiffers(want, n *corev1.Node) (corev1.ResourceName, bool) {
	for _, r := range slices.Sorted(maps.Keys(want.Status.Allocatable)) {
		q, ok := n.Status.Allocatable[r]
		if w := want.Status.Allocatable[r]; !ok || q.Cmp(w) != 0 {
			return r, true
		}
	}
	return "", false
}

func quantity(l corev1.ResourceList, r corev1.ResourceName) string {
	if q, ok := l[r]; ok {
		return q.String()
	}
	return "none"
}

// whyUnschedulable says what keeps the scheduler off n ("" when nothing does): the node
// controller's condition taints or a Ready condition that is not True.
func whyUnschedulable(n *corev1.Node) string {
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			return fmt.Sprintf("taint %s:%s", t.Key, t.Effect)
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return ""
			}
			return fmt.Sprintf("Ready=%s (%s)", cond.Status, cond.Reason)
		}
	}
	return "no Ready condition"
}
