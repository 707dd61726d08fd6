package route

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// MainTable is the kernel's main routing table; a zero Table means it.
const MainTable = 254

// String writes r like ip-route(8): "DST [via GW] dev DEV [table N]
// [src SRC] [onlink]".
func (r Route) String() string {
	var b strings.Builder
	b.WriteString(r.Dst.String())
	if r.Gw.IsValid() {
		fmt.Fprintf(&b, " via %s", r.Gw)
	}
	fmt.Fprintf(&b, " dev %s", r.Dev)
	if t := normTable(r.Table); t != 0 {
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
	if t := normTable(r.Table); t == 0 {
		b.WriteString(" lookup main")
	} else {
		fmt.Fprintf(&b, " lookup %d", t)
	}
	return b.String()
}

// Format writes routes and rules in a canonical order, one per line, each
// prefixed with "route " or "rule ", for logs and golden files.
func Format(routes []Route, rules []Rule) string {
	rs := make([]Route, len(routes))
	for i, r := range routes {
		rs[i] = normRoute(r)
	}
	slices.SortFunc(rs, compareRoutes)
	ls := make([]Rule, len(rules))
	for i, r := range rules {
		ls[i] = normRule(r)
	}
	slices.SortFunc(ls, compareRules)
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "route %s\n", r)
	}
	for _, r := range ls {
		fmt.Fprintf(&b, "rule %s\n", r)
	}
	return b.String()
}

func compareRoutes(a, b Route) int {
	if c := a.Table - b.Table; c != 0 {
		return c
	}
	if c := comparePrefixes(a.Dst, b.Dst); c != 0 {
		return c
	}
	return strings.Compare(a.String(), b.String())
}

func compareRules(a, b Rule) int {
	if c := a.Priority - b.Priority; c != 0 {
		return c
	}
	return strings.Compare(a.String(), b.String())
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
