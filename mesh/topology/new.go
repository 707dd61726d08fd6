package topology

import (
	"net/netip"
	"slices"
	"strings"
)

// New computes the mesh of nodes and peers. It fails only when opts are
// invalid (the error wraps ErrInvalidOptions); bad nodes and peers are
// reported in Topology.Problems and left out or trimmed, and the rest of the
// mesh is built without them. The result does not depend on the order of
// nodes and peers, and New never modifies them. When nodes come in name
// order and need no normalizing (see Segment.Nodes), as an agent's do once
// every kg published its endpoint, the Topology uses them in place instead
// of copies: the caller must then leave them unchanged while it uses the
// Topology.
func New(nodes []Node, peers []Peer, opts Options) (*Topology, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var ps problems
	t := &Topology{opts: opts}
	sc := getScratch()
	defer sc.release()
	holders := holdersOf(nodes, peers, sc)
	members, accepted := acceptNodes(nodes, holders, opts, &ps, sc)
	t.buildSegments(members, sc)
	cs := sc.newClaims()
	claimNodeRanges(members, &accepted, opts, cs, &ps, &t.ranges)
	// Room for the services, peers' ranges and allowed location IPs.
	n := len(opts.ServiceCIDRs)
	for _, p := range peers {
		n += len(p.AllowedIPs)
	}
	for _, m := range members {
		n += len(m.AllowedLocationIPs)
	}
	cs.grow(n)
	for _, s := range opts.ServiceCIDRs {
		cs.add(claim{prefix: s, kind: claimService})
	}
	alloc := newAllocator(opts.Subnet, cs)
	alloc.assignAnnounced(t.Segments)
	t.Peers = acceptPeers(peers, holders, opts, cs, &ps, sc)
	t.assignLocationIPs(&accepted, cs, &ps)
	alloc.assignHashed(t.Segments, &ps, sc)
	t.nodeRanges = cs.base
	t.finish(accepted.nodes, cs.base, sc)
	t.Problems = ps.sorted()
	for _, p := range t.Problems {
		if p.Severity == Excluded {
			if t.excluded == nil {
				t.excluded = make(map[string]string)
			}
			t.excluded[p.Kind+":"+p.Name] = p.Reason
		}
	}
	return t, nil
}

// buildSegments keeps members, sorted by name, for lookups, groups them
// into location groups and segments, and elects their leaders.
func (t *Topology) buildSegments(members []*member, sc *scratch) {
	t.members = members
	t.groups = groupMembers(members, sc)
	for i, g := range t.groups {
		for _, m := range g.members {
			m.gid = int32(i)
		}
	}
	if t.opts.Granularity != LocationGranularity {
		// A segment per node, by name as members.
		t.Segments = make([]Segment, 0, len(members))
		for i, m := range members {
			t.addSegment(members[i:i+1:i+1], m)
		}
		return
	}
	// A segment per group, by name then key (a location before a node
	// of the same name). The groups are sorted by key, locations first:
	// when all of them are locations, as usual, that is the same order.
	groups := t.groups
	if slices.ContainsFunc(groups, func(g group) bool { return g.key().node }) {
		groups = slices.Clone(t.groups)
		slices.SortFunc(groups, func(a, b group) int {
			x, y := a.key(), b.key()
			if x.name != y.name {
				return strings.Compare(x.name, y.name)
			}
			return boolFirst(!x.node, !y.node)
		})
	}
	if len(groups) > 0 {
		t.Segments = make([]Segment, 0, len(groups))
	}
	for _, g := range groups {
		t.addSegment(g.members, g.leader)
	}
}

// keyIndex numbers group keys in the order they come: a scan of them while
// they are few, a map once they are many.
type keyIndex struct {
	keys []segKey
	ids  map[segKey]int32
}

