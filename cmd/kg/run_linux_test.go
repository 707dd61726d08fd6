//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
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

func TestFlagsReachTheAgentConfig(t *testing.T) {
	o, err := parseFlags([]string{"--hostname=node-beijing", "--iptables-forward-rules", "--serve-graph", "--prioritise-private-addresses", "--resync-period=10s"})
	if err != nil {
		t.Fatal(err)
	}
	addrs := addresses{underlay: "eth0", internal: netip.MustParsePrefix("10.0.1.10/24")}
	cfg := agentConfig(t.Context(), o, topology.Options{}, wgconf.SecretKey{}, nil, addrs, &dataplane{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if !cfg.IPTablesForwardRules || !cfg.ServeGraph || cfg.Endpoint != "10.0.1.10:51820" || cfg.ResyncPeriod != 10*time.Second || cfg.Hostname != "node-beijing" {
		t.Errorf("agent config: forward rules %v, graph %v, endpoint %q, resync %v, hostname %q",
			cfg.IPTablesForwardRules, cfg.ServeGraph, cfg.Endpoint, cfg.ResyncPeriod, cfg.Hostname)
	}
	if cfg.Firewall != nil || cfg.Encap != nil {
		t.Errorf("no firewall or tunnel was set up, but the config has firewall %v, tunnel %v", cfg.Firewall, cfg.Encap)
	}
	o, _ = parseFlags([]string{"--hostname=node-beijing"})
	if cfg := agentConfig(t.Context(), o, topology.Options{}, wgconf.SecretKey{}, nil, addrs, &dataplane{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)); cfg.IPTablesForwardRules || cfg.ServeGraph {
		t.Errorf("defaults: forward rules %v, graph %v; want both off", cfg.IPTablesForwardRules, cfg.ServeGraph)
	}
}

func TestForwardingStateSaysWhyTheNodeCannotForward(t *testing.T) {
	ok := forwardingState{underlay: "eth0", underlayUp: true, wgLink: "kilo0", wgUp: true, ipForward: "1\n"}
	for _, tc := range []struct {
		name string
		edit func(*forwardingState)
		want string
	}{
		{name: "forwards", edit: func(*forwardingState) {}},
		{name: "underlay down", edit: func(s *forwardingState) { s.underlayUp = false }, want: "underlay link eth0 is down"},
		{name: "kilo0 down (Kilo issue 489)", edit: func(s *forwardingState) { s.wgUp = false }, want: "WireGuard link kilo0 is down"},
		{name: "kilo0 gone", edit: func(s *forwardingState) { s.wgErr = errors.New("Link not found") }, want: "WireGuard link kilo0: Link not found"},
		{name: "device does not answer", edit: func(s *forwardingState) { s.showErr = errors.New("timeout") }, want: "WireGuard device does not answer: timeout"},
		{name: "forwarding off (Kilo issue 489)", edit: func(s *forwardingState) { s.ipForward = "0\n" }, want: "IPv4 forwarding is off (net.ipv4.ip_forward = 0)"},
		{name: "forwarding unreadable: not held against the node", edit: func(s *forwardingState) { s.ipForward, s.ipForwardErr = "", errors.New("EACCES") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			err := s.err()
			if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
				t.Errorf("err() = %v, want %q", err, tc.want)
			}
		})
	}
}
