package topology

import (
	"net/netip"
	"slices"
)

// claimNodeRanges claims the pod CIDRs, internal IPs and public endpoints
// of members in name order. A pod CIDR that overlaps one claimed before, or
// an internal IP that another node already uses, is dropped with a Warning:
// WireGuard cannot route one range to two peers.
func claimNodeRanges(members []*member, opts Options, cs *claims, ps *problems) {
	for _, m := range members {
		seg := segmentKey(m, opts.Granularity)
		if len(m.PodCIDRs) == 0 {
			ps.add(KindNode, m.Name, Warning, CodeNoPodCIDR,
				"the node has no pod CIDR, so nothing is routed to its pods; set spec.podCIDRs on the Node (kube-controller-manager --allocate-node-cidrs does it)")
		}
		var pods []netip.Prefix
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
			cs.add(claim{prefix: p, kind: claimPod, name: m.Name, segment: seg})
		}
		m.PodCIDRs = pods
		for _, in := range []netip.Prefix{m.in4, m.in6} {
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
			cs.add(claim{prefix: h, kind: claimInternal, name: m.Name, segment: seg})
		}
		for _, a := range publicAddrs(m) {
			cs.add(claim{prefix: hostPrefix(a), kind: claimEndpoint, name: m.Name, segment: seg})
		}
	}
}

// publicAddrs returns the node's external IP and endpoint address, when
// they are not its internal IPs: ranges that contain them would capture
// WireGuard's own UDP packets.
func publicAddrs(m *member) []netip.Addr {
	var out []netip.Addr
	for _, a := range []netip.Addr{m.ExternalIP, m.Endpoint.Addr.Addr()} {
		if a.IsValid() && a != m.in4.Addr() && a != m.in6.Addr() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
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
	segIdx := make(map[string]int, len(t.Segments))
	for i, s := range t.Segments {
		for _, n := range s.Nodes {
			segIdx[n.Name] = i
		}
	}
	for _, group := range keys {
		seen := make(map[netip.Prefix]bool)
		for _, name := range t.locations[group] {
			m := t.members[name]
			s := &t.Segments[segIdx[name]]
			var kept []netip.Prefix
			for _, p := range m.AllowedLocationIPs {
				if seen[p] {
					kept = append(kept, p)
					continue
				}
				c, ok := cs.find(p, func(c claim) bool {
					if c.kind == claimInternal {
						return c.segment == s.key || c.prefix.Bits() > p.Bits()
					}
					return c.kind == claimLocation && c.segment == s.key
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
				cs.add(claim{prefix: p, kind: claimLocation, name: m.location, segment: s.key})
			}
			m.AllowedLocationIPs = kept
		}
	}
}
