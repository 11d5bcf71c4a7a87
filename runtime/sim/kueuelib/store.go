package kueuelib

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
)

// Change is one write to a Workload, as an informer would deliver it: Old is nil for a create,
// New is nil for a delete. Both are the store's copies at the time; nobody may modify them.
type Change struct {
	Old, New *kueue.Workload
	// Async marks the scheduler's admission write, which Kueue makes in a goroutine of its own
	// (routine.Wrapper): the scheduling cycle does not wait for it.
	Async bool
	// By is who made the write.
	By Writer
}

// Writer is who made a write, as the control-plane model tells Kueue's writers apart.
type Writer uint8

const (
	// ByKueue is Kueue's scheduler or workload controller.
	ByKueue Writer = iota
	// ByJob is Kueue's job reconciler (jobframework) finishing a Workload or releasing an evicted
	// one.
	ByJob
	// ByJobCreate is the job reconciler creating the Workload of a job.
	ByJobCreate
	// ByJobPodsReady is the job reconciler writing the PodsReady condition.
	ByJobPodsReady
	// ByBooster is the priority booster, a controller of its own with its own client.
	ByBooster
	// ByRestore is a resumed state's Workloads, which exist at its instant: Kueue's informers
	// list them when it starts, nobody writes them.
	ByRestore
)

// Store is the in-memory API server the sim gives Kueue's code as its client.Client. It holds the
// cluster objects (namespaces, priority classes, flavors, cohorts, queues, topologies, and the
// DeviceClasses, ResourceSlices and live workloads' ResourceClaimTemplates its DRA quota reads)
// and the Workloads, serves Get and List from them, and applies Kueue's writes to Workloads the way the
// API server would for the requests Kueue v0.19.2 makes: server-side-apply patches of a
// Workload's status (the admission fields by field manager kueue-admission, single conditions
// by others), merge patches and updates. Every Workload write is queued as a Change, which the
// sim delivers to Kueue's workload controller event handlers, as the informer would.
//
// Writes from Kueue's parallel preemption goroutines are serialised by a mutex; TakeChanges
// returns them ordered by workload, so their order does not depend on goroutine scheduling.
type Store struct {
	mu        sync.Mutex
	scheme    *runtime.Scheme
	mapper    apimeta.RESTMapper
	workloads map[types.NamespacedName]*kueue.Workload
	// owners are the jobs of the stored Workloads (their controller references): a replay's job
	// exists exactly as long as its Workload, and the sim keeps no job objects of its own.
	owners  map[ownerKey]types.UID
	objects map[objKey]client.Object
	// byType holds each type's objects sorted by namespace and name, for List.
	byType  map[reflect.Type][]client.Object
	changes []Change
	uids    uint64
	uidSeed uint64
	rv      uint64
	// async is > 0 while the scheduler's admission routine runs (admissionRoutine); by is
	// the writer of the operation running (as).
	async int
	by    Writer
	// now is Kueue's (virtual) clock, nil until New sets it.
	now func() time.Time
}

type objKey struct {
	typ reflect.Type
	key types.NamespacedName
}

type ownerKey struct {
	apiVersion, kind, namespace, name string
}

// ownerOf is the key of wl's controller owner; ok is false when it has none.
func ownerOf(wl *kueue.Workload) (ownerKey, types.UID, bool) {
	ref := metav1.GetControllerOf(wl)
	if ref == nil {
		return ownerKey{}, "", false
	}
	return ownerKey{ref.APIVersion, ref.Kind, wl.Namespace, ref.Name}, ref.UID, true
}

// NewStore returns an empty store whose Scheme is scheme (it must know Kueue's v1beta2 types
// and the job kinds whose objects the sim turns into Workloads).
func NewStore(scheme *runtime.Scheme) *Store {
	return &Store{scheme: scheme, mapper: apimeta.NewDefaultRESTMapper(nil),
		workloads: map[types.NamespacedName]*kueue.Workload{}, owners: map[ownerKey]types.UID{}, objects: map[objKey]client.Object{}, byType: map[reflect.Type][]client.Object{}}
}

var _ client.Client = (*Store)(nil)

// NewUID returns a UID unique in this store.
func (s *Store) NewUID() types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newUID()
}

// SetUIDSeed seeds the UIDs the store hands out.
func (s *Store) SetUIDSeed(seed uint64) { s.uidSeed = seed }

