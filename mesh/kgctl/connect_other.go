//go:build !linux

package kgctl

import (
	"context"
	"errors"
	"fmt"
)

// Connect is only implemented on Linux.
func Connect(ctx context.Context, cfg ConnectConfig) error {
	return fmt.Errorf("connect: %w", errors.ErrUnsupported)
}
