package topology

import (
	"cmp"
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
	// (by name) that the segments' Nodes share where they can.
	*Node
	// idx is the index of Node in that array.
	idx int
	// in4 and in6 are the internal IPs by family (either may be invalid).
	in4, in6 netip.Prefix
	// public reports whether other locations can reach the node without
	// NAT traversal: an external IP, a DNS endpoint or a forced endpoint.
	public bool
	// group is the key of the node's location group: "location:NAME", or
	// "node:NAME" for a node without location or internal IP.
	group string
	// segment is the key of the node's segment: its group in
	// LocationGranularity, "node:NAME" otherwise.
	segment string
	// seg is the index of the node's segment in Topology.Segments.
	seg int
	// location is the location shown to users: the location, or the node
	// name for a node that forms a location of its own.
	location string
	// allowed are the node's ranges routed to its segment: its pod CIDRs
	// and internal IPs that no other node claimed first.
	allowed []netip.Prefix
	// endpoint holds what Node.Endpoint points to, so that members
	// allocated together need no allocation of their own for it.
	endpoint Endpoint
}

// internal returns the node's internal IP of the family of a.
func (m *member) internal(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return m.in4
	}
	return m.in6
}

func locationKey(l string) string { return "location:" + l }

func nodeKey(n string) string { return "node:" + n }

// keyName returns the name part of a segment or group key ("location:NAME",
// "node:NAME").
func keyName(key string) string { return key[strings.IndexByte(key, ':')+1:] }

