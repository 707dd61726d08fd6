package topology

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// unmapPrefix turns an IPv4-mapped IPv6 prefix (::ffff:10.0.0.0/104) into
// its IPv4 form; other prefixes are returned unchanged, and a mapped prefix
// too short to be IPv4 becomes the invalid Prefix.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() || !p.Addr().Is4In6() {
		return p
	}
	if p.Bits() < 96 {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
}

// unmapAddr strips an IPv4-mapped prefix and any IPv6 zone.
func unmapAddr(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// normPrefixes returns ps masked, unmapped, without invalid entries, sorted
// and without duplicates; nil when nothing is left.
func normPrefixes(ps []netip.Prefix) []netip.Prefix {
	if len(ps) == 0 {
		return nil
	}
	return normPrefixesTo(make([]netip.Prefix, 0, len(ps)), ps)
}

// normPrefixesTo is normPrefixes appending to out, which has room for ps.
func normPrefixesTo(out, ps []netip.Prefix) []netip.Prefix {
	for _, p := range ps {
		p = unmapPrefix(p)
		if !p.IsValid() {
			continue
		}
		out = append(out, netip.PrefixFrom(p.Addr().WithZone(""), p.Bits()).Masked())
	}
	return sortPrefixes(out)
}

// sortPrefixes sorts ps, prefixes already normalized, in place and drops
// duplicates; nil when ps is empty. Long lists are sorted as pointer-free
// keys, which moves less memory and needs no write barrier.
func sortPrefixes(ps []netip.Prefix) []netip.Prefix {
	switch {
	case len(ps) == 0:
		return nil
	case len(ps) == 1:
		return ps
	case len(ps) < 64:
		slices.SortFunc(ps, compareMasked)
		return slices.Compact(ps)
	}
	keys := make([]prefixKey, len(ps))
	for i, p := range ps {
		keys[i] = keyOf(p)
	}
	slices.SortFunc(keys, comparePrefixKeys)
	keys = slices.Compact(keys)
	for i, k := range keys {
		ps[i] = k.prefix()
	}
	return ps[:len(keys)]
}

// mergeFront merges add into ps[len(add):], both sorted and without
// duplicates, in place: the first len(add) prefixes of ps are free room.
// It drops the duplicates and returns nil when nothing is left. Only the
// prefixes of ps below the last of add move, so adding what sorts first
// is cheap however long ps is.
func mergeFront(ps, add []netip.Prefix) []netip.Prefix {
	k, i, j := 0, 0, len(add) // where to write, the next of add, the next of ps
	for ; i < len(add); k++ {
		switch {
		case j < len(ps) && compareMasked(ps[j], add[i]) < 0:
			ps[k], j = ps[j], j+1
		case j < len(ps) && ps[j] == add[i]:
			ps[k], i, j = add[i], i+1, j+1
		default:
			ps[k], i = add[i], i+1
		}
	}
	if k < j { // duplicates left a gap
		ps = append(ps[:k], ps[j:]...)
	}
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// prefixKey is a zoneless prefix as plain numbers.
type prefixKey struct {
	hi, lo uint64 // address bits (see addrBits)
	v6     bool
	bits   int
}

func keyOf(p netip.Prefix) prefixKey {
	hi, lo := addrBits(p.Addr())
	return prefixKey{hi: hi, lo: lo, v6: !p.Addr().Is4(), bits: p.Bits()}
}

func (k prefixKey) prefix() netip.Prefix {
	if !k.v6 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(k.hi >> 56), byte(k.hi >> 48), byte(k.hi >> 40), byte(k.hi >> 32)}), k.bits)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], k.hi)
	binary.BigEndian.PutUint64(b[8:], k.lo)
	return netip.PrefixFrom(netip.AddrFrom16(b), k.bits)
}

// comparePrefixKeys orders keys as Prefix.Compare orders masked prefixes.
func comparePrefixKeys(a, b prefixKey) int {
	switch {
	case a.v6 != b.v6:
		return boolFirst(!a.v6, !b.v6)
	case a.hi != b.hi:
		return cmp.Compare(a.hi, b.hi)
	case a.lo != b.lo:
		return cmp.Compare(a.lo, b.lo)
	}
	return cmp.Compare(a.bits, b.bits)
}

// compareMasked orders masked prefixes as Prefix.Compare does, with less
// work: by address (family first), then length.
func compareMasked(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// prefixArena hands out prefix slices cut from shared arrays, each capped,
// so that appending to one never overwrites another.
type prefixArena struct {
	buf []netip.Prefix
}

// newPrefixArena returns an arena with room for n prefixes.
func newPrefixArena(n int) prefixArena {
	return prefixArena{buf: make([]netip.Prefix, 0, n)}
}

// take returns an empty slice with room for k prefixes.
func (a *prefixArena) take(k int) []netip.Prefix {
	if cap(a.buf)-len(a.buf) < k {
		a.buf = make([]netip.Prefix, 0, max(k, cap(a.buf)))
	}
	n := len(a.buf)
	a.buf = a.buf[:n+k]
	return a.buf[n : n : n+k]
}

// hostPrefix returns the single-address prefix of a (/32 or /128).
func hostPrefix(a netip.Addr) netip.Prefix {
	return netip.PrefixFrom(a, a.BitLen())
}

// lastAddr returns the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().As16()
	first := 0
	if p.Addr().Is4() {
		first = 12
	}
	host := p.Addr().BitLen() - p.Bits()
	for i := 15; i >= first && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

// claimKind says what a claimed range is used for.
type claimKind uint8

const (
	claimPod claimKind = iota
	claimInternal
	claimEndpoint
	claimWireGuard
	claimService
	claimPeer
	claimLocation
	claimKinds // how many kinds there are
)

// claim is a range that some owner uses, for overlap checks.
type claim struct {
	prefix netip.Prefix
	// name names the owner: a node, peer, segment or location.
	name string
	// seg is the index in Topology.Segments of the owner's segment, for
	// the claims of nodes and of allowed location IPs.
	seg  int32
	kind claimKind
}

// owner describes the claim for messages ("pod CIDR 10.42.0.0/24 of node "a"").
func (c claim) owner() string {
	switch c.kind {
	case claimPod:
		return fmt.Sprintf("pod CIDR %s of node %q", c.prefix, c.name)
	case claimInternal:
		return fmt.Sprintf("internal IP %s of node %q", c.prefix.Addr(), c.name)
	case claimEndpoint:
		return fmt.Sprintf("endpoint %s of node %q", c.prefix.Addr(), c.name)
	case claimWireGuard:
		return fmt.Sprintf("WireGuard IP %s of segment %q", c.prefix.Addr(), c.name)
	case claimService:
		return fmt.Sprintf("service CIDR %s", c.prefix)
	case claimPeer:
		return fmt.Sprintf("allowed IP %s of peer %q", c.prefix, c.name)
	default:
		return fmt.Sprintf("allowed location IP %s of location %q", c.prefix, c.name)
	}
}
