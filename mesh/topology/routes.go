package topology

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
)

// Routes returns every route and policy rule node's kernel needs for the
// mesh, sorted by destination then table (rules by source, destination,
// table). They are empty for an unknown or excluded node. See the package
// documentation for the rules that produce them.
func (t *Topology) Routes(node string) ([]Route, []Rule) {
	p := t.plan(node)
	return p.routes, p.rules
}

// TunnelRemotes returns the internal IPs node sends encapsulated traffic
// to through Links.Tunnel, sorted: the underlay addresses (IPv4 when both
// ends have one, else IPv6) of the nodes its tunnel routes lead to, for the
// VXLAN forwarding database or the IPIP setup.
func (t *Topology) TunnelRemotes(node string) []netip.Addr {
	return t.plan(node).remotes
}

// plan is what one node's kernel needs.
type plan struct {
	t *Topology
	m *member
	// own are the addresses of the node itself, the first nOwn: its
	// internal and external IPs and, for a leader, its segment's
	// WireGuard IP. Arrays, not slices: no allocation.
	own  [4]netip.Addr
	nOwn int
	// own4 and pods4 are the IPv4 addresses (nOwn4 of them) and pod CIDRs
	// (the first and last address of the first nPods4; manyPods4 when
	// there were more) of the node, as numbers, for skip.
	own4      [4]uint32
	nOwn4     int
	pods4     [2][2]uint32
	nPods4    int
	manyPods4 bool
	seg       *Segment  // the node's segment
	leader    *member   // the leader of seg
	mates     []*member // the nodes the node reaches natively, itself among them
	size      int       // how many routes there can be
	others    int       // how many of them are not routes to node ranges (see sorted)
	routes    []Route
	rules     []Rule
	remotes   []netip.Addr
}

func (t *Topology) plan(node string) plan {
	m, ok := t.member(node)
	if !ok {
		return plan{}
	}
	p := t.newPlan(m)
	// The merge pays when the other routes are few; in FullGranularity
	// (a WireGuard IP per node) or in one large location (the mates' pod
	// CIDRs) sorting them costs about what sorting all the routes does.
	if t.nodeRanges != nil && 4*p.others <= p.size {
		if p.sorted() {
			return p
		}
		p = t.newPlan(m)
	}
	p.collect()
	p.routes = sortRoutes(p.routes)
	p.finish()
	return p
}

// newPlan returns the plan of m with nothing collected yet.
func (t *Topology) newPlan(m *member) plan {
	p := plan{t: t, m: m}
	own := func(a netip.Addr) {
		p.own[p.nOwn] = a
		p.nOwn++
		if a.Is4() {
			first, _ := range4(netip.PrefixFrom(a, 32))
			p.own4[p.nOwn4] = first
			p.nOwn4++
		}
	}
	for _, a := range [3]netip.Addr{m.InternalIP.Addr(), m.InternalIP6.Addr(), m.ExternalIP} {
		if a.IsValid() {
			own(a)
		}
	}
	if s := &t.Segments[m.seg]; s.members[s.Leader] == m && s.WireGuardIP.IsValid() {
		own(s.WireGuardIP.Addr()) // see Addresses
	}
	for _, pod := range m.PodCIDRs {
		switch {
		case !pod.Addr().Is4():
		case p.nPods4 < len(p.pods4):
			first, last := range4(pod)
			p.pods4[p.nPods4] = [2]uint32{first, last}
			p.nPods4++
		default:
			p.manyPods4 = true
		}
	}
	p.seg = &t.Segments[m.seg]
	p.leader = p.seg.members[p.seg.Leader]
	if !t.opts.NoLocalRoutes {
		p.mates = t.mates(m)
	}
	// allowed: the remote segments' allowed IPs, of which others counts
	// the WireGuard IPs and allowed location IPs, with the segment's own
	// WireGuard IP.
	allowed, others := 0, 1
	for i := range t.Segments {
		if s := &t.Segments[i]; remote(p.seg, s) {
			allowed += len(s.AllowedIPs) - b2i(routesEndpoint(s))
			others += len(s.AllowedLocationIPs) + b2i(s.WireGuardIP.IsValid())
		}
	}
	rest := 0 // the peers' and the mates' routes
	for _, peer := range t.Peers {
		rest += len(peer.AllowedIPs)
	}
	for _, mate := range p.mates {
		rest += len(mate.PodCIDRs)
	}
	if t.opts.Encapsulate != EncapsulateNever {
		// encapsulateHostTraffic: a route per family both nodes have.
		for _, mate := range p.mates {
			rest += b2i(m.InternalIP.IsValid() && mate.InternalIP.IsValid()) + b2i(m.InternalIP6.IsValid() && mate.InternalIP6.IsValid())
		}
	}
	p.size, p.others = 1+allowed+rest, others+rest
	return p
}

