// Package apiretry tells a failed Kubernetes API call worth retrying from one the API server has
// answered for good. The runner's submissions and the agent's pod writes share it: during an API
// server or webhook outage both retry until the control plane is back, and only a real answer
// (a validation denial, a missing object) is final.
package apiretry

import (
	"context"
	"errors"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Transient reports whether a failed API call may succeed if retried: the API server or a webhook
// was unreachable, overloaded or timed out. Validation errors, webhook denials and conflicts with
// existing objects are permanent.
func Transient(err error) bool {
	switch {
	case err == nil:
		return false
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		// A webhook the API server could not call is an InternalError: "failed calling webhook".
		return true
	case apierrors.IsConflict(err):
		return true
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return false // any other status the API server sent is its answer
	}
	// An error without an API status never reached the API server's logic (dial, TLS, HTTP/2).
	return true
}
