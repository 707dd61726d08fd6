//go:build linux

package link

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// ByAddress returns the name of the link that carries addr, with the
// prefix length it carries it with: the underlay link of a node is the one
// holding its internal IP.
func ByAddress(addr netip.Addr) (string, netip.Prefix, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", netip.Prefix{}, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.Unmap() != addr.Unmap() {
			continue
		}
		l, err := netlink.LinkByIndex(a.LinkIndex)
		if err != nil {
			return "", netip.Prefix{}, fmt.Errorf("link of %s: %w", addr, err)
		}
		ones, _ := a.Mask.Size()
		return l.Attrs().Name, netip.PrefixFrom(addr, ones), nil
	}
	return "", netip.Prefix{}, fmt.Errorf("%w: no link carries %s; check the node's internal IP (kilo.squat.ai/force-internal-ip overrides it)", ErrLinkNotFound, addr)
}

// OperUp reports whether the named link is up and has carrier, i.e. can
// forward packets.
func OperUp(name string) (bool, error) {
	l, err := byName(name)
	if err != nil {
		return false, err
	}
	a := l.Attrs()
	return a.OperState == netlink.OperUp || (a.OperState == netlink.OperUnknown && a.RawFlags&0x10000 != 0), nil
}
