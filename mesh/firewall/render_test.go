package firewall

import (
	"errors"
	"github.com/kilofed/kilofed/mesh/golden"
	"net/netip"
	"testing"
)

var pfx = netip.MustParsePrefix

func TestRenderGolden(t *testing.T) {
	mesh := []netip.Prefix{pfx("10.1.0.0/16"), pfx("10.4.0.0/16"), pfx("fd01::/48"), pfx("10.5.0.1/32")}
	tests := []struct {
		name  string
		rules Rules
	}{
		{name: "empty"},
		{name: "leader", rules: Rules{
			Forward: []Forward{
				{Link: "kilo0", Range: pfx("10.2.0.0/24")},
				{Link: "kilo0", Range: pfx("fd02::/64")},
				{Range: pfx("10.1.0.7/24")},
				{Link: "kilo0"},
				{Range: pfx("10.1.0.0/24")}, // repeats the masked one above
			},
			Masquerade: []Masquerade{
				{Src: pfx("10.1.0.0/24"), Except: mesh},
				{Src: pfx("fd01:0:0:1::/64"), Except: mesh},
			},
			AcceptUDP: []uint16{51820},
		}},
		{name: "vxlan_from_location_nodes", rules: Rules{
			AcceptUDP: []uint16{51820},
			Tunnel: Tunnel{Kind: TunnelVXLAN, Port: 4789, Remotes: []netip.Addr{
				netip.MustParseAddr("192.168.10.3"), netip.MustParseAddr("::ffff:192.168.10.4"), netip.MustParseAddr("fd00:10::3"),
			}},
		}},
		{name: "ipip_from_location_nodes", rules: Rules{
			Tunnel: Tunnel{Kind: TunnelIPIP, Remotes: []netip.Addr{netip.MustParseAddr("192.168.10.3")}},
		}},
		{name: "vxlan_alone_in_location", rules: Rules{
			Tunnel: Tunnel{Kind: TunnelVXLAN, Port: 4789},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Format(tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "render_"+tt.name+".golden", got)
		})
	}
}

func TestRenderRejects(t *testing.T) {
	tests := []struct {
		name  string
		rules Rules
	}{
		{name: "forward without link or range", rules: Rules{Forward: []Forward{{}}}},
		{name: "masquerade without source", rules: Rules{Masquerade: []Masquerade{{Except: []netip.Prefix{pfx("10.0.0.0/8")}}}}},
		{name: "port zero", rules: Rules{AcceptUDP: []uint16{0}}},
		{name: "link with a space", rules: Rules{Forward: []Forward{{Link: "kilo 0"}}}},
		{name: "vxlan filter without port", rules: Rules{Tunnel: Tunnel{Kind: TunnelVXLAN}}},
		{name: "unknown tunnel kind", rules: Rules{Tunnel: Tunnel{Kind: "gre"}}},
		{name: "invalid tunnel remote", rules: Rules{Tunnel: Tunnel{Kind: TunnelIPIP, Remotes: []netip.Addr{{}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Render(tt.rules, IPv4); !errors.Is(err, ErrInvalid) {
				t.Errorf("Render() error = %v, want ErrInvalid", err)
			}
		})
	}
}
