package main

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/kilofed/kilofed/mesh/topology"
)

// withInternalCIDRs replaces the node's internal IPs by the first local
// address (of local, with its prefix length) in cidrs, per family, as
// Kilo's --internal-cidr does; with no cidrs, self is returned as is. A
// family with no local address in cidrs keeps no internal IP; with none in
// either family the flag cannot be honoured and an error says so.
func withInternalCIDRs(self topology.Node, cidrs, local []netip.Prefix) (topology.Node, error) {
	if len(cidrs) == 0 {
		return self, nil
	}
	var v4, v6 netip.Prefix
	for _, p := range local {
		if !inAny(p.Addr(), cidrs) {
			continue
		}
		if p.Addr().Is4() && !v4.IsValid() {
			v4 = p
		}
		if p.Addr().Is6() && !v6.IsValid() {
			v6 = p
		}
	}
	if !v4.IsValid() && !v6.IsValid() {
		return self, fmt.Errorf("--internal-cidr %v: no address of this host is in it (addresses: %v)", cidrs, local)
	}
	self.InternalIP, self.InternalIP6 = v4, v6
	return self, nil
}

func inAny(a netip.Addr, cidrs []netip.Prefix) bool {
	for _, c := range cidrs {
		if c.Contains(a) {
			return true
		}
	}
	return false
}

// localPrefixes lists the host's global unicast addresses with their prefix
// lengths, in interface order.
func localPrefixes() ([]netip.Prefix, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []netip.Prefix
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok || !ip.Unmap().IsGlobalUnicast() {
				continue
			}
			ones, _ := n.Mask.Size()
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
		}
	}
	return out, nil
}

// applyInternalCIDRs applies --internal-cidr to the node read from the
// cluster.
func applyInternalCIDRs(self topology.Node, o options) (topology.Node, error) {
	cidrs, err := o.internalCIDRs.prefixes("internal-cidr")
	if err != nil || len(cidrs) == 0 {
		return self, err
	}
	local, err := localPrefixes()
	if err != nil {
		return self, fmt.Errorf("--internal-cidr: %w", err)
	}
	return withInternalCIDRs(self, cidrs, local)
}
