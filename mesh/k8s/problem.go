package k8s

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalidAnnotation is wrapped by every AnnotationError.
	ErrInvalidAnnotation = errors.New("invalid annotation")
	// ErrInvalidPeer is wrapped by the errors of PeerFromObject.
	ErrInvalidPeer = errors.New("invalid peer")
	// ErrNoPeerCRD is returned by New when the API server does not serve Peers.
	ErrNoPeerCRD = errors.New("the Peer CRD peers.kilo.squat.ai is not installed")
	// ErrNotFound is returned when a Node or Peer to write is not known.
	ErrNotFound = errors.New("not found")
)

// Problem is an object, or one value of it, that could not be read; the
// rest of the mesh keeps working without it. It is an error whose message
// names the object.
type Problem struct {
	// Kind is topology.KindNode or topology.KindPeer.
	Kind string
	// Name is the object's name.
	Name string
	// Err says what is wrong and how to fix it.
	Err error
}

// Error returns `<kind> "<name>": <what is wrong>`.
func (p Problem) Error() string { return fmt.Sprintf("%s %q: %v", p.Kind, p.Name, p.Err) }

// Unwrap returns Err.
func (p Problem) Unwrap() error { return p.Err }

// AnnotationError is a Node annotation, label or field whose value cannot be
// used.
type AnnotationError struct {
	// Annotation is the annotation's name, or the Node field ("spec.podCIDRs").
	Annotation string
	// Value is the value found.
	Value string
	// Want describes a valid value, with an example.
	Want string
}

// Error returns `annotation <name>="<value>" is invalid: want <Want>`, or
// `field ...` for a Node field.
func (e *AnnotationError) Error() string {
	what := "annotation"
	if !strings.Contains(e.Annotation, "/") {
		what = "field"
	}
	return fmt.Sprintf("%s %s=%q is invalid: want %s", what, e.Annotation, e.Value, e.Want)
}

// Unwrap returns ErrInvalidAnnotation.
func (e *AnnotationError) Unwrap() error { return ErrInvalidAnnotation }
