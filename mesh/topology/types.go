package topology

import (
	"net/netip"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Granularity says which nodes get WireGuard tunnels between them.
type Granularity string

const (
	// LocationGranularity groups nodes by location; one leader per location
	// holds the tunnels to the other locations (Kilo's default).
	LocationGranularity Granularity = "location"
	// FullGranularity gives every node its own segment: a full mesh.
	FullGranularity Granularity = "full"
	// CrossGranularity builds direct tunnels between every pair of nodes in
	// different locations and none inside a location.
	CrossGranularity Granularity = "cross"
)

// Encapsulate says when traffic between nodes of one location is wrapped in
// an IP tunnel (IPIP or VXLAN) rather than routed natively.
type Encapsulate string

const (
	// EncapsulateNever routes natively inside a location.
	EncapsulateNever Encapsulate = "never"
	// EncapsulateCrossSubnet encapsulates only between nodes whose internal
	// IPs are in different subnets.
	EncapsulateCrossSubnet Encapsulate = "crosssubnet"
	// EncapsulateAlways always encapsulates inside a location.
	EncapsulateAlways Encapsulate = "always"
)

// Endpoint is where a WireGuard peer listens: a DNS name or an IP, and a port.
// Addr is set when the endpoint is an IP or once a DNS name was resolved.
type Endpoint struct {
	// DNS is the host name, empty when the endpoint was given as an IP.
	DNS string
	// Addr is the IP and port; invalid while a DNS name is unresolved.
	Addr netip.AddrPort
	// Port is the UDP port, also when Addr is not yet known.
	Port uint16
}

// Node is one cluster node as the mesh sees it, read from the Node object and
// its kilo.squat.ai annotations.
type Node struct {
	// Name is the Node's name.
	Name string
	// Location is the node's location (annotation, else topology label);
	// empty means the node is alone in a location of its own.
	Location string
	// Key is the node's WireGuard public key; the zero key means unknown.
	Key wgconf.Key
	// Endpoint is where other locations reach this node's WireGuard port:
	// force-endpoint if set, else the external IP, else the internal IP.
	Endpoint *Endpoint
	// InternalIP is the node's private address with its subnet.
	InternalIP netip.Prefix
	// InternalIP6 is the node's private IPv6 address, if dual-stack.
	InternalIP6 netip.Prefix
	// ExternalIP is the node's public address, if any (prefers leadership).
	ExternalIP netip.Addr
	// PodCIDRs are the node's pod ranges (IPv4 and IPv6 for dual stack).
	PodCIDRs []netip.Prefix
	// AllowedLocationIPs are extra ranges reachable through this location.
	AllowedLocationIPs []netip.Prefix
	// WireGuardIP is the address the node announces, if it publishes one.
	WireGuardIP netip.Prefix
	// PersistentKeepalive keeps NAT mappings open; zero disables it.
	PersistentKeepalive time.Duration
	// Since is when the node's agent began its current run (its heartbeat
	// Lease's creation time, set by the API server); zero when unknown.
	// Among candidates that are otherwise equal, the one running longest
	// leads, so a node that starts or comes back never takes leadership
	// from a working one.
	Since time.Time
	// Ready reports whether the node's agent is alive (fresh lease) and
	// forwarding; only ready nodes are elected leader.
	Ready bool
	// Leader reports whether the node carries the kilo.squat.ai/leader annotation.
	Leader bool
}

// Peer is an external WireGuard peer declared by a Peer object
// (peers.kilo.squat.ai): a laptop, a monitoring agent, another cluster.
type Peer struct {
	// Name is the Peer object's name.
	Name string
	// AllowedIPs are the ranges routed to this peer.
	AllowedIPs []netip.Prefix
	// PublicKey is the peer's WireGuard public key.
	PublicKey wgconf.Key
	// PresharedKey is an optional extra symmetric key.
	PresharedKey *wgconf.SecretKey
	// Created is when the Peer object was created; when two Peers claim
	// the same range, the older one keeps it.
	Created time.Time
	// Endpoint is where the peer listens, nil for a roaming peer.
	Endpoint *Endpoint
	// PersistentKeepalive keeps NAT mappings open; zero disables it.
	PersistentKeepalive time.Duration
	// ViaGateway: segments behind NAT reach this peer through the gateway
	// segment, as they reach a roaming one, though it has an endpoint. A
	// peer that only knows the gateway's key (a remote cluster's gateway,
	// to which this cluster announces its NAT'd locations as reached
	// through its own gateway) needs it.
	ViaGateway bool
}
