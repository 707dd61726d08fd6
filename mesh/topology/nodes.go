package topology

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// maxKeepalive is the largest persistent keepalive WireGuard accepts.
const maxKeepalive = 65535 * time.Second

// member is an accepted node with what New derived from it.
type member struct {
	// Node is the node, normalized, in the array of every accepted node
	// (by name) that the segments' Nodes share where they can. Its
	// InternalIP and InternalIP6 are the internal IPs by family (either
	// may be invalid).
	*Node
	// idx is the index of Node in that array.
	idx int32
	// seg is the index of the node's segment in Topology.Segments.
	seg int32
	// public reports whether other locations can reach the node without
	// NAT traversal: an external IP, a DNS endpoint or a forced endpoint.
	public bool
	// routed4 and routed6 report whether the internal IPs are routed to
	// the node's segment: no other node claimed them first.
	routed4, routed6 bool
	// ends says which of endpointClaims are valid (bit i for element i),
	// once claimNodeRanges computed it.
	ends uint8
	// gid is the index of the node's location group in Topology.groups.
	gid int32
	// group is the node's location group: its location, or the node
	// alone when it has no location or no internal IP.
	group segKey
}

// internal returns the node's internal IP of the family of a.
func (m *member) internal(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return m.InternalIP
	}
	return m.InternalIP6
}

// segment returns the key of the node's segment: its group in
// LocationGranularity, the node alone otherwise.
func (m *member) segment(g Granularity) segKey {
	if g == LocationGranularity {
		return m.group
	}
	return segKey{name: m.Name, node: true}
}

// location returns the location shown to users: the node's location
// group, or for a node alone its location in FullGranularity (where every
// node is alone) and its name otherwise.
func (m *member) location(g Granularity) string {
	switch {
	case !m.group.node:
		return m.group.name
	case g == FullGranularity && m.Location != "":
		return m.Location
	}
	return m.Name
}

// hasInternal reports whether the node has an internal IP.
func (m *member) hasInternal() bool { return m.InternalIP.IsValid() || m.InternalIP6.IsValid() }

// appendAllowed appends the ranges of m routed to its segment: its pod
// CIDRs and internal IPs that no other node claimed first.
func (m *member) appendAllowed(dst []netip.Prefix) []netip.Prefix {
	dst = append(dst, m.PodCIDRs...)
	if m.routed4 {
		dst = append(dst, hostPrefix(m.InternalIP.Addr()))
	}
	if m.routed6 {
		dst = append(dst, hostPrefix(m.InternalIP6.Addr()))
	}
	return dst
}

// segKey identifies a location group or a segment: a location, or a node
// alone. As strings ("location:NAME", "node:NAME", see String) they order
// by kind, locations first, then name.
type segKey struct {
	name string
	node bool
}

// String returns the key as the allocator hashes it: "location:NAME" or
// "node:NAME".
func (k segKey) String() string {
	if k.node {
		return nodeKey(k.name)
	}
	return locationKey(k.name)
}

// compare orders keys as their strings.
func (k segKey) compare(o segKey) int {
	return cmp.Or(boolFirst(!k.node, !o.node), cmp.Compare(k.name, o.name))
}

func locationKey(l string) string { return "location:" + l }

func nodeKey(n string) string { return "node:" + n }

// nodeArray is the array of the accepted nodes' Nodes, which the segments'
// Nodes share where they can: the caller's own nodes when they come in
// name order and New has nothing to change in any of them (inPlace; see
// normal), else New's normalized copies, by name.
type nodeArray struct {
	nodes   []Node
	inPlace bool
	members []*member // the accepted nodes
}

// own gives New copies of the Nodes, with their own pod CIDRs, allowed
// location IPs and endpoints, before it drops a range of one of them:
// New never writes to the caller's nodes.
func (a *nodeArray) own() {
	if !a.inPlace {
		return
	}
	nodes := slices.Clone(a.nodes)
	endpoints := make([]Endpoint, len(a.members))
	for i, m := range a.members {
		nd := &nodes[m.idx]
		nd.PodCIDRs = slices.Clone(nd.PodCIDRs)
		nd.AllowedLocationIPs = slices.Clone(nd.AllowedLocationIPs)
		if nd.Endpoint != nil {
			endpoints[i] = *nd.Endpoint
			nd.Endpoint = &endpoints[i]
		}
		m.Node = nd
	}
	a.nodes, a.inPlace = nodes, false
}

