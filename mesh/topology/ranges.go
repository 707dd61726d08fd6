package topology

import (
	"net/netip"
	"slices"
)

// claimNodeRanges claims the pod CIDRs, internal IPs and public endpoints
// of members in name order. A pod CIDR that overlaps one claimed before, or
// an internal IP that another node already uses, is dropped with a Warning:
// WireGuard cannot route one range to two peers. When no range overlaps
// another, as in most clusters, one sort finds it out (see disjoint) and
// the ranges are stored in *base and become cs's base; otherwise they are
// claimed one by one, in copies of the nodes (see nodeArray.own).
func claimNodeRanges(members []*member, nodes *nodeArray, opts Options, cs *claims, ps *problems, base *disjoint) {
	var n [claimKinds]int
	for _, m := range members {
		if len(m.PodCIDRs) == 0 {
			ps.add(KindNode, m.Name, Warning, CodeNoPodCIDR,
				"the node has no pod CIDR, so nothing is routed to its pods; set spec.podCIDRs on the Node (kube-controller-manager --allocate-node-cidrs does it)")
		}
		n[claimPod] += len(m.PodCIDRs)
		n[claimInternal] += b2i(m.InternalIP.IsValid()) + b2i(m.InternalIP6.IsValid())
		e := m.endpointClaims()
		m.ends = uint8(b2i(e[0].IsValid()) | b2i(e[1].IsValid())<<1)
		n[claimEndpoint] += b2i(e[0].IsValid()) + b2i(e[1].IsValid())
	}
	var b disjointBuilder
	b.grow(n)
	for _, m := range members {
		for _, p := range m.PodCIDRs {
			b.add(claim{prefix: p, kind: claimPod, name: m.Name, seg: m.seg})
		}
		m.routed4, m.routed6 = m.InternalIP.IsValid(), m.InternalIP6.IsValid() // unless claimed one by one
		for _, in := range [2]netip.Prefix{m.InternalIP, m.InternalIP6} {
			if in.IsValid() {
				b.add(claim{prefix: hostPrefix(in.Addr()), kind: claimInternal, name: m.Name, seg: m.seg})
			}
		}
		if m.ends&1 != 0 { // endpointClaims, without computing them again
			b.add(claim{prefix: hostPrefix(m.ExternalIP), kind: claimEndpoint, name: m.Name, seg: m.seg})
		}
		if m.ends&2 != 0 {
			b.add(claim{prefix: hostPrefix(m.Endpoint.Addr.Addr()), kind: claimEndpoint, name: m.Name, seg: m.seg})
		}
	}
	if d, ok := b.build(); ok {
		*base = d
		cs.base = base
		for c := range base.overlapping(opts.Subnet) {
			switch c.kind {
			case claimPod:
				warnPodInSubnet(c.name, c.prefix, opts, ps)
			case claimInternal:
				warnInternalInSubnet(c.name, c.prefix, opts, ps)
			}
		}
		return
	}
	cs.grow(len(b.d.refs))
	nodes.own() // claimRangesOf filters pod CIDRs in place
	for _, m := range members {
		m.routed4, m.routed6 = false, false
		claimRangesOf(m, opts, cs, ps)
	}
}

// claimRangesOf claims m's ranges one by one, dropping those that overlap
// a range claimed before.
func claimRangesOf(m *member, opts Options, cs *claims, ps *problems) {
	seg := m.seg
	pods := m.PodCIDRs[:0] // m's own copy, filtered in place
	for _, p := range m.PodCIDRs {
		c, ok := cs.find(p, func(c claim) bool {
			return c.kind == claimEndpoint || (c.kind == claimInternal && c.prefix.Bits() > p.Bits())
		})
		if ok {
			ps.add(KindNode, m.Name, Warning, CodeOverlap,
				"pod CIDR %s overlaps %s, so it is not routed; give every node its own pod CIDR", p, c.owner())
			continue
		}
		warnPodInSubnet(m.Name, p, opts, ps)
		pods = append(pods, p)
		cs.add(claim{prefix: p, kind: claimPod, name: m.Name, seg: seg})
	}
	if len(pods) == 0 {
		pods = nil
	}
	m.PodCIDRs = pods
	for i, in := range [2]netip.Prefix{m.InternalIP, m.InternalIP6} {
		if !in.IsValid() {
			continue
		}
		h := hostPrefix(in.Addr())
		c, ok := cs.find(h, func(c claim) bool {
			return c.kind == claimEndpoint || (c.kind == claimPod && c.prefix.Bits() < h.Bits())
		})
		if ok {
			ps.add(KindNode, m.Name, Warning, CodeOverlap,
				"internal IP %s is also the %s, so it is not routed to this node from other locations (its pods still are); give the nodes distinct internal IPs",
				in.Addr(), c.owner())
			continue
		}
		warnInternalInSubnet(m.Name, in, opts, ps)
		if i == 0 {
			m.routed4 = true
		} else {
			m.routed6 = true
		}
		cs.add(claim{prefix: h, kind: claimInternal, name: m.Name, seg: seg})
	}
	for _, a := range m.endpointClaims() {
		if a.IsValid() {
			cs.add(claim{prefix: hostPrefix(a), kind: claimEndpoint, name: m.Name, seg: seg})
		}
	}
}