// route sends dst, a range of a remote segment or of a Peer, through
// WireGuard or the leader.
func (p *plan) route(dst netip.Prefix, ofPeer bool) {
	switch {
	case p.skip(dst, true):
	case p.leader != p.m:
		p.via(p.leader, dst)
	default:
		src := p.m.internal(dst.Addr()).Addr()
		if wgIP := p.seg.WireGuardIP.Addr(); ofPeer && wgIP.IsValid() && wgIP.Is4() == dst.Addr().Is4() {
			src = wgIP
		}
		p.add(Route{Dst: dst, Dev: p.t.opts.Links.WireGuard, Src: src})
	}
}

// collect adds the routes and rules of the node, unsorted: its segment's
// WireGuard IP, the remote segments' allowed IPs, the peers' and the
// mates' ranges, in this order, which decides which of two routes with the
// same destination and table stays.
func (p *plan) collect() {
	p.routes = make([]Route, 0, p.size)
	p.routeOwnWireGuardIP()
	for i := range p.t.Segments {
		if s := &p.t.Segments[i]; remote(p.seg, s) {
			for _, dst := range s.AllowedIPs {
				p.route(dst, false)
			}
		}
	}
	p.routePeersAndMates()
}

// sorted adds the routes and rules of the node, the routes sorted and
// deduplicated as collect and sortRoutes would leave them, and reports
// whether it could. It needs Topology.nodeRanges: the remote segments'
// pod CIDRs and internal IPs, most of the routes, come from there sorted
// and distinct, so that only the other routes (WireGuard IPs, allowed
// location IPs, the peers' and the mates' ranges, a few unless the
// location is large) are sorted before they are merged in. When one of
// those has the destination and table of a node range, which of the two
// stays depends on the order collect adds them in: sorted then reports
// false, and the plan must be built anew with collect.
func (p *plan) sorted() bool {
	// One array holds everything: the other routes are collected in the
	// room newPlan counted for them at its end, and the merge writes the
	// result from its front. The routes to node ranges are at most start
	// (checked below: newPlan's counts are bounds, not exact when ranges
	// coincide), so the front never reaches an other route before it is
	// merged.
	buf := make([]Route, max(p.size, p.others))
	start := len(buf) - p.others
	p.routes = buf[start:start]
	p.routeOwnWireGuardIP()
	for i := range p.t.Segments {
		if s := &p.t.Segments[i]; remote(p.seg, s) {
			if s.WireGuardIP.IsValid() {
				p.route(hostPrefix(s.WireGuardIP.Addr()), false)
			}
			for _, dst := range s.AllowedLocationIPs {
				p.route(dst, false)
			}
		}
	}
	p.routePeersAndMates()
	others := sortRoutes(p.routes)
	merged := 0 // of others
	p.routes = buf[:0]
	var next routeKey // of others[0]
	if len(others) > 0 {
		next = routeKeyOf(others[0])
	}
	// Whether the last segment seen is remote: a segment's ranges tend to
	// come together (its nodes' pod CIDRs and internal IPs are often
	// allocated in a row), and remote compares names.
	lastSeg, lastRemote := int32(-1), false
	for dst, r := range p.t.nodeRanges.ranges() {
		if r.kind != claimPod && r.kind != claimInternal {
			continue
		}
		if r.seg != lastSeg {
			lastSeg, lastRemote = r.seg, remote(p.seg, &p.t.Segments[r.seg])
		}
		if !lastRemote {
			continue
		}
		// Claims are masked, and the routes of node ranges are in the
		// main table.
		hi, lo := addrBits(dst.Addr())
		key := routeKey{hi: hi, lo: lo, v6: dst.Addr().Is6(), bits: dst.Bits()}
		for len(others) > 0 {
			c := compareRouteKeys(next, key)
			if c == 0 {
				return false
			}
			if c > 0 {
				break
			}
			r := others[0]
			others, merged = others[1:], merged+1
			p.routes = append(p.routes, r)
			if len(others) > 0 {
				next = routeKeyOf(others[0])
			}
		}
		if len(p.routes) >= start+merged {
			return false // more routes than newPlan counted: no room left
		}
		p.route(dst, false)
	}
	p.routes = append(p.routes, others...) // copy moves them in place
	if len(p.routes) == 0 {
		p.routes = nil // as sortRoutes
	}
	p.finish()
	return true
}