// newUID is a UUID-shaped UID drawn from the store's seed and a counter. Kueue breaks some ties by
// UID (preemption candidates of one priority reserved in the same second); on a cluster UIDs are
// random, so the order they give is arbitrary, and here it is arbitrary too, but fixed per seed.
func (s *Store) newUID() types.UID {
	s.uids++
	hi, lo := splitmix(s.uidSeed^(2*s.uids)), splitmix(s.uidSeed^(2*s.uids+1))
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", hi>>32, hi>>16&0xffff, hi&0xfff,
		0x8000|lo>>48&0x3fff, lo&0xffffffffffff))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// apiTimes rounds a Workload's requeue time down to the second, as the API server stores it
// (metav1.Time is serialised in RFC 3339 to the second), so that Kueue's backoff requeues at the
// second it would on a cluster. Condition times and creation times keep the sub-second order the
// sim gives them: Kueue orders by them (FIFO by creation, preemption victims by reservation), and
// the cluster engine's Kueue keeps both to the nanosecond too (runtime/tools/patches/
// kueue-v0.19.2-precise-times.patch), so ties that an API server would make at one second, and
// Kueue would break by heap position or UID, are ordered as the trace orders them on both engines.
func apiTimes(wl *kueue.Workload) {
	if rs := wl.Status.RequeueState; rs != nil && rs.RequeueAt != nil && !rs.RequeueAt.IsZero() {
		rs.RequeueAt.Time = rs.RequeueAt.Truncate(time.Second)
	}
}

// virtualTimes stamps with Kueue's clock the condition transitions a write carries from the wall
// clock: Kueue sets some conditions (Requeued, on eviction and when a backoff ends) with
// apimeta.SetStatusCondition, which stamps a transition with time.Now. Such a time is after the
// virtual now, when the write happens, and nothing else can be.
func (s *Store) virtualTimes(wl *kueue.Workload) {
	if s.now == nil {
		return
	}
	now := s.now()
	for i := range wl.Status.Conditions {
		if c := &wl.Status.Conditions[i]; c.LastTransitionTime.After(now) {
			c.LastTransitionTime = metav1.NewTime(now)
		}
	}
}

// AddObject stores a cluster object (not a Workload) as the API server would after a create.
func (s *Store) AddObject(o client.Object) error {
	if _, ok := o.(*kueue.Workload); ok {
		return fmt.Errorf("store: add Workload %s/%s with Create", o.GetNamespace(), o.GetName())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objKey{reflect.TypeOf(o), types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
	if _, dup := s.objects[k]; dup {
		return fmt.Errorf("store: %T %s exists", o, k.key)
	}
	if o.GetUID() == "" {
		o.SetUID(s.newUID())
	}
	s.objects[k] = o
	// Inserted at its place, not sorted again: the ResourceClaimTemplates of the live workloads
	// come and go all run long.
	list := s.byType[k.typ]
	i, _ := slices.BinarySearchFunc(list, k.key, compareObject)
	s.byType[k.typ] = slices.Insert(list, i, o)
	return nil
}

// compareObject orders a type's objects by namespace and name, as List returns them.
func compareObject(o client.Object, key types.NamespacedName) int {
	if c := strings.Compare(o.GetNamespace(), key.Namespace); c != 0 {
		return c
	}
	return strings.Compare(o.GetName(), key.Name)
}

// RemoveObject deletes a stored cluster object (not a Workload), as the API server would; the
// sim deletes a workload's ResourceClaimTemplates when it is done.
func (s *Store) RemoveObject(o client.Object) error {
	if _, ok := o.(*kueue.Workload); ok {
		return fmt.Errorf("store: remove Workload %s/%s with Delete", o.GetNamespace(), o.GetName())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objKey{reflect.TypeOf(o), types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
	if _, ok := s.objects[k]; !ok {
		return apierrors.NewNotFound(s.resource(o), o.GetName())
	}
	delete(s.objects, k)
	list := s.byType[k.typ]
	if i, found := slices.BinarySearchFunc(list, k.key, compareObject); found {
		s.byType[k.typ] = slices.Delete(list, i, i+1)
	}
	return nil
}

// Workload returns the stored Workload (not a copy: callers must not modify it), or nil.
func (s *Store) Workload(key types.NamespacedName) *kueue.Workload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workloads[key]
}

// Workloads is the number of stored Workloads.
func (s *Store) Workloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.workloads)
}

// Forget drops a Workload without a Change: the sim forgets a finished Workload once Kueue's
// handlers have seen it finish, so that memory does not grow with the trace.
func (s *Store) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.workloads, key)
}

