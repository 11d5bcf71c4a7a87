//go:build kueue_v0_15 || kueue_v0_17

package kueuelib

import (
	"fmt"
	"reflect"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"
)

// insertInadmissible puts wInfo under key into c's unexported inadmissibleWorkloads map, reached
// through reflection as the heads are (seam 6): the releases before v0.18 have no method for it.
func insertInadmissible(c *qcache.ClusterQueue, key workload.Reference, wInfo *workload.Info) error {
	f := reflect.ValueOf(c).Elem().FieldByName("inadmissibleWorkloads")
	if !f.IsValid() || f.Kind() != reflect.Map || f.Type().Key() != reflect.TypeFor[workload.Reference]() ||
		f.Type().Elem() != reflect.TypeFor[*workload.Info]() {
		return fmt.Errorf("kueue %s seam: queue.ClusterQueue has no map inadmissibleWorkloads of *workload.Info by workload.Reference", KueueVersion)
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetMapIndex(reflect.ValueOf(key), reflect.ValueOf(wInfo))
	return nil
}

// discardRecorder drops Kueue's Kubernetes events (record.EventRecorder, before v0.18); the sim
// records its own.
type discardRecorder struct{}

var _ record.EventRecorder = discardRecorder{}

func (discardRecorder) Event(runtime.Object, string, string, string)          {}
func (discardRecorder) Eventf(runtime.Object, string, string, string, ...any) {}
func (discardRecorder) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}

// quotaCheckOptions refuses a quotaCheckStrategy: the releases before v0.18 have none.
func quotaCheckOptions(s string) ([]scheduler.Option, error) {
	if s == "" {
		return nil, nil
	}
	return nil, fmt.Errorf("resources.quotaCheckStrategy: Kueue v0.18 introduced it; this sim runs Kueue %s", KueueVersion)
}