// acceptNodes validates and normalizes nodes, reporting problems, and returns
// the accepted ones sorted by name, and the array of their Nodes.
func acceptNodes(nodes []Node, holders keyHolders, opts Options, ps *problems, sc *scratch) ([]*member, nodeArray) {
	sorted, shared, inOrder := byName(nodes, sc)
	// Normalized already, the nodes need no copy: copying them was the
	// largest share of a small cluster's work and memory.
	inPlace := inOrder
	for i := 0; i < len(sorted) && inPlace; i++ {
		inPlace = normal(sorted[i])
	}
	// The members and their Nodes are allocated at once; an excluded
	// node's slot is reused.
	slab := make([]member, 0, len(sorted))
	var accepted []Node
	var arena prefixArena    // each member's pod CIDRs and allowed location IPs
	var endpoints []Endpoint // what each copy's Endpoint points to, by index in accepted
	if inPlace {
		accepted = nodes
	} else {
		accepted = make([]Node, 0, len(sorted))
		endpoints = make([]Endpoint, len(sorted))
		n := 0
		for _, nd := range sorted {
			n += len(nd.PodCIDRs) + len(nd.AllowedLocationIPs)
		}
		arena = newPrefixArena(n)
	}
	out := make([]*member, 0, len(sorted))
	full := opts.Granularity == FullGranularity
	for i, n := range sorted {
		named := 1
		if shared {
			named = sameName(sorted, i)
		}
		switch {
		case n.Name == "":
			ps.add(KindNode, "", Excluded, CodeNoName, "a node has an empty name; it is ignored")
			continue
		case named > 1:
			ps.add(KindNode, n.Name, Excluded, CodeDuplicateName,
				"%d nodes are named %q; all of them are left out until the names are unique", named, n.Name)
			continue
		case n.Key == (wgconf.Key{}):
			ps.add(KindNode, n.Name, Excluded, CodeNoKey,
				"the node has no WireGuard public key (annotation kilo.squat.ai/key): the kg agent has not started on it yet; start kg on the node and it will publish its key")
			continue
		}
		if others, ok := holders.nodeClash(n.Key, KindNode, n.Name); ok {
			ps.add(KindNode, n.Name, Excluded, CodeDuplicateKey,
				"the node's WireGuard public key is also published by %s; a copied key must not evict its owner, so all of them are left out until each has its own: delete the private key file (kg's --key-file) of the node that copied it and restart its kg", joinNames(others))
			continue
		}
		// Fresh slots are zero (make); a slot given back is cleared first.
		slab = slab[:len(slab)+1]
		m := &slab[len(slab)-1]
		if inPlace { // normal: an endpoint, nothing to change
			m.Node, m.idx = n, int32(i)
			m.public = reachable(n.ExternalIP, n.Endpoint, n.InternalIP, n.InternalIP6)
		} else {
			accepted = accepted[:len(accepted)+1]
			m.Node, m.idx = &accepted[len(accepted)-1], int32(len(accepted)-1)
			ep := &endpoints[m.idx]
			normalizeNode(m, n, &arena, ep)
			if !m.hasInternal() && m.Endpoint == nil {
				ps.add(KindNode, n.Name, Excluded, CodeNoAddress,
					"the node has no internal IP and no endpoint, so no other node can reach it; give the Node an InternalIP address or annotate it with kilo.squat.ai/force-endpoint=HOST:PORT")
				*m.Node, *m, *ep = Node{}, member{}, Endpoint{}
				slab, accepted = slab[:len(slab)-1], accepted[:len(accepted)-1]
				continue
			}
			m.fillEndpoint(opts.Port, ep)
		}
		alone := segKey{name: n.Name, node: true}
		switch {
		case n.Location == "":
			m.group = alone
			if !full {
				ps.add(KindNode, n.Name, Warning, CodeNoLocation,
					"the node has no location, so it forms a location of its own named after it; annotate it with kilo.squat.ai/location=NAME or label it with topology.kubernetes.io/region=NAME")
			}
		case !m.hasInternal():
			m.group = alone
			if !full {
				ps.add(KindNode, n.Name, Warning, CodeNoInternalIP,
					"the node has no internal IP, so it cannot reach the other nodes of location %q natively and forms a location of its own; give the Node an InternalIP address", n.Location)
			}
		default:
			m.group = segKey{name: n.Location}
		}
		out = append(out, m)
	}
	return out, nodeArray{nodes: accepted, inPlace: inPlace, members: out}
}