// as marks the writes until the returned function is called as w's.
func (s *Store) as(w Writer) func() {
	s.mu.Lock()
	prev := s.by
	s.by = w
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.by = prev
		s.mu.Unlock()
	}
}

// TakeChanges returns the Workload writes since the last call, ordered by namespace and name
// (stable, so the writes to one Workload keep their order), and clears them.
func (s *Store) TakeChanges() []Change {
	s.mu.Lock()
	ch := s.changes
	s.changes = nil
	s.mu.Unlock()
	slices.SortStableFunc(ch, func(a, b Change) int {
		ka, kb := changeKey(a), changeKey(b)
		if c := strings.Compare(ka.Namespace, kb.Namespace); c != 0 {
			return c
		}
		return strings.Compare(ka.Name, kb.Name)
	})
	return ch
}

// HasChanges reports whether writes are waiting for TakeChanges.
func (s *Store) HasChanges() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.changes) > 0
}

// Key is the namespace and name of the Workload written.
func (c Change) Key() types.NamespacedName { return changeKey(c) }

func changeKey(c Change) types.NamespacedName {
	w := c.New
	if w == nil {
		w = c.Old
	}
	return types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
}

func (s *Store) nextRV() string {
	s.rv++
	return strconv.FormatUint(s.rv, 10)
}

// Get implements client.Reader.
func (s *Store) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wl, ok := obj.(*kueue.Workload); ok {
		src := s.workloads[key]
		if src == nil {
			return apierrors.NewNotFound(kueue.Resource("workloads"), key.Name)
		}
		src.DeepCopyInto(wl)
		return nil
	}
	// Metadata of a Workload's job, as Kueue's orphan check asks for it (v0.17's workload
	// controller, the FinishOrphanedWorkloads gate).
	if pm, ok := obj.(*metav1.PartialObjectMetadata); ok {
		uid, found := s.owners[ownerKey{pm.APIVersion, pm.Kind, key.Namespace, key.Name}]
		if !found {
			return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(pm.Kind) + "s"}, key.Name)
		}
		pm.Namespace, pm.Name, pm.UID = key.Namespace, key.Name, uid
		return nil
	}
	src, ok := s.objects[objKey{reflect.TypeOf(obj), key}]
	if !ok {
		return apierrors.NewNotFound(s.resource(obj), key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
	return nil
}

func (s *Store) resource(obj runtime.Object) schema.GroupResource {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}
	}
	return schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}
}

// List implements client.Reader for the lists Kueue's code asks for: LocalQueues (by ClusterQueue),
// Workloads (by queue or admitting ClusterQueue), ResourceSlices (by driver: Kueue's DRA counter
// quota), and lists of kinds the sim does not model (LimitRanges, pods, ...), which are empty.
func (s *Store) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	match := func(o client.Object, field func(string) string) bool {
		if lo.Namespace != "" && o.GetNamespace() != lo.Namespace {
			return false
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labelsOf(o)) {
			return false
		}
		if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
			return lo.FieldSelector.Matches(fieldSet(field))
		}
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch l := list.(type) {
	case *kueue.WorkloadList:
		keys := make([]types.NamespacedName, 0)
		for k, w := range s.workloads {
			if match(w, func(f string) string { return workloadField(w, f) }) {
				keys = append(keys, k)
			}
		}
		sortKeys(keys)
		for _, k := range keys {
			l.Items = append(l.Items, *s.workloads[k].DeepCopy())
		}
		return nil
	case *kueue.LocalQueueList:
		for _, o := range s.sortedObjects(reflect.TypeOf(&kueue.LocalQueue{})) {
			lq := o.(*kueue.LocalQueue)
			if match(lq, func(f string) string {
				if f == indexer.QueueClusterQueueKey {
					return string(lq.Spec.ClusterQueue)
				}
				return ""
			}) {
				l.Items = append(l.Items, *lq.DeepCopy())
			}
		}
		return nil
	}
	// Every other list: the items of that type the store holds (none for kinds the sim does not
	// model), so Kueue sees an empty cluster of them.
	elemType, err := listElemType(list)
	if err != nil {
		return err
	}
	var out []runtime.Object
	for _, o := range s.sortedObjects(elemType) {
		if match(o, func(f string) string { return objectField(o, f) }) {
			out = append(out, o.DeepCopyObject())
		}
	}
	return apimeta.SetList(list, out)
}

