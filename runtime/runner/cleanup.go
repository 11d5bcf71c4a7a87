package runner

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/render/contract"
)

// cleanup deletes what the run submitted: one DeleteAllOf per object type and namespace,
// selecting the kueuelab.io/workload-id label, with background propagation so pods and Kueue
// Workloads go with their owners. The cluster side (queues, flavors, nodes) stays.
func cleanup(ctx context.Context, c client.Client, created []client.Object) error {
	type key struct {
		t  reflect.Type
		ns string
	}
	seen := map[key]client.Object{}
	for _, o := range created {
		k := key{reflect.TypeOf(o), o.GetNamespace()}
		if _, ok := seen[k]; !ok {
			seen[k] = o
		}
	}
	var errs []error
	for k, o := range seen {
		empty := reflect.New(k.t.Elem()).Interface().(client.Object)
		if err := c.DeleteAllOf(ctx, empty, client.InNamespace(k.ns), client.HasLabels{contract.WorkloadLabel},
			client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			errs = append(errs, fmt.Errorf("delete %s in %s: %w", kindOf(o), k.ns, err))
		}
	}
	return errors.Join(errs...)
}
