package wireguard

import (
	"slices"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// LearnedEndpointTTL is how long after its latest handshake the learnt
// endpoint of a peer behind NAT wins over the configured one.
const LearnedEndpointTTL = 3 * time.Minute

// MergeLearned returns desired with the endpoints the device should keep:
// a peer whose desired Endpoint is invalid keeps its live endpoint, and a
// peer with KeepLearntEndpoint (behind NAT, or roaming) that completed a
// handshake within LearnedEndpointTTL before now from an endpoint other
// than the desired one keeps that learnt endpoint. Any other peer gets its
// desired endpoint, so that a changed force-endpoint or a re-resolved DNS
// name wins even while the old address still answers. A replaced endpoint
// loses its EndpointDNS. desired is not modified.
func MergeLearned(desired wgconf.Config, live State, now time.Time) wgconf.Config {
	out := desired
	out.Peers = slices.Clone(desired.Peers)
	for i := range out.Peers {
		p := &out.Peers[i]
		l, ok := live.Peer(p.PublicKey)
		if !ok || !l.Endpoint.IsValid() || l.Endpoint == unmapAddrPort(p.Endpoint) {
			continue
		}
		recent := !l.LastHandshake.IsZero() && now.Sub(l.LastHandshake) < LearnedEndpointTTL
		if !p.Endpoint.IsValid() || (p.KeepLearntEndpoint && recent) {
			p.Endpoint = l.Endpoint
			p.EndpointDNS = ""
		}
	}
	return out
}
