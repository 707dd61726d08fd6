package mirror

import (
	franges "github.com/kilofed/kilofed/federation/ranges"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
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
// WireGuard IP, the Service range once, no endpoint behind NAT.
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
				AllowedIPs: []string{"10.10.0.0/24", "10.10.1.0/24", "10.20.0.0/16", netip.PrefixFrom(s0.WireGuardIP.Addr(), 32).String()}},
			{Location: "lyon-dc", Node: "dc-1", PublicKey: keyB, PersistentKeepalive: 10,
				AllowedIPs: []string{"10.10.4.0/24", netip.PrefixFrom(s1.WireGuardIP.Addr(), 32).String()}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("announcement (-want +got):\n%s", d)
	}
	if got.Gateways[0].Node == "aws-1" && got.Gateways[0].Endpoint != "198.51.100.10:51820" {
		t.Errorf("public leader announced endpoint %q, want its external address", got.Gateways[0].Endpoint)
	}

	// What one cluster announces is what the other mirrors, unchanged.
	other := Peers(got, drRanges, nil, 0)
	if len(other.Peers) != 2 || len(other.Problems) != 0 {
		t.Errorf("the announcement does not mirror cleanly: %d peers, problems %v", len(other.Peers), other.Problems)
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
