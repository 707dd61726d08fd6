package wireguard

import (
	"net"
	"net/netip"
	"slices"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// State is the live state of a WireGuard interface, as wgctrl reports it.
type State struct {
	// Name is the interface name.
	Name string
	// Type is the implementation: "Linux kernel" or "userspace".
	Type string
	// PublicKey is the interface's public key.
	PublicKey wgconf.Key
	// ListenPort is the UDP port the interface listens on.
	ListenPort int
	// Peers are the configured peers, sorted by public key.
	Peers []PeerState
}

// PeerState is the live state of one peer, with what metrics export.
type PeerState struct {
	// PublicKey identifies the peer.
	PublicKey wgconf.Key
	// Endpoint is the peer's current address, configured or learnt from
	// its packets; invalid when unknown.
	Endpoint netip.AddrPort
	// LastHandshake is the time of the latest completed handshake; zero
	// when there was none.
	LastHandshake time.Time
	// ReceiveBytes counts bytes received from the peer.
	ReceiveBytes int64
	// TransmitBytes counts bytes sent to the peer.
	TransmitBytes int64
	// AllowedIPs are the ranges routed to the peer, sorted.
	AllowedIPs []netip.Prefix
	// PersistentKeepalive is the keepalive interval; zero when off.
	PersistentKeepalive time.Duration
}

// Peer returns the state of the peer with the given public key.
func (s State) Peer(key wgconf.Key) (PeerState, bool) {
	i, ok := slices.BinarySearchFunc(s.Peers, key, func(p PeerState, k wgconf.Key) int {
		return p.PublicKey.Compare(k)
	})
	if !ok {
		return PeerState{}, false
	}
	return s.Peers[i], true
}

// stateFrom converts wgctrl's view of a device.
func stateFrom(d *wgtypes.Device) State {
	s := State{
		Name:       d.Name,
		Type:       d.Type.String(),
		PublicKey:  wgconf.Key(d.PublicKey),
		ListenPort: d.ListenPort,
		Peers:      make([]PeerState, 0, len(d.Peers)),
	}
	for _, p := range d.Peers {
		ps := PeerState{
			PublicKey:           wgconf.Key(p.PublicKey),
			Endpoint:            addrPortFromUDP(p.Endpoint),
			ReceiveBytes:        p.ReceiveBytes,
			TransmitBytes:       p.TransmitBytes,
			AllowedIPs:          prefixesFromIPNets(p.AllowedIPs),
			PersistentKeepalive: p.PersistentKeepaliveInterval,
		}
		if !p.LastHandshakeTime.IsZero() && p.LastHandshakeTime.Unix() != 0 {
			ps.LastHandshake = p.LastHandshakeTime
		}
		s.Peers = append(s.Peers, ps)
	}
	slices.SortFunc(s.Peers, func(a, b PeerState) int { return a.PublicKey.Compare(b.PublicKey) })
	return s
}

func compareKeys(a, b wgtypes.Key) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

func addrPortFromUDP(u *net.UDPAddr) netip.AddrPort {
	if u == nil {
		return netip.AddrPort{}
	}
	return unmapAddrPort(u.AddrPort())
}

func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	if !ap.IsValid() {
		return ap
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func udpFromAddrPort(ap netip.AddrPort) *net.UDPAddr {
	return net.UDPAddrFromAddrPort(unmapAddrPort(ap))
}

func prefixesFromIPNets(ns []net.IPNet) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ns))
	for _, n := range ns {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ones, _ := n.Mask.Size()
		out = append(out, netip.PrefixFrom(a.Unmap(), ones))
	}
	return canonicalPrefixes(out)
}

func ipNetsFromPrefixes(ps []netip.Prefix) []net.IPNet {
	out := make([]net.IPNet, 0, len(ps))
	for _, p := range ps {
		p = p.Masked()
		bits := 32
		if p.Addr().Is6() {
			bits = 128
		}
		out = append(out, net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)})
	}
	return out
}

// canonicalPrefixes masks, sorts and deduplicates prefixes, as WireGuard
// stores allowed IPs.
func canonicalPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}
