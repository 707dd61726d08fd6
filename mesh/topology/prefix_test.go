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
