package topology

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/kilofed/kilofed/mesh/golden"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func TestPeerRules(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 3, d, 0, 0, 0, 0, time.UTC) }
	peer := func(name string, created time.Time, ips ...string) Peer {
		return Peer{Name: name, Created: created, PublicKey: testKey(name), AllowedIPs: pfxs(ips...)}
	}
	for _, tc := range []struct {
		name     string
		peers    []Peer
		accepted []string
		// problems maps a peer to the code and words its reason must hold.
		problems map[string][]string
	}{{
		name:     "the older peer keeps an exact duplicate",
		peers:    []Peer{peer("new", day(2), "10.5.100.10/32"), peer("old", day(1), "10.5.100.10/32")},
		accepted: []string{"old"},
		problems: map[string][]string{"new": {CodeOverlap, `peer "old"`, "10.5.100.10/32", "older"}},
	}, {
		name:     "same creation time: the name decides",
		peers:    []Peer{peer("b", day(1), "10.5.100.0/24"), peer("a", day(1), "10.5.100.10/32")},
		accepted: []string{"a"},
		problems: map[string][]string{"b": {CodeOverlap, `peer "a"`, "10.5.100.0/24"}},
	}, {
		name:     "a wider range overlapping an older narrower one is excluded",
		peers:    []Peer{peer("old", day(1), "10.5.100.10/32"), peer("wide", day(2), "10.5.0.0/17")},
		accepted: []string{"old"},
		problems: map[string][]string{"wide": {CodeOverlap, `peer "old"`}},
	}, {
		name:     "overlapping a pod CIDR",
		peers:    []Peer{peer("p", day(1), "10.42.0.0/16")},
		problems: map[string][]string{"p": {CodeOverlap, "pod CIDR 10.42.0.0/24", "node-beijing"}},
	}, {
		name:     "overlapping a node internal IP",
		peers:    []Peer{peer("p", day(1), "10.0.2.0/24")},
		problems: map[string][]string{"p": {CodeOverlap, "internal IP 10.0.2.20", "node-shanghai"}},
	}, {
		name:     "overlapping a node's public endpoint",
		peers:    []Peer{peer("p", day(1), "203.0.113.0/24")},
		problems: map[string][]string{"p": {CodeOverlap, "endpoint 203.0.113.10"}},
	}, {
		name:     "overlapping a service CIDR",
		peers:    []Peer{peer("p", day(1), "10.96.0.10/32")},
		problems: map[string][]string{"p": {CodeOverlap, "service CIDR 10.96.0.0/12"}},
	}, {
		name:     "a default route peer is refused",
		peers:    []Peer{peer("exit", day(1), "0.0.0.0/0")},
		problems: map[string][]string{"exit": {CodeOverlap}},
	}, {
		name:     "zero key",
		peers:    []Peer{{Name: "p", AllowedIPs: pfxs("10.5.100.1/32")}},
		problems: map[string][]string{"p": {CodeNoKey, "wg pubkey"}},
	}, {
		name: "a key used twice: the older keeps it",
		peers: []Peer{peer("a", day(1), "10.5.100.1/32"),
			{Name: "b", Created: day(2), PublicKey: testKey("a"), AllowedIPs: pfxs("10.5.100.2/32")}},
		accepted: []string{"a"},
		problems: map[string][]string{"b": {CodeDuplicateKey, `peer "a"`}},
	}, {
		// More peers than acceptPeers scans for a used key: it looks them
		// up in a map.
		name:     "a key used twice among many peers: the older keeps it",
		peers:    append(manyPeers(20), Peer{Name: "z", Created: day(30), PublicKey: testKey("p-03"), AllowedIPs: pfxs("10.5.101.1/32")}),
		accepted: manyPeerNames(20),
		problems: map[string][]string{"z": {CodeDuplicateKey, `peer "p-03"`}},
	}, {
		// More peers than acceptPeers scans for a name: it searches their
		// sorted names.
		name:     "two peers with one name among many are both left out",
		peers:    append(manyPeers(20), Peer{Name: "p-05", Created: day(30), PublicKey: testKey("other"), AllowedIPs: pfxs("10.5.101.1/32")}),
		accepted: slices.DeleteFunc(manyPeerNames(20), func(n string) bool { return n == "p-05" }),
		problems: map[string][]string{"p-05": {CodeDuplicateName}},
	}, {
		name:     "two peers with one name are both left out",
		peers:    []Peer{peer("p", day(1), "10.5.100.1/32"), peer("p", day(2), "10.5.100.2/32")},
		problems: map[string][]string{"p": {CodeDuplicateName}},
	}, {
		name:     "no allowed IPs: kept with a warning",
		peers:    []Peer{peer("p", day(1))},
		accepted: []string{"p"},
		problems: map[string][]string{"p": {CodeNoAllowedIPs}},
	}, {
		name:     "host bits are masked, duplicates merged",
		peers:    []Peer{peer("p", day(1), "10.11.3.4/16", "10.11.0.0/16")},
		accepted: []string{"p"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			top := mustNew(t, seedChina(), tc.peers, Options{Subnet: pfx("10.5.0.0/16"), ServiceCIDRs: pfxs("10.96.0.0/12")})
			var accepted []string
			for _, p := range top.Peers {
				accepted = append(accepted, p.Name)
			}
			if diff := cmp.Diff(tc.accepted, accepted); diff != "" {
				t.Errorf("accepted peers (-want +got):\n%s", diff)
			}
			got := make(map[string]Problem)
			for _, p := range top.Problems {
				if p.Kind != KindPeer {
					t.Errorf("unexpected problem %v", p)
				}
				got[p.Name] = p
			}
			if len(got) != len(tc.problems) {
				t.Errorf("problems = %v, want %d", top.Problems, len(tc.problems))
			}
			for name, want := range tc.problems {
				p, ok := got[name]
				if !ok {
					t.Errorf("no problem for peer %q", name)
					continue
				}
				if p.Code != want[0] {
					t.Errorf("peer %q code = %q, want %q", name, p.Code, want[0])
				}
				for _, w := range want[1:] {
					if !strings.Contains(p.Reason, w) {
						t.Errorf("peer %q reason %q lacks %q", name, p.Reason, w)
					}
				}
				excluded := !slices.Contains(accepted, name)
				if excluded != (p.Severity == Excluded) {
					t.Errorf("peer %q severity %s but accepted=%t", name, p.Severity, !excluded)
				}
			}
		})
	}
}