// normal reports whether n is as New would normalize it (normalizeNode,
// then fillEndpoint), so that New can use it as it is: canonical pod CIDRs
// and allowed location IPs (valid, masked, unmapped, sorted, no
// duplicates, nil when none), unmapped addresses, internal IPs by family,
// a keepalive in whole seconds within WireGuard's range, and an endpoint
// with its port. kg publishes its node's endpoint, so the nodes an agent
// reads usually are.
func normal(n *Node) bool {
	e := n.Endpoint
	switch {
	case e == nil || e.Port == 0 || e.DNS == "" && !e.Addr.Addr().IsValid():
		return false
	case e.Addr.Addr().IsValid() && (e.Addr.Port() != e.Port || !plainAddr(e.Addr.Addr())):
		return false
	case n.ExternalIP.IsValid() && !plainAddr(n.ExternalIP), n.WireGuardIP.IsValid() && n.WireGuardIP.Addr().Is4In6(),
		clampKeepalive(n.PersistentKeepalive) != n.PersistentKeepalive:
		return false
	}
	// internalIPs would keep them: an IPv4 address first, then an IPv6 one.
	in4, in6 := n.InternalIP, n.InternalIP6
	return (!in4.IsValid() || in4.Addr().Is4()) && (!in6.IsValid() || in6.Addr().Is6() && plainAddr(in6.Addr())) &&
		normalPrefixes(n.PodCIDRs) && normalPrefixes(n.AllowedLocationIPs)
}

// plainAddr reports whether unmapAddr would keep a, a valid address as it
// is: not IPv4-mapped, no zone.
func plainAddr(a netip.Addr) bool { return !a.Is4In6() && a.Zone() == "" }

// normalPrefixes reports whether ps is as normPrefixes would return it.
func normalPrefixes(ps []netip.Prefix) bool {
	if ps != nil && len(ps) == 0 {
		return false
	}
	for i, p := range ps {
		switch a := p.Addr(); {
		case !p.IsValid():
			return false
		case a.Is4(): // masked, as numbers
			if b := a.As4(); binary.BigEndian.Uint32(b[:])<<p.Bits() != 0 {
				return false
			}
		case !plainAddr(a) || p != p.Masked():
			return false
		}
		if i > 0 && compareMasked(ps[i-1], p) >= 0 {
			return false
		}
	}
	return true
}