func (s *Store) sortedObjects(t reflect.Type) []client.Object { return s.byType[t] }

func sortKeys(keys []types.NamespacedName) {
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// listElemType is the pointer type of a typed list's items (*corev1.Node for a NodeList).
func listElemType(list client.ObjectList) (reflect.Type, error) {
	v := reflect.ValueOf(list).Elem().FieldByName("Items")
	if !v.IsValid() || v.Kind() != reflect.Slice {
		return nil, fmt.Errorf("store: list %T has no Items", list)
	}
	return reflect.PointerTo(v.Type().Elem()), nil
}

func labelsOf(o client.Object) labels.Set { return labels.Set(o.GetLabels()) }

type fieldSet func(string) string

func (f fieldSet) Has(k string) bool   { return f(k) != "" }
func (f fieldSet) Get(k string) string { return f(k) }

var _ fields.Fields = fieldSet(nil)

// objectField is the value of the field indexes Kueue's manager registers for the DRA objects it
// lists: ResourceSlices by driver (the ResourceSlice controller's index, which
// dra.ResourceSliceCache lists by) and DeviceClasses by extended resource name.
func objectField(o client.Object, f string) string {
	switch x := o.(type) {
	case *resourcev1.ResourceSlice:
		if f == "spec.driver" {
			return x.Spec.Driver
		}
	case *resourcev1.DeviceClass:
		if f == "spec.extendedResourceName" && x.Spec.ExtendedResourceName != nil {
			return *x.Spec.ExtendedResourceName
		}
	}
	return ""
}

// workloadField is the value of the field indexes Kueue's manager registers for Workloads.
func workloadField(w *kueue.Workload, f string) string {
	switch f {
	case indexer.WorkloadQueueKey:
		return string(w.Spec.QueueName)
	case indexer.WorkloadClusterQueueKey:
		if w.Status.Admission != nil {
			return string(w.Status.Admission.ClusterQueue)
		}
	}
	return ""
}

// Create implements client.Writer: a Workload gets a UID, a resource version, generation 1 and
// the creation timestamp it carries (the sim sets it from the virtual clock).
func (s *Store) Create(_ context.Context, obj client.Object, opts ...client.CreateOption) error {
	co := (&client.CreateOptions{}).ApplyOptions(opts)
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		if len(co.DryRun) > 0 {
			return nil
		}
		return s.AddObject(obj)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
	if _, dup := s.workloads[key]; dup {
		return apierrors.NewAlreadyExists(kueue.Resource("workloads"), wl.Name)
	}
	if len(co.DryRun) > 0 {
		return nil
	}
	if wl.UID == "" {
		wl.UID = s.newUID()
	}
	wl.ResourceVersion = s.nextRV()
	wl.Generation = 1
	apiTimes(wl)
	stored := wl.DeepCopy()
	s.workloads[key] = stored
	if k, uid, ok := ownerOf(stored); ok {
		s.owners[k] = uid
	}
	s.changes = append(s.changes, Change{New: stored, Async: s.async > 0, By: s.by})
	return nil
}

// Delete implements client.Writer for Workloads.
func (s *Store) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return fmt.Errorf("store: delete %T: the sim deletes only Workloads", obj)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
	old := s.workloads[key]
	if old == nil {
		return apierrors.NewNotFound(kueue.Resource("workloads"), wl.Name)
	}
	delete(s.workloads, key)
	if k, uid, ok := ownerOf(old); ok && s.owners[k] == uid {
		delete(s.owners, k)
	}
	s.changes = append(s.changes, Change{Old: old, Async: s.async > 0, By: s.by})
	return nil
}

// Update implements client.Writer: a Workload's spec and metadata are replaced, its status kept.
func (s *Store) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return fmt.Errorf("store: update %T: the sim updates only Workloads", obj)
	}
	return s.write(wl, func(cur *kueue.Workload) {
		status := cur.Status
		wl.DeepCopyInto(cur)
		cur.Status = status
		cur.Generation++
	})
}

