package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
)

var (
	runIDRe    = regexp.MustCompile(`^[a-z0-9]{1,6}$`)
	dnsLabelRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// hostNet is this machine's own network: never used in the lab.
	hostNet = netip.MustParsePrefix("192.0.2.0/24")
)

// maxNodesPerCluster bounds the management addresses 100.x.c.(10+n).
const maxNodesPerCluster = 240

// validate checks a spec that went through withDefaults. Every error wraps
// ErrInvalidSpec and says which field is wrong.
func (s Spec) validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidSpec}, a...)...))
	}
	if !runIDRe.MatchString(s.Name) {
		bad("Spec.Name %q must be 1 to 6 characters of [a-z0-9]", s.Name)
	}
	if len(s.Clusters) == 0 {
		bad("no clusters: give at least one ClusterSpec")
	}
	if s.CoreDNS && !s.KubeProxy {
		bad("Spec.CoreDNS needs Spec.KubeProxy: pods reach CoreDNS through the kube-dns ClusterIP")
	}
	if len(s.Clusters) > 200 {
		bad("%d clusters: at most 200", len(s.Clusters))
	}
	type owned struct {
		p     netip.Prefix
		owner string
	}
	var global []owned // prefixes that must not overlap lab-wide
	// claim takes p lab-wide for owner; want6 says which family p must be.
	claim := func(p netip.Prefix, owner string, want6 bool) {
		switch {
		case !want6 && !p.Addr().Is4():
			bad("%s %s is not IPv4: IPv6 ranges go in the ...6 fields of a DualStack cluster", owner, p)
			return
		case want6 && (!p.Addr().Is6() || p.Addr().Is4In6() || !IPv6Range.Contains(p.Addr()) || p.Bits() < IPv6Range.Bits()):
			bad("%s %s is outside the lab's IPv6 range %s", owner, p, IPv6Range)
			return
		}
		for _, reserved := range []owned{{MgmtRange, "the management range"}, {hostNet, "this machine's network"},
			{PublicRangeA, "the public range"}, {PublicRangeB, "the public range"}, {WANRange6, "the WAN's IPv6 range"}} {
			if p.Overlaps(reserved.p) {
				bad("%s %s overlaps %s %s", owner, p, reserved.owner, reserved.p)
				return
			}
		}
		for _, o := range global {
			if p.Overlaps(o.p) {
				bad("%s %s overlaps %s %s", owner, p, o.owner, o.p)
				return
			}
		}
		global = append(global, owned{p, owner})
	}
	netnsNames := map[string]string{}
	claimNetns := func(name, owner string) {
		if other, ok := netnsNames[name]; ok {
			bad("%s and %s would share the namespace name %s: rename one", owner, other, name)
		}
		netnsNames[name] = owner
	}
	clusterNames := map[string]bool{}
	publics := map[netip.Addr]string{WANHostIP: "the WAN host"}
	claimPublic := func(a netip.Addr, owner string) {
		if !PublicRangeA.Contains(a) && !PublicRangeB.Contains(a) {
			bad("%s public address %s is outside %s and %s", owner, a, PublicRangeA, PublicRangeB)
			return
		}
		if a == lastAddr(PublicRangeA) || a == lastAddr(PublicRangeB) || a == PublicRangeA.Addr() || a == PublicRangeB.Addr() {
			bad("%s public address %s is a network or broadcast address", owner, a)
			return
		}
		if other, ok := publics[a]; ok {
			bad("%s public address %s is already used by %s", owner, a, other)
			return
		}
		publics[a] = owner
	}
	for ci, c := range s.Clusters {
		cname := fmt.Sprintf("cluster %q", c.Name)
		if !dnsLabelRe.MatchString(c.Name) {
			bad("cluster %d name %q is not a DNS label", ci+1, c.Name)
		}
		if clusterNames[c.Name] {
			bad("two clusters are named %q", c.Name)
		}
		clusterNames[c.Name] = true
		claim(c.PodCIDR.Masked(), cname+" pod CIDR", false)
		claim(c.ServiceCIDR.Masked(), cname+" service CIDR", false)
		claim(c.WireGuardSubnet.Masked(), cname+" WireGuard subnet", false)
		if c.DualStack {
			claim(c.PodCIDR6.Masked(), cname+" IPv6 pod CIDR", true)
			claim(c.ServiceCIDR6.Masked(), cname+" IPv6 service CIDR", true)
			if c.ServiceCIDR6.Bits() < 108 {
				bad("%s IPv6 service CIDR %s is larger than /108 (kube-apiserver refuses it)", cname, c.ServiceCIDR6)
			}
			if d := c.NodeCIDRMaskSize6 - c.PodCIDR6.Bits(); d <= 0 || d > 16 || c.NodeCIDRMaskSize6 > 120 {
				bad("%s NodeCIDRMaskSize6 %d must be 1 to 16 bits longer than the IPv6 pod CIDR's /%d and at most 120",
					cname, c.NodeCIDRMaskSize6, c.PodCIDR6.Bits())
			}
		} else if c.PodCIDR6.IsValid() || c.ServiceCIDR6.IsValid() || c.NodeCIDRMaskSize6 != 0 {
			bad("%s has IPv6 ranges but is not DualStack: set ClusterSpec.DualStack", cname)
		}
		if c.ServiceCIDR.Bits() < 12 {
			bad("%s service CIDR %s is larger than /12 (kube-apiserver refuses it)", cname, c.ServiceCIDR)
		}
		if !c.ServiceCIDR.Contains(c.ClusterDNS) {
			bad("%s cluster DNS %s is outside its service CIDR %s", cname, c.ClusterDNS, c.ServiceCIDR)
		}
		if c.NodeCIDRMaskSize <= c.PodCIDR.Bits() || c.NodeCIDRMaskSize > 30 {
			bad("%s NodeCIDRMaskSize %d must be longer than the pod CIDR's /%d and at most 30", cname, c.NodeCIDRMaskSize, c.PodCIDR.Bits())
		}
		if len(c.Locations) == 0 {
			bad("%s has no locations", cname)
		}
		locNames := map[string]bool{}
		nodeNames := map[string]bool{}
		nodes := 0
		for _, l := range c.Locations {
			lname := fmt.Sprintf("location %s/%s", c.Name, l.Name)
			if !dnsLabelRe.MatchString(l.Name) {
				bad("%s: name is not a DNS label", lname)
			}
			if locNames[l.Name] {
				bad("%s: two locations have that name", lname)
			}
			locNames[l.Name] = true
			claimNetns(routerNetns(s.Name, c.Name, l.Name), lname)
			claim(l.LAN.Masked(), lname+" LAN", false)
			if l.LAN.Bits() > 29 {
				bad("%s LAN %s is smaller than /29", lname, l.LAN)
			}
			switch {
			case c.DualStack:
				claim(l.LAN6.Masked(), lname+" IPv6 LAN", true)
				if l.LAN6.Bits() > 120 {
					bad("%s IPv6 LAN %s is smaller than /120", lname, l.LAN6)
				}
			case l.LAN6.IsValid():
				bad("%s has an IPv6 LAN but its cluster is not DualStack: set ClusterSpec.DualStack", lname)
			}
			lanIPs6 := map[netip.Addr]bool{routerLANIP(l.LAN6): true}
			claimPublic(l.PublicIP, lname+" router")
			if len(l.Nodes) == 0 {
				bad("%s has no nodes", lname)
			}
			lanIPs := map[netip.Addr]bool{routerLANIP(l.LAN): true}
			for _, n := range l.Nodes {
				nodes++
				nname := fmt.Sprintf("node %s/%s", c.Name, n.Name)
				if !dnsLabelRe.MatchString(n.Name) {
					bad("%s: name is not a DNS label", nname)
				}
				if nodeNames[n.Name] {
					bad("%s: two nodes of the cluster have that name", nname)
				}
				nodeNames[n.Name] = true
				claimNetns(nodeNetns(s.Name, c.Name, n.Name), nname)
				switch {
				case !l.LAN.Contains(n.LANIP) || n.LANIP == l.LAN.Masked().Addr() || n.LANIP == lastAddr(l.LAN):
					bad("%s LAN IP %s is not a host address of its LAN %s", nname, n.LANIP, l.LAN)
				case lanIPs[n.LANIP]:
					bad("%s LAN IP %s is taken (the router has %s)", nname, n.LANIP, routerLANIP(l.LAN))
				}
				lanIPs[n.LANIP] = true
				switch {
				case !c.DualStack && n.LANIP6.IsValid():
					bad("%s has an IPv6 LAN IP but its cluster is not DualStack: set ClusterSpec.DualStack", nname)
				case !c.DualStack:
				case !l.LAN6.Contains(n.LANIP6) || n.LANIP6 == l.LAN6.Masked().Addr():
					bad("%s IPv6 LAN IP %s is not a host address of its IPv6 LAN %s", nname, n.LANIP6, l.LAN6)
				case lanIPs6[n.LANIP6]:
					bad("%s IPv6 LAN IP %s is taken (the router has %s)", nname, n.LANIP6, routerLANIP(l.LAN6))
				}
				lanIPs6[n.LANIP6] = true
				if l.NAT && n.PublicIP.IsValid() {
					bad("%s has a public IP but its location is behind NAT: drop NodeSpec.PublicIP or LocationSpec.NAT", nname)
				}
				if n.PublicIP.IsValid() {
					claimPublic(n.PublicIP, nname)
				}
			}
		}
		if nodes > maxNodesPerCluster {
			bad("%s has %d nodes: at most %d", cname, nodes, maxNodesPerCluster)
		}
		if c.NodeCIDRMaskSize > c.PodCIDR.Bits() && c.NodeCIDRMaskSize-c.PodCIDR.Bits() < 30 &&
			nodes > 1<<(c.NodeCIDRMaskSize-c.PodCIDR.Bits()) {
			bad("%s has %d nodes but its pod CIDR %s only holds %d /%d podCIDRs", cname, nodes, c.PodCIDR,
				1<<(c.NodeCIDRMaskSize-c.PodCIDR.Bits()), c.NodeCIDRMaskSize)
		}
	}
	claimNetns(wanNetns(s.Name), "the WAN")
	for _, c := range s.Clusters {
		nodes := 0
		for _, l := range c.Locations {
			nodes += len(l.Nodes)
		}
		if d := c.NodeCIDRMaskSize6 - c.PodCIDR6.Bits(); c.DualStack && d > 0 && d <= 16 && nodes > 1<<d {
			bad("cluster %q has %d nodes but its IPv6 pod CIDR %s only holds %d /%d podCIDRs", c.Name, nodes, c.PodCIDR6, 1<<d, c.NodeCIDRMaskSize6)
		}
	}
	return errors.Join(errs...)
}

// routerLANIP returns the router's address on a LAN: its first host address.
func routerLANIP(lan netip.Prefix) netip.Addr { return nthAddr(lan.Masked(), 1) }
