package wireguard

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func TestMergeLearned(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	ap := netip.MustParseAddrPort
	configured := ap("198.51.100.7:51820")
	learnt := ap("203.0.113.9:40001")
	tests := []struct {
		name    string
		desired wgconf.Peer
		live    *PeerState
		want    netip.AddrPort
		wantDNS string
	}{
		{
			name:    "new peer keeps desired endpoint",
			desired: wgconf.Peer{Endpoint: configured, EndpointDNS: "a.example"},
			want:    configured, wantDNS: "a.example",
		},
		{
			name:    "new roaming peer stays without endpoint",
			desired: wgconf.Peer{},
		},
		{
			name:    "invalid desired keeps live endpoint",
			desired: wgconf.Peer{},
			live:    &PeerState{Endpoint: learnt},
			want:    learnt,
		},
		{
			name:    "unresolved DNS keeps live endpoint and drops the name",
			desired: wgconf.Peer{EndpointDNS: "a.example"},
			live:    &PeerState{Endpoint: learnt, LastHandshake: now.Add(-time.Hour)},
			want:    learnt,
		},
		{
			name:    "behind NAT: a recent handshake from another endpoint wins",
			desired: wgconf.Peer{Endpoint: configured, EndpointDNS: "a.example", KeepLearntEndpoint: true},
			live:    &PeerState{Endpoint: learnt, LastHandshake: now.Add(-time.Minute)},
			want:    learnt,
		},
		{
			name:    "not behind NAT: a changed endpoint wins over a recent handshake from the old one",
			desired: wgconf.Peer{Endpoint: configured, EndpointDNS: "a.example"},
			live:    &PeerState{Endpoint: learnt, LastHandshake: now.Add(-time.Second)},
			want:    configured, wantDNS: "a.example",
		},
		{
			name:    "behind NAT, stale handshake: desired endpoint wins",
			desired: wgconf.Peer{Endpoint: configured, KeepLearntEndpoint: true},
			live:    &PeerState{Endpoint: learnt, LastHandshake: now.Add(-LearnedEndpointTTL)},
			want:    configured,
		},
		{
			name:    "behind NAT, never a handshake: desired endpoint wins",
			desired: wgconf.Peer{Endpoint: configured, KeepLearntEndpoint: true},
			live:    &PeerState{Endpoint: learnt},
			want:    configured,
		},
		{
			name:    "same endpoint unchanged",
			desired: wgconf.Peer{Endpoint: configured, EndpointDNS: "a.example"},
			live:    &PeerState{Endpoint: configured, LastHandshake: now.Add(-time.Second)},
			want:    configured, wantDNS: "a.example",
		},
		{
			name:    "IPv4-mapped desired equals live",
			desired: wgconf.Peer{Endpoint: ap("[::ffff:198.51.100.7]:51820"), EndpointDNS: "a.example"},
			live:    &PeerState{Endpoint: configured, LastHandshake: now.Add(-time.Second)},
			want:    ap("[::ffff:198.51.100.7]:51820"), wantDNS: "a.example",
		},
		{
			name:    "live peer without endpoint: desired wins",
			desired: wgconf.Peer{Endpoint: configured},
			live:    &PeerState{LastHandshake: now.Add(-time.Second)},
			want:    configured,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := wgconf.Peer{PublicKey: key(9), Endpoint: ap("198.51.100.99:51820")}
			tt.desired.PublicKey = key(1)
			desired := wgconf.Config{PrivateKey: secret(7), Peers: []wgconf.Peer{tt.desired, other}}
			var live State
			if tt.live != nil {
				tt.live.PublicKey = key(1)
				live.Peers = []PeerState{*tt.live}
			}
			before := cloneConfig(desired)
			got := MergeLearned(desired, live, now)
			want := cloneConfig(desired)
			want.Peers[0].Endpoint, want.Peers[0].EndpointDNS = tt.want, tt.wantDNS
			if d := cmp.Diff(want, got, cmpConfig); d != "" {
				t.Errorf("MergeLearned (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, desired, cmpConfig); d != "" {
				t.Errorf("MergeLearned modified its input (-before +after):\n%s", d)
			}
		})
	}
}

var cmpConfig = cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })

func cloneConfig(c wgconf.Config) wgconf.Config {
	c.Peers = append([]wgconf.Peer(nil), c.Peers...)
	return c
}
