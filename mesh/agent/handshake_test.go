package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

func TestNudgerRestartsOnlyFreshPeersWithoutHandshake(t *testing.T) {
	a, b, c, nat := pubKey(t, 1), pubKey(t, 2), pubKey(t, 3), pubKey(t, 4)
	t0 := time.Unix(1000, 0)
	n := newNudger()
	n.track(wgconf.Config{Peers: []wgconf.Peer{{PublicKey: a}, {PublicKey: b}, {PublicKey: nat}}}, t0)
	reachable := func(k wgconf.Key) bool { return k != nat }
	st := wireguard.State{Peers: []wireguard.PeerState{
		{PublicKey: a}, // no handshake yet
		{PublicKey: b, LastHandshake: t0.Add(300 * time.Millisecond)}, // handshake done
		{PublicKey: nat},
	}}
	for _, tc := range []struct {
		name string
		at   time.Duration
		want []wgconf.Key
	}{
		{name: "its own first initiation gets a chance", at: 500 * time.Millisecond, want: nil},
		{name: "after a second without handshake", at: 1100 * time.Millisecond, want: []wgconf.Key{a}},
		{name: "not twice within a second", at: 1500 * time.Millisecond, want: nil},
		{name: "again a second later", at: 2200 * time.Millisecond, want: []wgconf.Key{a}},
		{name: "never after the window", at: 16 * time.Second, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := n.due(st, reachable, t0.Add(tc.at))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("due (-want +got):\n%s", diff)
			}
			for _, k := range got {
				n.last[k] = t0.Add(tc.at)
			}
		})
	}
	// A peer that is no longer configured is forgotten; a new one starts
	// its own window.
	n.track(wgconf.Config{Peers: []wgconf.Peer{{PublicKey: c}}}, t0.Add(20*time.Second))
	if len(n.since) != 1 || len(n.last) != 0 {
		t.Errorf("after re-tracking: since=%v last=%v, want only c", n.since, n.last)
	}
	if got := n.due(wireguard.State{}, reachable, t0.Add(21500*time.Millisecond)); len(got) != 1 || got[0] != c {
		t.Errorf("due for the new peer = %v, want c", got)
	}
}
