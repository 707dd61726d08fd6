package wireguard

import (
	"context"
	"github.com/kilofed/kilofed/mesh/golden"
	"net/netip"
	"testing"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// TestFakeRecordsChanges drives a Fake through a short agent life and
// compares what it would have sent with testdata/fake.golden.
func TestFakeRecordsChanges(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	f := NewFake("kilo0", func() time.Time { return now })
	p := netip.MustParsePrefix
	cfg := wgconf.Config{PrivateKey: secret(7), ListenPort: 51820, Peers: []wgconf.Peer{
		{PublicKey: key(1), Endpoint: netip.MustParseAddrPort("198.51.100.1:51820"), AllowedIPs: []netip.Prefix{p("10.1.0.0/24")}},
		{PublicKey: key(2), AllowedIPs: []netip.Prefix{p("10.2.0.0/24")}, PersistentKeepalive: 25 * time.Second},
	}}
	steps := []struct {
		name string
		do   func() error
	}{
		{"initial", func() error { return f.Set(ctx, cfg) }},
		{"same again", func() error { return f.Set(ctx, cfg) }},
		{"peer 1 roams behind NAT", func() error {
			if !f.Observe(PeerState{PublicKey: key(1), Endpoint: netip.MustParseAddrPort("203.0.113.5:40000"), LastHandshake: now.Add(-time.Minute)}) {
				t.Fatal("Observe: peer 1 unknown")
			}
			return f.Set(ctx, cfg)
		}},
		{"handshake gets old: configured endpoint returns", func() error {
			now = now.Add(5 * time.Minute)
			return f.Set(ctx, cfg)
		}},
		{"peer 2 gets a range", func() error {
			cfg.Peers[1].AllowedIPs = append(cfg.Peers[1].AllowedIPs, p("10.22.0.0/16"))
			return f.Set(ctx, cfg)
		}},
		{"peer 1 removed", func() error {
			cfg.Peers = cfg.Peers[1:]
			return f.Set(ctx, cfg)
		}},
		{"close", f.Close},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	golden.Check(t, "fake.golden", f.Record())
	if err := f.Set(ctx, cfg); err == nil {
		t.Error("Set after Close succeeded")
	}
}