// routeOwnWireGuardIP routes the WireGuard IP of the node's segment
// through its leader.
func (p *plan) routeOwnWireGuardIP() {
	if p.leader != p.m && p.seg.WireGuardIP.IsValid() {
		p.route(hostPrefix(p.seg.WireGuardIP.Addr()), false)
	}
}

// routePeersAndMates routes the peers' ranges, and the mates' pod CIDRs
// natively.
func (p *plan) routePeersAndMates() {
	for _, peer := range p.t.Peers {
		for _, dst := range peer.AllowedIPs {
			p.route(dst, true)
		}
	}
	for _, mate := range p.mates {
		if mate == p.m {
			continue
		}
		for _, dst := range mate.PodCIDRs {
			// With disjoint node ranges a mate's pod CIDR can neither
			// overlap this node's nor hold its addresses (its WireGuard
			// IP was allocated outside every claim).
			if p.t.nodeRanges != nil || !p.skip(dst, false) {
				p.via(mate, dst)
			}
		}
		p.encapsulateHostTraffic(mate)
	}
}

// routesEndpoint reports whether s routes its leader's endpoint address
// alone (an internal IP that is the endpoint, in FullGranularity): a
// destination skip leaves out.
func routesEndpoint(s *Segment) bool {
	e := s.members[s.Leader].Endpoint
	if e == nil || !e.Addr.Addr().IsValid() {
		return false
	}
	_, ok := slices.BinarySearchFunc(s.AllowedIPs, hostPrefix(e.Addr.Addr()), compareMasked)
	return ok
}

// skip reports whether dst must not be routed: it holds the node's own
// pod CIDRs or addresses, or, for destinations outside the location, the
// endpoint of a WireGuard peer (the route would capture WireGuard's own
// packets).
func (p *plan) skip(dst netip.Prefix, outside bool) bool {
	if dst.Addr().Is4() { // the same tests on numbers
		first, last := range4(dst)
		for _, pod := range p.pods4[:p.nPods4] {
			if first <= pod[1] && pod[0] <= last {
				return true
			}
		}
		if p.manyPods4 && slices.ContainsFunc(p.m.PodCIDRs, dst.Overlaps) {
			return true
		}
		for _, a := range p.own4[:p.nOwn4] {
			if first <= a && a <= last {
				return true
			}
		}
		return outside && p.t.endpoints.contains4(first, last)
	}
	for _, pod := range p.m.PodCIDRs {
		if dst.Overlaps(pod) {
			return true
		}
	}
	for _, a := range p.own[:p.nOwn] {
		if dst.Contains(a) {
			return true
		}
	}
	return outside && p.t.endpoints.containsAny(dst)
}

// contains4 reports whether s holds an IPv4 address from first to last.
func (s addrSet) contains4(first, last uint32) bool {
	i, _ := slices.BinarySearch(s.v4, first)
	return i < len(s.v4) && s.v4[i] <= last
}

// range4 returns the first and last address of the IPv4 prefix p.
func range4(p netip.Prefix) (first, last uint32) {
	b := p.Addr().As4()
	first = binary.BigEndian.Uint32(b[:]) &^ uint32(1<<(32-p.Bits())-1)
	return first, first | uint32(1<<(32-p.Bits())-1)
}

// addrSet is a set of addresses sorted for containsAny.
type addrSet struct {
	v4 []uint32
	v6 []netip.Addr
}

// newAddrSet returns the set of addrs, all valid; its IPv4 addresses
// are kept in room, unless there is too little of it.
func newAddrSet(addrs []netip.Addr, room []uint32) addrSet {
	var s addrSet
	v4 := 0
	for _, a := range addrs {
		v4 += b2i(a.Is4())
	}
	s.v4 = room[:0]
	if cap(room) < v4 {
		s.v4 = make([]uint32, 0, v4)
	}
	for _, a := range addrs {
		if a.Is4() {
			b := a.As4()
			s.v4 = append(s.v4, binary.BigEndian.Uint32(b[:]))
		} else {
			s.v6 = append(s.v6, a)
		}
	}
	slices.Sort(s.v4)
	slices.SortFunc(s.v6, netip.Addr.Compare)
	s.v4, s.v6 = slices.Compact(s.v4), slices.Compact(s.v6)
	return s
}

