package topology

import (
	"cmp"
	"net/netip"
	"slices"
)

// New computes the mesh of nodes and peers. It fails only when opts are
// invalid (the error wraps ErrInvalidOptions); bad nodes and peers are
// reported in Topology.Problems and left out or trimmed, and the rest of the
// mesh is built without them. The result does not depend on the order of
// nodes and peers, and New never modifies them.
func New(nodes []Node, peers []Peer, opts Options) (*Topology, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var ps problems
	t := &Topology{
		opts:      opts,
		members:   make(map[string]*member, len(nodes)),
		peerIdx:   make(map[string]int),
		excluded:  make(map[string]string),
		locations: make(map[string][]string),
	}
	holders := holdersOf(nodes, peers)
	members, accepted := acceptNodes(nodes, holders, opts, &ps)
	t.buildSegments(members)
	// Room for the node ranges, services, WireGuard IPs, peers' ranges and
	// allowed location IPs.
	n := nodeClaims(members) + len(opts.ServiceCIDRs) + len(t.Segments)
	for _, p := range peers {
		n += len(p.AllowedIPs)
	}
	cs := newClaims()
	cs.grow(n)
	claimNodeRanges(members, opts, cs, &ps)
	for _, s := range opts.ServiceCIDRs {
		cs.add(claim{prefix: s, kind: claimService})
	}
	alloc := newAllocator(opts.Subnet, cs)
	alloc.assignAnnounced(t.Segments)
	t.Peers = acceptPeers(peers, holders, opts, cs, &ps)
	t.assignLocationIPs(cs, &ps)
	alloc.assignHashed(t.Segments, &ps)
	t.finish(accepted)
	t.Problems = ps.sorted()
	for _, p := range t.Problems {
		if p.Severity == Excluded {
			t.excluded[p.Kind+":"+p.Name] = p.Reason
		}
	}
	return t, nil
}

// buildSegments groups members into segments and elects their leaders.
func (t *Topology) buildSegments(members []*member) {
	groups := make(map[string][]*member)
	for _, m := range members {
		t.members[m.Name] = m
		groups[m.group] = append(groups[m.group], m)
	}
	for key, ms := range groups {
		names := make([]string, 0, len(ms))
		for _, m := range electionOrder(ms) {
			names = append(names, m.Name)
		}
		t.locations[key] = names
	}
	// Segments sorted by name then key, their nodes by name: runs of
	// bySegment.
	bySegment := slices.Clone(members)
	slices.SortFunc(bySegment, func(a, b *member) int {
		return cmp.Or(cmp.Compare(keyName(a.segment), keyName(b.segment)), cmp.Compare(a.segment, b.segment), cmp.Compare(a.Name, b.Name))
	})
	n := 0
	for i, m := range bySegment {
		if i == 0 || m.segment != bySegment[i-1].segment {
			n++
		}
	}
	if n > 0 {
		t.Segments = make([]Segment, 0, n)
	}
	for lo := 0; lo < len(bySegment); {
		hi := lo + 1
		for hi < len(bySegment) && bySegment[hi].segment == bySegment[lo].segment {
			hi++
		}
		ms := bySegment[lo:hi:hi]
		lo = hi
		s := Segment{
			Name:     keyName(ms[0].segment),
			Location: ms[0].location,
			key:      ms[0].segment,
			group:    ms[0].group,
			members:  ms,
		}
		if t.opts.Granularity == FullGranularity {
			s.group = s.key // every node reaches every other through WireGuard
		}
		leader := ms[0]
		if len(ms) > 1 {
			leader = electionOrder(ms)[0]
		}
		s.Leader = slices.Index(ms, leader)
		s.public = leader.public
		for _, m := range ms {
			m.seg = len(t.Segments)
		}
		t.Segments = append(t.Segments, s)
	}
}

// finish fills the segments' nodes and allowed IPs and the lookup tables.
// A segment whose nodes are adjacent in accepted (every member's Node, by
// name) takes its Nodes from there; the others get copies.
func (t *Topology) finish(accepted []Node) {
	size := func(s *Segment) int {
		n := len(s.AllowedLocationIPs) + 1
		for _, m := range s.members {
			n += len(m.allowed)
		}
		return n
	}
	total := 0
	for i := range t.Segments {
		total += size(&t.Segments[i])
	}
	arena := newPrefixArena(total)
	for i := range t.Segments {
		s := &t.Segments[i]
		ips := arena.take(size(s))
		ips = append(ips, s.AllowedLocationIPs...)
		if s.WireGuardIP.IsValid() {
			ips = append(ips, hostPrefix(s.WireGuardIP.Addr()))
		}
		first, adjacent := s.members[0].idx, true
		for j, m := range s.members {
			adjacent = adjacent && m.idx == first+j
			ips = append(ips, m.allowed...)
			if j == s.Leader && m.Endpoint != nil && m.Endpoint.Addr.Addr().IsValid() {
				t.endpoints = append(t.endpoints, m.Endpoint.Addr.Addr())
			}
		}
		if end := first + len(s.members); adjacent {
			s.Nodes = accepted[first:end:end]
		} else {
			s.Nodes = make([]Node, len(s.members))
			for j, m := range s.members {
				s.Nodes[j] = *m.Node
			}
		}
		s.AllowedIPs = sortPrefixes(ips)
		s.AllowedLocationIPs = sortPrefixes(s.AllowedLocationIPs) // normalized, s's own
	}
	for i, p := range t.Peers {
		t.peerIdx[p.Name] = i
		if p.Endpoint != nil && p.Endpoint.Addr.Addr().IsValid() {
			t.endpoints = append(t.endpoints, p.Endpoint.Addr.Addr())
		}
	}
	slices.SortFunc(t.endpoints, netip.Addr.Compare)
	t.endpoints = slices.Compact(t.endpoints)
}
