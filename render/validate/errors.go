package validate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Error is one problem with one object: where the object came from, which object and which field.
type Error struct {
	// Source is the file the object was read from; empty for objects validated in memory.
	Source string
	// Doc is the 1-based document index in Source (0 in memory); Item the 1-based index inside
	// a List document (0 otherwise).
	Doc, Item int
	// Line is the line of Source where the document starts (0 if unknown).
	Line int
	// Kind, Namespace and Name identify the object (as far as they could be read).
	Kind, Namespace, Name string
	// Field is the field path ("spec.replicatedJobs[0].foo"); empty for the object as a whole.
	Field string
	// Detail says what is wrong.
	Detail string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		if e.Doc > 0 {
			fmt.Fprintf(&b, ": doc %d", e.Doc)
			if e.Item > 0 {
				fmt.Fprintf(&b, " item %d", e.Item)
			}
		}
		b.WriteString(": ")
	}
	if e.Kind != "" || e.Name != "" {
		b.WriteString(e.object())
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Detail)
	return b.String()
}

func (e *Error) object() string {
	kind := e.Kind
	if kind == "" {
		kind = "<no kind>"
	}
	name := e.Name
	if name == "" {
		name = "<no name>"
	}
	if e.Namespace != "" {
		return kind + " " + e.Namespace + "/" + name
	}
	return kind + " " + name
}

// Errors are all problems found in one object; Validate returns them as its error.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// objectRef carries the identity of the object being validated into every Error made for it.
type objectRef struct {
	Kind, Namespace, Name string
}

func (r objectRef) errorf(fieldPath, format string, args ...any) *Error {
	return &Error{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Field: fieldPath, Detail: fmt.Sprintf(format, args...)}
}

func (r objectRef) fromFieldErrors(prefix *field.Path, errs field.ErrorList) Errors {
	out := make(Errors, 0, len(errs))
	for _, fe := range errs {
		p := fe.Field
		if prefix != nil {
			if p == "" || p == "<nil>" {
				p = prefix.String()
			} else {
				p = prefix.String() + "." + p
			}
		}
		if p == "<nil>" {
			p = ""
		}
		out = append(out, r.errorf(p, "%s", fe.ErrorBody()))
	}
	return out
}
