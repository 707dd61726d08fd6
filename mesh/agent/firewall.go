package agent

import (
	"github.com/kilofed/kilofed/mesh/firewall"
	"github.com/kilofed/kilofed/mesh/topology"
)

// FirewallRules returns the packet filter node needs in topo: forwarding is
// accepted through the WireGuard link and for every mesh range, the node's
// pods are masqueraded when they leave the mesh (and only then), and the
// WireGuard port is open on input.
func FirewallRules(topo *topology.Topology, node string, listenPort int) firewall.Rules {
	opts := topo.Options()
	ranges := append(topo.MeshRanges(), opts.ServiceCIDRs...)
	if opts.Subnet.IsValid() {
		ranges = append(ranges, opts.Subnet)
	}
	rules := firewall.Rules{
		Forward: []firewall.Forward{{Link: opts.Links.WireGuard}},
	}
	for _, r := range ranges {
		rules.Forward = append(rules.Forward, firewall.Forward{Range: r})
	}
	if n, ok := topo.Node(node); ok {
		for _, pods := range n.PodCIDRs {
			rules.Masquerade = append(rules.Masquerade, firewall.Masquerade{Src: pods, Except: ranges})
		}
	}
	if listenPort > 0 {
		rules.AcceptUDP = []uint16{uint16(listenPort)}
	}
	return rules
}