// TestPeerConfSeedLaptop is what `kilofed showconf peer seb-laptop` prints
// for the Chinese seed's cluster once the French seed's laptop Peer is applied.
func TestPeerConfSeedLaptop(t *testing.T) {
	top := mustNew(t, seedChina(), []Peer{laptopPeer()},
		Options{Subnet: pfx("10.5.0.0/16"), ServiceCIDRs: pfxs("10.96.0.0/12")})
	iface, err := top.PeerConf("seb-laptop")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "peerconf-seb-laptop.golden", wgconf.Render(iface, wgconf.RenderOptions{}))
	if diff := cmp.Diff(pfxs("10.5.100.10/32"), iface.Address, netipCmp); diff != "" {
		t.Errorf("Address (-want +got):\n%s", diff)
	}
	// The cluster DNS (10.96.0.10) must be reachable through exactly one segment.
	var through []string
	for _, p := range iface.Peers {
		for _, a := range p.AllowedIPs {
			if a.Contains(addr("10.96.0.10")) {
				through = append(through, p.Name)
			}
		}
		if p.PersistentKeepalive != 25*time.Second {
			t.Errorf("peer %s keepalive %s, want the laptop's 25s", p.Name, p.PersistentKeepalive)
		}
	}
	if len(through) != 1 {
		t.Errorf("10.96.0.10 routed through %v, want exactly one segment", through)
	}
}

