package topology

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Addresses returns the addresses of node's WireGuard interface: its
// segment's WireGuard IP (with the subnet's mask) when it leads the
// segment, nothing otherwise.
func (t *Topology) Addresses(node string) []netip.Prefix {
	s, ok := t.Segment(node)
	if !ok || !t.IsLeader(node) || !s.WireGuardIP.IsValid() {
		return nil
	}
	return []netip.Prefix{s.WireGuardIP}
}

// WireGuardConfig returns the desired state of node's WireGuard interface:
// one peer per segment it reaches through WireGuard and one per accepted
// Peer, sorted by public key. A node that does not lead its segment
// (LocationGranularity) has no peers. The error matches ErrUnknownNode or
// ErrExcluded.
func (t *Topology) WireGuardConfig(node string, privateKey wgconf.SecretKey) (wgconf.Config, error) {
	m, err := t.lookupNode(node)
	if err != nil {
		return wgconf.Config{}, err
	}
	c := wgconf.Config{PrivateKey: privateKey, ListenPort: int(t.opts.Port)}
	own := &t.Segments[m.seg]
	if own.members[own.Leader] != m { // not a leader (IsLeader, without a second lookup)
		return c, nil
	}
	keepalive := own.PersistentKeepalive()
	gateway, relayed := t.relayedPeers(own)
	// The peers in public key order, built in place: refs are sorted
	// rather than the peer configurations, whose allowed IPs are the
	// Topology's own (see shared).
	key := func(r peerRef) wgconf.Key {
		if r.seg < 0 {
			return t.Peers[r.peer].PublicKey
		}
		return t.Segments[r.seg].Key()
	}
	sc := getScratch()
	defer sc.release()
	refs := buffer(&sc.refs, len(t.Segments)+len(t.Peers))[:0]
	for i := range t.Segments {
		if s := &t.Segments[i]; remote(own, s) {
			k := s.Key()
			refs = append(refs, peerRef{head: binary.BigEndian.Uint64(k[:8]), seg: int32(i)})
		}
	}
	for i, p := range t.Peers {
		if !slices.ContainsFunc(relayed, func(r Peer) bool { return r.Name == p.Name }) {
			refs = append(refs, peerRef{head: binary.BigEndian.Uint64(p.PublicKey[:8]), seg: -1, peer: int32(i)})
		}
	}
	// Sorted as single numbers, which sortKeys sorts without a call per
	// comparison: the top bits of each head, the index in refs
	// in the bits below. Refs whose heads agree in those top bits (rare:
	// keys are random) are then ordered by their whole keys.
	shift := bits.Len(uint(len(refs)))
	index := uint64(1)<<shift - 1
	order := buffer(&sc.u64[0], len(refs))
	for i, r := range refs {
		order[i] = r.head&^index | uint64(i)
	}
	sortKeys(order)
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && order[j]&^index == order[i]&^index {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(order[i:j], func(a, b uint64) int {
				ka, kb := key(refs[a&index]), key(refs[b&index])
				return bytes.Compare(ka[:], kb[:])
			})
		}
		i = j
	}
	if len(refs) > 0 {
		c.Peers = make([]wgconf.Peer, 0, len(refs))
	}
	for _, o := range order {
		r := refs[o&index]
		if r.seg < 0 {
			p := t.Peers[r.peer]
			c.Peers = append(c.Peers, peerPeer(p, max(keepalive, p.PersistentKeepalive), shared(p.AllowedIPs)))
			continue
		}
		s := &t.Segments[r.seg]
		pc := segmentPeer(s, max(keepalive, s.PersistentKeepalive(), t.opts.MeshKeepalive), shared(s.AllowedIPs))
		if int(r.seg) == gateway {
			for _, p := range relayed {
				pc.AllowedIPs = append(pc.AllowedIPs, p.AllowedIPs...)
			}
			pc.AllowedIPs = normPrefixes(pc.AllowedIPs)
		}
		c.Peers = append(c.Peers, pc)
	}
	return c, nil
}

// peerRef is a peer of a WireGuard configuration while it is sorted.
type peerRef struct {
	head uint64 // the key's first 8 bytes
	seg  int32  // index in Topology.Segments, or -1 for the Peer Topology.Peers[peer]
	peer int32
}

