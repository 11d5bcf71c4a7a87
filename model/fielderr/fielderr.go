// Package fielderr is the one error shape of every kueuelab input loader (trace, profile, hardware
// catalog, cluster spec, mapping, experiment): the file, the line and the path of the bad field,
// printed as "file:line: path: what is wrong". It has no dependencies, so model/ can use it.
package fielderr

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is a problem with one value of an input file.
type Error struct {
	// File names the input ("cluster.yaml", "stdin", "model/gen/profiles/default.yaml (embedded)").
	File string
	// Line is 1-based; 0 when the problem is not tied to a line.
	Line int
	// Field is the path of the bad field in the loader's own syntax ("pods[1].replicas",
	// "teams[0].quota.gpu"); empty when the problem is not tied to one field (bad syntax).
	Field string
	// ID names the record or object the field belongs to (a workload id, a team name) when the
	// loader knows it. It is not printed; callers use it to group problems.
	ID  string
	Err error
}

// New returns an Error with a formatted message.
func New(file string, line int, field, format string, args ...any) *Error {
	return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("invalid")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// List is every problem found in one input. A loader that reports all its problems at once returns
// a List; its message has one problem per line.
type List []*Error

func (l List) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As find each *Error of the list.
func (l List) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns nil for an empty list and the list otherwise, so that a loader can end with
// "return errs.Err()" without returning a typed nil.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Sort orders the list by file, line and field, so a loader's report does not depend on map order.
func (l List) Sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Field, b.Field))
	})
}

// All returns every *Error in err: err itself, the members of a List, or those reachable through
// errors.Join and wrapping. Errors of other types are left out.
func All(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *Error:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// As is errors.As for *Error, for callers that only want the first one.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Join appends child to a field path: Join("pods", "[1]") is "pods[1]", Join("pods[1]",
// "replicas") is "pods[1].replicas", and an empty side gives the other.
func Join(parent, child string) string {
	switch {
	case parent == "":
		return child
	case child == "":
		return parent
	case child[0] == '[':
		return parent + child
	default:
		return parent + "." + child
	}
}

// Index appends an array index to a field path: Index("pods", 1) is "pods[1]".
func Index(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// FromPointer turns an RFC 6901 JSON pointer ("/pods/1/requests/nvidia.com~1gpu") into a field path
// ("pods[1].requests.nvidia.com/gpu"). A segment of digits is taken as an array index, which is
// right for every input kueuelab reads (no object key of its schemas is a number).
func FromPointer(ptr string) string {
	if ptr == "" {
		return ""
	}
	var b strings.Builder
	for seg := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		if isIndex(seg) {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