func TestPeerConfErrors(t *testing.T) {
	top := mustNew(t, seedChina(), []Peer{laptopPeer(), {Name: "keyless", AllowedIPs: pfxs("10.5.100.1/32")}}, Options{Subnet: pfx("10.5.0.0/16")})
	if _, err := top.PeerConf("nobody"); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("PeerConf(nobody) error = %v, want ErrUnknownPeer", err)
	}
	_, err := top.PeerConf("keyless")
	if !errors.Is(err, ErrExcluded) || !strings.Contains(err.Error(), "spec.publicKey") {
		t.Errorf("PeerConf(keyless) error = %v, want ErrExcluded with the reason", err)
	}
	if _, err := top.WireGuardConfig("nobody", wgconf.SecretKey{}); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("WireGuardConfig(nobody) error = %v, want ErrUnknownNode", err)
	}
	if c := top.NodeConf("nobody"); len(c.Peers) != 0 || len(c.Address) != 0 {
		t.Errorf("NodeConf(nobody) = %+v, want empty", c)
	}
	if p := top.AsPeer("nobody"); p.PublicKey != (wgconf.Key{}) {
		t.Errorf("AsPeer(nobody) = %+v, want zero", p)
	}
}

// TestRoamingPeerAndNATSegmentUseTheGateway checks that a roaming peer and
// a segment behind NAT, which can never start a handshake with each other,
// talk through the gateway segment on both sides.
func TestRoamingPeerAndNATSegmentUseTheGateway(t *testing.T) {
	top := mustNew(t, metaCloud(), []Peer{laptopPeer(), drPeer()}, Options{Subnet: pfx("10.5.0.0/16")})
	gw := top.Segments[top.gatewaySegment()]
	if gw.Name != "aws-euwest3" {
		t.Fatalf("gateway segment %s, want aws-euwest3 (first public one)", gw.Name)
	}
	c, err := top.WireGuardConfig("dc-1", wgconf.SecretKey(testKey("private")))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range c.Peers {
		names = append(names, p.Name)
		if p.Name == "aws-euwest3" && !containsPrefix(p.AllowedIPs, "10.5.100.10/32") {
			t.Errorf("dc-1 does not send the laptop's range to the gateway: %v", p.AllowedIPs)
		}
	}
	if slices.Contains(names, "seb-laptop") || !slices.Contains(names, "cluster-dr-ovhcloud") {
		t.Errorf("dc-1 peers %v: want the DR peer (it has an endpoint) but not the roaming laptop", names)
	}
	iface, err := top.PeerConf("seb-laptop")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range iface.Peers {
		if p.Name == "lyon-dc" {
			t.Errorf("the laptop has a direct entry for the NAT'd lyon-dc")
		}
		if p.Name == "aws-euwest3" && !containsPrefix(p.AllowedIPs, "10.42.5.0/24") {
			t.Errorf("the laptop does not reach lyon-dc's pods through the gateway: %v", p.AllowedIPs)
		}
	}
	if !top.PreferLearntEndpoint(testKey("dc-1")) || !top.PreferLearntEndpoint(testKey("seb-laptop")) ||
		top.PreferLearntEndpoint(testKey("aws-1")) || top.PreferLearntEndpoint(testKey("cluster-dr-ovhcloud")) {
		t.Error("PreferLearntEndpoint: want true for the NAT'd segment and the roaming laptop only")
	}
}

func containsPrefix(ps []netip.Prefix, s string) bool { return slices.Contains(ps, pfx(s)) }

