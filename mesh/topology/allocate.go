package topology

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// allocator hands out WireGuard IPs in the subnet without coordination:
// an address a node of the segment already announces when it is free,
// else a slot derived from a hash of the segment's key, probing upward.
type allocator struct {
	subnet netip.Prefix
	// pool is the first sub-prefix of subnet with at most 32 host bits:
	// hashed slots are taken from it.
	pool netip.Prefix
	size uint64 // number of addresses in pool
	// cs holds every claimed range, the WireGuard IPs that nodes announce
	// included.
	cs *claims
	// hashed holds the offsets of the addresses assignHashed gave: the
	// last claims, which only its own probes look up, and each blocks
	// its one address. It is empty (no slots) until assignHashed.
	hashed uint64Set
}

func newAllocator(subnet netip.Prefix, cs *claims) allocator {
	host := min(subnet.Addr().BitLen()-subnet.Bits(), 32)
	pool := netip.PrefixFrom(subnet.Addr(), subnet.Addr().BitLen()-host)
	return allocator{subnet: subnet, pool: pool, size: 1 << host, cs: cs}
}

// free reports whether a can be a segment's WireGuard IP: inside the
// subnet, neither its first nor its last address, not taken, and not
// inside any claimed range (an assigned address is a claim). It returns the
// blocking claim, if any.
func (a *allocator) free(addr netip.Addr) (claim, bool) {
	if !a.subnet.Contains(addr) || addr == a.subnet.Addr() || addr == lastAddr(a.subnet) {
		return claim{}, false
	}
	if a.hashed.slots != nil && a.pool.Contains(addr) && a.hashed.has(a.offsetOf(addr)) {
		return claim{prefix: hostPrefix(addr), kind: claimWireGuard}, false
	}
	c, blocked := a.cs.find(hostPrefix(addr), nil)
	return c, !blocked
}

func (a *allocator) assign(s *Segment, addr netip.Addr) {
	s.WireGuardIP = netip.PrefixFrom(addr, a.subnet.Bits())
	if a.hashed.slots != nil {
		a.hashed.add(a.offsetOf(addr))
		return
	}
	a.cs.add(claim{prefix: hostPrefix(addr), kind: claimWireGuard,
		name: s.Name})
}

// assignAnnounced gives segments the addresses their nodes announce:
// first the leaders' announcements, segments in name order, then the other
// nodes' announcements in node name order.
func (a *allocator) assignAnnounced(segs []Segment) {
	for i := range segs {
		s := &segs[i]
		if addr := s.members[s.Leader].WireGuardIP.Addr(); addr.IsValid() {
			if _, ok := a.free(unmapAddr(addr)); ok {
				a.assign(s, unmapAddr(addr))
			}
		}
	}
	for i := range segs {
		s := &segs[i]
		for _, n := range s.members {
			if s.WireGuardIP.IsValid() {
				break
			}
			if addr := unmapAddr(n.WireGuardIP.Addr()); addr.IsValid() {
				if _, ok := a.free(addr); ok {
					a.assign(s, addr)
				}
			}
		}
	}
}

// home returns the first slot probed for key: never the pool's first or
// last address.
func (a *allocator) home(key string) uint64 {
	return 1 + fnv1a(fnvOffset64, key)%(a.size-2)
}

// homeOf is home of the key's string, without building it.
func (a *allocator) homeOf(k segKey) uint64 {
	kind := "location:"
	if k.node {
		kind = "node:"
	}
	return 1 + fnv1a(fnv1a(fnvOffset64, kind), k.name)%(a.size-2)
}

// fnv1a goes on with the 64-bit FNV-1a hash h over s, as hash/fnv's
// New64a, without allocating.
func fnv1a(h uint64, s string) uint64 {
	for i := range len(s) {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// FNV-1a's 64-bit parameters.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func (a *allocator) addrAt(off uint64) netip.Addr {
	b := a.pool.Addr().As16()
	binary.BigEndian.PutUint32(b[12:], binary.BigEndian.Uint32(b[12:])|uint32(off))
	addr := netip.AddrFrom16(b)
	if a.pool.Addr().Is4() {
		return addr.Unmap()
	}
	return addr
}

func (a *allocator) offsetOf(addr netip.Addr) uint64 {
	b := addr.As16()
	return uint64(binary.BigEndian.Uint32(b[12:])) & (a.size - 1)
}

// assignHashed gives every segment still without an address its hashed
// slot, probing upward (and wrapping) past taken addresses and claimed
// ranges. Segments are served in (slot, key) order, so a segment keeps its
// address when others come and go unless their slots collide, and keeps
// it in every case once its nodes announce it.
func (a *allocator) assignHashed(segs []Segment, ps *problems, sc *scratch) {
	// Each segment still without address as home<<32 | index in segs
	// (home < 2^32), sorted; equal homes are then ordered by key.
	todo := buffer(&sc.u64[0], len(segs))[:0]
	for i := range segs {
		if s := &segs[i]; !s.WireGuardIP.IsValid() {
			todo = append(todo, a.homeOf(s.key)<<32|uint64(i))
		}
	}
	slices.Sort(todo)
	for lo := 0; lo < len(todo); {
		hi := lo + 1
		for hi < len(todo) && todo[hi]>>32 == todo[lo]>>32 {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(todo[lo:hi], func(x, y uint64) int { return segs[uint32(x)].key.compare(segs[uint32(y)].key) })
		}
		lo = hi
	}
	a.hashed = newUint64Set(len(todo), &sc.u64[1])
	for _, h := range todo {
		s := &segs[uint32(h)]
		if addr, ok := a.probe(h >> 32); ok {
			a.assign(s, addr)
			continue
		}
		ps.add(KindNode, s.members[s.Leader].Name, Warning, CodeNoWireGuardIP,
			"the WireGuard subnet %s has no free address left for segment %q, so its leader's interface has no address; use a larger --subnet",
			a.subnet, s.Name)
	}
}

// probe walks the slots from start, jumping over claimed ranges, until a
// free address is found or every slot was seen.
func (a *allocator) probe(start uint64) (netip.Addr, bool) {
	cycle := a.size - 2 // slots 1 .. size-2
	off, walked := start, uint64(0)
	for walked < cycle {
		addr := a.addrAt(off)
		c, ok := a.free(addr)
		if ok {
			return addr, true
		}
		step := uint64(1)
		if c.prefix.IsValid() && c.prefix.Bits() < addr.BitLen() {
			if c.prefix.Contains(a.pool.Addr()) && c.prefix.Contains(lastAddr(a.pool)) {
				return netip.Addr{}, false // the whole pool is claimed
			}
			step = a.offsetOf(lastAddr(c.prefix)) - off + 1
		}
		walked += step
		off += step
		if off > cycle {
			off = 1 + (off-1)%cycle
		}
	}
	return netip.Addr{}, false
}
