package link

import (
	"errors"
	"net/netip"
	"slices"
)

// ErrLinkNotFound is returned when a named link does not exist.
var ErrLinkNotFound = errors.New("link not found")

// DiffAddresses compares the desired interface addresses of a link with its
// current ones and returns those to add and those to delete, each sorted.
// Addresses are compared with their prefix length, so 10.4.0.1/16 and
// 10.4.0.1/32 differ. Current IPv6 link-local addresses (fe80::/10) are kept
// unless desired, since the kernel manages them.
func DiffAddresses(desired, current []netip.Prefix) (add, del []netip.Prefix) {
	want := make(map[netip.Prefix]bool, len(desired))
	for _, p := range desired {
		want[p] = true
	}
	have := make(map[netip.Prefix]bool, len(current))
	for _, p := range current {
		have[p] = true
		if !want[p] && !isIPv6LinkLocal(p) {
			del = append(del, p)
		}
	}
	for p := range want {
		if !have[p] {
			add = append(add, p)
		}
	}
	sortPrefixes(add)
	sortPrefixes(del)
	return add, del
}

func sortPrefixes(ps []netip.Prefix) {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
}

func isIPv6LinkLocal(p netip.Prefix) bool {
	return p.Addr().Is6() && p.Addr().IsLinkLocalUnicast()
}
