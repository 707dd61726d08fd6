package topology

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Sentinel errors of the Topology methods.
var (
	// ErrUnknownNode is returned for a node name that New never saw.
	ErrUnknownNode = errors.New("unknown node")
	// ErrUnknownPeer is returned for a peer name that New never saw.
	ErrUnknownPeer = errors.New("unknown peer")
	// ErrExcluded is returned for a node or peer that New left out of the
	// mesh; Topology.Problems says why.
	ErrExcluded = errors.New("excluded from the mesh")
)

// Topology is the whole mesh as every agent computes it: segments with
// their leaders and WireGuard IPs, the accepted peers, and the problems found.
// It is read-only once New returns it (its slices are shared with what its
// methods return), and its methods are safe for concurrent use.
type Topology struct {
	// Segments are the WireGuard segments, sorted by Name.
	Segments []Segment
	// Peers are the accepted peers, normalized, sorted by name.
	Peers []Peer
	// Problems are the nodes and peers New warned about or excluded,
	// sorted by kind and name.
	Problems []Problem

	opts     Options
	members  []*member         // the accepted nodes, sorted by name
	excluded map[string]string // "node:NAME" / "peer:NAME" -> reason
	groups   []group           // the location groups, sorted by key
	// nodeRanges are the nodes' ranges when none overlaps another
	// (claims.base), sorted; nil otherwise. They are stored in ranges,
	// which saves an allocation.
	nodeRanges *disjoint
	ranges     disjoint
	endpoints  addrSet // every WireGuard endpoint address of the mesh
	// endpoints4 holds the IPv4 endpoints of a small mesh, saving an
	// allocation.
	endpoints4 [16]uint32
}

// Segment is a set of nodes that share one WireGuard identity toward the
// rest of the mesh: a location in LocationGranularity, a single node in
// FullGranularity and CrossGranularity.
type Segment struct {
	// Name identifies the segment: the location, or the node name for a
	// node that is alone (full and cross granularity, or no location).
	Name string
	// Location is the location of the segment's nodes, or the node name
	// for a node without location or internal IP.
	Location string
	// Nodes are the segment's nodes, normalized (canonical prefixes,
	// conflicting ranges removed, Endpoint filled in), sorted by name:
	// the very elements of New's nodes when it could use them in place.
	Nodes []Node
	// Leader is the index in Nodes of the node that holds the segment's
	// WireGuard tunnels.
	Leader int
	// WireGuardIP is the segment's address in the WireGuard subnet, with
	// the subnet's mask; the leader wears it. It is invalid when the
	// subnet was full (see Problems).
	WireGuardIP netip.Prefix
	// AllowedIPs is what the rest of the mesh routes to this segment: the
	// WireGuard IP, every node's pod CIDRs and internal IPs, and the
	// allowed location IPs, sorted.
	AllowedIPs []netip.Prefix
	// AllowedLocationIPs are the kilo.squat.ai/allowed-location-ips ranges
	// this segment carries (also in AllowedIPs).
	AllowedLocationIPs []netip.Prefix

	key     segKey    // the segment's key (hashed as "location:NAME" or "node:NAME")
	group   int32     // location group, by index in Topology.groups; in FullGranularity a number of its own past them (segments of one group talk natively)
	public  bool      // the leader has a public endpoint
	members []*member // the members behind Nodes, in the same order
}

// LeaderNode returns the node that leads the segment.
func (s Segment) LeaderNode() Node { return s.Nodes[s.Leader] }

// Key returns the leader's WireGuard public key.
func (s Segment) Key() wgconf.Key { return s.Nodes[s.Leader].Key }

// Endpoint returns where the rest of the mesh reaches the segment: the
// leader's endpoint, with its port filled in.
func (s Segment) Endpoint() Endpoint {
	if e := s.Nodes[s.Leader].Endpoint; e != nil {
		return *e
	}
	return Endpoint{}
}

// PersistentKeepalive returns the leader's persistent keepalive.
func (s Segment) PersistentKeepalive() time.Duration {
	return s.Nodes[s.Leader].PersistentKeepalive
}

// HasPublicEndpoint reports whether the leader can be reached without NAT
// traversal: it has an external IP, a DNS endpoint or a forced endpoint.
func (s Segment) HasPublicEndpoint() bool { return s.public }

