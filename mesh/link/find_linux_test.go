//go:build linux

package link_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/kilofed/kilofed/mesh/link"
	"github.com/kilofed/kilofed/mesh/link/linktest"
)

func TestPrivilegedByAddressAndOperUp(t *testing.T) {
	linktest.Require(t)
	nsA, nsB := linktest.NetNS(t), linktest.NetNS(t)
	a, b := linktest.Name(t, "fa"), linktest.Name(t, "fb")
	linktest.Veth(t, nsA, a, "10.98.3.1/24", nsB, b, "fd98:3::2/64")
	linktest.Run(t, nsA, func() error {
		name, p, err := link.ByAddress(netip.MustParseAddr("10.98.3.1"))
		if err != nil || name != a || p != netip.MustParsePrefix("10.98.3.1/24") {
			t.Errorf("ByAddress(10.98.3.1) = %q, %s, %v; want %q, 10.98.3.1/24", name, p, err, a)
		}
		if _, _, err := link.ByAddress(netip.MustParseAddr("10.98.3.9")); !errors.Is(err, link.ErrLinkNotFound) {
			t.Errorf("ByAddress(absent) error = %v, want ErrLinkNotFound", err)
		}
		if up, err := link.OperUp(a); err != nil || !up {
			t.Errorf("OperUp(%s) = %v, %v; want up (both veth ends are up)", a, up, err)
		}
		return nil
	})
	linktest.Run(t, nsB, func() error {
		name, p, err := link.ByAddress(netip.MustParseAddr("fd98:3::2"))
		if err != nil || name != b || p.Bits() != 64 {
			t.Errorf("ByAddress(fd98:3::2) = %q, %s, %v", name, p, err)
		}
		return nil
	})
	// The kernel drops IPv6 addresses of a link set down, so this comes
	// after the IPv6 lookup.
	linktest.IP(t, "-n", nsB, "link", "set", b, "down")
	linktest.Run(t, nsA, func() error {
		if up, err := link.OperUp(a); err != nil || up {
			t.Errorf("OperUp(%s) with its peer down = %v, %v; want not up", a, up, err)
		}
		return nil
	})
}
