package mirror

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/ranges"
)

const (
	keyA = "IgDTEvasUvxisSAmfBKh8ZNGbl0rX2MJYvChs7NTYHs="
	keyB = "GQfCyIlpLrGtUaUsGmqg0HRFWaqbDbbW7Ddz3u4b2Xk="
)

var local = ranges.Cluster{
	ID:        "prod",
	Pods:      []netip.Prefix{netip.MustParsePrefix("10.10.0.0/16")},
	Services:  []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")},
	WireGuard: netip.MustParsePrefix("10.4.0.0/16"),
}

// dr is the seed's DR cluster as it would announce itself: two locations.
func dr() fedv1.AnnouncementSpec {
	return fedv1.AnnouncementSpec{
		ClusterID:       "dr",
		PodCIDRs:        []string{"10.11.0.0/16"},
		ServiceCIDRs:    []string{"10.21.0.0/16"},
		WireGuardSubnet: "10.5.0.0/16",
		Gateways: []fedv1.Gateway{
			{Location: "ovh-gra", Node: "dr-1", PublicKey: keyA, Endpoint: "198.51.100.10:51820",
				AllowedIPs: []string{"10.11.0.0/24", "10.5.0.1/32", "10.21.0.0/16"}},
			{Location: "ovh-sbg", Node: "dr-3", PublicKey: keyB,
				AllowedIPs: []string{"10.11.1.0/24", "10.5.0.2/32"}, PersistentKeepalive: 10},
		},
	}
}

func TestPeersMirrorEveryGatewayOfADisjointRemote(t *testing.T) {
	res := Peers(dr(), local, nil, 0)
	if len(res.Conflicts) != 0 || len(res.Problems) != 0 {
		t.Fatalf("unexpected conflicts %v, problems %v", res.Conflicts, res.Problems)
	}
	type peer struct {
		Name, Key, Endpoint, Remote, Location string
		Allowed                               []string
		Keepalive                             int
	}
	var got []peer
	for _, p := range res.Peers {
		e := ""
		if p.Spec.Endpoint != nil {
			e = p.Spec.Endpoint.String()
		}
		got = append(got, peer{p.Name, p.Spec.PublicKey, e, p.Labels[LabelRemote], p.Labels[LabelLocation], p.Spec.AllowedIPs, p.Spec.PersistentKeepalive})
	}
	want := []peer{
		{"dr-ovh-gra", keyA, "198.51.100.10:51820", "dr", "ovh-gra", []string{"10.11.0.0/24", "10.21.0.0/16", "10.5.0.1/32"}, 25},
		{"dr-ovh-sbg", keyB, "", "dr", "ovh-sbg", []string{"10.11.1.0/24", "10.5.0.2/32"}, 25},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("peers (-want +got):\n%s", d)
	}
}

func TestPeersNeverRouteARangeThatOverlapsALocalOne(t *testing.T) {
	a := dr()
	// The remote comes to announce a pod range that overlaps production's,
	// and a gateway routes into it: that part is refused, the rest stays.
	a.PodCIDRs = append(a.PodCIDRs, "10.10.128.0/17")
	a.Gateways[1].AllowedIPs = append(a.Gateways[1].AllowedIPs, "10.10.200.0/24")
	res := Peers(a, local, nil, 0)
	if len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0].Error(), "dr's pod range 10.10.128.0/17 overlaps prod's pod range 10.10.0.0/16") {
		t.Errorf("conflicts = %v, want the overlap named", res.Conflicts)
	}
	for _, p := range res.Peers {
		for _, ip := range p.Spec.AllowedIPs {
			if netip.MustParsePrefix(ip).Overlaps(netip.MustParsePrefix("10.10.0.0/16")) {
				t.Errorf("Peer %s routes %s, inside production's pods", p.Name, ip)
			}
		}
	}
	if len(res.Peers) != 2 {
		t.Errorf("got %d peers, want both gateways kept with their other ranges", len(res.Peers))
	}
}

func TestPeersRefuseWhatAnotherMemberUses(t *testing.T) {
	c := ranges.Cluster{ID: "c", Services: []netip.Prefix{netip.MustParsePrefix("10.21.0.0/16")}}
	res := Peers(dr(), local, []ranges.Cluster{c}, 0)
	if len(res.Conflicts) != 1 || res.Conflicts[0].With.Cluster != "c" {
		t.Fatalf("conflicts = %v, want dr's service range against c's", res.Conflicts)
	}
	gra := res.Peers[0]
	if got := strings.Join(gra.Spec.AllowedIPs, ","); got != "10.11.0.0/24,10.5.0.1/32" {
		t.Errorf("dr-ovh-gra allowed IPs = %s, want the service range left out", got)
	}
}

func TestPeersLeaveOutMalformedGateways(t *testing.T) {
	a := dr()
	a.Gateways[0].PublicKey = "not-a-key"
	a.Gateways[1].AllowedIPs = []string{"10.99.0.0/24", "garbage"}
	a.PodCIDRs = append(a.PodCIDRs, "10.300.0.0/16")
	res := Peers(a, local, nil, 0)
	if len(res.Peers) != 0 {
		t.Errorf("got peers %v, want none: one bad key, one gateway routing nothing accepted", res.Peers)
	}
	joined := strings.Join(res.Problems, "\n")
	for _, want := range []string{
		`pod range "10.300.0.0/16", which is not a CIDR`,
		"gateway ovh-gra of dr (node dr-1) left out: ",
		`allowed IP "garbage" is not a CIDR`,
		"allowed IP 10.99.0.0/24 is outside the ranges accepted from dr",
		"gateway ovh-sbg of dr (node dr-3) left out: none of its allowed IPs",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}

func TestPeerNameIsAValidDistinctName(t *testing.T) {
	for _, tc := range []struct{ cluster, loc, want string }{
		{"dr", "ovh-gra", "dr-ovh-gra"},
		{"dr", "Paris_DC", "dr-paris-dc-"},
		{"dr", strings.Repeat("x", 70), "dr-" + strings.Repeat("x", 49) + "-"},
	} {
		got := PeerName(tc.cluster, tc.loc)
		if !strings.HasPrefix(got, tc.want) || len(got) > 63 {
			t.Errorf("PeerName(%q, %q) = %q, want prefix %q and at most 63 bytes", tc.cluster, tc.loc, got, tc.want)
		}
	}
	if PeerName("dr", "Paris_DC") == PeerName("dr", "paris-dc") {
		t.Error("two locations share a Peer name")
	}
}

// TestPeersNameTheRemoteGatewayNode: kilofed status shows, per remote
// location, the node leading it, which only the Announcement knows.
func TestPeersNameTheRemoteGatewayNode(t *testing.T) {
	res := Peers(dr(), local, nil, 0)
	got := map[string]string{}
	for _, p := range res.Peers {
		got[p.Name] = p.Annotations[AnnotationNode]
	}
	if diff := cmp.Diff(map[string]string{"dr-ovh-gra": "dr-1", "dr-ovh-sbg": "dr-3"}, got); diff != "" {
		t.Errorf("gateway nodes of the mirrored Peers (-want +got):\n%s", diff)
	}
}
