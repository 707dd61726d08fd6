//go:build !linux

package route

import (
	"errors"
	"fmt"
)

// NewRouter is only implemented on Linux.
func NewRouter(opts RouterOptions) (Router, error) {
	return nil, fmt.Errorf("new router: %w", errors.ErrUnsupported)
}
