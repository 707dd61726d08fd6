package k8s

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// PeerFromObject reads a Peer into a topology.Peer. A Peer with any invalid
// value (checked by v1alpha1.Peer.Validate: the schema's rules plus the
// endpoint, which the schema cannot check) is not used at all, and the error,
// a Problem wrapping ErrInvalidPeer and Validate's sentinels, says why.
// Allowed IPs are masked (10.5.100.1/24 becomes 10.5.100.0/24, as WireGuard
// does); an endpoint with both a DNS name and an IP uses the name, as Kilo
// does; Created is the object's creation time.
func PeerFromObject(p *v1alpha1.Peer) (topology.Peer, error) {
	if err := p.Validate(); err != nil {
		return topology.Peer{}, Problem{Kind: topology.KindPeer, Name: p.Name, Err: fmt.Errorf("%w: %w", ErrInvalidPeer, err)}
	}
	out := topology.Peer{
		Name:                p.Name,
		Created:             p.CreationTimestamp.Time,
		PersistentKeepalive: time.Duration(p.Spec.PersistentKeepalive) * time.Second,
	}
	// Validate checked every value below: parsing cannot fail.
	out.PublicKey, _ = wgconf.ParseKey(p.Spec.PublicKey)
	if p.Spec.PresharedKey != "" {
		k, _ := wgconf.ParseSecretKey(p.Spec.PresharedKey)
		out.PresharedKey = &k
	}
	for _, s := range p.Spec.AllowedIPs {
		pr, _ := netip.ParsePrefix(s)
		out.AllowedIPs = append(out.AllowedIPs, pr.Masked())
	}
	if p.Spec.Endpoint != nil {
		out.Endpoint = endpointOf(p.Spec.Endpoint)
	}
	return out, nil
}
