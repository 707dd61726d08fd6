package wireguard

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func TestChanges(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	ipnets := func(ss ...string) []net.IPNet {
		return ipNetsFromPrefixes(pfx(ss...))
	}
	udp := func(s string) *net.UDPAddr { return net.UDPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	psk := secret(5)
	priv := secret(7)
	// The live device: peers 1 and 2 configured, priv as key, port 51820.
	live := func() *wgtypes.Device {
		return &wgtypes.Device{
			Name: "kilo0", PrivateKey: wgtypes.Key(priv), PublicKey: wgtypes.Key(priv.PublicKey()), ListenPort: 51820,
			Peers: []wgtypes.Peer{
				{PublicKey: wgkey(1), Endpoint: udp("198.51.100.1:51820"), AllowedIPs: ipnets("10.4.0.1/32", "10.1.0.0/24"),
					PersistentKeepaliveInterval: 25 * time.Second},
				{PublicKey: wgkey(2), Endpoint: udp("[::ffff:198.51.100.2]:51820"), AllowedIPs: ipnets("10.2.0.0/24"), PresharedKey: wgtypes.Key(psk)},
			},
		}
	}
	same := func() wgconf.Config {
		return wgconf.Config{PrivateKey: priv, ListenPort: 51820, Peers: []wgconf.Peer{
			{PublicKey: key(1), Endpoint: netip.MustParseAddrPort("198.51.100.1:51820"),
				AllowedIPs: pfx("10.1.0.7/24", "10.4.0.1/32"), PersistentKeepalive: 25 * time.Second},
			{PublicKey: key(2), Endpoint: netip.MustParseAddrPort("198.51.100.2:51820"), AllowedIPs: pfx("10.2.0.0/24"), PresharedKey: &psk},
		}}
	}
	tests := []struct {
		name string
		edit func(*wgconf.Config)
		want string
	}{
		{name: "same config sends nothing", edit: func(*wgconf.Config) {}},
		{name: "zero port and zero key keep the device's", edit: func(c *wgconf.Config) { c.ListenPort = 0; c.PrivateKey = wgconf.SecretKey{} }},
		{name: "invalid endpoint keeps the device's", edit: func(c *wgconf.Config) { c.Peers[0].Endpoint = netip.AddrPort{} }},
		{
			name: "new key and port",
			edit: func(c *wgconf.Config) { c.PrivateKey = secret(8); c.ListenPort = 51821 },
			want: "private-key " + short(wgtypes.Key(secret(8).PublicKey())) + "\nlisten-port 51821\n",
		},
		{
			name: "one peer's allowed IPs change, the other untouched",
			edit: func(c *wgconf.Config) { c.Peers[1].AllowedIPs = pfx("10.2.0.0/24", "10.22.0.0/16") },
			want: "update peer AgICAgIC allowed-ips [10.2.0.0/24 10.22.0.0/16]\n",
		},
		{
			name: "endpoint, keepalive and preshared key change",
			edit: func(c *wgconf.Config) {
				c.Peers[0].Endpoint = netip.MustParseAddrPort("203.0.113.1:4000")
				c.Peers[0].PersistentKeepalive = 10 * time.Second
				c.Peers[1].PresharedKey = nil
			},
			want: "update peer AQEBAQEB endpoint 203.0.113.1:4000 keepalive 10s\nupdate peer AgICAgIC preshared-key none\n",
		},
		{
			name: "peer added and peer removed",
			edit: func(c *wgconf.Config) {
				c.Peers[1] = wgconf.Peer{PublicKey: key(3), AllowedIPs: pfx("10.3.0.0/24", "fd03::/64"), PersistentKeepalive: 25 * time.Second}
			},
			want: "remove peer AgICAgIC\nadd peer AwMDAwMD keepalive 25s allowed-ips [10.3.0.0/24 fd03::/64]\n",
		},
		{
			name: "all peers removed",
			edit: func(c *wgconf.Config) { c.Peers = nil },
			want: "remove peer AQEBAQEB\nremove peer AgICAgIC\n",
		},
		{
			name: "range moves between peers",
			edit: func(c *wgconf.Config) {
				c.Peers[0].AllowedIPs = pfx("10.4.0.1/32")
				c.Peers[1].AllowedIPs = pfx("10.1.0.0/24", "10.2.0.0/24")
			},
			want: "update peer AQEBAQEB allowed-ips [10.4.0.1/32]\nupdate peer AgICAgIC allowed-ips [10.1.0.0/24 10.2.0.0/24]\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := same()
			tt.edit(&desired)
			if err := validate(desired); err != nil {
				t.Fatalf("validate: %v", err)
			}
			dev := live()
			cfg, ok := changes(desired, dev)
			if got := formatChanges(cfg); got != tt.want || ok != (tt.want != "") {
				t.Errorf("changes = %v (-want +got):\n%s", ok, cmp.Diff(tt.want, got))
			}
			// Applying the changes converges: nothing left to send.
			apply(dev, cfg)
			if again, ok := changes(desired, dev); ok {
				t.Errorf("after apply, still changes:\n%s", formatChanges(again))
			}
		})
	}
}

func TestValidate(t *testing.T) {
	priv := secret(7)
	p := netip.MustParsePrefix
	tests := []struct {
		name    string
		cfg     wgconf.Config
		wantErr bool
	}{
		{name: "ok", cfg: wgconf.Config{PrivateKey: priv, Peers: []wgconf.Peer{
			{PublicKey: key(1), AllowedIPs: []netip.Prefix{p("10.1.0.0/24")}},
			{PublicKey: key(2), AllowedIPs: []netip.Prefix{p("10.1.0.0/25")}},
		}}},
		{name: "duplicate peer", wantErr: true, cfg: wgconf.Config{PrivateKey: priv, Peers: []wgconf.Peer{{PublicKey: key(1)}, {PublicKey: key(1)}}}},
		{name: "own key as peer", wantErr: true, cfg: wgconf.Config{PrivateKey: priv, Peers: []wgconf.Peer{{PublicKey: priv.PublicKey()}}}},
		{name: "range claimed twice", wantErr: true, cfg: wgconf.Config{PrivateKey: priv, Peers: []wgconf.Peer{
			{PublicKey: key(1), AllowedIPs: []netip.Prefix{p("10.1.0.0/24")}},
			{PublicKey: key(2), AllowedIPs: []netip.Prefix{p("10.1.0.9/24")}},
		}}},
		{name: "invalid range", wantErr: true, cfg: wgconf.Config{PrivateKey: priv, Peers: []wgconf.Peer{{PublicKey: key(1), AllowedIPs: []netip.Prefix{{}}}}}},
		{name: "port out of range", wantErr: true, cfg: wgconf.Config{PrivateKey: priv, ListenPort: 70000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validate(tt.cfg); (err != nil) != tt.wantErr {
				t.Errorf("validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