// TestViaGatewayPeerIsReachedFromNATSegmentsThroughTheGateway checks that a
// Peer marked ViaGateway, though it has an endpoint, is reached from a
// segment behind NAT through the gateway segment (both ways: the NAT'd
// leader has no entry for it and sends its ranges to the gateway), and
// directly from public segments, whose leaders keep their own entry.
func TestViaGatewayPeerIsReachedFromNATSegmentsThroughTheGateway(t *testing.T) {
	dr := drPeer()
	dr.ViaGateway = true
	top := mustNew(t, metaCloud(), []Peer{dr}, Options{Subnet: pfx("10.5.0.0/16")})
	c, err := top.WireGuardConfig("dc-1", wgconf.SecretKey(testKey("private")))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Peers {
		if p.Name == dr.Name {
			t.Errorf("dc-1, behind NAT, has a direct entry for the via-gateway Peer %s", dr.Name)
		}
		if p.Name == "aws-euwest3" {
			for _, a := range dr.AllowedIPs {
				if !slices.Contains(p.AllowedIPs, a) {
					t.Errorf("dc-1 does not send %s (%s's) to the gateway: %v", a, dr.Name, p.AllowedIPs)
				}
			}
		}
	}
	gw, err := top.WireGuardConfig("aws-1", wgconf.SecretKey(testKey("private")))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(gw.Peers, func(p wgconf.Peer) bool { return p.Name == dr.Name }) {
		t.Errorf("the gateway aws-1 has no entry for the via-gateway Peer %s", dr.Name)
	}
	plain := mustNew(t, metaCloud(), []Peer{drPeer()}, Options{Subnet: pfx("10.5.0.0/16")})
	if c, _ := plain.WireGuardConfig("dc-1", wgconf.SecretKey(testKey("private"))); !slices.ContainsFunc(c.Peers, func(p wgconf.Peer) bool { return p.Name == dr.Name }) {
		t.Errorf("without ViaGateway, dc-1 lost its direct entry for %s", dr.Name)
	}
}

// manyPeers returns n peers p-00, p-01... created a day apart in March
// 2026, each with an address of its own.
func manyPeers(n int) []Peer {
	var ps []Peer
	for i := range n {
		name := fmt.Sprintf("p-%02d", i)
		ps = append(ps, Peer{Name: name, Created: time.Date(2026, 3, 1+i, 0, 0, 0, 0, time.UTC),
			PublicKey: testKey(name), AllowedIPs: pfxs(fmt.Sprintf("10.5.100.%d/32", i+1))})
	}
	return ps
}

// manyPeerNames returns the names of manyPeers(n).
func manyPeerNames(n int) []string {
	var names []string
	for _, p := range manyPeers(n) {
		names = append(names, p.Name)
	}
	return names
}

// TestWireGuardPeersInKeyOrder checks that a leader's WireGuard peers come
// in public key order, also for keys whose first 8 bytes agree (the sort
// looks at those first).
func TestWireGuardPeersInKeyOrder(t *testing.T) {
	nodes, peers := benchCluster(40, 40, false)
	for i := range nodes {
		if i%3 == 0 { // a third of the keys share their first 8 bytes
			copy(nodes[i].Key[:8], "samehead")
		}
	}
	peers[0].PublicKey = nodes[3].Key
	peers[0].PublicKey[31] ^= 1 // the same head as a node's, another key
	for _, g := range []Granularity{LocationGranularity, FullGranularity} {
		top, err := New(nodes, peers, Options{Granularity: g})
		if err != nil {
			t.Fatal(err)
		}
		c, err := top.WireGuardConfig("node-00000", wgconf.SecretKey{})
		if err != nil {
			t.Fatal(err)
		}
		if want := 39 + len(peers); len(c.Peers) != want {
			t.Fatalf("%s: %d peers, want %d", g, len(c.Peers), want)
		}
		for i := 1; i < len(c.Peers); i++ {
			if a, b := c.Peers[i-1].PublicKey, c.Peers[i].PublicKey; bytes.Compare(a[:], b[:]) >= 0 {
				t.Errorf("%s: peer %d's key %x does not sort after peer %d's %x", g, i, b, i-1, a)
			}
		}
	}
}
