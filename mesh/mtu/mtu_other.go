//go:build !linux

package mtu

import (
	"errors"
	"fmt"
)

// Auto is only implemented on Linux.
func Auto(underlay string, encapOverhead int) (Plan, error) {
	return Plan{}, fmt.Errorf("read underlay MTU: %w", errors.ErrUnsupported)
}
