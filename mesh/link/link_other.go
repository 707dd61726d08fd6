//go:build !linux

package link

import (
	"errors"
	"net/netip"
)

// SetAddresses is only implemented on Linux.
func SetAddresses(name string, addrs []netip.Prefix) error { return errors.ErrUnsupported }

// Addresses is only implemented on Linux.
func Addresses(name string) ([]netip.Prefix, error) { return nil, errors.ErrUnsupported }

// SetUp is only implemented on Linux.
func SetUp(name string) error { return errors.ErrUnsupported }

// SetMTU is only implemented on Linux.
func SetMTU(name string, mtu int) error { return errors.ErrUnsupported }

// Delete is only implemented on Linux.
func Delete(name string) error { return errors.ErrUnsupported }

// RunInNetNS runs f directly when path is empty; entering another network
// namespace is only implemented on Linux.
func RunInNetNS(path string, f func() error) error {
	if path == "" {
		return f()
	}
	return errors.ErrUnsupported
}

// ByAddress is only implemented on Linux.
func ByAddress(addr netip.Addr) (string, netip.Prefix, error) {
	return "", netip.Prefix{}, errors.ErrUnsupported
}

// OperUp is only implemented on Linux.
func OperUp(name string) (bool, error) { return false, errors.ErrUnsupported }
