//go:build !linux

package wireguard

import (
	"context"
	"errors"
	"fmt"
)

// Open is only implemented on Linux.
func Open(ctx context.Context, opts OpenOptions) (Device, error) {
	return nil, fmt.Errorf("open WireGuard interface: %w", errors.ErrUnsupported)
}
