package topology

import (
	"cmp"
	"iter"
	"net/netip"
	"slices"
)

// disjoint is a sorted set of claims none of which overlaps another: the
// nodes' ranges in the common case. It is built and checked at once, by
// sorting every claim and comparing each with the one before, instead of
// one claim at a time in the trie.
type disjoint struct {
	// v4 are the IPv4 claims as address<<32 | length<<24 | index in refs,
	// ascending: by address, then length.
	v4 []uint64
	// v6 are the IPv6 claims, ascending.
	v6   []claim6
	refs []claimRef
}

// claim6 is an IPv6 claim as numbers.
type claim6 struct {
	hi, lo uint64 // the masked address bits (see addrBits)
	bits   int32
	ref    int32 // index in disjoint.refs
}

// claimRef is what a claim says besides its prefix.
type claimRef struct {
	name string
	seg  int32
	kind claimKind
}

// maxDisjoint is how many IPv4 claims the index part of a key can tell
// apart.
const maxDisjoint = 1 << 24

// disjointBuilder collects claims for a disjoint set, oldest first.
type disjointBuilder struct {
	d disjoint
	// v4 are the IPv4 keys of each kind apart, as added: the nodes' ranges
	// of one kind tend to come in the order of the node names, so the
	// kinds one after the other make a few sorted runs.
	v4 [claimKinds][]uint64
	// all holds the v4 of every kind one after the other, each in room
	// reserved by grow, so that build joins them in place.
	all []uint64
}

// grow makes room for n[k] IPv4 claims of kind k; it must come before
// the first add.
func (b *disjointBuilder) grow(n [claimKinds]int) {
	total := 0
	for _, c := range n {
		total += c
	}
	// One array for every kind instead of one each: fewer allocations.
	b.all = make([]uint64, total)
	off := 0
	for k, c := range n {
		b.v4[k] = b.all[off : off : off+c]
		off += c
	}
	b.d.refs = slices.Grow(b.d.refs, total)
}

// add records c, whose prefix must be valid and masked.
func (b *disjointBuilder) add(c claim) {
	i := len(b.d.refs)
	b.d.refs = append(b.d.refs, claimRef{name: c.name, seg: c.seg, kind: c.kind})
	hi, lo := addrBits(c.prefix.Addr())
	if c.prefix.Addr().Is4() {
		b.v4[c.kind] = append(b.v4[c.kind], hi|uint64(c.prefix.Bits())<<24|uint64(i))
		return
	}
	b.d.v6 = append(b.d.v6, claim6{hi: hi, lo: lo, bits: int32(c.prefix.Bits()), ref: int32(i)})
}

// build sorts the claims and returns them when none overlaps another,
// but for one endpoint claimed more than once, of which only the oldest
// claim is kept (find could not tell them apart).
func (b *disjointBuilder) build() (disjoint, bool) {
	d := &b.d
	if len(d.refs) > maxDisjoint {
		return disjoint{}, false
	}
	d.v4 = b.joinV4()
	sortKeys(d.v4)
	slices.SortFunc(d.v6, func(x, y claim6) int {
		return cmp.Or(cmp.Compare(x.hi, y.hi), cmp.Compare(x.lo, y.lo), cmp.Compare(x.bits, y.bits), cmp.Compare(x.ref, y.ref))
	})
	// Sorted by address, a claim overlaps another only if it overlaps the
	// one before it: the set is disjoint up to there, and the one before
	// ends last.
	kept := d.v4[:0]
	for _, k := range d.v4 {
		if n := len(kept); n > 0 && k>>32 <= last4(kept[n-1]) {
			if !d.sameEndpoint(keyPrefix4(k), d.v4ref(k), keyPrefix4(kept[n-1]), d.v4ref(kept[n-1])) {
				return disjoint{}, false
			}
			continue
		}
		kept = append(kept, k)
	}
	d.v4 = kept
	kept6 := d.v6[:0]
	for _, c := range d.v6 {
		if n := len(kept6); n > 0 && !after6(c, kept6[n-1]) {
			p := kept6[n-1]
			if c.hi != p.hi || c.lo != p.lo || c.bits != p.bits || d.refs[c.ref].kind != claimEndpoint || d.refs[p.ref].kind != claimEndpoint {
				return disjoint{}, false
			}
			continue
		}
		kept6 = append(kept6, c)
	}
	d.v6 = kept6
	return *d, true
}

