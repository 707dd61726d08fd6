package topology

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestAddrSetContainsAny checks the endpoint lookup of the routes against
// Prefix.Contains.
func TestAddrSetContainsAny(t *testing.T) {
	set := newAddrSet([]netip.Addr{addr("10.0.0.5"), addr("10.0.1.0"), addr("10.0.0.5"), addr("fd00::1"), addr("192.168.0.255")}, nil)
	for _, tc := range []struct {
		dst  string
		want bool
	}{
		{"10.0.0.5/32", true},
		{"10.0.0.4/32", false},
		{"10.0.0.0/30", false},
		{"10.0.0.4/30", true},
		{"10.0.0.0/24", true},
		{"10.0.0.128/25", false},
		{"10.0.1.0/24", true},    // the first address
		{"192.168.0.0/24", true}, // the last address
		{"192.168.1.0/24", false},
		{"0.0.0.0/0", true},
		{"11.0.0.0/8", false},
		{"fd00::/64", true},
		{"fd00::2/127", false},
		{"::/0", true},
		{"fe80::/10", false},
	} {
		if got := set.containsAny(pfx(tc.dst)); got != tc.want {
			t.Errorf("containsAny(%s) = %t, want %t", tc.dst, got, tc.want)
		}
	}
	if (addrSet{}).containsAny(pfx("0.0.0.0/0")) {
		t.Error("the empty set contains an address")
	}
}

// TestSortRoutesKeepsTheFirstAdded checks sortRoutes, on IPv4 routes and
// on routes of both families, against a stable sort by destination then
// table that keeps the first added of each.
func TestSortRoutesKeepsTheFirstAdded(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tables := range [][]int{{0}, {0, 0, DefaultTable}, {DefaultTable, 7}, {0, 7, DefaultTable}} {
		for _, mixed := range []bool{false, true} {
			for _, n := range []int{0, 1, 2, 20, 32, 33, 50, 500} { // 32: sortRoutes's room on the stack
				var routes []Route
				for i := range n {
					dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(4)), byte(rng.IntN(256))}), 22+rng.IntN(11)).Masked()
					if mixed && rng.IntN(3) == 0 {
						dst = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 15: byte(rng.IntN(256))}), 120+rng.IntN(9)).Masked()
					}
					routes = append(routes, Route{Dst: dst, Table: tables[rng.IntN(len(tables))], Dev: fmt.Sprint("dev", i)})
				}
				want := slices.Clone(routes)
				slices.SortStableFunc(want, func(a, b Route) int {
					if c := a.Dst.Compare(b.Dst); c != 0 {
						return c
					}
					return cmp.Compare(a.Table, b.Table)
				})
				want = slices.CompactFunc(want, func(a, b Route) bool { return a.Dst == b.Dst && a.Table == b.Table })
				if len(want) == 0 {
					want = nil
				}
				if got := sortRoutes(routes); !slices.Equal(got, want) {
					t.Errorf("tables %v, mixed %t, %d routes: sortRoutes = %v, want %v", tables, mixed, n, got, want)
				}
			}
		}
	}
}