// NodeConf returns node's WireGuard interface as `kilofed showconf node`
// prints it: addresses, listen port and peers, without the private key.
// It is empty for an unknown or excluded node.
func (t *Topology) NodeConf(node string) wgconf.Interface {
	c, err := t.WireGuardConfig(node, wgconf.SecretKey{})
	if err != nil {
		return wgconf.Interface{}
	}
	return wgconf.Interface{Config: c, Address: t.Addresses(node)}
}

// AsPeer returns node's segment as a peer of some other WireGuard
// interface (`showconf node NAME --as-peer`): the leader's key and
// endpoint, the segment's allowed IPs and keepalive. It is the zero value
// for an unknown or excluded node.
func (t *Topology) AsPeer(node string) wgconf.Peer {
	s, ok := t.Segment(node)
	if !ok {
		return wgconf.Peer{}
	}
	return segmentPeer(s, s.PersistentKeepalive(), slices.Clone(s.AllowedIPs))
}

// PeerConf returns the configuration the external peer named peer uses
// itself (`showconf peer NAME`): its single addresses (/32, /128) as
// Address, its endpoint port as ListenPort, and one [Peer] per segment with
// the segment's allowed IPs, the peer's preshared key and the larger of the
// two keepalives. The ranges of the other Peers and the service CIDRs are
// routed through one segment, the gateway (the first segment whose leader
// has a public endpoint, else the first segment), whose leader forwards
// them: a Peer needs no configuration on the others. So are the ranges of
// the segments the peer cannot reach directly (see relays). The error
// matches ErrUnknownPeer or ErrExcluded.
func (t *Topology) PeerConf(peer string) (wgconf.Interface, error) {
	i, ok := t.peerIndex(peer)
	if !ok {
		if reason, ok := t.excluded[KindPeer+":"+peer]; ok {
			return wgconf.Interface{}, &nameError{kind: KindPeer, name: peer, reason: reason, err: ErrExcluded}
		}
		return wgconf.Interface{}, &nameError{kind: KindPeer, name: peer, err: ErrUnknownPeer}
	}
	p := t.Peers[i]
	var iface wgconf.Interface
	for _, a := range p.AllowedIPs {
		if a.IsSingleIP() {
			iface.Address = append(iface.Address, a)
		}
	}
	if p.Endpoint != nil {
		iface.ListenPort = int(p.Endpoint.Port)
	}
	gateway := t.gatewaySegment()
	var extra []netip.Prefix // routed through the gateway
	for j := range t.Segments {
		s := &t.Segments[j]
		if t.relays(s, p) {
			extra = append(extra, s.AllowedIPs...)
			continue
		}
		pc := segmentPeer(s, max(p.PersistentKeepalive, s.PersistentKeepalive()), slices.Clone(s.AllowedIPs))
		pc.PresharedKey = copyKey(p.PresharedKey)
		iface.Peers = append(iface.Peers, pc)
	}
	if gateway >= 0 {
		extra = append(extra, t.opts.ServiceCIDRs...)
		for _, o := range t.Peers {
			if o.Name != p.Name {
				extra = append(extra, o.AllowedIPs...)
			}
		}
		for i := range iface.Peers {
			if iface.Peers[i].PublicKey == t.Segments[gateway].Key() {
				iface.Peers[i].AllowedIPs = normPrefixes(append(iface.Peers[i].AllowedIPs, extra...))
			}
		}
	}
	sortPeers(iface.Peers)
	return iface, nil
}

// Gateway returns the segment through which external peers reach the parts
// of the mesh they cannot reach directly (the first segment with a public
// endpoint, else the first segment); false when there is no segment. Its
// leader reports the Peers' status.
func (t *Topology) Gateway() (*Segment, bool) {
	g := t.gatewaySegment()
	if g < 0 {
		return nil, false
	}
	return &t.Segments[g], true
}

// gatewaySegment returns the index of the segment through which external
// peers reach other peers and services, or -1 without segments.
func (t *Topology) gatewaySegment() int {
	for i := range t.Segments {
		if t.Segments[i].public {
			return i
		}
	}
	if len(t.Segments) == 0 {
		return -1
	}
	return 0
}

