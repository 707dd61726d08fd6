package topology

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
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
		members:   make(map[string]*member),
		segOf:     make(map[string]int),
		peerIdx:   make(map[string]int),
		excluded:  make(map[string]string),
		locations: make(map[string][]string),
	}
	holders := holdersOf(nodes, peers)
	members := acceptNodes(nodes, holders, opts, &ps)
	cs := newClaims()
	claimNodeRanges(members, opts, cs, &ps)
	for _, s := range opts.ServiceCIDRs {
		cs.add(claim{prefix: s, kind: claimService})
	}
	t.buildSegments(members)
	alloc := newAllocator(opts.Subnet, cs)
	alloc.assignAnnounced(t.Segments)
	t.Peers = acceptPeers(peers, holders, opts, cs, &ps)
	t.assignLocationIPs(cs, &ps)
	alloc.assignHashed(t.Segments, &ps)
	t.finish()
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
		for _, m := range electionOrder(ms) {
			t.locations[key] = append(t.locations[key], m.Name)
		}
	}
	bySegment := make(map[string][]*member)
	for _, m := range members {
		key := segmentKey(m, t.opts.Granularity)
		bySegment[key] = append(bySegment[key], m)
	}
	for key, ms := range bySegment {
		s := Segment{
			Name:     strings.SplitN(key, ":", 2)[1],
			Location: ms[0].location,
			key:      key,
			group:    ms[0].group,
		}
		if t.opts.Granularity == FullGranularity {
			s.group = key // every node reaches every other through WireGuard
		}
		leader := electionOrder(ms)[0]
		for i, m := range ms { // ms is sorted by name: members are
			s.Nodes = append(s.Nodes, m.Node)
			if m == leader {
				s.Leader = i
				s.public = m.public
			}
		}
		t.Segments = append(t.Segments, s)
	}
	slices.SortFunc(t.Segments, func(a, b Segment) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.key, b.key))
	})
}

// finish fills the segments' nodes and allowed IPs and the lookup tables.
func (t *Topology) finish() {
	for i := range t.Segments {
		s := &t.Segments[i]
		ips := slices.Clone(s.AllowedLocationIPs)
		if s.WireGuardIP.IsValid() {
			ips = append(ips, hostPrefix(s.WireGuardIP.Addr()))
		}
		for j := range s.Nodes {
			m := t.members[s.Nodes[j].Name]
			s.Nodes[j] = m.Node
			ips = append(ips, m.allowed...)
			t.segOf[m.Name] = i
			if j == s.Leader && m.Endpoint != nil && m.Endpoint.Addr.Addr().IsValid() {
				t.endpoints = append(t.endpoints, m.Endpoint.Addr.Addr())
			}
		}
		s.AllowedIPs = normPrefixes(ips)
		s.AllowedLocationIPs = normPrefixes(s.AllowedLocationIPs)
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
