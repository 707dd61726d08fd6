package firewall

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
)

// Firewall keeps the kernel's packet filter in line with Rules.
type Firewall interface {
	// Set makes kilofed's chains hold exactly rules, restoring anything
	// deleted by hand; it is safe to call again with the same rules.
	Set(ctx context.Context, rules Rules) error
	// Close removes kilofed's chains and the jumps to them.
	Close(ctx context.Context) error
}

// Rules is the desired packet filter state of one node.
type Rules struct {
	// Forward lists ranges whose forwarded traffic is accepted.
	Forward []Forward
	// Masquerade lists sources whose traffic is NATed when it leaves the
	// mesh. For a packet, the first entry whose Src matches decides.
	Masquerade []Masquerade
	// AcceptUDP lists UDP ports accepted on input (the WireGuard port).
	AcceptUDP []uint16
	// Tunnel, when its Kind is set, accepts the encapsulated packets of
	// that kind on input only from its Remotes and drops all others.
	Tunnel Tunnel
}

// TunnelKind is an encapsulation whose packets a Tunnel filters.
type TunnelKind string

const (
	// TunnelIPIP matches IP protocol 4 (IPIP, and IPv4 in IPv6).
	TunnelIPIP TunnelKind = "ipip"
	// TunnelVXLAN matches UDP to Tunnel.Port.
	TunnelVXLAN TunnelKind = "vxlan"
)

// Tunnel filters the encapsulated packets a node receives. Their inner
// packets enter the pod network unencrypted and from any source the outer
// header claims, so only the nodes that tunnel to this one (its location)
// may send them; the filter covers both address families.
type Tunnel struct {
	// Kind is the encapsulation; empty means no filter.
	Kind TunnelKind
	// Port is the UDP destination port of TunnelVXLAN.
	Port uint16
	// Remotes are the only sources accepted: the underlay addresses of
	// the nodes whose tunnels end here. None drops every such packet.
	Remotes []netip.Addr
}

// Forward accepts forwarded traffic to and from a range. With Link and
// Range, packets leaving through Link to Range and packets entering from
// Link out of Range are accepted; with Range only, any packet from or to
// Range; with Link only, any packet entering or leaving through Link.
type Forward struct {
	// Link is an interface name such as kilo0; empty matches any.
	Link string
	// Range is a remote range; invalid matches any address.
	Range netip.Prefix
}

// Masquerade NATs traffic from Src to the node's address, except traffic
// to the Except ranges (the mesh: pod, WireGuard and peer ranges).
type Masquerade struct {
	// Src is the range whose traffic is masqueraded (the pod range).
	Src netip.Prefix
	// Except are destinations left alone; entries of the other address
	// family than Src are ignored.
	Except []netip.Prefix
}

// Options configure New.
type Options struct {
	// Logger receives one line per change; nil discards.
	Logger *slog.Logger
	// DisableIPv6 leaves ip6tables alone, for nodes without IPv6; Set
	// then rejects IPv6 ranges.
	DisableIPv6 bool
}

var (
	// ErrUnavailable is returned by New when iptables cannot be used.
	ErrUnavailable = errors.New("iptables unavailable")
	// ErrInvalid is returned by Set for rules that cannot be rendered.
	ErrInvalid = errors.New("invalid firewall rules")
)
