package wgconf

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
)

// Interface is the [Interface] section of a wg-quick file; only Render uses
// Address, DNS and MTU, which the wg tool itself does not know.
type Interface struct {
	// Config holds the private key (written only with WithPrivateKey),
	// the listen port and the peers.
	Config
	// Address lists the interface addresses (wg-quick's Address).
	Address []netip.Prefix
	// DNS lists resolvers for wg-quick's DNS line.
	DNS []netip.Addr
	// MTU is wg-quick's MTU; zero omits it.
	MTU int
}

// String summarises iface like Config's String, with its addresses.
func (iface Interface) String() string {
	return fmt.Sprintf("{Address:%v %s}", iface.Address, iface.Config)
}

// LogValue logs iface without its private key.
func (iface Interface) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("address", iface.Address), slog.Any("config", iface.Config))
}

// RenderOptions say how much of a configuration Render writes.
type RenderOptions struct {
	// WithPrivateKey writes the PrivateKey line; otherwise a placeholder
	// comment is written so that the user pastes their own key.
	WithPrivateKey bool
	// AllowedIPs, when valid prefixes are given, replaces every peer's
	// AllowedIPs (kgctl's --allowed-ips for --as-peer output).
	AllowedIPs []netip.Prefix
}

// Render writes iface in wg-quick's INI format, peers in the order given.
func Render(iface Interface, opts RenderOptions) string {
	var b strings.Builder
	b.WriteString("[Interface]\n")
	if opts.WithPrivateKey {
		fmt.Fprintf(&b, "PrivateKey = %s\n", iface.PrivateKey.Base64())
	} else {
		b.WriteString("# PrivateKey = <the private key that matches this peer's public key>\n")
	}
	if len(iface.Address) > 0 {
		fmt.Fprintf(&b, "Address = %s\n", joinPrefixes(iface.Address))
	}
	if iface.ListenPort != 0 {
		fmt.Fprintf(&b, "ListenPort = %d\n", iface.ListenPort)
	}
	if len(iface.DNS) > 0 {
		s := make([]string, len(iface.DNS))
		for i, a := range iface.DNS {
			s[i] = a.String()
		}
		fmt.Fprintf(&b, "DNS = %s\n", strings.Join(s, ", "))
	}
	if iface.MTU != 0 {
		fmt.Fprintf(&b, "MTU = %d\n", iface.MTU)
	}
	for _, p := range iface.Peers {
		b.WriteString("\n")
		if p.Name != "" {
			fmt.Fprintf(&b, "# %s\n", p.Name)
		}
		b.WriteString("[Peer]\n")
		fmt.Fprintf(&b, "PublicKey = %s\n", p.PublicKey)
		if p.PresharedKey != nil {
			fmt.Fprintf(&b, "PresharedKey = %s\n", p.PresharedKey.Base64())
		}
		allowed := p.AllowedIPs
		if len(opts.AllowedIPs) > 0 {
			allowed = opts.AllowedIPs
		}
		if len(allowed) > 0 {
			fmt.Fprintf(&b, "AllowedIPs = %s\n", joinPrefixes(allowed))
		}
		if p.Endpoint.IsValid() || (p.EndpointDNS != "" && p.Endpoint.Port() != 0) {
			// A DNS endpoint renders as written, resolved or not.
			fmt.Fprintf(&b, "Endpoint = %s\n", p.endpoint())
		}
		if p.PersistentKeepalive > 0 {
			fmt.Fprintf(&b, "PersistentKeepalive = %d\n", int(p.PersistentKeepalive.Seconds()))
		}
	}
	return b.String()
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
