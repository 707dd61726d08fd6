package mirror

import (
	franges "github.com/kilofed/kilofed/federation/ranges"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	mk8s "github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func mustKey(t *testing.T, s string) wgconf.Key {
	t.Helper()
	k, err := wgconf.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestAnnounceOneGatewayPerLocationFromTheMeshTopology computes the mesh's
// own topology for two locations, one public and one behind NAT, and checks
// what the cluster announces: the elected leader of each, its pods and
// WireGuard IP, the Service range once, no endpoint behind NAT, and the
// NAT'd location reached via the public one, which carries its ranges.
func TestAnnounceOneGatewayPerLocationFromTheMeshTopology(t *testing.T) {
	pub := func(s string) *topology.Endpoint {
		ap := netip.MustParseAddrPort(s)
		return &topology.Endpoint{Addr: ap, Port: ap.Port()}
	}
	nodes := []topology.Node{
		{Name: "aws-1", Location: "aws", Key: mustKey(t, keyA), Ready: true,
			InternalIP: netip.MustParsePrefix("172.16.1.10/24"), ExternalIP: netip.MustParseAddr("198.51.100.10"),
			Endpoint: pub("198.51.100.10:51820"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.0.0/24")}},
		{Name: "aws-2", Location: "aws", Key: mustKey(t, "aCjAvpxHeAJrd5zKpq4bLOUGt7T4JYQm2fp8RRmYcF0="), Ready: true,
			InternalIP: netip.MustParsePrefix("172.16.1.11/24"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")}},
		{Name: "dc-1", Location: "lyon-dc", Key: mustKey(t, keyB), Ready: true, PersistentKeepalive: 10 * time.Second,
			InternalIP: netip.MustParsePrefix("172.16.3.10/24"), Endpoint: pub("172.16.3.10:51820"),
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.4.0/24")}},
	}
	subnet := netip.MustParsePrefix("10.4.0.0/16")
	topo, err := topology.New(nodes, nil, topology.Options{Subnet: subnet, Port: 51820, Granularity: topology.LocationGranularity})
	if err != nil {
		t.Fatal(err)
	}
	got := Announce("prod", topo, []netip.Prefix{netip.MustParsePrefix("10.10.0.0/16")}, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}, subnet)
	s0, _ := topo.Segment("aws-1")
	s1, _ := topo.Segment("dc-1")
	want := fedv1.AnnouncementSpec{
		ClusterID: "prod", PodCIDRs: []string{"10.10.0.0/16"}, ServiceCIDRs: []string{"10.20.0.0/16"}, WireGuardSubnet: "10.4.0.0/16",
		Gateways: []fedv1.Gateway{
			{Location: "aws", Node: s0.LeaderNode().Name, PublicKey: s0.LeaderNode().Key.String(), Endpoint: publicEndpoint(s0.LeaderNode()),
				AllowedIPs: []string{"10.10.0.0/24", "10.10.1.0/24", "10.10.4.0/24", "10.20.0.0/16",
					netip.PrefixFrom(s0.WireGuardIP.Addr(), 32).String(), netip.PrefixFrom(s1.WireGuardIP.Addr(), 32).String()}},
			{Location: "lyon-dc", Node: "dc-1", PublicKey: keyB, PersistentKeepalive: 10, Via: "aws",
				AllowedIPs: []string{"10.10.4.0/24", netip.PrefixFrom(s1.WireGuardIP.Addr(), 32).String()}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("announcement (-want +got):\n%s", d)
	}
	if got.Gateways[0].Node == "aws-1" && got.Gateways[0].Endpoint != "198.51.100.10:51820" {
		t.Errorf("public leader announced endpoint %q, want its external address", got.Gateways[0].Endpoint)
	}

	// What one cluster announces is what the other mirrors: one Peer, the
	// public gateway, which the other's NAT'd locations reach through
	// their own gateway.
	other := Peers(got, drRanges, nil, 0)
	if len(other.Peers) != 1 || len(other.Problems) != 0 {
		t.Fatalf("the announcement does not mirror cleanly: %d peers, problems %v", len(other.Peers), other.Problems)
	}
	if p := other.Peers[0]; p.Name != "prod-aws" || p.Annotations[mk8s.PeerViaGatewayAnnotation] != "true" || len(p.Spec.AllowedIPs) != 6 ||
		p.Annotations[AnnotationCarries] != "lyon-dc=dc-1" {
		t.Errorf("mirrored Peer %s, annotations %v, allowed IPs %v: want prod-aws, via the gateway, with lyon-dc's ranges", p.Name, p.Annotations, p.Spec.AllowedIPs)
	}
}

// TestAnnounceWithoutPublicLocationLeavesNATdLocationsDirect: with no
// location that has a public endpoint there is no gateway to go through;
// each location is announced on its own, the first carries the Services.
func TestAnnounceWithoutPublicLocationLeavesNATdLocationsDirect(t *testing.T) {
	nat := func(name, loc, key, ip, pods string) topology.Node {
		ap := netip.MustParseAddrPort(ip + ":51820")
		return topology.Node{Name: name, Location: loc, Key: mustKey(t, key), Ready: true,
			InternalIP: netip.PrefixFrom(ap.Addr(), 24), Endpoint: &topology.Endpoint{Addr: ap, Port: 51820},
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix(pods)}}
	}
	subnet := netip.MustParsePrefix("10.4.0.0/16")
	topo, err := topology.New([]topology.Node{
		nat("a-1", "a", keyA, "172.16.1.10", "10.10.0.0/24"),
		nat("b-1", "b", keyB, "172.16.2.10", "10.10.1.0/24"),
	}, nil, topology.Options{Subnet: subnet, Port: 51820, Granularity: topology.LocationGranularity})
	if err != nil {
		t.Fatal(err)
	}
	got := Announce("prod", topo, nil, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}, subnet)
	if len(got.Gateways) != 2 {
		t.Fatalf("%d gateways, want 2", len(got.Gateways))
	}
	for i, g := range got.Gateways {
		if g.Via != "" || g.Endpoint != "" {
			t.Errorf("gateway %s: via %q endpoint %q, want neither (no public location)", g.Location, g.Via, g.Endpoint)
		}
		if hasServices := slices.Contains(g.AllowedIPs, "10.20.0.0/16"); hasServices != (i == 0) {
			t.Errorf("gateway %s carries the Services: %v, want only the first", g.Location, hasServices)
		}
	}
	if res := Peers(got, drRanges, nil, 0); len(res.Peers) != 2 {
		t.Errorf("%d Peers mirrored, want 2 (one per location)", len(res.Peers))
	}
}

// drRanges are the seed's DR cluster's ranges, disjoint from production's.
var drRanges = func() (c franges.Cluster) {
	c.ID = "dr"
	c.Pods = []netip.Prefix{netip.MustParsePrefix("10.11.0.0/16")}
	c.Services = []netip.Prefix{netip.MustParsePrefix("10.21.0.0/16")}
	c.WireGuard = netip.MustParsePrefix("10.5.0.0/16")
	return c
}()
