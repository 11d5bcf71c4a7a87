package cluster

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

// Scheme returns a scheme with the core types, CRDs, the Kueue API versions kueuelab reads and
// writes (kueuewl.AddToScheme) and the API of every kind in render's registry.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, kueuewl.AddToScheme,
		render.DefaultRegistry().AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
