package topology

import (
	"slices"
	"testing"
)

// TestRangesInTheWireGuardSubnetWarn checks the warnings for pod CIDRs
// overlapping the WireGuard subnet and internal IPs inside it, both when
// the nodes' ranges are disjoint (claimed with one sort) and when two of
// them overlap (claimed one by one).
func TestRangesInTheWireGuardSubnetWarn(t *testing.T) {
	opts := Options{Subnet: pfx("10.4.0.0/16")}
	inSubnet := []Node{
		node("a", "eu", "10.4.0.7/24", "", "10.42.0.0/24"),  // internal IP inside
		node("b", "eu", "10.0.0.2/24", "", "10.4.128.0/24"), // pod CIDR inside
		node("c", "eu", "10.0.0.3/24", "", "10.0.0.0/8"),    // pod CIDR around
	}
	want := []string{
		"node a SubnetOverlap: internal IP 10.4.0.7 is inside the WireGuard subnet 10.4.0.0/16; choose a --subnet that overlaps no pod CIDR or node network",
		"node b SubnetOverlap: pod CIDR 10.4.128.0/24 overlaps the WireGuard subnet 10.4.0.0/16; choose a --subnet that overlaps no pod CIDR or node network",
	}
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  []string
	}{
		{name: "disjoint", nodes: inSubnet[:2], want: want},
		{name: "overlapping", nodes: append(slices.Clone(inSubnet), node("d", "eu", "10.0.0.4/24", "", "10.42.0.0/24")), want: append(slices.Clone(want),
			"node c Overlap: pod CIDR 10.0.0.0/8 overlaps pod CIDR 10.4.128.0/24 of node \"b\", so it is not routed; give every node its own pod CIDR",
			"node d Overlap: pod CIDR 10.42.0.0/24 overlaps pod CIDR 10.42.0.0/24 of node \"a\", so it is not routed; give every node its own pod CIDR",
		)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := mustNew(t, tc.nodes, nil, opts)
			var got []string
			for _, p := range top.Problems {
				if p.Code == CodeSubnetOverlap || p.Code == CodeOverlap {
					got = append(got, "node "+p.Name+" "+map[string]string{CodeSubnetOverlap: "SubnetOverlap", CodeOverlap: "Overlap"}[p.Code]+": "+p.Reason)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("problems:\n%s\nwant:\n%s", joinLines(got), joinLines(want))
			}
		})
	}
}

func joinLines(ss []string) string {
	out := ""
	for _, s := range ss {
		out += "\t" + s + "\n"
	}
	return out
}
