// Package cluster works on any Kubernetes cluster kueuelab replays on, reached through a
// kubeconfig: it applies and replaces objects with kueuelab's scheme, prepares a user's cluster
// (Install: checks Kueue, KWOK and the operators, installs kueuelab's KWOK stages) and reads
// Kueue's and kube-scheduler's configuration and metrics. It starts and supervises nothing:
// kueuelab's own local control plane is runtime/localcluster, which builds on this package and
// which this package must never import (TestNoLocalControlPlane).
package cluster