// byName returns pointers to nodes sorted by name, stable by position,
// whether two of them share a name, and whether nodes were in name order
// already (then the pointers are in the order of nodes).
func byName(nodes []Node, sc *scratch) ([]*Node, bool, bool) {
	sorted := buffer(&sc.nodes, len(nodes))
	for i := range nodes {
		sorted[i] = &nodes[i]
	}
	inOrder, shared := true, false
	for i := 1; i < len(nodes) && inOrder; i++ {
		c := strings.Compare(nodes[i-1].Name, nodes[i].Name)
		inOrder, shared = c <= 0, shared || c == 0
	}
	if inOrder {
		return sorted, shared, true
	}
	// Sort names with indexes, stable by position: they sit together in
	// memory and swapping them needs no write barrier on pointers to Nodes.
	type named struct {
		name string
		i    int
	}
	order := make([]named, len(nodes))
	for i := range nodes {
		order[i] = named{nodes[i].Name, i}
	}
	slices.SortFunc(order, func(a, b named) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	shared = false
	for i, o := range order {
		sorted[i] = &nodes[o.i]
		shared = shared || (i > 0 && o.name == order[i-1].name)
	}
	return sorted, shared, false
}

// sameName returns how many of the nodes sorted by name are named like
// sorted[i].
func sameName(sorted []*Node, i int) int {
	lo, hi := i, i+1
	for lo > 0 && sorted[lo-1].Name == sorted[i].Name {
		lo--
	}
	for hi < len(sorted) && sorted[hi].Name == sorted[i].Name {
		hi++
	}
	return hi - lo
}

// normalizeNode sets m.Node to a copy of n with canonical prefixes and
// sane durations, and the rest of m, zero but for Node and idx, to what
// follows from it; its slices come from arena, its Endpoint is *ep.
func normalizeNode(m *member, n *Node, arena *prefixArena, ep *Endpoint) {
	// The copy is normalized on the stack and then stored at once: while
	// the garbage collector marks, each pointer written to the heap costs
	// a write barrier, and most fields of a Node hold one.
	nd := *n
	nd.PodCIDRs = normPrefixesTo(arena.take(len(n.PodCIDRs)), n.PodCIDRs)
	nd.AllowedLocationIPs = normPrefixesTo(arena.take(len(n.AllowedLocationIPs)), n.AllowedLocationIPs)
	nd.ExternalIP = unmapAddr(n.ExternalIP)
	nd.WireGuardIP = unmapPrefix(n.WireGuardIP)
	nd.PersistentKeepalive = clampKeepalive(n.PersistentKeepalive)
	nd.InternalIP, nd.InternalIP6 = internalIPs(n)
	nd.Endpoint = nil
	if e := n.Endpoint; e != nil && (e.DNS != "" || e.Addr.Addr().IsValid()) {
		*ep = *e
		ep.Addr = netip.AddrPortFrom(unmapAddr(e.Addr.Addr()), e.Addr.Port())
		nd.Endpoint = ep
	}
	m.public = reachable(nd.ExternalIP, nd.Endpoint, nd.InternalIP, nd.InternalIP6)
	*m.Node = nd
}

// internalIPs returns n's internal IPs by family, unmapped and without
// zone: the first IPv4 and the first IPv6 of InternalIP and InternalIP6.
func internalIPs(n *Node) (in4, in6 netip.Prefix) {
	for _, p := range [2]netip.Prefix{unmapPrefix(n.InternalIP), unmapPrefix(n.InternalIP6)} {
		if !p.IsValid() {
			continue
		}
		p = netip.PrefixFrom(p.Addr().WithZone(""), p.Bits())
		if p.Addr().Is4() && !in4.IsValid() {
			in4 = p
		} else if p.Addr().Is6() && !in6.IsValid() {
			in6 = p
		}
	}
	return in4, in6
}

// Public reports whether other locations reach n without NAT traversal, as
// New judges it when it elects leaders: n has an external IP, or an
// endpoint that is a DNS name or an address other than its internal IPs
// (a forced endpoint). The agents' location election ranks candidates by
// it, so that the leader it elects is the one New would.
func Public(n *Node) bool {
	in4, in6 := internalIPs(n)
	return reachable(unmapAddr(n.ExternalIP), n.Endpoint, in4, in6)
}

// reachable is Public's rule over normalized fields.
func reachable(ext netip.Addr, e *Endpoint, in4, in6 netip.Prefix) bool {
	if ext.IsValid() {
		return true
	}
	if e == nil {
		return false
	}
	a := unmapAddr(e.Addr.Addr())
	return e.DNS != "" || a.IsValid() && a != in4.Addr() && a != in6.Addr()
}

// fillEndpoint sets where other nodes reach m: its Endpoint with a port,
// else its external IP, else its internal IP (IPv4 first), with port. The
// Endpoint is *ep, m's own.
func (m *member) fillEndpoint(port uint16, ep *Endpoint) {
	if m.Endpoint != nil {
		e := m.Endpoint
		if e.Port == 0 {
			e.Port = e.Addr.Port()
		}
		if e.Port == 0 {
			e.Port = port
		}
		if e.Addr.Addr().IsValid() {
			e.Addr = netip.AddrPortFrom(e.Addr.Addr(), e.Port)
		}
		return
	}
	for _, a := range [3]netip.Addr{m.ExternalIP, m.InternalIP.Addr(), m.InternalIP6.Addr()} {
		if a.IsValid() {
			*ep = Endpoint{Addr: netip.AddrPortFrom(a, port), Port: port}
			m.Endpoint = ep
			return
		}
	}
}

func clampKeepalive(d time.Duration) time.Duration {
	switch {
	case d <= 0:
		return 0
	case d < time.Second:
		return time.Second
	case d > maxKeepalive:
		return maxKeepalive
	}
	return d.Truncate(time.Second)
}

// elect returns the node of ms that leads them: the first in election
// order.
func elect(ms []*member) *member {
	first, before := ms[0], electionCompare(anyReady(ms))
	for _, m := range ms[1:] {
		if before(m, first) < 0 {
			first = m
		}
	}
	return first
}

func anyReady(ms []*member) bool {
	return slices.ContainsFunc(ms, func(m *member) bool { return m.Ready })
}

// electionCompare orders nodes the way leaders are elected: ready nodes
// first (every node when none of the location is ready: anyReady is
// false), then those with the kilo.squat.ai/leader annotation, then those
// with a public endpoint, then the longest running, then by name.
func electionCompare(anyReady bool) func(a, b *member) int {
	return func(a, b *member) int {
		switch {
		case a.Ready != b.Ready && anyReady:
			return boolFirst(a.Ready, b.Ready)
		case a.Leader != b.Leader:
			return boolFirst(a.Leader, b.Leader)
		case a.public != b.public:
			return boolFirst(a.public, b.public)
		}
		if c := sinceFirst(a.Since, b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	}
}

// sinceFirst orders the earlier Since first and an unknown (zero) Since
// last, so that a node whose agent comes (back) does not take the lead from
// one that has been working.
func sinceFirst(a, b time.Time) int {
	switch {
	case a.IsZero() || b.IsZero():
		return boolFirst(!a.IsZero(), !b.IsZero())
	}
	return a.Compare(b)
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
