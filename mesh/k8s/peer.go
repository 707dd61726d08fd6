package k8s

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// errUnparsed marks a Peer value that did not parse although
// v1alpha1.Peer.Validate accepted it; it never happens while the two agree.
var errUnparsed = errors.New("value not understood")

// PeerFromObject reads a Peer into a topology.Peer. A Peer with any invalid
// value (the rules of v1alpha1.Peer.Validate: the schema's plus the
// endpoint, which the schema cannot check) is not used at all, and the error,
// a Problem wrapping ErrInvalidPeer and Validate's sentinels, says why.
// Allowed IPs are masked (10.5.100.1/24 becomes 10.5.100.0/24, as WireGuard
// does); an endpoint with both a DNS name and an IP uses the name, as Kilo
// does; Created is the object's creation time. Every value is parsed once;
// Validate runs only to explain a Peer that does not parse.
func PeerFromObject(p *v1alpha1.Peer) (topology.Peer, error) {
	out, err := parsePeer(p)
	if err != nil {
		if verr := p.Validate(); verr != nil {
			err = verr
		}
		return topology.Peer{}, Problem{Kind: topology.KindPeer, Name: p.Name, Err: fmt.Errorf("%w: %w", ErrInvalidPeer, err)}
	}
	return out, nil
}

// parsePeer parses every value of p's spec, failing at the first one that
// Validate would reject.
func parsePeer(p *v1alpha1.Peer) (topology.Peer, error) {
	s := p.Spec
	out := topology.Peer{Name: p.Name, Created: p.CreationTimestamp.Time}
	switch v := p.Annotations[PeerViaGatewayAnnotation]; v {
	case "", "false":
	case "true":
		out.ViaGateway = true
	default:
		return topology.Peer{}, fmt.Errorf("annotation %s: %q is neither true nor false", PeerViaGatewayAnnotation, v)
	}
	var err error
	if out.PublicKey, err = parseKey(s.PublicKey); err != nil {
		return topology.Peer{}, fmt.Errorf("publicKey: %w", err)
	}
	if s.PresharedKey != "" {
		k, err := parseKey(s.PresharedKey)
		if err != nil {
			return topology.Peer{}, fmt.Errorf("presharedKey: %w", err)
		}
		psk := wgconf.SecretKey(k)
		out.PresharedKey = &psk
	}
	if len(s.AllowedIPs) == 0 {
		return topology.Peer{}, fmt.Errorf("allowedIPs: %w", errUnparsed)
	}
	for _, a := range s.AllowedIPs {
		pr, err := netip.ParsePrefix(a)
		if err != nil {
			return topology.Peer{}, fmt.Errorf("allowedIPs: %w", err)
		}
		out.AllowedIPs = append(out.AllowedIPs, pr.Masked())
	}
	if s.PersistentKeepalive < 0 || s.PersistentKeepalive > 65535 {
		return topology.Peer{}, fmt.Errorf("persistentKeepalive: %w", errUnparsed)
	}
	out.PersistentKeepalive = time.Duration(s.PersistentKeepalive) * time.Second
	if s.Endpoint != nil {
		if err := s.Endpoint.Validate(); err != nil {
			return topology.Peer{}, fmt.Errorf("endpoint: %w", err)
		}
		out.Endpoint = endpointOf(s.Endpoint)
	}
	return out, nil
}

// parseKey parses a WireGuard key as `wg pubkey` prints it: 44 base64
// characters that decode to 32 bytes (the rule of v1alpha1.ValidateKey).
func parseKey(s string) (wgconf.Key, error) {
	if len(s) != 44 {
		return wgconf.Key{}, wgconf.ErrInvalidKey
	}
	return wgconf.ParseKey(s)
}
