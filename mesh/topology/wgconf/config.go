package wgconf

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Config is the whole desired state of one WireGuard interface.
type Config struct {
	// PrivateKey is the interface's private key; the zero key leaves the
	// device's key alone.
	PrivateKey SecretKey
	// ListenPort is the UDP port; zero keeps the current or a random port.
	ListenPort int
	// Peers are all peers of the interface, sorted by public key.
	Peers []Peer
}

// Peer is one [Peer] section.
type Peer struct {
	// Name is a human label (node or Peer name) kept for rendering only.
	Name string
	// PublicKey identifies the peer.
	PublicKey Key
	// PresharedKey is optional.
	PresharedKey *SecretKey
	// Endpoint is the peer's address; invalid for a peer that roams or
	// whose endpoint is learnt from its handshakes (NAT).
	Endpoint netip.AddrPort
	// EndpointDNS is the name the endpoint came from, for rendering.
	EndpointDNS string
	// KeepLearntEndpoint reports whether an endpoint learnt from the
	// peer's recent handshakes wins over Endpoint: the peer sits behind
	// NAT (Endpoint is a guess, such as an internal IP) or roams. When it
	// is false, a changed Endpoint replaces the learnt one at once.
	KeepLearntEndpoint bool
	// AllowedIPs are the ranges routed to the peer.
	AllowedIPs []netip.Prefix
	// PersistentKeepalive; zero disables it.
	PersistentKeepalive time.Duration
}

// String summarises c without its private key: listen port and peers.
func (c Config) String() string {
	return fmt.Sprintf("{PrivateKey:%s ListenPort:%d Peers:%v}", c.PrivateKey, c.ListenPort, c.Peers)
}

// LogValue logs c without its private key.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("private_key", c.PrivateKey),
		slog.Int("listen_port", c.ListenPort),
		slog.Int("peers", len(c.Peers)),
	)
}

// String writes p like its [Peer] section on one line, without the
// preshared key.
func (p Peer) String() string {
	s := fmt.Sprintf("{%s %s", p.Name, p.PublicKey)
	if p.PresharedKey != nil {
		s += " psk=" + redacted
	}
	if p.Endpoint.IsValid() || p.EndpointDNS != "" {
		s += " endpoint=" + p.endpoint()
	}
	s += fmt.Sprintf(" allowed=%v", p.AllowedIPs)
	if p.PersistentKeepalive > 0 {
		s += " keepalive=" + p.PersistentKeepalive.String()
	}
	return s + "}"
}

// LogValue logs p without its preshared key.
func (p Peer) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("name", p.Name), slog.String("public_key", p.PublicKey.String())}
	if p.PresharedKey != nil {
		attrs = append(attrs, slog.String("preshared_key", redacted))
	}
	if p.Endpoint.IsValid() || p.EndpointDNS != "" {
		attrs = append(attrs, slog.String("endpoint", p.endpoint()))
	}
	attrs = append(attrs, slog.Any("allowed_ips", p.AllowedIPs))
	return slog.GroupValue(attrs...)
}

// endpoint is the endpoint as written: the DNS name when there is one.
func (p Peer) endpoint() string {
	if p.EndpointDNS != "" && p.Endpoint.Port() != 0 {
		return fmt.Sprintf("%s:%d", p.EndpointDNS, p.Endpoint.Port())
	}
	return p.Endpoint.String()
}