// containsAny reports whether dst holds one of the addresses of s.
func (s addrSet) containsAny(dst netip.Prefix) bool {
	if dst.Addr().Is4() {
		return s.contains4(range4(dst))
	}
	dst = dst.Masked()
	i, _ := slices.BinarySearchFunc(s.v6, dst.Addr(), netip.Addr.Compare)
	return i < len(s.v6) && dst.Contains(s.v6[i])
}

func (p *plan) add(r Route) { p.routes = append(p.routes, r) }

// via routes dst through the internal IP of next (of dst's family):
// through the tunnel link when encapsulation applies, natively otherwise.
// Without an internal IP of that family, or without an underlay address
// family both nodes have, there is no route.
func (p *plan) via(next *member, dst netip.Prefix) {
	gw := next.internal(dst.Addr()).Addr()
	remote, ok := underlay(p.m, next)
	if !gw.IsValid() || !ok {
		return
	}
	self := p.m.internal(dst.Addr())
	if p.t.encapsulate(p.m, next) {
		tgw, onLink, ok := p.t.opts.tunnelNextHop(dst, remote)
		if !ok {
			return
		}
		p.add(Route{Dst: dst, Gw: tgw, Dev: p.t.opts.Links.Tunnel, Src: self.Addr(), OnLink: onLink})
		p.remotes = append(p.remotes, remote)
		return
	}
	dev := p.t.opts.Links.Underlay
	onLink := dev != "" && !(self.IsValid() && self.Masked().Contains(gw))
	p.add(Route{Dst: dst, Gw: gw, Dev: dev, OnLink: onLink})
}

// encapsulateHostTraffic sends what local pods address to mate's internal
// IPs through the tunnel too, by routes in Options.Table and rules
// selecting the node's pod CIDRs, as the underlay may drop pod sources.
func (p *plan) encapsulateHostTraffic(mate *member) {
	remote, ok := underlay(p.m, mate)
	if !ok || !p.t.encapsulate(p.m, mate) {
		return
	}
	for _, family := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		self, other := p.m.internal(family), mate.internal(family)
		if !self.IsValid() || !other.IsValid() {
			continue
		}
		dst := hostPrefix(other.Addr())
		var added bool
		for _, pod := range p.m.PodCIDRs {
			if pod.Addr().Is4() == family.Is4() {
				p.rules = append(p.rules, Rule{Src: pod, Dst: dst, Table: p.t.opts.Table})
				added = true
			}
		}
		tgw, onLink, ok := p.t.opts.tunnelNextHop(dst, remote)
		if added && ok {
			p.add(Route{Dst: dst, Gw: tgw, Dev: p.t.opts.Links.Tunnel, Src: self.Addr(), Table: p.t.opts.Table, OnLink: onLink})
			p.remotes = append(p.remotes, remote)
		}
	}
}

// underlay returns the internal IP of b that a sends encapsulated packets
// to: IPv4 when both nodes have one, else IPv6 when both have one.
func underlay(a, b *member) (netip.Addr, bool) {
	switch {
	case a.InternalIP.IsValid() && b.InternalIP.IsValid():
		return b.InternalIP.Addr(), true
	case a.InternalIP6.IsValid() && b.InternalIP6.IsValid():
		return b.InternalIP6.Addr(), true
	}
	return netip.Addr{}, false
}

// encapsulate reports whether traffic from node a to node b of its
// location goes through the tunnel link: always, never, or, for
// crosssubnet, when their underlay addresses (see underlay) are in
// different subnets.
func (t *Topology) encapsulate(a, b *member) bool {
	switch t.opts.Encapsulate {
	case EncapsulateAlways:
		return true
	case EncapsulateCrossSubnet:
		if a.InternalIP.IsValid() && b.InternalIP.IsValid() {
			return a.InternalIP.Masked() != b.InternalIP.Masked()
		}
		if a.InternalIP6.IsValid() && b.InternalIP6.IsValid() {
			return a.InternalIP6.Masked() != b.InternalIP6.Masked()
		}
		return true
	}
	return false
}

// finish sorts and deduplicates the rules and tunnel remotes plan
// collected.
func (p *plan) finish() {
	slices.SortFunc(p.rules, func(a, b Rule) int {
		return cmp.Or(a.Src.Compare(b.Src), a.Dst.Compare(b.Dst), cmp.Compare(a.Table, b.Table), cmp.Compare(a.Priority, b.Priority))
	})
	p.rules = slices.Compact(p.rules)
	slices.SortFunc(p.remotes, netip.Addr.Compare)
	p.remotes = slices.Compact(p.remotes)
}

