package topology

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
)

// claims holds the claimed ranges: the nodes' ranges in a sorted array
// (base) when none of them overlaps another, and the others, or all of
// them, in a path-compressed binary trie (a PATRICIA trie), one per
// address family. Each trie node stands for a
// prefix: a claimed one, or one where claimed prefixes branch apart.
// Prefixes either nest or are disjoint, so the claims overlapping p are
// those on p's path from the root (they contain p) and those in the subtree
// below it (they lie inside p). Adding and finding walk that path, which
// has at most one node per branching point.
type claims struct {
	// base, if set, holds claims older than every claim of the trie, none
	// of which overlaps another.
	base *disjoint
	all  []claim
	// next links the claims of one prefix, oldest first: the index in all
	// of the next newer claim of the same prefix, or -1.
	next  []int32
	nodes []trieNode // nodes[0] is the IPv4 root (0.0.0.0/0), nodes[1] the IPv6 root (::/0)
}

// trieNode is one prefix of the trie.
type trieNode struct {
	hi, lo uint64 // the prefix's address bits (see addrBits), masked
	bits   int    // the prefix length
	// child are the indexes in nodes of the subtrees whose prefixes go on
	// with bit 0 and bit 1 after this one; 0 means none, as a root is
	// nobody's child.
	child [2]int32
	// first and last are the oldest and newest claim of this very prefix
	// (indexes in all), -1 when it has none.
	first, last int32
}

func newClaims() *claims {
	cs := new(claims)
	cs.reset()
	return cs
}

// reset empties cs, keeping its arrays: no claims, no base, the two roots.
func (cs *claims) reset() {
	cs.base = nil
	cs.all, cs.next = cs.all[:0], cs.next[:0]
	cs.nodes = append(cs.nodes[:0], trieNode{first: -1, last: -1}, trieNode{first: -1, last: -1})
}

// grow makes room for n more claims without reallocating.
func (cs *claims) grow(n int) {
	cs.all = slices.Grow(cs.all, n)
	cs.next = slices.Grow(cs.next, n)
	cs.nodes = slices.Grow(cs.nodes, 2*n) // at most a branching node besides its own
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

// maskBits keeps the first k bits of the address (hi, lo).
func maskBits(hi, lo uint64, k int) (uint64, uint64) {
	if k < 64 {
		return hi &^ (^uint64(0) >> k), 0
	}
	return hi, lo &^ (^uint64(0) >> (k - 64))
}

// commonBits returns how many leading bits two addresses share (128 when
// they are equal).
func commonBits(ahi, alo, bhi, blo uint64) int {
	if x := ahi ^ bhi; x != 0 {
		return bits.LeadingZeros64(x)
	}
	return 64 + bits.LeadingZeros64(alo^blo)
}

// within reports whether the prefix (hi, lo)/n lies inside (or is) node t's
// prefix.
func (t *trieNode) within(hi, lo uint64, n int) bool {
	return t.bits <= n && commonBits(hi, lo, t.hi, t.lo) >= t.bits
}

// root returns the trie root of p's address family.
func root(p netip.Prefix) int32 {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

func (cs *claims) newNode(hi, lo uint64, n int) int32 {
	cs.nodes = append(cs.nodes, trieNode{hi: hi, lo: lo, bits: n, first: -1, last: -1})
	return int32(len(cs.nodes) - 1)
}

// add records c even if it overlaps existing claims. An invalid prefix is
// not recorded.
func (cs *claims) add(c claim) {
	if !c.prefix.IsValid() {
		return
	}
	c.prefix = c.prefix.Masked()
	hi, lo := addrBits(c.prefix.Addr())
	n, size := root(c.prefix), c.prefix.Bits()
	for cs.nodes[n].bits != size { // n's prefix contains c's
		b := bitAt(hi, lo, cs.nodes[n].bits)
		child := cs.nodes[n].child[b]
		if child == 0 {
			leaf := cs.newNode(hi, lo, size)
			cs.nodes[n].child[b] = leaf
			n = leaf
			break
		}
		ch := cs.nodes[child]
		if ch.within(hi, lo, size) {
			n = child
			continue
		}
		// c and the child's prefix part after k bits (or c contains the
		// child): a node for those k bits goes between n and the child.
		k := min(commonBits(hi, lo, ch.hi, ch.lo), size)
		mhi, mlo := maskBits(hi, lo, k)
		mid := cs.newNode(mhi, mlo, k)
		cs.nodes[mid].child[bitAt(ch.hi, ch.lo, k)] = child
		cs.nodes[n].child[b] = mid
		n = mid
		if k < size {
			leaf := cs.newNode(hi, lo, size)
			cs.nodes[mid].child[bitAt(hi, lo, k)] = leaf
			n = leaf
		}
		break
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
	c, ok := cs.findTrie(p, ignore)
	if cs.base == nil {
		return c, ok
	}
	b, inBase := cs.base.find(p, ignore)
	switch {
	case !inBase:
		return c, ok
	case !ok || firstFound(p, b, c):
		return b, true
	}
	return c, true
}

// firstFound reports whether find returns the older claim b rather than
// c, both overlapping p.
func firstFound(p netip.Prefix, b, c claim) bool {
	bIn, cIn := b.prefix.Bits() > p.Bits(), c.prefix.Bits() > p.Bits()
	switch {
	case bIn != cIn:
		return !bIn // a claim containing p first
	case !bIn:
		return b.prefix.Bits() <= c.prefix.Bits() // the widest first
	}
	return compareMasked(b.prefix, c.prefix) <= 0 // the lowest, then the widest
}

// findTrie is find among the claims of the trie, for p masked.
func (cs *claims) findTrie(p netip.Prefix, ignore func(claim) bool) (claim, bool) {
	hi, lo := addrBits(p.Addr())
	n, size := root(p), p.Bits()
	for { // n's prefix contains p's
		if c, ok := cs.firstAt(n, ignore); ok {
			return c, true
		}
		node := &cs.nodes[n]
		if node.bits == size {
			return cs.firstBelow(n, ignore)
		}
		child := node.child[bitAt(hi, lo, node.bits)]
		if child == 0 {
			return claim{}, false
		}
		switch ch := &cs.nodes[child]; {
		case ch.within(hi, lo, size):
			n = child
		case ch.bits > size && commonBits(hi, lo, ch.hi, ch.lo) >= size: // inside p
			if c, ok := cs.firstAt(child, ignore); ok {
				return c, true
			}
			return cs.firstBelow(child, ignore)
		default:
			return claim{}, false
		}
	}
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
