package ranges

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Conflict is two ranges of different clusters that overlap, or a range
// that no cluster may route (Reserved).
type Conflict struct {
	// Range is the offending range (of the remote cluster when one side
	// is being checked against the others).
	Range Range
	// With is the range it overlaps; zero for a Reserved range.
	With Range
	// Reserved, when set, says why Range may not be routed at all
	// (loopback, link-local, multicast, the whole address space...).
	Reserved string
	// SameID reports that two clusters have the ID Range.Cluster.
	SameID bool
}

// Error returns a sentence that names both ranges and how to fix it.
func (c Conflict) Error() string {
	if c.SameID {
		return fmt.Sprintf("two clusters have the ID %q; a cluster's ID never changes once set, so join the other one under another ID (kilofed join --cluster-id)", c.Range.Cluster)
	}
	if c.Reserved != "" {
		return fmt.Sprintf("%s is %s and cannot be routed between clusters; remove it from %s's configuration",
			c.Range, c.Reserved, c.Range.Cluster)
	}
	if c.Range.Kind != c.With.Kind {
		return fmt.Sprintf("%s overlaps %s: traffic for the overlap would go to the wrong cluster; give %s another %s range or %s another %s range, one that overlaps no range of the other",
			c.Range, c.With, c.Range.Cluster, c.Range.Kind, c.With.Cluster, c.With.Kind)
	}
	return fmt.Sprintf("%s overlaps %s: traffic for the overlap would go to the wrong cluster; give %s or %s a %s range that overlaps no range of the other",
		c.Range, c.With, c.Range.Cluster, c.With.Cluster, c.Range.Kind)
}

// reserved are ranges that are never routed to another cluster, with why.
var reserved = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `in "this network" (0.0.0.0/8)`},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback (127.0.0.0/8)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (169.254.0.0/16)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast (224.0.0.0/4)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4)"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "loopback (::1)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local (fe80::/10)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast (ff00::/8)"},
}

// Reserved returns why p may never be routed to another cluster, or "" when
// it may. A range too wide to be one cluster's (shorter than /8 for IPv4,
// /16 for IPv6) is refused too: it would capture other clusters' and the
// Internet's traffic.
func Reserved(p netip.Prefix) string {
	p = p.Masked()
	if p.Addr().Is4() && p.Bits() < 8 || p.Addr().Is6() && !p.Addr().Is4In6() && p.Bits() < 16 {
		return fmt.Sprintf("wider than one cluster's range can be (/%d)", p.Bits())
	}
	for _, r := range reserved {
		if r.prefix.Overlaps(p) {
			return r.why
		}
	}
	return ""
}

// Check returns every conflict among the clusters: each pair of ranges of
// two different clusters that overlap (reported once, the range of the
// cluster listed later first), every reserved range, and a conflict for two
// clusters with the same ID. It is symmetric: the order of clusters changes
// only the order of the result. It is what `kilofed join` refuses on.
func Check(clusters []Cluster) []Conflict {
	var out []Conflict
	var seen []Range
	ids := map[string]bool{}
	for _, c := range clusters {
		if ids[c.ID] {
			out = append(out, Conflict{Range: Range{Cluster: c.ID}, SameID: true})
		}
		ids[c.ID] = true
		mine := c.Ranges()
		for _, r := range mine {
			if why := Reserved(r.Prefix); why != "" {
				out = append(out, Conflict{Range: r, Reserved: why})
				continue
			}
			for _, s := range seen {
				if s.Cluster != r.Cluster && s.Prefix.Overlaps(r.Prefix) {
					out = append(out, Conflict{Range: r, With: s})
				}
			}
		}
		seen = append(seen, mine...)
	}
	return out
}

// Accept splits the ranges a remote cluster announces into those that may
// be routed here and the conflicts that leave the others out: a remote range
// that overlaps a range of local or of another member (others), or that is
// reserved, is refused; the rest is accepted. The remote's own ranges never
// conflict with each other here (its mesh checks those).
func Accept(remote Cluster, local Cluster, others []Cluster) (accepted []Range, conflicts []Conflict) {
	theirs := local.Ranges()
	for _, o := range others {
		if o.ID != remote.ID {
			theirs = append(theirs, o.Ranges()...)
		}
	}
	for _, r := range remote.Ranges() {
		if why := Reserved(r.Prefix); why != "" {
			conflicts = append(conflicts, Conflict{Range: r, Reserved: why})
			continue
		}
		ok := true
		for _, s := range theirs {
			if s.Prefix.Overlaps(r.Prefix) {
				conflicts = append(conflicts, Conflict{Range: r, With: s})
				ok = false
			}
		}
		if ok {
			accepted = append(accepted, r)
		}
	}
	slices.SortStableFunc(conflicts, func(a, b Conflict) int {
		return cmp.Compare(a.Range.Prefix.String(), b.Range.Prefix.String())
	})
	return accepted, conflicts
}

// Allowed reports whether p, a prefix a remote cluster wants routed here
// (an allowed IP of one of its gateways), lies inside one of the accepted
// ranges.
func Allowed(p netip.Prefix, accepted []Range) bool {
	p = p.Masked()
	for _, r := range accepted {
		if r.Prefix.Bits() <= p.Bits() && r.Prefix.Contains(p.Addr()) {
			return true
		}
	}
	return false
}
