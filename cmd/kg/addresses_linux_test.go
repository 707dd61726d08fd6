//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/kilofed/kilofed/mesh/link"
	"github.com/kilofed/kilofed/mesh/topology"
)

// TestNodeAddressesOfEveryFamily checks that a node starts with an IPv4,
// a dual-stack or an IPv6-only InternalIP: the underlay is the link that
// carries the IPv4 address, else the IPv6 one.
func TestNodeAddressesOfEveryFamily(t *testing.T) {
	host := map[netip.Addr]struct {
		link string
		p    netip.Prefix
	}{
		netip.MustParseAddr("10.0.1.10"):        {"eth0", netip.MustParsePrefix("10.0.1.10/24")},
		netip.MustParseAddr("2001:db8:0:1::10"): {"eth0", netip.MustParsePrefix("2001:db8:0:1::10/64")},
		netip.MustParseAddr("2001:db8:0:9::10"): {"eth1", netip.MustParsePrefix("2001:db8:0:9::10/64")},
	}
	byAddress := func(a netip.Addr) (string, netip.Prefix, error) {
		if l, ok := host[a]; ok {
			return l.link, l.p, nil
		}
		return "", netip.Prefix{}, fmt.Errorf("%w: %s", link.ErrLinkNotFound, a)
	}
	v4 := netip.MustParsePrefix("10.0.1.10/32")
	v6 := netip.MustParsePrefix("2001:db8:0:1::10/128")
	for _, tc := range []struct {
		name    string
		node    topology.Node
		want    addresses
		wantErr error
	}{
		{name: "IPv4", node: topology.Node{InternalIP: v4},
			want: addresses{underlay: "eth0", internal: host[v4.Addr()].p}},
		{name: "dual-stack", node: topology.Node{InternalIP: v4, InternalIP6: v6},
			want: addresses{underlay: "eth0", internal: host[v4.Addr()].p, internal6: host[v6.Addr()].p}},
		{name: "IPv6-only", node: topology.Node{InternalIP6: v6},
			want: addresses{underlay: "eth0", internal6: host[v6.Addr()].p}},
		{name: "IPv6-only on another link", node: topology.Node{InternalIP6: netip.MustParsePrefix("2001:db8:0:9::10/128")},
			want: addresses{underlay: "eth1", internal6: netip.MustParsePrefix("2001:db8:0:9::10/64")}},
		{name: "IPv6 not on this host is left out", node: topology.Node{InternalIP: v4, InternalIP6: netip.MustParsePrefix("2001:db8:0:7::1/128")},
			want: addresses{underlay: "eth0", internal: host[v4.Addr()].p}},
		{name: "IPv4 not on this host", node: topology.Node{InternalIP: netip.MustParsePrefix("10.0.7.1/32"), InternalIP6: v6},
			wantErr: link.ErrLinkNotFound},
		{name: "IPv6-only not on this host", node: topology.Node{InternalIP6: netip.MustParsePrefix("2001:db8:0:7::1/128")},
			wantErr: link.ErrLinkNotFound},
		{name: "no internal IP", node: topology.Node{}, wantErr: errNoInternalIP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nodeAddresses(tc.node, byAddress, slog.New(slog.DiscardHandler))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("addresses %+v, want %+v", got, tc.want)
			}
		})
	}
}
