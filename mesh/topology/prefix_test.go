package topology

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestSortPrefixesOrdersLikePrefixCompare checks both ways sortPrefixes
// sorts (short lists directly, long ones as keys) against Prefix.Compare.
func TestSortPrefixesOrdersLikePrefixCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 10, 63, 64, 500} {
		var ps []netip.Prefix
		for range n {
			var p netip.Prefix
			switch rng.IntN(3) {
			case 0:
				p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(3)), byte(rng.IntN(3)), byte(rng.IntN(256))}), 8+rng.IntN(25))
			case 1:
				p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 7: byte(rng.IntN(3)), 15: byte(rng.IntN(256))}), rng.IntN(129))
			default:
				p = netip.PrefixFrom(netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: 10, 15: byte(rng.IntN(4))}), 96+rng.IntN(33))
			}
			ps = append(ps, p.Masked())
		}
		want := slices.Clone(ps)
		slices.SortFunc(want, netip.Prefix.Compare)
		want = slices.Compact(want)
		if len(want) == 0 {
			want = nil
		}
		if got := sortPrefixes(slices.Clone(ps)); !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%d prefixes: sortPrefixes = %v, want %v", n, got, want)
		}
	}
}

// TestMergeFront checks the merge of sorted prefixes into sorted prefixes
// that left room for them in front against sorting them all.
func TestMergeFront(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ps, add  []netip.Prefix
		wantNone bool
	}{
		{name: "nothing", wantNone: true},
		{name: "into nothing", add: pfxs("10.0.0.0/24", "10.0.1.0/24")},
		{name: "nothing added", ps: pfxs("10.0.0.0/24", "10.0.1.0/24")},
		{name: "before", ps: pfxs("10.0.1.0/24", "10.0.2.0/24"), add: pfxs("10.0.0.0/24")},
		{name: "after", ps: pfxs("10.0.1.0/24", "10.0.2.0/24"), add: pfxs("10.0.3.0/24")},
		{name: "between", ps: pfxs("10.0.0.0/24", "10.0.2.0/24"), add: pfxs("10.0.1.0/24")},
		{name: "around", ps: pfxs("10.0.1.0/24", "10.0.2.0/24"), add: pfxs("10.0.0.0/24", "10.0.3.0/24")},
		{name: "duplicate", ps: pfxs("10.0.0.0/24", "10.0.0.1/32"), add: pfxs("10.0.0.1/32", "10.0.0.2/32")},
		{name: "duplicate first, more after", ps: pfxs("10.0.0.1/32", "10.0.0.3/32", "10.0.0.4/32"), add: pfxs("10.0.0.1/32", "10.0.0.2/32")},
		{name: "same address, wider first", ps: pfxs("10.0.0.0/32"), add: pfxs("10.0.0.0/16")},
		{name: "IPv6 after IPv4", ps: pfxs("fd00::/64"), add: pfxs("10.0.0.0/8", "fd00::1/128")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := sortPrefixes(append(slices.Clone(tc.ps), tc.add...))
			ps := append(make([]netip.Prefix, len(tc.add)), tc.ps...) // room in front
			got := mergeFront(ps, tc.add)
			if !slices.Equal(got, want) || (len(got) == 0) != tc.wantNone {
				t.Errorf("mergeFront(%v, %v) = %v, want %v", tc.ps, tc.add, got, want)
			}
		})
	}
}
