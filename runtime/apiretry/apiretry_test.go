package apiretry

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"webhook unreachable", apierrors.NewInternalError(errors.New(`failed calling webhook "mjob.kb.io": connect: connection refused`)), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "create", 1), true},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), true},
		{"unavailable", apierrors.NewServiceUnavailable("starting"), true},
		{"conflict", apierrors.NewConflict(gr, "j", errors.New("changed")), true},
		{"connection refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"unexpected EOF", fmt.Errorf("post: %w", io.ErrUnexpectedEOF), true},
		{"webhook denial", apierrors.NewForbidden(gr, "j", errors.New(`admission webhook "vjob.kb.io" denied the request`)), false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "j", nil), false},
		{"exists", apierrors.NewAlreadyExists(gr, "j"), false},
		{"namespace missing", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), false},
		{"nil", nil, false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
