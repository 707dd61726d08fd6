//go:build linux

package main

import (
	"net/netip"
	"testing"
)

func TestAnnouncedEndpoint(t *testing.T) {
	both := addresses{underlay: "eth0", internal: netip.MustParsePrefix("10.0.1.10/24"), internal6: netip.MustParsePrefix("fd00:1::10/64")}
	only6 := addresses{underlay: "eth0", internal6: netip.MustParsePrefix("fd00:1::10/64")}
	for _, tc := range []struct {
		name  string
		o     options
		addrs addresses
		want  string
	}{
		{name: "left to the cluster", o: options{port: 51820}, addrs: both, want: ""},
		{name: "forced IP gets the port", o: options{port: 51820, forceExternalIP: "203.0.113.10"}, addrs: both, want: "203.0.113.10:51820"},
		{name: "forced host:port kept", o: options{port: 51820, forceExternalIP: "gw.example.com:4500"}, addrs: both, want: "gw.example.com:4500"},
		{name: "forced wins over private", o: options{port: 51820, forceExternalIP: "203.0.113.10", prioritisePrivate: true}, addrs: both, want: "203.0.113.10:51820"},
		{name: "private addresses prioritised", o: options{port: 51821, prioritisePrivate: true}, addrs: both, want: "10.0.1.10:51821"},
		{name: "private IPv6 on an IPv6-only node", o: options{port: 51820, prioritisePrivate: true}, addrs: only6, want: "[fd00:1::10]:51820"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := announcedEndpoint(tc.o, tc.addrs); got != tc.want {
				t.Errorf("endpoint %q, want %q", got, tc.want)
			}
		})
	}
}
