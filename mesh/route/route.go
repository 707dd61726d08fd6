package route

import "net/netip"

// Route is one kernel route, as the topology wants it.
type Route struct {
	// Dst is the destination range.
	Dst netip.Prefix
	// Gw is the next hop, invalid for a device route.
	Gw netip.Addr
	// Dev is the output link name (kilo0, the underlay link, a tunnel link).
	Dev string
	// Src is the preferred source address, if any.
	Src netip.Addr
	// Table is the routing table, zero for main.
	Table int
	// OnLink marks a next hop that is reachable on Dev without a subnet route.
	OnLink bool
}

// Rule is one policy routing rule.
type Rule struct {
	// Src selects packets by source range, if valid.
	Src netip.Prefix
	// Dst selects packets by destination range, if valid.
	Dst netip.Prefix
	// Table is the table looked up for matching packets.
	Table int
	// Priority orders rules; zero lets the kernel pick.
	Priority int
}
