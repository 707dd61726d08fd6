package kgctl

import (
	"errors"
	"fmt"
	"github.com/kilofed/kilofed/mesh/golden"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// renderPlan writes a plan as the golden files hold it.
func renderPlan(p Plan) string {
	var b strings.Builder
	b.WriteString(wgconf.Render(p.Interface, wgconf.RenderOptions{WithPrivateKey: true}))
	b.WriteString("\n== routes\n")
	for _, r := range p.Routes {
		fmt.Fprintf(&b, "%s dev %s\n", r.Dst, r.Dev)
	}
	b.WriteString("== not routed\n")
	for _, s := range p.Skipped {
		b.WriteString(s + "\n")
	}
	b.WriteString("== peers\n")
	for _, pc := range p.Interface.Peers {
		kick := "no kick"
		if a, ok := p.Kick[pc.PublicKey]; ok {
			kick = "kick " + a.String()
		}
		fmt.Fprintf(&b, "%s (%s)\n", p.describePeer(pc), kick)
	}
	return b.String()
}

// natSnapshot adds to the seed a location behind NAT (no external IP) and
// a Peer with a fixed endpoint, which talks to it directly at its internal
// IP: that IP must not be routed into the tunnel.
func natSnapshot() Snapshot {
	s := seedSnapshot()
	dc := seedNode("dc-1", "lyon-dc", "192.168.10.31/24", "203.0.113.99", "10.42.5.0/24", "10.5.0.3/16")
	dc.ExternalIP = netip.Addr{}
	dc.PersistentKeepalive = 25 * time.Second
	s.Nodes = append(s.Nodes, dc)
	s.Granularities["dc-1"] = topology.LocationGranularity
	s.Peers = append(s.Peers, topology.Peer{Name: "monitoring", AllowedIPs: []netip.Prefix{pfx("10.5.100.20/32")},
		PublicKey: publicKey("monitoring"), Endpoint: &topology.Endpoint{Addr: netip.MustParseAddrPort("198.51.100.77:51820"), Port: 51820}})
	return s
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name, peer string
		snap       Snapshot
	}{
		{name: "plan-seb-laptop", peer: "seb-laptop", snap: seedSnapshot()},
		{name: "plan-nat-roaming", peer: "seb-laptop", snap: natSnapshot()},
		{name: "plan-nat-endpoint", peer: "monitoring", snap: natSnapshot()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Compute(tt.snap, MeshFlags{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := m.NewPlan(tt.peer, privateKey(tt.peer), "kfc0")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tt.name+".golden", renderPlan(p))
		})
	}
}

func TestPlanErrors(t *testing.T) {
	m, err := Compute(seedSnapshot(), MeshFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.NewPlan("nobody", privateKey("nobody"), "kfc0"); !errors.Is(err, topology.ErrUnknownPeer) {
		t.Errorf("unknown peer: error %v, want ErrUnknownPeer", err)
	}
	if _, err := m.NewPlan("seb-laptop", privateKey("someone else"), "kfc0"); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("other key: error %v, want ErrKeyMismatch", err)
	}
}

// TestPlanChanges checks what connect reports when the topology moves.
func TestPlanChanges(t *testing.T) {
	plan := func(s Snapshot) Plan {
		m, err := Compute(s, MeshFlags{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.NewPlan("seb-laptop", privateKey("seb-laptop"), "kfc0")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	twoLeaders := seedSnapshot()
	second := seedNode("node-beijing-2", "cn-beijing", "10.0.1.11/24", "198.51.100.30", "10.42.2.0/24", "10.5.0.1/16")
	twoLeaders.Nodes = append(twoLeaders.Nodes, second)
	failedOver := seedSnapshot()
	failedOver.Nodes = append(failedOver.Nodes, second)
	failedOver.Nodes[0].Ready = false
	moved := seedSnapshot()
	moved.Nodes[1].ExternalIP = netip.MustParseAddr("198.51.100.21")
	newPeer := seedSnapshot()
	newPeer.Peers = append(newPeer.Peers, topology.Peer{Name: "ci-runner", AllowedIPs: []netip.Prefix{pfx("10.5.100.30/32")}, PublicKey: publicKey("ci-runner")})

	tests := []struct {
		name     string
		from, to Snapshot
		want     []string
	}{
		{name: "nothing", from: seedSnapshot(), to: seedSnapshot()},
		{name: "leader failover", from: twoLeaders, to: failedOver, want: []string{
			"new peer: location cn-beijing (leader node-beijing-2), endpoint 198.51.100.30:51820",
			"peer gone: location cn-beijing (leader node-beijing), endpoint 203.0.113.10:51820",
		}},
		{name: "endpoint moved", from: seedSnapshot(), to: moved, want: []string{
			"changed peer: location cn-shanghai (leader node-shanghai), endpoint 198.51.100.21:51820",
		}},
		{name: "another Peer routed through the gateway", from: seedSnapshot(), to: newPeer, want: []string{
			"changed peer: location cn-beijing (leader node-beijing), endpoint 203.0.113.10:51820",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan(tt.from).changes(plan(tt.to))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
	p := plan(twoLeaders)
	if !slices.IsSortedFunc(p.Routes, func(a, b topology.Route) int { return comparePrefix(a.Dst, b.Dst) }) {
		t.Errorf("routes not sorted: %v", p.Routes)
	}
}