// acceptNodes validates and normalizes nodes, reporting problems, and returns
// the accepted ones sorted by name, and the array of their Nodes.
func acceptNodes(nodes []Node, holders keyHolders, opts Options, ps *problems) ([]*member, []Node) {
	// Sort indexes, stable by position: swapping them needs no write barrier.
	order := make([]int32, len(nodes))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Or(cmp.Compare(nodes[a].Name, nodes[b].Name), cmp.Compare(a, b)) })
	sorted := make([]*Node, len(nodes))
	for i, j := range order {
		sorted[i] = &nodes[j]
	}
	// The members are allocated at once; an excluded node's slot is reused.
	slab := make([]member, 0, len(sorted))
	accepted := make([]Node, 0, len(sorted))
	n := 0
	for _, nd := range sorted {
		n += 2*len(nd.PodCIDRs) + len(nd.AllowedLocationIPs) + 2
	}
	arena := newPrefixArena(n) // each member's pod CIDRs, allowed location IPs and allowed
	out := make([]*member, 0, len(sorted))
	locationKeys := make(map[string]string) // one key string per location
	full := opts.Granularity == FullGranularity
	for i, n := range sorted {
		switch named := sameName(sorted, i); {
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
		slab, accepted = slab[:len(slab)+1], accepted[:len(accepted)+1]
		m := &slab[len(slab)-1]
		m.Node, m.idx = &accepted[len(accepted)-1], len(accepted)-1
		normalizeNode(m, n, arena)
		if !m.in4.IsValid() && !m.in6.IsValid() && m.Endpoint == nil {
			ps.add(KindNode, n.Name, Excluded, CodeNoAddress,
				"the node has no internal IP and no endpoint, so no other node can reach it; give the Node an InternalIP address or annotate it with kilo.squat.ai/force-endpoint=HOST:PORT")
			*m.Node, *m = Node{}, member{}
			slab, accepted = slab[:len(slab)-1], accepted[:len(accepted)-1]
			continue
		}
		m.fillEndpoint(opts.Port)
		m.location = n.Name
		switch {
		case n.Location == "":
			m.group = nodeKey(n.Name)
			if !full {
				ps.add(KindNode, n.Name, Warning, CodeNoLocation,
					"the node has no location, so it forms a location of its own named after it; annotate it with kilo.squat.ai/location=NAME or label it with topology.kubernetes.io/region=NAME")
			}
		case !m.in4.IsValid() && !m.in6.IsValid():
			m.group = nodeKey(n.Name)
			if full {
				m.location = n.Location
			} else {
				ps.add(KindNode, n.Name, Warning, CodeNoInternalIP,
					"the node has no internal IP, so it cannot reach the other nodes of location %q natively and forms a location of its own; give the Node an InternalIP address", n.Location)
			}
		default:
			key, ok := locationKeys[n.Location]
			if !ok {
				key = locationKey(n.Location)
				locationKeys[n.Location] = key
			}
			m.group, m.location = key, n.Location
		}
		m.segment = m.group
		if opts.Granularity != LocationGranularity && !strings.HasPrefix(m.group, "node:") {
			m.segment = nodeKey(n.Name) // else the group already is
		}
		out = append(out, m)
	}
	return out, accepted
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
// follows from it; its slices come from arena.
func normalizeNode(m *member, n *Node, arena *prefixArena) {
	*m.Node = *n
	m.PodCIDRs = normPrefixesTo(arena.take(len(n.PodCIDRs)), n.PodCIDRs)
	m.AllowedLocationIPs = normPrefixesTo(arena.take(len(n.AllowedLocationIPs)), n.AllowedLocationIPs)
	m.allowed = arena.take(len(n.PodCIDRs) + 2)
	m.ExternalIP = unmapAddr(n.ExternalIP)
	m.WireGuardIP = unmapPrefix(n.WireGuardIP)
	m.PersistentKeepalive = clampKeepalive(n.PersistentKeepalive)
	for _, p := range [2]netip.Prefix{unmapPrefix(n.InternalIP), unmapPrefix(n.InternalIP6)} {
		if !p.IsValid() {
			continue
		}
		p = netip.PrefixFrom(p.Addr().WithZone(""), p.Bits())
		if p.Addr().Is4() && !m.in4.IsValid() {
			m.in4 = p
		} else if p.Addr().Is6() && !m.in6.IsValid() {
			m.in6 = p
		}
	}
	m.InternalIP, m.InternalIP6 = m.in4, m.in6
	m.Endpoint = nil
	if e := n.Endpoint; e != nil && (e.DNS != "" || e.Addr.Addr().IsValid()) {
		m.endpoint = *e
		m.endpoint.Addr = netip.AddrPortFrom(unmapAddr(e.Addr.Addr()), e.Addr.Port())
		m.Endpoint = &m.endpoint
		a := m.endpoint.Addr.Addr()
		m.public = m.endpoint.DNS != "" || (a != m.in4.Addr() && a != m.in6.Addr())
	}
	if m.ExternalIP.IsValid() {
		m.public = true
	}
}

// fillEndpoint sets where other nodes reach m: its Endpoint with a port,
// else its external IP, else its internal IP (IPv4 first), with port.
func (m *member) fillEndpoint(port uint16) {
	if m.Endpoint != nil {
		e := &m.endpoint
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
	for _, a := range [3]netip.Addr{m.ExternalIP, m.in4.Addr(), m.in6.Addr()} {
		if a.IsValid() {
			m.endpoint = Endpoint{Addr: netip.AddrPortFrom(a, port), Port: port}
			m.Endpoint = &m.endpoint
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

// electionOrder sorts nodes the way leaders are elected: ready nodes first
// (all nodes when none is ready), then those with the kilo.squat.ai/leader
// annotation, then those with a public endpoint, then by name.
func electionOrder(ms []*member) []*member {
	out := slices.Clone(ms)
	anyReady := slices.ContainsFunc(ms, func(m *member) bool { return m.Ready })
	slices.SortFunc(out, func(a, b *member) int {
		return cmp.Or(
			boolFirst(a.Ready || !anyReady, b.Ready || !anyReady),
			boolFirst(a.Leader, b.Leader),
			boolFirst(a.public, b.public),
			sinceFirst(a.Since, b.Since),
			cmp.Compare(a.Name, b.Name),
		)
	})
	return out
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
