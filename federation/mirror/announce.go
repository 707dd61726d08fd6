package mirror

import (
	"net/netip"
	"slices"
	"strconv"
	"time"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
)

// Announce returns what this cluster publishes for its remotes: its ID and
// ranges, and per mesh segment (a location, or a node in full granularity)
// the leader's key and endpoint and the ranges behind it, all read from
// topo, the mesh's own topology (the one the agents compute). The Service
// ranges go with the first segment, so that exactly one gateway carries
// them. A leader's endpoint is left out when it is its internal address (a
// location behind NAT): the remote then waits for that gateway's
// handshakes, which its keepalive sends.
func Announce(clusterID string, topo *topology.Topology, pods, services []netip.Prefix, subnet netip.Prefix) fedv1.AnnouncementSpec {
	a := fedv1.AnnouncementSpec{
		ClusterID:    clusterID,
		PodCIDRs:     prefixStrings(pods),
		ServiceCIDRs: prefixStrings(services),
	}
	if subnet.IsValid() {
		a.WireGuardSubnet = subnet.Masked().String()
	}
	first := true
	for _, s := range topo.Segments {
		leader := s.LeaderNode()
		if leader.Key.IsZero() {
			continue
		}
		g := fedv1.Gateway{
			Location:  s.Name,
			Node:      leader.Name,
			PublicKey: leader.Key.String(),
			Endpoint:  publicEndpoint(leader),
		}
		var allowed []netip.Prefix
		if s.WireGuardIP.IsValid() {
			allowed = append(allowed, netip.PrefixFrom(s.WireGuardIP.Addr(), s.WireGuardIP.Addr().BitLen()))
		}
		for _, n := range s.Nodes {
			allowed = append(allowed, n.PodCIDRs...)
		}
		allowed = append(allowed, s.AllowedLocationIPs...)
		if first {
			allowed = append(allowed, services...)
			first = false
		}
		g.AllowedIPs = prefixStrings(allowed)
		if leader.PersistentKeepalive > 0 {
			g.PersistentKeepalive = int32(leader.PersistentKeepalive / time.Second)
		}
		a.Gateways = append(a.Gateways, g)
	}
	return a
}

// publicEndpoint returns where remotes reach n's WireGuard port, or "" when
// n only has its internal address (behind NAT).
func publicEndpoint(n topology.Node) string {
	e := n.Endpoint
	if e == nil {
		return ""
	}
	if e.DNS != "" {
		return e.DNS + ":" + strconv.Itoa(int(e.Port))
	}
	if !e.Addr.IsValid() {
		return ""
	}
	a := e.Addr.Addr()
	if n.InternalIP.IsValid() && n.InternalIP.Addr() == a || n.InternalIP6.IsValid() && n.InternalIP6.Addr() == a {
		return ""
	}
	return e.Addr.String()
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() {
			out = append(out, p.Masked().String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
