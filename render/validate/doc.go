// Package validate checks rendered objects the way a Kubernetes API server would on create: custom
// resources against the openAPIV3Schema of the upstream CRDs pinned in go.mod (embedded from the
// module cache by `go generate`), using k8s.io/apiextensions-apiserver's own pruning, defaulting,
// schema, list-type, embedded-metadata and CEL validation; built-in kinds and Katib Experiments
// (whose CRD has no schema) by strict decoding into their upstream Go types plus metadata checks.
//
// Mutating admission webhooks (Kueue's, JobSet's, the training operators') are not run, so their
// defaults are not applied: render must emit every field such a webhook would fill in.
package validate
