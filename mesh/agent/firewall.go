package agent

import (
	"github.com/kilofed/kilofed/mesh/encap"
	"github.com/kilofed/kilofed/mesh/firewall"
	"github.com/kilofed/kilofed/mesh/topology"
)

// FirewallOptions are the settings of this node that FirewallRules needs
// beside the topology.
type FirewallOptions struct {
	// ListenPort is the WireGuard UDP port opened on input; zero opens
	// none.
	ListenPort int
	// ForwardRules accepts forwarded traffic of the mesh ranges and the
	// WireGuard link ahead of every other FORWARD rule
	// (Config.IPTablesForwardRules).
	ForwardRules bool
	// Tunnel is what the in-location tunnel receives; the zero value (no
	// tunnel) filters nothing.
	Tunnel encap.Inbound
}

// inbounder is implemented by Encapsulators that say which packets they
// receive, as package encap's do.
type inbounder interface {
	Inbound() encap.Inbound
}

// firewallOptions collects FirewallOptions from the agent's configuration.
func (a *Agent) firewallOptions() FirewallOptions {
	o := FirewallOptions{ListenPort: a.cfg.ListenPort, ForwardRules: a.cfg.IPTablesForwardRules}
	if in, ok := a.cfg.Encap.(inbounder); ok {
		o.Tunnel = in.Inbound()
	}
	return o
}

// FirewallRules returns the packet filter node needs in topo: the node's
// pods are masqueraded when they leave the mesh (and only then), the
// WireGuard port is open on input, encapsulated packets are taken only
// from the nodes whose tunnels end here (topo.TunnelRemotes) and, with
// opts.ForwardRules, forwarding is accepted through the WireGuard link and
// for every mesh range. Without it, forwarding is left to the node's
// FORWARD policy and to the NetworkPolicy enforcer, which then keeps the
// last word on traffic to pods.
func FirewallRules(topo *topology.Topology, node string, opts FirewallOptions) firewall.Rules {
	o := topo.Options()
	ranges := append(topo.MeshRanges(), o.ServiceCIDRs...)
	if o.Subnet.IsValid() {
		ranges = append(ranges, o.Subnet)
	}
	var rules firewall.Rules
	if opts.ForwardRules {
		rules.Forward = []firewall.Forward{{Link: o.Links.WireGuard}}
		for _, r := range ranges {
			rules.Forward = append(rules.Forward, firewall.Forward{Range: r})
		}
	}
	if n, ok := topo.Node(node); ok {
		for _, pods := range n.PodCIDRs {
			rules.Masquerade = append(rules.Masquerade, firewall.Masquerade{Src: pods, Except: ranges})
		}
	}
	if opts.ListenPort > 0 {
		rules.AcceptUDP = []uint16{uint16(opts.ListenPort)}
	}
	switch opts.Tunnel.Kind {
	case encap.KindIPIP:
		rules.Tunnel = firewall.Tunnel{Kind: firewall.TunnelIPIP, Remotes: topo.TunnelRemotes(node)}
	case encap.KindVXLAN:
		rules.Tunnel = firewall.Tunnel{Kind: firewall.TunnelVXLAN, Port: uint16(opts.Tunnel.Port), Remotes: topo.TunnelRemotes(node)}
	}
	return rules
}
