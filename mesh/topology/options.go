package topology

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Defaults used by New for zero-valued Options fields.
const (
	// DefaultPort is WireGuard's customary listen port (Kilo's --port).
	DefaultPort uint16 = 51820
	// DefaultWireGuardLink is the WireGuard interface name (Kilo's --interface).
	DefaultWireGuardLink = "kilo0"
	// DefaultTunnelLink is the encapsulation link used when encapsulation is
	// on and Links.Tunnel is empty: Linux's IPIP fallback device.
	DefaultTunnelLink = "tunl0"
	// DefaultTable is the routing table that holds the routes which
	// encapsulate traffic from local pods to other nodes' internal IPs
	// (Kilo uses the same number).
	DefaultTable = 1107
)

// DefaultSubnet is the WireGuard network used when Options.Subnet is the
// zero Prefix (Kilo's --subnet default).
var DefaultSubnet = netip.MustParsePrefix("10.4.0.0/16")

// ErrInvalidOptions is wrapped by every error New returns.
var ErrInvalidOptions = errors.New("invalid topology options")

// Options configure how New lays out the mesh; the zero value is usable.
type Options struct {
	// Granularity groups nodes into segments; empty means LocationGranularity.
	Granularity Granularity
	// Subnet is the WireGuard network (Kilo's --subnet) from which every
	// segment gets its WireGuard IP; the zero Prefix means DefaultSubnet.
	// It must have no host bits set and leave at least two usable addresses.
	Subnet netip.Prefix
	// Port is the WireGuard listen port, and the port of node endpoints that
	// do not name one; zero means DefaultPort.
	Port uint16
	// Encapsulate says when traffic between nodes of one location goes
	// through Links.Tunnel; empty means EncapsulateNever.
	Encapsulate Encapsulate
	// Links names the links used in routes.
	Links Links
	// Table is the routing table of the encapsulated routes to other nodes'
	// internal IPs that policy rules select for traffic from local pods;
	// zero means DefaultTable.
	Table int
	// NoLocalRoutes leaves the routes between nodes of one location to the
	// CNI (Kilo's --local=false): Routes then only carries traffic that
	// leaves the location.
	NoLocalRoutes bool
	// ServiceCIDRs are the cluster's Service ranges (Kilo's
	// --service-cidr). Peers may not claim them, and PeerConf routes them
	// to one segment so that an external peer reaches ClusterIPs and the
	// cluster DNS.
	ServiceCIDRs []netip.Prefix
	// MeshKeepalive is the least persistent keepalive of the tunnels
	// between segments (not of external Peers). Besides keeping tunnels and
	// NAT mappings up, it makes WireGuard start a handshake as soon as a peer
	// is configured, so that after a failover the side configured last
	// completes the handshake at once instead of after a 5 s retry. Zero
	// leaves the nodes' own keepalives alone.
	MeshKeepalive time.Duration
	// TunnelNextHop says how a route to dst reaches, through Links.Tunnel,
	// the node whose underlay address is remote: the gateway, whether the
	// route needs onlink, and whether the tunnel can carry dst at all. The
	// agent passes its encapsulation's rule (encap.Kind.NextHop); nil means
	// IPv4 via the remote's address, onlink, and no IPv6 through the tunnel.
	TunnelNextHop func(dst netip.Prefix, remote netip.Addr) (gw netip.Addr, onLink, ok bool)
}

func (o Options) tunnelNextHop(dst netip.Prefix, remote netip.Addr) (netip.Addr, bool, bool) {
	if o.TunnelNextHop != nil {
		return o.TunnelNextHop(dst, remote)
	}
	remote = remote.Unmap()
	if dst.Addr().Is4() && remote.Is4() {
		return remote, true, true
	}
	return netip.Addr{}, false, false
}

