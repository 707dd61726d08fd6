//go:build !linux

package encap

import (
	"errors"
	"fmt"
)

// Detect is only implemented on Linux.
func Detect() (Kind, error) {
	return "", fmt.Errorf("detect encapsulation: %w", errors.ErrUnsupported)
}

// New returns the no-op Encapsulator for KindNone; tunnels are only
// implemented on Linux.
func New(opts Options) (Encapsulator, error) {
	if opts.Kind == KindNone {
		return none{}, nil
	}
	return nil, fmt.Errorf("new encapsulator: %w", errors.ErrUnsupported)
}
