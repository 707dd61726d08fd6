//go:build !linux

package main

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// resolveUntil needs Linux (network namespaces).
func resolveUntil(context.Context, *lab.Cluster, string, string, netip.AddrPort, string, time.Duration) ([]string, error) {
	return nil, errors.ErrUnsupported
}