// Patch implements client.Writer (metadata and spec of a Workload, as a merge patch whose result
// the caller already holds in obj).
func (s *Store) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return fmt.Errorf("store: patch %T: the sim patches only Workloads", obj)
	}
	if patch.Type() == types.ApplyPatchType {
		return fmt.Errorf("store: apply of a Workload's spec is not modelled (only of its status)")
	}
	return s.write(wl, func(cur *kueue.Workload) {
		status := cur.Status
		wl.DeepCopyInto(cur)
		cur.Status = status
	})
}

// Apply implements client.Writer; the scheduling path the sim runs does not use apply
// configurations.
func (s *Store) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return fmt.Errorf("store: apply configurations are not modelled")
}

// DeleteAllOf implements client.Writer; not used by the code the sim runs.
func (s *Store) DeleteAllOf(_ context.Context, obj client.Object, _ ...client.DeleteAllOfOption) error {
	return fmt.Errorf("store: delete all of %T is not modelled", obj)
}

// Status implements client.StatusClient.
func (s *Store) Status() client.SubResourceWriter { return statusWriter{s} }

// SubResource implements client.SubResourceClientConstructor (status only).
func (s *Store) SubResource(sub string) client.SubResourceClient { return subResource{s, sub} }

// Scheme implements client.Client.
func (s *Store) Scheme() *runtime.Scheme { return s.scheme }

// RESTMapper implements client.Client.
func (s *Store) RESTMapper() apimeta.RESTMapper { return s.mapper }

// GroupVersionKindFor implements client.Client.
func (s *Store) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, s.scheme)
}

// IsObjectNamespaced implements client.Client: everything but the cluster-scoped kinds Kueue's
// code asks about.
func (s *Store) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	switch obj.(type) {
	case *corev1.Namespace, *corev1.Node, *kueue.ClusterQueue, *kueue.ResourceFlavor, *kueue.Cohort,
		*kueue.WorkloadPriorityClass, *kueue.Topology, *kueue.AdmissionCheck, *resourcev1.DeviceClass,
		*resourcev1.ResourceSlice:
		return false, nil
	}
	return true, nil
}

// write applies f to the stored Workload of wl's key, queues the change and copies the result
// back into wl, as a client does with the API server's answer.
func (s *Store) write(wl *kueue.Workload, f func(cur *kueue.Workload)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
	old := s.workloads[key]
	if old == nil {
		return apierrors.NewNotFound(kueue.Resource("workloads"), wl.Name)
	}
	// The new version shares the old one's spec (stored versions are never modified in place:
	// writes that change the spec replace it), which spares a copy of the pod templates per write.
	cur := &kueue.Workload{TypeMeta: old.TypeMeta, Spec: old.Spec}
	old.ObjectMeta.DeepCopyInto(&cur.ObjectMeta)
	old.Status.DeepCopyInto(&cur.Status)
	f(cur)
	apiTimes(cur)
	s.virtualTimes(cur)
	cur.ResourceVersion = s.nextRV()
	s.workloads[key] = cur
	s.changes = append(s.changes, Change{Old: old, New: cur, Async: s.async > 0, By: s.by})
	cur.DeepCopyInto(wl)
	return nil
}

type statusWriter struct{ s *Store }

func (w statusWriter) Create(_ context.Context, obj client.Object, _ client.Object, _ ...client.SubResourceCreateOption) error {
	return fmt.Errorf("store: create of %T/status is not modelled", obj)
}

// Update replaces a Workload's status, or a cluster object (the LocalQueue reconciler writes
// its queues' status).
func (w statusWriter) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return w.s.replace(obj)
	}
	return w.s.write(wl, func(cur *kueue.Workload) { wl.Status.DeepCopyInto(&cur.Status) })
}

// replace stores obj in place of the stored object of its type and key.
func (s *Store) replace(obj client.Object) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objKey{reflect.TypeOf(obj), types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	old, ok := s.objects[k]
	if !ok {
		return apierrors.NewNotFound(s.resource(obj), obj.GetName())
	}
	cp := obj.DeepCopyObject().(client.Object)
	s.objects[k] = cp
	list := s.byType[k.typ]
	for i, o := range list {
		if o == old {
			list[i] = cp
		}
	}
	return nil
}

