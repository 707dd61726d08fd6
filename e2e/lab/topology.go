package lab

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"
)

// layout builds the lab's clusters, locations and nodes, with every name and
// address, from a spec filled in by withDefaults, for the management slot
// slot. It does no I/O.
func (l *Lab) layout(slot int) {
	l.slot = slot
	l.wan = &Namespace{Name: wanNetns(l.Spec.Name), lab: l}
	locG, nodeG := 0, 0
	for ci, cs := range l.Spec.Clusters {
		c := &Cluster{
			Name:            cs.Name,
			Index:           ci + 1,
			APIServerIP:     apiServerIP(slot, ci+1),
			PodCIDR:         cs.PodCIDR.Masked(),
			ServiceCIDR:     cs.ServiceCIDR.Masked(),
			WireGuardSubnet: cs.WireGuardSubnet.Masked(),
			PodCIDR6:        cs.PodCIDR6.Masked(),
			ServiceCIDR6:    cs.ServiceCIDR6.Masked(),
			ClusterDNS:      cs.ClusterDNS,
			ClusterDomain:   cs.ClusterDomain,
			lab:             l,
			spec:            cs,
		}
		c.APIServer = fmt.Sprintf("https://%s", netip.AddrPortFrom(c.APIServerIP, APIServerPort))
		for _, ls := range cs.Locations {
			locG++
			loc := &Location{
				Name:     ls.Name,
				Cluster:  cs.Name,
				LAN:      ls.LAN.Masked(),
				RouterIP: routerLANIP(ls.LAN),
				PublicIP: ls.PublicIP,
				NAT:      ls.NAT,
				LAN6:     ls.LAN6.Masked(),
				Router:   &Namespace{Name: routerNetns(l.Spec.Name, cs.Name, ls.Name), lab: l},
				index:    locG,
			}
			if loc.LAN6.IsValid() {
				loc.RouterIP6 = routerLANIP(loc.LAN6)
			}
			for _, ns := range ls.Nodes {
				n := &Node{
					Name:        ns.Name,
					Cluster:     cs.Name,
					Location:    ls.Name,
					Netns:       nodeNetns(l.Spec.Name, cs.Name, ns.Name),
					LANIP:       ns.LANIP,
					LANIP6:      ns.LANIP6,
					PublicIP:    ns.PublicIP,
					MgmtIP:      nodeMgmtIP(slot, ci+1, len(c.nodes)),
					Labels:      maps.Clone(ns.Labels),
					Annotations: maps.Clone(ns.Annotations),
					lab:         l,
					cluster:     c,
					location:    loc,
					index:       len(c.nodes),
					global:      nodeG,
				}
				nodeG++
				n.ns = &Namespace{Name: n.Netns, lab: l}
				loc.nodes = append(loc.nodes, n)
				c.nodes = append(c.nodes, n)
			}
			c.locations = append(c.locations, loc)
		}
		l.clusters = append(l.clusters, c)
	}
}

// routerRules returns the iptables-restore input of a location's router:
// 1:1 NAT of each node's public address in a public location (with hairpin,
// so that a node reaches another one of its LAN by its public address), or
// masquerade of the whole LAN in a NAT location.
func routerRules(loc *Location) string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	if loc.NAT {
		fmt.Fprintf(&b, "-A POSTROUTING -s %s -o %s -j MASQUERADE\n", loc.LAN, RouterWANLink)
	}
	for _, n := range loc.nodes {
		if !n.PublicIP.IsValid() {
			continue
		}
		fmt.Fprintf(&b, "-A PREROUTING -d %s/32 -j DNAT --to-destination %s\n", n.PublicIP, n.LANIP)
		fmt.Fprintf(&b, "-A POSTROUTING -s %s/32 -o %s -j SNAT --to-source %s\n", n.LANIP, RouterWANLink, n.PublicIP)
		fmt.Fprintf(&b, "-A POSTROUTING -s %s/32 -o %s -m conntrack --ctstate DNAT -j SNAT --to-source %s\n",
			n.LANIP, RouterLANBridge, n.PublicIP)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Link-local addresses of the IPv6 link between a router (wan0) and the WAN
// (its port): each side's next hop towards the other.
var (
	routerWANLinkLocal = netip.MustParseAddr("fe80::1")
	wanPortLinkLocal   = netip.MustParseAddr("fe80::2")
)

// routerRules6 returns the ip6tables-restore input of a dual-stack
// location's router. IPv6 has no NAT here: a public location routes its
// LAN's global addresses both ways; a NAT location's router lets through
// from the WAN only what answers a connection its LAN opened, as a home
// router's stateful firewall does.
func routerRules6(loc *Location) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	if loc.NAT {
		fmt.Fprintf(&b, "-A FORWARD -i %s -o %s -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n", RouterWANLink, RouterLANBridge)
		fmt.Fprintf(&b, "-A FORWARD -i %s -o %s -j DROP\n", RouterWANLink, RouterLANBridge)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
