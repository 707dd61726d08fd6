package wireguard

import (
	"net/netip"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Config is the whole desired state of one WireGuard interface.
type Config struct {
	// PrivateKey is the interface's private key.
	PrivateKey wgtypes.Key
	// ListenPort is the UDP port; zero keeps the current or a random port.
	ListenPort int
	// Peers are all peers of the interface, sorted by public key.
	Peers []PeerConfig
}

// PeerConfig is one [Peer] section.
type PeerConfig struct {
	// Name is a human label (node or Peer name) kept for rendering only.
	Name string
	// PublicKey identifies the peer.
	PublicKey wgtypes.Key
	// PresharedKey is optional.
	PresharedKey *wgtypes.Key
	// Endpoint is the peer's address; invalid for a peer that roams or
	// whose endpoint is learnt from its handshakes (NAT).
	Endpoint netip.AddrPort
	// EndpointDNS is the name the endpoint came from, for rendering.
	EndpointDNS string
	// AllowedIPs are the ranges routed to the peer.
	AllowedIPs []netip.Prefix
	// PersistentKeepalive; zero disables it.
	PersistentKeepalive time.Duration
}
