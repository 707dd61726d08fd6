package topology

import (
	"cmp"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// linearFind is claims.find's rule written as a scan of every claim: the
// widest claim containing p, else the lowest inside p (by address, then
// the widest), the oldest first among claims of one prefix.
func linearFind(all []claim, p netip.Prefix, ignore func(claim) bool) (claim, bool) {
	p = p.Masked()
	best, found, containing := claim{}, false, false
	for _, c := range all {
		if !c.prefix.Overlaps(p) || (ignore != nil && ignore(c)) {
			continue
		}
		contains := c.prefix.Bits() <= p.Bits()
		switch {
		case !found:
		case containing && contains:
			if c.prefix.Bits() >= best.prefix.Bits() {
				continue
			}
		case containing:
			continue
		case !contains:
			if cmp.Or(c.prefix.Addr().Compare(best.prefix.Addr()), cmp.Compare(c.prefix.Bits(), best.prefix.Bits())) >= 0 {
				continue
			}
		}
		best, found, containing = c, true, contains
	}
	return best, found
}

// TestClaimsFindMatchesLinearScan checks the trie against a scan of every
// claim, on random nested, equal and disjoint prefixes of both families.
func TestClaimsFindMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randPrefix := func() netip.Prefix { return randClaimPrefix(rng, 8) }
	ignores := map[string]func(claim) bool{
		"none":     nil,
		"pods":     func(c claim) bool { return c.kind == claimPod },
		"not pods": func(c claim) bool { return c.kind != claimPod },
	}
	for round := range 50 {
		cs := newClaims()
		var all []claim
		for i := range 60 {
			c := claim{prefix: randPrefix(), kind: claimKind(i % 2), name: string(rune('a' + i%26))}
			cs.add(c)
			all = append(all, c)
			checkFindMatchesScan(t, round, cs, all, randPrefix, ignores)
		}
	}
}

// randClaimPrefix returns a random masked prefix, one in four IPv6 (of
// 2001:db8::/120 and longer), else IPv4 of 10.0.0.0/14 at least minBits4
// long: nested, equal and disjoint prefixes come often.
func randClaimPrefix(rng *rand.Rand, minBits4 int) netip.Prefix {
	if rng.IntN(4) == 0 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(rng.IntN(4)), 15: byte(rng.IntN(256))})
		return netip.PrefixFrom(a, 112+rng.IntN(17)).Masked()
	}
	a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(2)), byte(rng.IntN(4)), byte(rng.IntN(256))})
	return netip.PrefixFrom(a, minBits4+rng.IntN(33-minBits4)).Masked()
}

// checkFindMatchesScan checks cs.find on 5 random queries against a scan
// of all, the claims cs holds oldest first, with each of ignores.
func checkFindMatchesScan(t *testing.T, round int, cs *claims, all []claim, randPrefix func() netip.Prefix, ignores map[string]func(claim) bool) {
	t.Helper()
	for range 5 {
		q := randPrefix()
		for name, ignore := range ignores {
			got, ok := cs.find(q, ignore)
			want, wantOK := linearFind(all, q, ignore)
			if ok != wantOK || got != want {
				t.Fatalf("round %d, %d claims, find(%s) ignoring %s = %+v, %t; want %+v, %t", round, len(all), q, name, got, ok, want, wantOK)
			}
		}
	}
}