// endpointClaims returns the external IP and endpoint address of m when
// they are not internal IPs (invalid otherwise, and the endpoint address
// when it is the external IP): ranges that contain them would capture
// WireGuard's own UDP packets.
func (m *member) endpointClaims() [2]netip.Addr {
	out := [2]netip.Addr{m.ExternalIP}
	if m.Endpoint != nil {
		out[1] = m.Endpoint.Addr.Addr()
	}
	for i, a := range out {
		if a == m.InternalIP.Addr() || a == m.InternalIP6.Addr() || (i == 1 && a == m.ExternalIP) {
			out[i] = netip.Addr{}
		}
	}
	return out
}

func warnPodInSubnet(node string, p netip.Prefix, opts Options, ps *problems) {
	if p.Overlaps(opts.Subnet) {
		ps.add(KindNode, node, Warning, CodeSubnetOverlap,
			"pod CIDR %s overlaps the WireGuard subnet %s; choose a --subnet that overlaps no pod CIDR or node network", p, opts.Subnet)
	}
}

func warnInternalInSubnet(node string, in netip.Prefix, opts Options, ps *problems) {
	if in.IsValid() && opts.Subnet.Contains(in.Addr()) {
		ps.add(KindNode, node, Warning, CodeSubnetOverlap,
			"internal IP %s is inside the WireGuard subnet %s; choose a --subnet that overlaps no pod CIDR or node network", in.Addr(), opts.Subnet)
	}
}

// assignLocationIPs gives the allowed location IPs of every location group
// to its segments. Nodes are visited in election order; in full and cross
// granularity a range goes to the first node of the location announcing
// it. A range overlapping anything else claimed (pod CIDRs, WireGuard IPs,
// peers, service CIDRs, other locations' ranges, another node's internal
// IP or endpoint) is dropped with a Warning; containing internal IPs is
// allowed, so a location may route its whole LAN.
func (t *Topology) assignLocationIPs(nodes *nodeArray, cs *claims, ps *problems) {
	n := 0
	for i := range t.Segments {
		for _, m := range t.Segments[i].members {
			n += len(m.AllowedLocationIPs)
		}
	}
	if n == 0 {
		return
	}
	arena := newPrefixArena(n) // the segments' AllowedLocationIPs
	for i := range t.Segments {
		s := &t.Segments[i]
		k := 0
		for _, m := range s.members {
			k += len(m.AllowedLocationIPs)
		}
		s.AllowedLocationIPs = arena.take(k)
	}
	var seen map[netip.Prefix]bool
	var with []*member // the nodes of a group with allowed location IPs
	for _, g := range t.groups {
		clear(seen)
		with = with[:0]
		for _, m := range g.members {
			if len(m.AllowedLocationIPs) > 0 {
				with = append(with, m)
			}
		}
		if len(with) == 0 {
			continue
		}
		if seen == nil {
			seen = make(map[netip.Prefix]bool)
		}
		slices.SortFunc(with, electionCompare(anyReady(g.members)))
		for _, m := range with {
			s := &t.Segments[m.seg]
			// The kept ranges, once one was dropped: m's own copy (see
			// nodeArray.own) is then filtered in place.
			kept, dropped := 0, false
			keep := func(p netip.Prefix) {
				if dropped {
					m.AllowedLocationIPs[kept] = p
				}
				kept++
			}
			for _, p := range m.AllowedLocationIPs {
				if seen[p] {
					keep(p)
					continue
				}
				c, ok := cs.find(p, func(c claim) bool {
					if c.kind == claimInternal {
						return c.seg == int32(m.seg) || c.prefix.Bits() > p.Bits()
					}
					return c.kind == claimLocation && c.seg == int32(m.seg)
				})
				if ok {
					ps.add(KindNode, m.Name, Warning, CodeOverlap,
						"allowed location IP %s overlaps %s, so it is not routed to location %q; remove it from kilo.squat.ai/allowed-location-ips or fix the overlap",
						p, c.owner(), m.location(t.opts.Granularity))
					if !dropped {
						nodes.own()
						dropped = true
					}
					continue
				}
				seen[p] = true
				keep(p)
				s.AllowedLocationIPs = append(s.AllowedLocationIPs, p)
				cs.add(claim{prefix: p, kind: claimLocation, name: m.location(t.opts.Granularity), seg: m.seg})
			}
			if dropped {
				m.AllowedLocationIPs = m.AllowedLocationIPs[:kept:kept]
				if kept == 0 {
					m.AllowedLocationIPs = nil
				}
			}
		}
	}
}