// Patch applies a status patch: a server-side apply of a partial Workload (how Kueue v0.19.2
// writes admission, eviction, finish and single conditions by default) or a merge patch whose
// result the caller holds in obj (the WorkloadRequestUseMergePatch gate).
func (w statusWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return fmt.Errorf("store: status patch of %T is not modelled", obj)
	}
	if patch.Type() != types.ApplyPatchType {
		return w.s.write(wl, func(cur *kueue.Workload) { wl.Status.DeepCopyInto(&cur.Status) })
	}
	po := (&client.SubResourcePatchOptions{}).ApplyOptions(opts)
	manager := ""
	if po.FieldManager != "" {
		manager = po.FieldManager
	}
	return w.s.write(wl, func(cur *kueue.Workload) { applyStatus(cur, wl, manager) })
}

// Apply implements client.SubResourceWriter; the scheduling path the sim runs writes status by
// patch and update only.
func (w statusWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return fmt.Errorf("store: status apply configurations are not modelled")
}

type subResource struct {
	s   *Store
	sub string
}

// Apply implements client.SubResourceClient (see statusWriter.Apply).
func (r subResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return fmt.Errorf("store: %s apply configurations are not modelled", r.sub)
}

func (r subResource) Get(_ context.Context, obj, _ client.Object, _ ...client.SubResourceGetOption) error {
	return fmt.Errorf("store: get of %T/%s is not modelled", obj, r.sub)
}

func (r subResource) Create(_ context.Context, obj, _ client.Object, _ ...client.SubResourceCreateOption) error {
	return fmt.Errorf("store: create of %T/%s is not modelled", obj, r.sub)
}

func (r subResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if r.sub != "status" {
		return fmt.Errorf("store: update of %T/%s is not modelled", obj, r.sub)
	}
	return statusWriter{r.s}.Update(ctx, obj, opts...)
}

func (r subResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if r.sub != "status" {
		return fmt.Errorf("store: patch of %T/%s is not modelled", obj, r.sub)
	}
	return statusWriter{r.s}.Patch(ctx, obj, patch, opts...)
}

// admissionConditions are the condition types Kueue's admission field manager owns
// (pkg/workload/patching admissionManagedConditions in v0.19.2): an apply by that manager that omits one
// removes it, as server-side apply removes fields a manager stops applying.
var admissionConditions = []string{
	kueue.WorkloadQuotaReserved, kueue.WorkloadEvicted, kueue.WorkloadAdmitted, kueue.WorkloadPreempted,
	kueue.WorkloadRequeued, kueue.WorkloadDeactivationTarget,
}

// applyStatus merges the status of a server-side apply patch p into cur. The admission manager's
// patch (pkg/workload.PrepareWorkloadPatch) carries every field it owns, so those fields are
// replaced; conditions are merged by type (the list's map key), and the admission manager's own
// conditions that its patch omits are removed. Other managers apply single conditions, which are
// merged.
func applyStatus(cur, p *kueue.Workload, manager string) {
	if manager == constants.AdmissionName {
		st := &cur.Status
		ps := p.Status.DeepCopy()
		st.Admission = ps.Admission
		st.RequeueState = ps.RequeueState
		st.ResourceRequests = ps.ResourceRequests
		st.AccumulatedPastExecutionTimeSeconds = ps.AccumulatedPastExecutionTimeSeconds
		st.SchedulingStats = ps.SchedulingStats
		st.ClusterName = ps.ClusterName
		st.NominatedClusterNames = ps.NominatedClusterNames
		st.UnhealthyNodes = ps.UnhealthyNodes
		st.AdmissionChecks = ps.AdmissionChecks
		for _, t := range admissionConditions {
			if apimeta.FindStatusCondition(ps.Conditions, t) == nil {
				apimeta.RemoveStatusCondition(&st.Conditions, t)
			}
		}
	}
	for _, c := range p.Status.Conditions {
		setCondition(&cur.Status.Conditions, c)
	}
}

// setCondition replaces or appends c by type, keeping every field as given (apply does not
// recompute lastTransitionTime the way meta.SetStatusCondition does).
func setCondition(conds *[]metav1.Condition, c metav1.Condition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			(*conds)[i] = c
			return
		}
	}
	*conds = append(*conds, c)
}
