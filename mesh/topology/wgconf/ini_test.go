package wgconf

import (
	"github.com/kilofed/kilofed/mesh/golden"
	"net/netip"
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	psk := SecretKey(key(5))
	node := Interface{
		Config: Config{PrivateKey: SecretKey(key(7)), ListenPort: 51820, Peers: []Peer{
			{
				Name: "location eu (node-a)", PublicKey: key(1),
				Endpoint: netip.MustParseAddrPort("198.51.100.1:51820"), EndpointDNS: "gw.eu.example",
				AllowedIPs:          []netip.Prefix{netip.MustParsePrefix("10.4.0.1/32"), netip.MustParsePrefix("10.1.0.0/24")},
				PersistentKeepalive: 25 * time.Second,
			},
			{
				Name: "laptop", PublicKey: key(2), PresharedKey: &psk,
				AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.5.0.1/32"), netip.MustParsePrefix("fd05::1/128")},
			},
			{
				PublicKey: key(3), Endpoint: netip.MustParseAddrPort("[2001:db8::3]:51820"),
				AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.3.0.0/24")},
			},
		}},
		Address: []netip.Prefix{netip.MustParsePrefix("10.4.0.2/16")},
		DNS:     []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		MTU:     1420,
	}
	tests := []struct {
		name  string
		iface Interface
		opts  RenderOptions
	}{
		{name: "node_with_private_key", iface: node, opts: RenderOptions{WithPrivateKey: true}},
		{name: "node_without_private_key", iface: node},
		{name: "as_peer_allowed_ips", iface: node, opts: RenderOptions{
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		}},
		{name: "empty", iface: Interface{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden.Check(t, "render_"+tt.name+".golden", Render(tt.iface, tt.opts))
		})
	}
}

// key returns a deterministic key filled with b, for readable tests.
func key(b byte) Key {
	var k Key
	for i := range k {
		k[i] = b
	}
	return k
}
