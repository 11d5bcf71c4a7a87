// Package deps keeps the pinned upstream modules in go.mod (so `go mod tidy` never drops or
// upgrades them) until the packages that use them import them directly. Remove an import here
// once a real package imports it.
package deps

import (
	_ "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"
	_ "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	_ "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	_ "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/schollz/progressbar/v3"
	_ "gonum.org/v1/gonum/stat"
	_ "k8s.io/api/batch/v1"
	_ "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	_ "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	_ "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	_ "sigs.k8s.io/yaml"
)
