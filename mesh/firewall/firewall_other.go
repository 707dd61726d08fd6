//go:build !linux

package firewall

import (
	"errors"
	"fmt"
)

// New is only implemented on Linux.
func New(opts Options) (Firewall, error) {
	return nil, fmt.Errorf("new firewall: %w", errors.ErrUnsupported)
}