// id returns the number of k, the next one when k is new.
func (x *keyIndex) id(k segKey) int32 {
	if x.ids != nil {
		if i, ok := x.ids[k]; ok {
			return i
		}
	} else if i := slices.Index(x.keys, k); i >= 0 {
		return int32(i)
	}
	i := int32(len(x.keys))
	x.keys = append(x.keys, k)
	switch {
	case x.ids != nil:
		x.ids[k] = i
	case len(x.keys) > 16:
		x.ids = make(map[segKey]int32, 2*len(x.keys))
		for j, k := range x.keys {
			x.ids[k] = int32(j)
		}
	}
	return i
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// groupMembers returns the location groups of members, sorted by name:
// sorted by key, with their members by name in one shared array, and
// their leaders.
func groupMembers(members []*member, sc *scratch) []group {
	if g, ok := groupRuns(members); ok {
		return g
	}
	return groupIndexed(members, sc)
}

// groupIndexed is groupMembers for members in any order.
func groupIndexed(members []*member, sc *scratch) []group {
	index := keyIndex{keys: sc.keys[:0]}
	ids := buffer(&sc.ids, len(members)) // the group of each member
	sizes := sc.ints[:0]
	defer func() { sc.keys, sc.ints = index.keys, sizes }() // grown, for the next call
	for j, m := range members {
		if j > 0 && m.group == members[j-1].group {
			ids[j] = ids[j-1]
		} else {
			ids[j] = index.id(m.group)
		}
		if int(ids[j]) == len(sizes) {
			sizes = append(sizes, 0)
		}
		sizes[ids[j]]++
	}
	groups := make([]group, len(sizes))
	all := make([]*member, len(members))
	off := 0
	for i, n := range sizes {
		groups[i].members = all[off : off : off+n]
		off += n
	}
	for j, m := range members {
		g := &groups[ids[j]]
		g.members = append(g.members, m)
	}
	for i := range groups {
		groups[i].leader = elect(groups[i].members)
	}
	slices.SortFunc(groups, func(a, b group) int { return a.key().compare(b.key()) })
	return groups
}

// groupRuns returns the location groups of members when their keys never
// decrease along members (the groups are then runs of members, in key
// order), as they do when node names follow location names: each group
// is a run of members itself, and no key needs an index or a sort.
func groupRuns(members []*member) ([]group, bool) {
	n := min(len(members), 1)
	for j := 1; j < len(members); j++ {
		switch c := members[j-1].group.compare(members[j].group); {
		case c > 0:
			return nil, false
		case c < 0:
			n++
		}
	}
	groups := make([]group, 0, n)
	for lo := 0; lo < len(members); {
		hi := lo + 1
		for hi < len(members) && members[hi].group == members[lo].group {
			hi++
		}
		ms := members[lo:hi:hi]
		groups = append(groups, group{members: ms, leader: elect(ms)})
		lo = hi
	}
	return groups, true
}

// addSegment appends the segment of ms, sorted by name, led by leader.
func (t *Topology) addSegment(ms []*member, leader *member) {
	s := Segment{
		Name:     ms[0].segment(t.opts.Granularity).name,
		Location: ms[0].location(t.opts.Granularity),
		key:      ms[0].segment(t.opts.Granularity),
		group:    ms[0].gid,
		members:  ms,
		Leader:   slices.Index(ms, leader),
		public:   leader.public,
	}
	if t.opts.Granularity == FullGranularity {
		// Every node reaches every other through WireGuard: each segment
		// is a group of its own, numbered apart from the location groups.
		s.group = int32(len(t.groups) + len(t.Segments))
	}
	for _, m := range ms {
		m.seg = int32(len(t.Segments))
	}
	t.Segments = append(t.Segments, s)
}

// finish fills the segments' nodes and allowed IPs and the lookup tables.
// A segment whose nodes are adjacent in accepted (every member's Node, by
// name) takes its Nodes from there; the others get copies. When the nodes'
// ranges are base, none overlapping another, they come sorted from there.
func (t *Topology) finish(accepted []Node, base *disjoint, sc *scratch) {
	size := func(s *Segment) int {
		n := len(s.AllowedLocationIPs) + 1
		for _, m := range s.members {
			n += len(m.PodCIDRs) + b2i(m.routed4) + b2i(m.routed6) // see appendAllowed
		}
		return n
	}
	total := 0
	for i := range t.Segments {
		total += size(&t.Segments[i])
	}
	arena := newPrefixArena(total)
	endpoints := buffer(&sc.addrs, len(t.Segments)+len(t.Peers))[:0]
	for i := range t.Segments {
		s := &t.Segments[i]
		s.AllowedLocationIPs = sortPrefixes(s.AllowedLocationIPs) // normalized, s's own
		s.AllowedIPs = arena.take(size(s))
		if base != nil {
			// Room in front for the WireGuard IP and the allowed location
			// IPs, merged in below.
			s.AllowedIPs = s.AllowedIPs[:len(s.AllowedLocationIPs)+b2i(s.WireGuardIP.IsValid())]
		}
	}
	if base != nil {
		for p, r := range base.ranges() {
			if r.kind == claimPod || r.kind == claimInternal {
				s := &t.Segments[r.seg]
				s.AllowedIPs = append(s.AllowedIPs, p)
			}
		}
	}
	var extra []netip.Prefix
	for i := range t.Segments {
		s := &t.Segments[i]
		extra = append(extra[:0], s.AllowedLocationIPs...)
		if s.WireGuardIP.IsValid() {
			w := hostPrefix(s.WireGuardIP.Addr())
			j, _ := slices.BinarySearchFunc(extra, w, compareMasked)
			extra = slices.Insert(extra, j, w)
		}
		if base != nil {
			s.AllowedIPs = mergeFront(s.AllowedIPs, extra)
		} else {
			ips := append(s.AllowedIPs, extra...)
			for _, m := range s.members {
				ips = m.appendAllowed(ips)
			}
			s.AllowedIPs = sortPrefixes(ips)
		}
		first, adjacent := int(s.members[0].idx), true
		for j, m := range s.members {
			adjacent = adjacent && int(m.idx) == first+j
			if j == s.Leader && m.Endpoint != nil && m.Endpoint.Addr.Addr().IsValid() {
				endpoints = append(endpoints, m.Endpoint.Addr.Addr())
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
	}
	for _, p := range t.Peers {
		if p.Endpoint != nil && p.Endpoint.Addr.Addr().IsValid() {
			endpoints = append(endpoints, p.Endpoint.Addr.Addr())
		}
	}
	t.endpoints = newAddrSet(endpoints, t.endpoints4[:])
}
