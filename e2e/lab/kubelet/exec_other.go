//go:build !linux

package kubelet

import (
	"context"
	"errors"
	"net"
	"net/netip"
)

// runCommand is not supported outside Linux.
func runCommand(context.Context, execSpec) (int, error) {
	return 0, errors.ErrUnsupported
}

// ListenInNetns is not supported outside Linux: network namespaces are
// Linux's.
func ListenInNetns(string, netip.AddrPort) (net.Listener, error) {
	return nil, errors.ErrUnsupported
}
