package topology

import (
	"fmt"
	"net/netip"
	"strings"
)

// MainTable is the kernel's main routing table; a zero Table means it.
const MainTable = 254

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

// String writes r like ip-route(8): "DST [via GW] dev DEV [table N]
// [src SRC] [onlink]".
func (r Route) String() string {
	var b strings.Builder
	b.WriteString(r.Dst.String())
	if r.Gw.IsValid() {
		fmt.Fprintf(&b, " via %s", r.Gw)
	}
	fmt.Fprintf(&b, " dev %s", r.Dev)
	if t := mainIsZero(r.Table); t != 0 {
		fmt.Fprintf(&b, " table %d", t)
	}
	if r.Src.IsValid() {
		fmt.Fprintf(&b, " src %s", r.Src)
	}
	if r.OnLink {
		b.WriteString(" onlink")
	}
	return b.String()
}

// String writes r like ip-rule(8): "[pref N] from SRC|all [to DST] lookup
// TABLE|main".
func (r Rule) String() string {
	var b strings.Builder
	if r.Priority != 0 {
		fmt.Fprintf(&b, "pref %d ", r.Priority)
	}
	if r.Src.IsValid() {
		fmt.Fprintf(&b, "from %s", r.Src)
	} else {
		b.WriteString("from all")
	}
	if r.Dst.IsValid() {
		fmt.Fprintf(&b, " to %s", r.Dst)
	}
	if t := mainIsZero(r.Table); t == 0 {
		b.WriteString(" lookup main")
	} else {
		fmt.Fprintf(&b, " lookup %d", t)
	}
	return b.String()
}

// mainIsZero returns table t with MainTable written as zero.
func mainIsZero(t int) int {
	if t == MainTable {
		return 0
	}
	return t
}
