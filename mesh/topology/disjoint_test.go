package topology

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestDisjointClaimsSweep checks which claim sets the sweep accepts: none
// of the claims may overlap another, but for the same endpoint claimed
// twice, of which the oldest is kept.
func TestDisjointClaimsSweep(t *testing.T) {
	pod := func(p string) claim { return claim{prefix: pfx(p), kind: claimPod, name: "pod " + p} }
	in := func(p string) claim { return claim{prefix: pfx(p), kind: claimInternal, name: "internal " + p} }
	ep := func(p, name string) claim { return claim{prefix: pfx(p), kind: claimEndpoint, name: name} }
	for _, tc := range []struct {
		name   string
		claims []claim
		ok     bool
		want   []claim // the claims kept, sorted; nil for the claims
	}{
		{name: "none", ok: true},
		{name: "one", claims: []claim{pod("10.0.0.0/24")}, ok: true},
		{name: "disjoint, unsorted", claims: []claim{pod("10.0.1.0/24"), in("192.168.0.1/32"), pod("10.0.0.0/24")}, ok: true,
			want: []claim{pod("10.0.0.0/24"), pod("10.0.1.0/24"), in("192.168.0.1/32")}},
		{name: "adjacent, an address inside the second", claims: []claim{pod("10.0.0.0/25"), pod("10.0.0.128/25"), in("10.0.1.0/32"), in("10.0.0.255/32")}, ok: false},
		{name: "adjacent, disjoint", claims: []claim{pod("10.0.0.0/25"), pod("10.0.0.128/25"), in("10.0.1.0/32")}, ok: true,
			want: []claim{pod("10.0.0.0/25"), pod("10.0.0.128/25"), in("10.0.1.0/32")}},
		{name: "same prefix twice", claims: []claim{pod("10.0.0.0/24"), pod("10.0.0.0/24")}, ok: false},
		{name: "same address, other length", claims: []claim{pod("10.0.0.0/24"), in("10.0.0.0/32")}, ok: false},
		{name: "nested", claims: []claim{pod("10.0.0.0/16"), in("10.0.3.4/32")}, ok: false},
		{name: "nested, inner first", claims: []claim{in("10.0.3.4/32"), pod("10.0.0.0/16")}, ok: false},
		{name: "nested after a disjoint one", claims: []claim{pod("10.0.0.0/16"), pod("10.1.0.0/24"), in("10.0.255.255/32")}, ok: false},
		{name: "everything", claims: []claim{pod("0.0.0.0/0"), pod("255.255.255.255/32")}, ok: false},
		{name: "IPv4 and IPv6 do not overlap", claims: []claim{pod("::/0"), pod("0.0.0.0/0")}, ok: true,
			want: []claim{pod("0.0.0.0/0"), pod("::/0")}},
		{name: "IPv6 nested", claims: []claim{pod("fd00::/64"), in("fd00::1/128")}, ok: false},
		{name: "IPv6 disjoint", claims: []claim{in("fd00::1/128"), pod("fd00:0:0:1::/64"), in("fd00::/128")}, ok: true,
			want: []claim{in("fd00::/128"), in("fd00::1/128"), pod("fd00:0:0:1::/64")}},
		{name: "IPv6 last addresses", claims: []claim{pod("ffff:ffff:ffff:ffff::/64"), in("ffff:ffff:ffff:fffe:ffff:ffff:ffff:ffff/128")}, ok: true,
			want: []claim{in("ffff:ffff:ffff:fffe:ffff:ffff:ffff:ffff/128"), pod("ffff:ffff:ffff:ffff::/64")}},
		{name: "same endpoint twice keeps the oldest", claims: []claim{ep("198.51.100.1/32", "b"), pod("10.0.0.0/24"), ep("198.51.100.1/32", "a")}, ok: true,
			want: []claim{pod("10.0.0.0/24"), ep("198.51.100.1/32", "b")}},
		{name: "endpoint inside a pod CIDR", claims: []claim{pod("10.0.0.0/24"), ep("10.0.0.1/32", "a")}, ok: false},
		{name: "endpoint and internal IP", claims: []claim{in("10.0.0.1/32"), ep("10.0.0.1/32", "a")}, ok: false},
	} {
		// The room grow reserves for each kind: none (grow not called),
		// the number of claims, one less (the kind outgrows it) and more.
		var counts [claimKinds]int
		for _, c := range tc.claims {
			counts[c.kind]++
		}
		for _, room := range []struct {
			name  string
			extra int
		}{{"no grow", 0}, {"exact room", 0}, {"room one short", -1}, {"room to spare", 2}} {
			t.Run(tc.name+"/"+room.name, func(t *testing.T) {
				var b disjointBuilder
				if room.name != "no grow" {
					var n [claimKinds]int
					for k, c := range counts {
						n[k] = max(c+room.extra, 0)
					}
					b.grow(n)
				}
				for _, c := range tc.claims {
					b.add(c)
				}
				d, ok := b.build()
				if ok != tc.ok {
					t.Fatalf("build() ok = %t, want %t", ok, tc.ok)
				}
				if !ok {
					return
				}
				want := tc.want
				if want == nil {
					want = tc.claims
				}
				if got := d.all(); !slices.Equal(got, want) {
					t.Errorf("kept %v, want %v", got, want)
				}
			})
		}
	}
}

// TestClaimsFindWithDisjointBase checks find over a disjoint base and a
// trie of newer claims against a scan of every claim, oldest first.
func TestClaimsFindWithDisjointBase(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	randPrefix := func() netip.Prefix { return randClaimPrefix(rng, 20) }
	ignores := map[string]func(claim) bool{
		"none":     nil,
		"pods":     func(c claim) bool { return c.kind == claimPod },
		"not pods": func(c claim) bool { return c.kind != claimPod },
		"odd seg":  func(c claim) bool { return c.seg%2 == 1 },
	}
	for round := range 50 {
		// A base of disjoint claims, drawn at random.
		var b disjointBuilder
		var all []claim
		for i := range 40 {
			c := claim{prefix: randPrefix(), kind: claimKind(i % 3), name: string(rune('a' + i%26)), seg: int32(i)}
			if slices.ContainsFunc(all, func(o claim) bool { return o.prefix.Overlaps(c.prefix) }) {
				continue
			}
			b.add(c)
			all = append(all, c)
		}
		base, ok := b.build()
		if !ok {
			t.Fatalf("round %d: disjoint claims refused", round)
		}
		cs := newClaims()
		cs.base = &base
		for i := range 40 {
			c := claim{prefix: randPrefix(), kind: claimKind(3 + i%2), name: string(rune('A' + i%26)), seg: int32(i)}
			cs.add(c)
			all = append(all, c)
			checkFindMatchesScan(t, round, cs, all, randPrefix, ignores)
		}
	}
}
