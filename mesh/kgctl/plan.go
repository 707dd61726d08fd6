package kgctl

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Plan is what connect applies on this machine for one topology: the
// Peer's WireGuard interface as topology.PeerConf gives it, and a route
// through the interface for every allowed IP of its [Peer] sections.
type Plan struct {
	// Interface is the WireGuard configuration, private key included.
	Interface wgconf.Interface
	// Routes send the mesh's ranges through the interface.
	Routes []topology.Route
	// Skipped are allowed IPs that get no route, with the reason.
	Skipped []string
	// Segments describe the [Peer] sections for people, by public key:
	// "location cn-beijing, leader node-beijing".
	Segments map[wgconf.Key]string
	// Kick lists, per [Peer] public key, an address inside the mesh that a
	// packet can be sent to so that WireGuard starts a handshake: the
	// segment's WireGuard IP.
	Kick map[wgconf.Key]netip.Addr
}

// NewPlan computes the plan of peer on link, with the peer's private key.
// The error matches topology.ErrUnknownPeer or topology.ErrExcluded, or
// ErrKeyMismatch when key is not the Peer's.
func (m *Mesh) NewPlan(peer string, key wgconf.SecretKey, link string) (Plan, error) {
	t := m.Topology
	iface, err := t.PeerConf(peer)
	if err != nil {
		return Plan{}, m.explain(topology.KindPeer, peer, err)
	}
	i := slices.IndexFunc(t.Peers, func(p topology.Peer) bool { return p.Name == peer })
	if err := checkKey(peer, t.Peers[i].PublicKey, key); err != nil {
		return Plan{}, err
	}
	iface.PrivateKey = key
	p := Plan{Interface: iface, Segments: map[wgconf.Key]string{}, Kick: map[wgconf.Key]netip.Addr{}}
	var endpoints []netip.Addr
	for _, pc := range iface.Peers {
		if pc.Endpoint.IsValid() {
			endpoints = append(endpoints, pc.Endpoint.Addr())
		}
	}
	for _, s := range t.Segments {
		p.Segments[s.Key()] = m.describeSegment(&s)
		if s.WireGuardIP.IsValid() {
			p.Kick[s.Key()] = s.WireGuardIP.Addr()
		}
	}
	for _, pc := range iface.Peers {
		for _, dst := range pc.AllowedIPs {
			dst = dst.Masked()
			if reason := skipRoute(dst, endpoints, iface.Address); reason != "" {
				p.Skipped = append(p.Skipped, fmt.Sprintf("%s (%s): %s", dst, p.Segments[pc.PublicKey], reason))
				continue
			}
			p.Routes = append(p.Routes, topology.Route{Dst: dst, Dev: link})
		}
	}
	slices.SortFunc(p.Routes, func(a, b topology.Route) int { return comparePrefix(a.Dst, b.Dst) })
	return p, nil
}

// skipRoute says why dst must not be routed through the tunnel, or "".
func skipRoute(dst netip.Prefix, endpoints []netip.Addr, own []netip.Prefix) string {
	if dst.Bits() == 0 {
		return "a default route is left to the system (use wg-quick for a full tunnel)"
	}
	for _, e := range endpoints {
		if dst.Contains(e) {
			return fmt.Sprintf("it holds the WireGuard endpoint %s, whose packets must not enter the tunnel", e)
		}
	}
	for _, a := range own {
		if dst.Overlaps(a) {
			return fmt.Sprintf("it overlaps this peer's own address %s", a)
		}
	}
	return ""
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// summary is the one-line description of a plan.
func (p Plan) summary() string {
	return fmt.Sprintf("address %s, %d WireGuard peers, %d routes", joinPrefixes(p.Interface.Address), len(p.Interface.Peers), len(p.Routes))
}

// describePeer names a [Peer] section with its endpoint.
func (p Plan) describePeer(pc wgconf.Peer) string {
	what := p.Segments[pc.PublicKey]
	if what == "" {
		what = "peer " + pc.Name
	}
	switch {
	case pc.EndpointDNS != "":
		what += fmt.Sprintf(", endpoint %s:%d", pc.EndpointDNS, pc.Endpoint.Port())
	case pc.Endpoint.IsValid():
		what += ", endpoint " + pc.Endpoint.String()
	default:
		what += ", no endpoint (it reaches us)"
	}
	return what
}

// changes describes how plan q differs from p, one line per [Peer] added,
// removed or changed, or nil when they apply the same state.
func (p Plan) changes(q Plan) []string {
	var out []string
	old := map[wgconf.Key]wgconf.Peer{}
	for _, pc := range p.Interface.Peers {
		old[pc.PublicKey] = pc
	}
	for _, pc := range q.Interface.Peers {
		o, ok := old[pc.PublicKey]
		delete(old, pc.PublicKey)
		switch {
		case !ok:
			out = append(out, "new peer: "+q.describePeer(pc))
		case wgconf.Render(wgconf.Interface{Config: wgconf.Config{Peers: []wgconf.Peer{o}}}, wgconf.RenderOptions{}) !=
			wgconf.Render(wgconf.Interface{Config: wgconf.Config{Peers: []wgconf.Peer{pc}}}, wgconf.RenderOptions{}):
			out = append(out, "changed peer: "+q.describePeer(pc))
		}
	}
	for _, pc := range p.Interface.Peers {
		if _, ok := old[pc.PublicKey]; ok {
			out = append(out, "peer gone: "+p.describePeer(pc))
		}
	}
	if len(out) == 0 && (!slices.Equal(p.Routes, q.Routes) || !slices.Equal(p.Interface.Address, q.Interface.Address) ||
		p.Interface.ListenPort != q.Interface.ListenPort) {
		out = append(out, "addresses or routes changed: "+q.summary())
	}
	return out
}

func joinPrefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(prefixStrings(ps), ", ")
}