// routeKey orders routes as Prefix.Compare orders their (masked)
// destinations, then by table, then as they were added. It holds no
// pointer, so sorting keys moves little memory and needs no write barrier.
type routeKey struct {
	hi, lo uint64 // the destination's address bits (see addrBits)
	v6     bool
	bits   int
	table  int
	i      int // index of the route
}

// routeKeyOf returns the key of r, index 0.
func routeKeyOf(r Route) routeKey {
	hi, lo := addrBits(r.Dst.Masked().Addr())
	return routeKey{hi: hi, lo: lo, v6: r.Dst.Addr().Is6(), bits: r.Dst.Bits(), table: r.Table}
}

func compareRouteKeys(a, b routeKey) int {
	switch {
	case a.v6 != b.v6:
		return boolFirst(!a.v6, !b.v6)
	case a.hi != b.hi:
		return cmp.Compare(a.hi, b.hi)
	case a.lo != b.lo:
		return cmp.Compare(a.lo, b.lo)
	case a.bits != b.bits:
		return cmp.Compare(a.bits, b.bits)
	case a.table != b.table:
		return cmp.Compare(a.table, b.table)
	}
	return cmp.Compare(a.i, b.i)
}

// sortRoutes sorts routes in place by destination then table and keeps
// the first added of those with the same destination and table; nil for
// none.
func sortRoutes(routes []Route) []Route {
	if len(routes) == 0 {
		return nil
	}
	// Up to 32 routes are sorted in memory on the stack; more in buffers
	// kept between calls.
	if len(routes) > 32 && len(routes) <= maxPooled {
		sc := getScratch()
		sc.ints = routeOrder(routes, sc.ints) // grown, for the next call
		permute(routes, sc.ints)
		sc.release()
	} else {
		var small [32]int // grown by routeOrder past 32
		permute(routes, routeOrder(routes, small[:0]))
	}
	return slices.CompactFunc(routes, func(a, b Route) bool { return a.Dst == b.Dst && a.Table == b.Table })
}

// routeOrder returns the indexes of routes in sorted order, in order if
// it has the room.
func routeOrder(routes []Route, order []int) []int {
	order = slices.Grow(order[:0], len(routes))[:len(routes)]
	// In the common case, IPv4 routes in at most two tables, each route's
	// key is one number: address, length, table (main first), index.
	tables := [2]int{routes[0].Table, routes[0].Table}
	short := uint64(len(routes)) < 1<<25
	for _, r := range routes {
		switch t := r.Table; {
		case t == tables[0] || t == tables[1]:
		case tables[0] == tables[1]:
			tables[0], tables[1] = min(t, tables[0]), max(t, tables[0])
		default:
			short = false
		}
		short = short && r.Dst.Addr().Is4()
	}
	if short {
		var small [32]uint64 // as in sortRoutes
		keys := small[:0]
		if len(routes) > len(small) {
			sc := getScratch()
			defer sc.release()
			keys = buffer(&sc.u64[0], len(routes))
		}
		keys = keys[:len(routes)]
		for i, r := range routes {
			first, _ := range4(r.Dst)
			keys[i] = uint64(first)<<32 | uint64(r.Dst.Bits())<<26 | uint64(b2i(r.Table == tables[1] && tables[0] != tables[1]))<<25 | uint64(i)
		}
		sortKeys(keys)
		for k, key := range keys {
			order[k] = int(key & (1<<25 - 1))
		}
		return order
	}
	keys := make([]routeKey, len(routes))
	for i, r := range routes {
		keys[i] = routeKeyOf(r)
		keys[i].i = i
	}
	slices.SortFunc(keys, compareRouteKeys)
	for k, key := range keys {
		order[k] = key.i
	}
	return order
}

// permute puts routes[order[k]] at k, in place, one cycle of the
// permutation at a time; a done position has its order set to -1.
func permute(routes []Route, order []int) {
	for k := range order {
		if order[k] < 0 || order[k] == k { // done, or in place
			continue
		}
		held, j := routes[k], k
		for {
			src := order[j]
			order[j] = -1
			if src == k {
				routes[j] = held
				break
			}
			routes[j], j = routes[src], src
		}
	}
}
