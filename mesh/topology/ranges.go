package topology

import (
	"net/netip"
	"slices"
)

// nodeClaims returns how many claims claimNodeRanges and assignLocationIPs
// make at most.
func nodeClaims(members []*member) int {
	n := 0
	for _, m := range members {
		n += len(m.PodCIDRs) + len(m.AllowedLocationIPs) + 4 // internal IPs, external IP, endpoint
		if !m.in4.IsValid() {
			n--
		}
		if !m.in6.IsValid() {
			n--
		}
		if !m.ExternalIP.IsValid() {
			n--
		}
	}
	return n
}

// claimNodeRanges claims the pod CIDRs, internal IPs and public endpoints
// of members in name order. A pod CIDR that overlaps one claimed before, or
// an internal IP that another node already uses, is dropped with a Warning:
// WireGuard cannot route one range to two peers.
func claimNodeRanges(members []*member, opts Options, cs *claims, ps *problems) {
	for _, m := range members {
		seg := int32(m.seg)
		if len(m.PodCIDRs) == 0 {
			ps.add(KindNode, m.Name, Warning, CodeNoPodCIDR,
				"the node has no pod CIDR, so nothing is routed to its pods; set spec.podCIDRs on the Node (kube-controller-manager --allocate-node-cidrs does it)")
		}
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
			if p.Overlaps(opts.Subnet) {
				ps.add(KindNode, m.Name, Warning, CodeSubnetOverlap,
					"pod CIDR %s overlaps the WireGuard subnet %s; choose a --subnet that overlaps no pod CIDR or node network", p, opts.Subnet)
			}
			pods = append(pods, p)
			m.allowed = append(m.allowed, p)
			cs.add(claim{prefix: p, kind: claimPod, name: m.Name, seg: seg})
		}
		if len(pods) == 0 {
			pods = nil
		}
		m.PodCIDRs = pods
		for _, in := range [2]netip.Prefix{m.in4, m.in6} {
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
			if opts.Subnet.Contains(in.Addr()) {
				ps.add(KindNode, m.Name, Warning, CodeSubnetOverlap,
					"internal IP %s is inside the WireGuard subnet %s; choose a --subnet that overlaps no pod CIDR or node network", in.Addr(), opts.Subnet)
			}
			m.allowed = append(m.allowed, h)
			cs.add(claim{prefix: h, kind: claimInternal, name: m.Name, seg: seg})
		}
		// The external IP and endpoint address, when they are not internal
		// IPs: ranges that contain them would capture WireGuard's own UDP
		// packets.
		for i, a := range [2]netip.Addr{m.ExternalIP, m.Endpoint.Addr.Addr()} {
			if a.IsValid() && a != m.in4.Addr() && a != m.in6.Addr() && (i == 0 || a != m.ExternalIP) {
				cs.add(claim{prefix: hostPrefix(a), kind: claimEndpoint, name: m.Name, seg: seg})
			}
		}
	}
}

// assignLocationIPs gives the allowed location IPs of every location group
// to its segments. Nodes are visited in election order; in full and cross
// granularity a range goes to the first node of the location announcing
// it. A range overlapping anything else claimed (pod CIDRs, WireGuard IPs,
// peers, service CIDRs, other locations' ranges, another node's internal
// IP or endpoint) is dropped with a Warning; containing internal IPs is
// allowed, so a location may route its whole LAN.
func (t *Topology) assignLocationIPs(cs *claims, ps *problems) {
	keys := make([]string, 0, len(t.locations))
	for k := range t.locations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var seen map[netip.Prefix]bool
	for _, group := range keys {
		clear(seen)
		for _, name := range t.locations[group] {
			m := t.members[name]
			if len(m.AllowedLocationIPs) == 0 {
				continue
			}
			if seen == nil {
				seen = make(map[netip.Prefix]bool)
			}
			s := &t.Segments[m.seg]
			kept := m.AllowedLocationIPs[:0] // m's own copy, filtered in place
			for _, p := range m.AllowedLocationIPs {
				if seen[p] {
					kept = append(kept, p)
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
						p, c.owner(), m.location)
					continue
				}
				seen[p] = true
				kept = append(kept, p)
				s.AllowedLocationIPs = append(s.AllowedLocationIPs, p)
				cs.add(claim{prefix: p, kind: claimLocation, name: m.location, seg: int32(m.seg)})
			}
			if len(kept) == 0 {
				kept = nil
			}
			m.AllowedLocationIPs = kept
		}
	}
}
