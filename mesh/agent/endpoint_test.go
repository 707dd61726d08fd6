package agent

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// TestChangedEndpointWinsAndNATKeepsLearnt: the leader of cn-shanghai gets
// a new force-endpoint while its old address still answers: the device
// moves to the new one at once. The leader of a location behind NAT keeps
// the endpoint learnt from its handshakes, as its configured one is an
// internal IP.
func TestChangedEndpointWinsAndNATKeepsLearnt(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	home := topology.Node{
		Name: "node-home", Location: "home", Ready: true, Key: pubKey(t, 9),
		InternalIP: netip.MustParsePrefix("192.168.1.5/24"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.42.9.0/24")},
		PersistentKeepalive: 25 * time.Second,
	}
	nodes := append(seedNodes(t), home)
	r.backend.Set(nodes, nil, nil)
	ctx := context.Background()
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0) // the device's clock (newRig)
	oldShanghai := netip.MustParseAddrPort("198.51.100.20:51820")
	learntHome := netip.MustParseAddrPort("203.0.113.77:40000")
	for _, p := range []wireguard.PeerState{
		{PublicKey: pubKey(t, 3), Endpoint: oldShanghai, LastHandshake: now.Add(-5 * time.Second)},
		{PublicKey: pubKey(t, 9), Endpoint: learntHome, LastHandshake: now.Add(-5 * time.Second)},
	} {
		if !r.device.Observe(p) {
			t.Fatalf("peer %s not configured", p.PublicKey)
		}
	}

	newShanghai := netip.MustParseAddrPort("198.51.100.99:51820")
	nodes[2].Endpoint = &topology.Endpoint{Addr: newShanghai, Port: newShanghai.Port()} // force-endpoint
	r.backend.Set(nodes, nil, nil)
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := r.device.Show(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		seed byte
		want netip.AddrPort
	}{
		{name: "changed force-endpoint", seed: 3, want: newShanghai},
		{name: "behind NAT", seed: 9, want: learntHome},
	} {
		p, ok := st.Peer(pubKey(t, tt.seed))
		if !ok || p.Endpoint != tt.want {
			t.Errorf("%s: endpoint %v (configured %v), want %v", tt.name, p.Endpoint, ok, tt.want)
		}
	}
}
