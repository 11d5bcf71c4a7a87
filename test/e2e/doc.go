// Package e2e holds kueuelab's end-to-end tests: TestMain brings up one real local control plane
// (etcd, Kubernetes, KWOK, Kueue, JobSet, training-operator, mpi-operator) in a temporary state dir,
// and each test drives real job objects through Kueue and checks what the controllers did. Set
// KUEUELAB_E2E=0 to skip them; the binaries come from `kueuelab tools install`.
package e2e