// Options returns the options New used, with defaults filled in.
func (t *Topology) Options() Options { return t.opts }

// Node returns the accepted node named name, normalized.
func (t *Topology) Node(name string) (Node, bool) {
	m, ok := t.member(name)
	if !ok {
		return Node{}, false
	}
	return *m.Node, true
}

// Segment returns the segment of the accepted node named node.
func (t *Topology) Segment(node string) (*Segment, bool) {
	m, ok := t.member(node)
	if !ok {
		return nil, false
	}
	return &t.Segments[m.seg], true
}

// IsLeader reports whether node holds WireGuard tunnels: it leads its
// location in LocationGranularity; every accepted node does in
// FullGranularity and CrossGranularity.
func (t *Topology) IsLeader(node string) bool {
	s, ok := t.Segment(node)
	return ok && s.Nodes[s.Leader].Name == node
}

// Leader returns the elected node of a location: the leader of its segment
// in LocationGranularity; in FullGranularity and CrossGranularity, where
// every node leads its own segment, the node that would lead the location.
// A node without location is looked up by its own name.
func (t *Topology) Leader(location string) (Node, bool) {
	for _, key := range [2]segKey{{name: location}, {name: location, node: true}} {
		if g, ok := t.group(key); ok {
			return *g.leader.Node, true
		}
	}
	return Node{}, false
}

// MeshRanges returns every range the mesh routes, sorted: the allowed IPs
// of all segments and of all accepted peers. The firewall leaves traffic to
// them unmasqueraded.
func (t *Topology) MeshRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range t.Segments {
		out = append(out, s.AllowedIPs...)
	}
	for _, p := range t.Peers {
		out = append(out, p.AllowedIPs...)
	}
	return normPrefixes(out)
}

// member returns the accepted node named name.
func (t *Topology) member(name string) (*member, bool) {
	i, ok := slices.BinarySearchFunc(t.members, name, func(m *member, name string) int { return strings.Compare(m.Name, name) })
	if !ok {
		return nil, false
	}
	return t.members[i], true
}

// peerIndex returns the index in Peers of the accepted peer named name.
func (t *Topology) peerIndex(name string) (int, bool) {
	return slices.BinarySearchFunc(t.Peers, name, func(p Peer, name string) int { return strings.Compare(p.Name, name) })
}

// lookupNode returns the member named name or an error matching
// ErrUnknownNode or ErrExcluded.
func (t *Topology) lookupNode(name string) (*member, error) {
	if m, ok := t.member(name); ok {
		return m, nil
	}
	if reason, ok := t.excluded[nodeKey(name)]; ok {
		return nil, &nameError{kind: KindNode, name: name, reason: reason, err: ErrExcluded}
	}
	return nil, &nameError{kind: KindNode, name: name, err: ErrUnknownNode}
}

// nameError reports a node or peer that cannot be used.
type nameError struct {
	kind, name, reason string
	err                error
}

func (e *nameError) Error() string {
	var b strings.Builder
	b.WriteString(e.kind + " " + e.name + ": " + e.err.Error())
	if e.reason != "" {
		b.WriteString(": " + e.reason)
	} else {
		b.WriteString("; check the name (kubectl get nodes, kubectl get peers)")
	}
	return b.String()
}

func (e *nameError) Unwrap() error { return e.err }

// mates returns the accepted nodes of m's location group, m among them,
// sorted by name: the nodes m reaches natively are the others, its
// segment in LocationGranularity, its location in CrossGranularity, none
// in FullGranularity.
func (t *Topology) mates(m *member) []*member {
	if t.opts.Granularity == FullGranularity {
		return nil
	}
	g, _ := t.group(m.group)
	return g.members
}

// remote reports whether segment s is reached through WireGuard from a
// node of segment from.
func remote(from, s *Segment) bool { return from.group != s.group }

// group returns the location group of key.
func (t *Topology) group(key segKey) (group, bool) {
	i, ok := slices.BinarySearchFunc(t.groups, key, func(g group, k segKey) int { return g.key().compare(k) })
	if !ok {
		return group{}, false
	}
	return t.groups[i], true
}

// group is a location group: the nodes of one location, or a node alone.
type group struct {
	members []*member // by name
	leader  *member   // the first in election order
}

// key returns the group's key.
func (g group) key() segKey { return g.members[0].group }
