package agent

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kilofed/kilofed/mesh/encap"
	"github.com/kilofed/kilofed/mesh/firewall"
	"github.com/kilofed/kilofed/mesh/golden"
	"github.com/kilofed/kilofed/mesh/topology"
)

// encapRig is newRig with encapsulation always on through a VXLAN tunnel
// and a fake firewall.
func encapRig(t *testing.T, host string, seed byte, forwardRules bool) (*rig, *firewall.Fake) {
	t.Helper()
	r := newRig(t, host, seed)
	fw := &firewall.Fake{}
	r.agent.cfg.Topology.Encapsulate = topology.EncapsulateAlways
	r.agent.cfg.Topology.Links.Tunnel = encap.VXLANLink
	r.agent.cfg.Encap = encap.NewFake(encap.VXLANLink)
	r.agent.cfg.Firewall = fw
	r.agent.cfg.IPTablesForwardRules = forwardRules
	if err := r.agent.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r, fw
}

func TestFirewallGolden(t *testing.T) {
	tests := []struct {
		name         string
		host         string
		seed         byte
		forwardRules bool
	}{
		{name: "leader", host: "node-beijing", seed: 1},
		{name: "member", host: "node-beijing-2", seed: 2},
		{name: "leader_forward_rules", host: "node-beijing", seed: 1, forwardRules: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, fw := encapRig(t, tt.host, tt.seed, tt.forwardRules)
			golden.Check(t, "firewall-"+tt.name+".golden", fw.Record())
		})
	}
}

func TestFirewallForwardsOnlyWhenAsked(t *testing.T) {
	for _, asked := range []bool{false, true} {
		_, fw := encapRig(t, "node-beijing", 1, asked)
		if got := len(fw.Rules().Forward) > 0; got != asked {
			t.Errorf("IPTablesForwardRules=%v: forward rules %+v", asked, fw.Rules().Forward)
		}
	}
}

func TestFirewallTakesEncapsulatedPacketsOnlyFromTheLocation(t *testing.T) {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	vxlan := FirewallOptions{Tunnel: encap.Inbound{Kind: encap.KindVXLAN, Port: 4789}}
	r, _ := encapRig(t, "node-beijing", 1, false)
	topo := r.agent.Topology()
	tests := []struct {
		name string
		node string
		opts FirewallOptions
		want firewall.Tunnel
	}{
		{name: "leader takes its member's", node: "node-beijing", opts: vxlan,
			want: firewall.Tunnel{Kind: firewall.TunnelVXLAN, Port: 4789, Remotes: addrs("10.0.1.11")}},
		{name: "member takes its leader's", node: "node-beijing-2", opts: vxlan,
			want: firewall.Tunnel{Kind: firewall.TunnelVXLAN, Port: 4789, Remotes: addrs("10.0.1.10")}},
		{name: "ipip", node: "node-beijing", opts: FirewallOptions{Tunnel: encap.Inbound{Kind: encap.KindIPIP}},
			want: firewall.Tunnel{Kind: firewall.TunnelIPIP, Remotes: addrs("10.0.1.11")}},
		{name: "node alone in its location drops all", node: "node-shanghai", opts: vxlan,
			want: firewall.Tunnel{Kind: firewall.TunnelVXLAN, Port: 4789}},
		{name: "unknown node drops all", node: "node-nowhere", opts: vxlan,
			want: firewall.Tunnel{Kind: firewall.TunnelVXLAN, Port: 4789}},
		{name: "no tunnel, no filter", node: "node-beijing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FirewallRules(topo, tt.node, tt.opts).Tunnel
			if d := cmp.Diff(tt.want, got, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{})); d != "" {
				t.Errorf("Tunnel (-want +got):\n%s", d)
			}
		})
	}
}

func TestFirewallIsSetAgainOnlyWhenItsRulesChangeOrAtAResync(t *testing.T) {
	// Setting the firewall runs iptables a dozen times: a reconciliation
	// that changes nothing in it (a lead moving elsewhere) skips it, so the
	// next change, which may be a failover, is not queued behind it. A
	// resync still sets it, which repairs rules deleted by hand.
	r, fw := encapRig(t, "node-beijing", 1, false)
	sets := func() int { return strings.Count(fw.Record(), "set\n") }
	ctx := context.Background()
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sets(); n != 1 {
		t.Errorf("firewall set %d times by two reconciliations of the same cluster, want 1", n)
	}
	nodes := append(seedNodes(t), topology.Node{Name: "node-beijing-3", Location: "cn-beijing", Ready: true, Key: pubKey(t, 4),
		InternalIP: netip.MustParsePrefix("10.0.1.12/24"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.42.3.0/24")}})
	r.backend.Set(nodes, nil, nil)
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sets(); n != 2 {
		t.Errorf("firewall set %d times after a change of its rules, want 2", n)
	}
	resync, nudge, _ := handLoop(r)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.agent.Run(ctx) }()
	resync.c <- time.Time{} // taken after Run's first reconciliation
	nudge.c <- time.Time{}  // taken after the resync's
	if n := sets(); n != 3 {
		t.Errorf("firewall set %d times after a resync, want 3", n)
	}
	cancel()
	<-done
}
