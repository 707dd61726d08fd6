package route

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kilofed/kilofed/mesh/topology"
)

// Format writes routes and rules in a canonical order, one per line, each
// prefixed with "route " or "rule ", for logs and golden files.
func Format(routes []topology.Route, rules []topology.Rule) string {
	rs := make([]topology.Route, len(routes))
	for i, r := range routes {
		rs[i] = normRoute(r)
	}
	slices.SortFunc(rs, compareRoutes)
	ls := make([]topology.Rule, len(rules))
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

func compareRoutes(a, b topology.Route) int {
	if c := a.Table - b.Table; c != 0 {
		return c
	}
	if c := comparePrefixes(a.Dst, b.Dst); c != 0 {
		return c
	}
	return strings.Compare(a.String(), b.String())
}

func compareRules(a, b topology.Rule) int {
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
