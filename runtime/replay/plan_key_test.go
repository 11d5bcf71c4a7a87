package replay

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kueuelab/kueuelab/render"
)

// Two placements that differ in any field a workload's objects depend on must not be shared:
// every field of render.Placement but NodeLabelKeys, set one at a time.
func TestPlacementKeyCoversEveryField(t *testing.T) {
	base := render.Placement{}
	values := map[reflect.Kind]reflect.Value{
		reflect.String: reflect.ValueOf("x"),
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "NodeLabelKeys" {
			continue
		}
		changed := base
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Type {
		case reflect.TypeOf(map[string]string{}):
			v.Set(reflect.ValueOf(map[string]string{"k": "v"}))
		case reflect.TypeOf([]corev1.Toleration{}):
			v.Set(reflect.ValueOf([]corev1.Toleration{{Key: "k"}}))
		default:
			x, ok := values[f.Type.Kind()]
			if !ok {
				t.Fatalf("field %s of type %s: the test does not know how to change it", f.Name, f.Type)
			}
			v.Set(x.Convert(f.Type))
		}
		if placementKey(&changed) == placementKey(&base) {
			t.Errorf("placements differing in %s share a key", f.Name)
		}
	}
}
