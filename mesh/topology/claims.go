package topology

import (
	"encoding/binary"
	"net/netip"
)

// claims holds every claimed range in a binary trie, one root per address
// family: the trie node at depth d on the path of p's bits stands for p's
// d-bit supernet. Prefixes either nest or are disjoint, so the claims
// overlapping p are those on its path (they contain p) and those in the
// subtree below it (they lie inside p). Adding and finding cost a walk of
// p's bits, whatever the number of claims.
type claims struct {
	all []claim
	// next links the claims of one prefix, oldest first: the index in all
	// of the next newer claim of the same prefix, or -1.
	next  []int32
	nodes []trieNode // nodes[0] is the IPv4 root, nodes[1] the IPv6 root
}

// trieNode is one prefix of the trie.
type trieNode struct {
	// child are the indexes in nodes of the two halves of this prefix
	// (next bit 0, next bit 1); 0 means none, as a root is nobody's child.
	child [2]int32
	// first and last are the oldest and newest claim of this very prefix
	// (indexes in all), -1 when it has none.
	first, last int32
}

func newClaims() *claims {
	return &claims{nodes: []trieNode{{first: -1, last: -1}, {first: -1, last: -1}}}
}

// grow makes room for n more claims without reallocating.
func (cs *claims) grow(n int) {
	cs.all = append(make([]claim, 0, len(cs.all)+n), cs.all...)
	cs.next = append(make([]int32, 0, len(cs.next)+n), cs.next...)
	// A claim adds a few nodes of its own below the prefixes it shares.
	cs.nodes = append(make([]trieNode, 0, len(cs.nodes)+4*n), cs.nodes...)
}

// addrBits returns the bits of a, most significant first: an IPv4 address
// fills the top 32 bits of hi.
func addrBits(a netip.Addr) (hi, lo uint64) {
	if a.Is4() {
		b := a.As4()
		return uint64(binary.BigEndian.Uint32(b[:])) << 32, 0
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// bitAt returns bit d (0 is the most significant) of the address (hi, lo).
func bitAt(hi, lo uint64, d int) int {
	if d < 64 {
		return int(hi >> (63 - d) & 1)
	}
	return int(lo >> (127 - d) & 1)
}

// root returns the trie root of p's address family.
func root(p netip.Prefix) int32 {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

// add records c even if it overlaps existing claims. An invalid prefix is
// not recorded.
func (cs *claims) add(c claim) {
	if !c.prefix.IsValid() {
		return
	}
	c.prefix = c.prefix.Masked()
	hi, lo := addrBits(c.prefix.Addr())
	n := root(c.prefix)
	for d := range c.prefix.Bits() {
		b := bitAt(hi, lo, d)
		next := cs.nodes[n].child[b]
		if next == 0 {
			next = int32(len(cs.nodes))
			cs.nodes = append(cs.nodes, trieNode{first: -1, last: -1})
			cs.nodes[n].child[b] = next
		}
		n = next
	}
	i := int32(len(cs.all))
	cs.all = append(cs.all, c)
	cs.next = append(cs.next, -1)
	if node := &cs.nodes[n]; node.first < 0 {
		node.first = i
	} else {
		cs.next[node.last] = i
	}
	cs.nodes[n].last = i
}

// find returns the first claim overlapping p for which ignore returns
// false: the widest claim containing p, else the lowest one inside p (by
// address, then the widest); among the claims of one prefix, the oldest.
func (cs *claims) find(p netip.Prefix, ignore func(claim) bool) (claim, bool) {
	if !p.IsValid() {
		return claim{}, false
	}
	p = p.Masked()
	hi, lo := addrBits(p.Addr())
	n := root(p)
	for d := 0; ; d++ {
		if c, ok := cs.firstAt(n, ignore); ok {
			return c, true
		}
		if d == p.Bits() {
			break
		}
		if n = cs.nodes[n].child[bitAt(hi, lo, d)]; n == 0 {
			return claim{}, false // nothing is claimed inside p
		}
	}
	return cs.firstBelow(n, ignore)
}

// firstAt returns the oldest claim of node n's prefix not ignored.
func (cs *claims) firstAt(n int32, ignore func(claim) bool) (claim, bool) {
	for i := cs.nodes[n].first; i >= 0; i = cs.next[i] {
		if ignore == nil || !ignore(cs.all[i]) {
			return cs.all[i], true
		}
	}
	return claim{}, false
}

// firstBelow returns the first claim strictly inside node n's prefix not
// ignored, in preorder: by address, then the widest first.
func (cs *claims) firstBelow(n int32, ignore func(claim) bool) (claim, bool) {
	for _, child := range cs.nodes[n].child {
		if child == 0 {
			continue
		}
		if c, ok := cs.firstAt(child, ignore); ok {
			return c, true
		}
		if c, ok := cs.firstBelow(child, ignore); ok {
			return c, true
		}
	}
	return claim{}, false
}