// Links names the links that routes leave through.
type Links struct {
	// WireGuard is the WireGuard interface; empty means DefaultWireGuardLink.
	WireGuard string
	// Underlay is the link that holds the node's internal IP (e.g. eth0).
	// Empty leaves the choice to the kernel, which then cannot take on-link
	// next hops outside the node's own subnet.
	Underlay string
	// Tunnel is the encapsulation link ("tunl0" for IPIP, a VXLAN link such
	// as "kilo-vxlan"); empty means DefaultTunnelLink.
	Tunnel string
}

// withDefaults validates o and fills its zero fields.
func (o Options) withDefaults() (Options, error) {
	switch o.Granularity {
	case "":
		o.Granularity = LocationGranularity
	case LocationGranularity, FullGranularity, CrossGranularity:
	default:
		return o, fmt.Errorf("%w: mesh granularity %q is unknown; use %q, %q or %q",
			ErrInvalidOptions, o.Granularity, LocationGranularity, FullGranularity, CrossGranularity)
	}
	switch o.Encapsulate {
	case "":
		o.Encapsulate = EncapsulateNever
	case EncapsulateNever, EncapsulateCrossSubnet, EncapsulateAlways:
	default:
		return o, fmt.Errorf("%w: encapsulation %q is unknown; use %q, %q or %q",
			ErrInvalidOptions, o.Encapsulate, EncapsulateNever, EncapsulateCrossSubnet, EncapsulateAlways)
	}
	if o.Subnet == (netip.Prefix{}) {
		o.Subnet = DefaultSubnet
	}
	if !o.Subnet.IsValid() {
		return o, fmt.Errorf("%w: subnet %s is not a valid CIDR; pass a range such as %s", ErrInvalidOptions, o.Subnet, DefaultSubnet)
	}
	o.Subnet = unmapPrefix(o.Subnet)
	if o.Subnet != o.Subnet.Masked() {
		return o, fmt.Errorf("%w: subnet %s has host bits set; use %s", ErrInvalidOptions, o.Subnet, o.Subnet.Masked())
	}
	if o.Subnet.Addr().BitLen()-o.Subnet.Bits() < 2 {
		return o, fmt.Errorf("%w: subnet %s is too small to hold WireGuard IPs; use a prefix of /30 or shorter (for example %s)",
			ErrInvalidOptions, o.Subnet, DefaultSubnet)
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Links.WireGuard == "" {
		o.Links.WireGuard = DefaultWireGuardLink
	}
	if o.Links.Tunnel == "" {
		o.Links.Tunnel = DefaultTunnelLink
	}
	if o.Table == 0 {
		o.Table = DefaultTable
	}
	o.ServiceCIDRs = normPrefixes(o.ServiceCIDRs)
	if o.Table < 0 {
		return o, fmt.Errorf("%w: routing table %d is negative; use a table number such as %d", ErrInvalidOptions, o.Table, DefaultTable)
	}
	return o, nil
}

// DefaultMeshKeepalive is the agents' default --mesh-keepalive: WireGuard's
// customary keepalive, short enough for NAT mappings.
const DefaultMeshKeepalive = 25 * time.Second

// ErrInvalidValue is returned by ParseGranularity and ParseEncapsulate.
var ErrInvalidValue = errors.New("invalid value")

// ParseGranularity reads a --mesh-granularity value; empty means
// LocationGranularity.
func ParseGranularity(s string) (Granularity, error) {
	switch g := Granularity(s); g {
	case "":
		return LocationGranularity, nil
	case LocationGranularity, FullGranularity, CrossGranularity:
		return g, nil
	}
	return "", fmt.Errorf("%q: %w: use location, full or cross", s, ErrInvalidValue)
}

// ParseEncapsulate reads an --encapsulate value; empty means
// EncapsulateNever.
func ParseEncapsulate(s string) (Encapsulate, error) {
	switch e := Encapsulate(s); e {
	case "":
		return EncapsulateNever, nil
	case EncapsulateNever, EncapsulateCrossSubnet, EncapsulateAlways:
		return e, nil
	}
	return "", fmt.Errorf("%q: %w: use never, crosssubnet or always", s, ErrInvalidValue)
}