// joinV4 returns the IPv4 keys of every kind, one kind after the other.
// While each kind stayed in the room grow reserved, they are moved to the
// front of b.all, in place: a kind's keys start at or after the end of
// those before.
func (b *disjointBuilder) joinV4() []uint64 {
	off := 0
	for k := range b.v4 {
		if cap(b.v4[k]) == 0 {
			continue
		}
		if end := off + cap(b.v4[k]); end > len(b.all) || &b.v4[k][:1][0] != &b.all[off] {
			return slices.Concat(b.v4[:]...) // a kind outgrew its room
		}
		off += cap(b.v4[k])
	}
	all := b.all[:0]
	for _, keys := range b.v4 {
		all = append(all, keys...)
	}
	return all
}

// sameEndpoint reports whether two IPv4 claims are the same endpoint.
func (d *disjoint) sameEndpoint(p netip.Prefix, i int, q netip.Prefix, j int) bool {
	return p == q && d.refs[i].kind == claimEndpoint && d.refs[j].kind == claimEndpoint
}

func (d *disjoint) v4ref(k uint64) int { return int(k & (maxDisjoint - 1)) }

// last4 returns the last address of an IPv4 key's prefix.
func last4(k uint64) uint64 {
	return k>>32 | (1<<(32-k>>24&0xff) - 1)
}

func keyPrefix4(k uint64) netip.Prefix {
	a := uint32(k >> 32)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), int(k>>24&0xff))
}

// after6 reports whether c starts after the last address of p.
func after6(c, p claim6) bool {
	hi, lo := p.hi, p.lo
	if p.bits < 64 {
		hi |= ^uint64(0) >> p.bits
		lo = ^uint64(0)
	} else if p.bits < 128 {
		lo |= ^uint64(0) >> (p.bits - 64)
	}
	return c.hi > hi || (c.hi == hi && c.lo > lo)
}

func (c claim6) prefix() netip.Prefix {
	return prefixKey{hi: c.hi, lo: c.lo, v6: true, bits: int(c.bits)}.prefix()
}

func (d *disjoint) claim(p netip.Prefix, ref int) claim {
	r := d.refs[ref]
	return claim{prefix: p, name: r.name, seg: r.seg, kind: r.kind}
}

// ranges yields the prefix and the rest of every claim of d, sorted.
func (d *disjoint) ranges() iter.Seq2[netip.Prefix, claimRef] {
	return func(yield func(netip.Prefix, claimRef) bool) {
		for _, k := range d.v4 {
			if !yield(keyPrefix4(k), d.refs[d.v4ref(k)]) {
				return
			}
		}
		for _, c := range d.v6 {
			if !yield(c.prefix(), d.refs[c.ref]) {
				return
			}
		}
	}
}

// all returns every claim of d, sorted.
func (d *disjoint) all() []claim {
	var out []claim
	for _, k := range d.v4 {
		out = append(out, d.claim(keyPrefix4(k), d.v4ref(k)))
	}
	for _, c := range d.v6 {
		out = append(out, d.claim(c.prefix(), int(c.ref)))
	}
	return out
}

// find returns the first claim overlapping p, masked, for which ignore
// returns false, by the rule of claims.find: the claim containing p, else
// the lowest inside p.
func (d *disjoint) find(p netip.Prefix, ignore func(claim) bool) (claim, bool) {
	for c := range d.overlapping(p) {
		if ignore == nil || !ignore(c) {
			return c, true
		}
	}
	return claim{}, false
}

// overlapping yields the claims overlapping p, masked, sorted: the one
// containing p, if any, then those inside p.
func (d *disjoint) overlapping(p netip.Prefix) iter.Seq[claim] {
	return func(yield func(claim) bool) {
		hi, lo := addrBits(p.Addr())
		if p.Addr().Is4() {
			first, end := hi>>32, last4(hi|uint64(p.Bits())<<24)
			// From the claim holding first (if any) up to those starting
			// at end.
			i, _ := slices.BinarySearch(d.v4, first<<32|0xffffffff)
			if i > 0 && last4(d.v4[i-1]) >= first {
				i--
			}
			for ; i < len(d.v4) && d.v4[i]>>32 <= end; i++ {
				if !yield(d.claim(keyPrefix4(d.v4[i]), d.v4ref(d.v4[i]))) {
					return
				}
			}
			return
		}
		q := claim6{hi: hi, lo: lo, bits: int32(p.Bits())}
		i, _ := slices.BinarySearchFunc(d.v6, q, func(c, q claim6) int {
			return cmp.Or(cmp.Compare(c.hi, q.hi), cmp.Compare(c.lo, q.lo))
		})
		if i > 0 && !after6(q, d.v6[i-1]) {
			i--
		}
		for ; i < len(d.v6) && !after6(d.v6[i], q); i++ {
			if !yield(d.claim(d.v6[i].prefix(), int(d.v6[i].ref))) {
				return
			}
		}
	}
}
