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
// topo, the mesh's own topology (the one the agents compute).
//
// Other clusters reach this one through its public gateways only, when it
// has one: a segment behind NAT is announced with Via, the mesh's gateway
// segment (the first with a public endpoint), whose allowed IPs carry the
// NAT'd segment's ranges too, and the Peers mirroring remote gateways here
// are marked ViaGateway, so that this cluster's NAT'd segments reach them
// through that gateway too. Cryptokey routing then agrees on both sides,
// and two locations behind NAT in two clusters reach each other (through
// both gateways). With no public segment, a NAT'd segment is announced
// without endpoint: the remote waits for its keepalive's handshakes.
//
// The Service ranges go with the gateway segment (the first segment when
// none is public), so that exactly one gateway carries them.
func Announce(clusterID string, topo *topology.Topology, pods, services []netip.Prefix, subnet netip.Prefix) fedv1.AnnouncementSpec {
	a := fedv1.AnnouncementSpec{
		ClusterID:    clusterID,
		PodCIDRs:     prefixStrings(pods),
		ServiceCIDRs: prefixStrings(services),
	}
	if subnet.IsValid() {
		a.WireGuardSubnet = subnet.Masked().String()
	}
	via, relayed := topo.RelaysViaGateway()
	carrier := -1                // index in a.Gateways of the gateway that carries the services
	var allowed [][]netip.Prefix // each gateway's ranges, formatted once all are known
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
		switch {
		case relayed && s.Name == via.Name:
			carrier = len(a.Gateways)
		case relayed && !s.HasPublicEndpoint():
			g.Via = via.Name
		case !relayed && carrier < 0:
			carrier = len(a.Gateways)
		}
		if leader.PersistentKeepalive > 0 {
			g.PersistentKeepalive = int32(leader.PersistentKeepalive / time.Second)
		}
		a.Gateways = append(a.Gateways, g)
		allowed = append(allowed, segmentRanges(s))
	}
	for i := range a.Gateways {
		if a.Gateways[i].Via != "" && carrier >= 0 {
			allowed[carrier] = append(allowed[carrier], allowed[i]...)
		}
	}
	if carrier >= 0 {
		allowed[carrier] = append(allowed[carrier], services...)
	}
	for i := range a.Gateways {
		a.Gateways[i].AllowedIPs = prefixStrings(allowed[i])
	}
	return a
}

// segmentRanges returns the ranges behind a segment: its WireGuard IP, its
// nodes' pod CIDRs and its allowed location IPs.
func segmentRanges(s topology.Segment) []netip.Prefix {
	var out []netip.Prefix
	if s.WireGuardIP.IsValid() {
		out = append(out, netip.PrefixFrom(s.WireGuardIP.Addr(), s.WireGuardIP.Addr().BitLen()))
	}
	for _, n := range s.Nodes {
		out = append(out, n.PodCIDRs...)
	}
	return append(out, s.AllowedLocationIPs...)
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