// relays reports whether segment s and peer p talk through the gateway
// segment rather than directly: s has no public endpoint (it is behind
// NAT) and either p has no endpoint at all (a roaming client: neither can
// start the handshake) or p asks for it (ViaGateway), so the gateway's
// leader forwards between them.
func (t *Topology) relays(s *Segment, p Peer) bool {
	g := t.gatewaySegment()
	return g >= 0 && !s.public && (p.Endpoint == nil || p.ViaGateway) && t.Segments[g].public && remote(s, &t.Segments[g])
}

// RelaysViaGateway reports whether the mesh has a public gateway segment
// through which its segments behind NAT reach ViaGateway peers.
func (t *Topology) RelaysViaGateway() (*Segment, bool) {
	g := t.gatewaySegment()
	if g < 0 || !t.Segments[g].public {
		return nil, false
	}
	return &t.Segments[g], true
}

// relayedPeers returns the gateway segment and the peers that segment s
// reaches through it.
func (t *Topology) relayedPeers(s *Segment) (int, []Peer) {
	var out []Peer
	for _, p := range t.Peers {
		if t.relays(s, p) {
			out = append(out, p)
		}
	}
	return t.gatewaySegment(), out
}

// PreferLearntEndpoint reports whether an endpoint learnt from the
// WireGuard handshakes of key wins over the configured one (the
// KeepLearntEndpoint of its peer configuration): the key belongs to a
// segment whose leader has no public endpoint (its configured endpoint is
// an internal IP that NAT hides) or to a Peer without endpoint (a roaming
// client). Every other peer is configured at its own endpoint, so a changed
// force-endpoint or DNS name takes effect at once.
func (t *Topology) PreferLearntEndpoint(key wgconf.Key) bool {
	for i := range t.Segments {
		if t.Segments[i].Key() == key {
			return !t.Segments[i].public
		}
	}
	for _, p := range t.Peers {
		if p.PublicKey == key {
			return p.Endpoint == nil
		}
	}
	return false
}

// segmentPeer returns s as a peer with the given keepalive and allowed
// IPs (a copy of s.AllowedIPs).
func segmentPeer(s *Segment, keepalive time.Duration, allowed []netip.Prefix) wgconf.Peer {
	e := s.Endpoint()
	return wgconf.Peer{
		Name:                s.Name,
		PublicKey:           s.Key(),
		Endpoint:            netip.AddrPortFrom(e.Addr.Addr(), e.Port),
		EndpointDNS:         e.DNS,
		KeepLearntEndpoint:  !s.public,
		AllowedIPs:          allowed,
		PersistentKeepalive: keepalive,
	}
}

// peerPeer returns p as a peer with the given keepalive and allowed IPs
// (a copy of p.AllowedIPs).
func peerPeer(p Peer, keepalive time.Duration, allowed []netip.Prefix) wgconf.Peer {
	pc := wgconf.Peer{
		Name:                p.Name,
		PublicKey:           p.PublicKey,
		PresharedKey:        copyKey(p.PresharedKey),
		KeepLearntEndpoint:  p.Endpoint == nil,
		AllowedIPs:          allowed,
		PersistentKeepalive: keepalive,
	}
	if p.Endpoint != nil {
		pc.Endpoint = netip.AddrPortFrom(p.Endpoint.Addr.Addr(), p.Endpoint.Port)
		pc.EndpointDNS = p.Endpoint.DNS
	}
	return pc
}

// shared returns ps capped, so that appending to it copies it: the
// configurations share the Topology's read-only ranges.
func shared(ps []netip.Prefix) []netip.Prefix { return ps[:len(ps):len(ps)] }

func sortPeers(ps []wgconf.Peer) {
	slices.SortFunc(ps, func(a, b wgconf.Peer) int { return bytes.Compare(a.PublicKey[:], b.PublicKey[:]) })
}

func copyKey(k *wgconf.SecretKey) *wgconf.SecretKey {
	if k == nil {
		return nil
	}
	c := *k
	return &c
}
