package topology

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// locationNodes returns one node per location name, with distinct ranges.
func locationNodes(names ...string) []Node {
	var out []Node
	for i, l := range names {
		out = append(out, locationNode(i, l))
	}
	return out
}

// locationNode returns the single node of location l, with ranges derived
// from i.
func locationNode(i int, l string) Node {
	return node("n-"+l, l, fmt.Sprintf("10.%d.%d.1/24", 100+i/250, i%250), "",
		fmt.Sprintf("172.%d.%d.0/24", 16+i/250, i%250))
}

func wireGuardIPs(top *Topology) map[string]netip.Prefix {
	out := make(map[string]netip.Prefix)
	for _, s := range top.Segments {
		out[s.Name] = s.WireGuardIP
	}
	return out
}

// announce does what the agent does: every node publishes its segment's
// WireGuard IP (kilo.squat.ai/wireguard-ip).
func announce(top *Topology, nodes []Node) []Node {
	out := slices.Clone(nodes)
	for i := range out {
		if s, ok := top.Segment(out[i].Name); ok {
			out[i].WireGuardIP = s.WireGuardIP
		}
	}
	return out
}

// TestStableAllocationByHash adds and removes locations without any
// announced address: the other segments keep their WireGuard IPs.
func TestStableAllocationByHash(t *testing.T) {
	base := []string{"scaleway-paris", "aws-euwest3", "lyon-dc", "cn-beijing", "cn-shanghai", "gcp-us", "azure-nl"}
	opts := Options{Subnet: pfx("10.5.0.0/16")}
	before := wireGuardIPs(mustNew(t, locationNodes(base...), nil, opts))
	for _, tc := range []struct {
		name      string
		locations []string
	}{
		{name: "add a location", locations: append(slices.Clone(base), "on-premise-fr")},
		{name: "add two locations first in name order", locations: append([]string{"aaa", "aab"}, base...)},
		{name: "remove a location", locations: slices.Delete(slices.Clone(base), 2, 3)},
		{name: "remove the first location", locations: base[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := wireGuardIPs(mustNew(t, locationNodes(tc.locations...), nil, opts))
			for name, ip := range after {
				if old, ok := before[name]; ok && old != ip {
					t.Errorf("segment %s moved from %s to %s", name, old, ip)
				}
			}
		})
	}
}

// TestStableAllocationAnnounced churns many locations in a small subnet,
// where hashed slots collide, with every node announcing its address as
// the agent does: no segment ever changes its WireGuard IP.
func TestStableAllocationAnnounced(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	opts := Options{Subnet: pfx("10.5.0.0/24")}
	var pool []string
	for i := range 60 {
		pool = append(pool, fmt.Sprintf("loc-%02d", i))
	}
	all := locationNodes(pool...) // distinct ranges for every location
	nodes := slices.Clone(all[:40])
	top := mustNew(t, nodes, nil, opts)
	for round := range 30 {
		nodes = announce(top, nodes)
		before := wireGuardIPs(top)
		for range 2 {
			i := rng.IntN(len(nodes))
			nodes = slices.Delete(nodes, i, i+1)
		}
		for added := 0; added < 2; {
			n := all[rng.IntN(len(all))]
			if !slices.ContainsFunc(nodes, func(m Node) bool { return m.Name == n.Name }) {
				nodes = append(nodes, n)
				added++
			}
		}
		top = mustNew(t, nodes, nil, opts)
		if len(top.Segments) != len(nodes) || len(top.Problems) != 0 {
			t.Fatalf("round %d: %d segments for %d nodes, problems %v", round, len(top.Segments), len(nodes), top.Problems)
		}
		for name, ip := range wireGuardIPs(top) {
			if old, ok := before[name]; ok && old != ip {
				t.Fatalf("round %d: segment %s moved from %s to %s", round, name, old, ip)
			}
		}
	}
}

// hashTo searches a location name whose hashed slot in subnet is want.
func hashTo(t *testing.T, subnet netip.Prefix, want netip.Addr, prefix string) string {
	t.Helper()
	a := newAllocator(subnet, newClaims())
	for i := range 5_000_000 {
		name := fmt.Sprintf("%s%d", prefix, i)
		if a.addrAt(a.home(locationKey(name))) == want {
			return name
		}
	}
	t.Fatalf("no location name hashes to %s", want)
	return ""
}

// TestAllocationCollision shows the collision rule: the segment served
// first by (slot, key) takes the slot, the other probes upward; once the
// other announces its address it keeps it.
func TestAllocationCollision(t *testing.T) {
	subnet := pfx("10.5.0.0/28")
	b := hashTo(t, subnet, addr("10.5.0.5"), "b-")
	a := hashTo(t, subnet, addr("10.5.0.5"), "a-") // sorts before b
	opts := Options{Subnet: subnet}
	first := mustNew(t, locationNodes(b), nil, opts)
	if got := wireGuardIPs(first)[b]; got != pfx("10.5.0.5/28") {
		t.Fatalf("%s alone got %s, want its slot 10.5.0.5/28", b, got)
	}
	nodes := append(locationNodes(b), locationNode(1, a))
	got := wireGuardIPs(mustNew(t, nodes, nil, opts))
	if diff := cmp.Diff(map[string]netip.Prefix{a: pfx("10.5.0.5/28"), b: pfx("10.5.0.6/28")}, got, netipCmp); diff != "" {
		t.Errorf("without announcement (-want +got):\n%s", diff)
	}
	nodes = append(announce(first, locationNodes(b)), locationNode(1, a))
	got = wireGuardIPs(mustNew(t, nodes, nil, opts))
	if diff := cmp.Diff(map[string]netip.Prefix{b: pfx("10.5.0.5/28"), a: pfx("10.5.0.6/28")}, got, netipCmp); diff != "" {
		t.Errorf("with %s announcing its address (-want +got):\n%s", b, diff)
	}
}

// TestAllocationAvoidsPeers puts a location whose slot is the seed
// laptop's address: the location moves up, the laptop keeps its address.
func TestAllocationAvoidsPeers(t *testing.T) {
	subnet := pfx("10.5.0.0/16")
	loc := hashTo(t, subnet, addr("10.5.100.10"), "loc-")
	opts := Options{Subnet: subnet}
	if got := wireGuardIPs(mustNew(t, locationNodes(loc), nil, opts))[loc]; got != pfx("10.5.100.10/16") {
		t.Fatalf("without peers %s got %s, want 10.5.100.10/16", loc, got)
	}
	top := mustNew(t, locationNodes(loc), []Peer{laptopPeer()}, opts)
	if got := wireGuardIPs(top)[loc]; got != pfx("10.5.100.11/16") {
		t.Errorf("with the laptop peer %s got %s, want 10.5.100.11/16", loc, got)
	}
	if len(top.Peers) != 1 || len(top.Problems) != 0 {
		t.Errorf("peers %v, problems %v: want the laptop accepted", top.Peers, top.Problems)
	}
	wide := laptopPeer()
	wide.AllowedIPs = pfxs("10.5.100.0/24")
	top = mustNew(t, locationNodes(loc), []Peer{wide}, opts)
	if got := wireGuardIPs(top)[loc]; got != pfx("10.5.101.0/16") {
		t.Errorf("with a peer holding 10.5.100.0/24 %s got %s, want 10.5.101.0/16 (the first address after it)", loc, got)
	}
}

// TestAllocationSmallSubnet never hands out the network or broadcast
// address and reports the segment left without an address.
func TestAllocationSmallSubnet(t *testing.T) {
	top := mustNew(t, locationNodes("a", "b", "c"), nil, Options{Subnet: pfx("10.5.0.0/30")})
	var got []netip.Addr
	for _, s := range top.Segments {
		if s.WireGuardIP.IsValid() {
			got = append(got, s.WireGuardIP.Addr())
		}
	}
	slices.SortFunc(got, netip.Addr.Compare)
	if diff := cmp.Diff([]netip.Addr{addr("10.5.0.1"), addr("10.5.0.2")}, got, netipCmp); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	if len(top.Problems) != 1 || top.Problems[0].Code != CodeNoWireGuardIP || top.Problems[0].Severity != Warning {
		t.Fatalf("problems = %v, want one %s warning", top.Problems, CodeNoWireGuardIP)
	}
	// The segment without an address still works: no Address, still peers.
	for _, s := range top.Segments {
		if s.WireGuardIP.IsValid() {
			continue
		}
		name := s.LeaderNode().Name
		if addrs := top.Addresses(name); len(addrs) != 0 {
			t.Errorf("Addresses(%s) = %v, want none", name, addrs)
		}
		c, err := top.WireGuardConfig(name, wgconf.SecretKey(testKey("private")))
		if err != nil || len(c.Peers) != 2 {
			t.Errorf("WireGuardConfig(%s) = %d peers, %v; want 2 peers", name, len(c.Peers), err)
		}
	}
}

func TestAllocationAnnounced(t *testing.T) {
	ann := func(ip string) func(*Node) { return func(n *Node) { n.WireGuardIP = pfx(ip) } }
	opts := Options{Subnet: pfx("10.5.0.0/16")}
	for _, tc := range []struct {
		name  string
		nodes []Node
		peers []Peer
		want  map[string]string
	}{{
		name:  "announced address inside the subnet is kept",
		nodes: []Node{with(locationNodes("a")[0], ann("10.5.7.7/16"))},
		want:  map[string]string{"a": "10.5.7.7/16"},
	}, {
		name:  "an address outside the subnet is ignored",
		nodes: []Node{with(locationNodes("a")[0], ann("10.4.7.7/16"))},
		want:  map[string]string{"a": "hashed"},
	}, {
		name:  "the network address is never used",
		nodes: []Node{with(locationNodes("a")[0], ann("10.5.0.0/16"))},
		want:  map[string]string{"a": "hashed"},
	}, {
		name:  "the broadcast address is never used",
		nodes: []Node{with(locationNodes("a")[0], ann("10.5.255.255/16"))},
		want:  map[string]string{"a": "hashed"},
	}, {
		name: "two leaders announcing one address: the first segment by name keeps it",
		nodes: []Node{with(locationNodes("b")[0], ann("10.5.7.7/16")),
			with(locationNode(1, "a"), ann("10.5.7.7/16"))},
		want: map[string]string{"a": "10.5.7.7/16", "b": "hashed"},
	}, {
		name: "a non-leader's announcement is used when the leader has none",
		nodes: []Node{node("a-1", "a", "10.1.0.1/24", "", "172.16.1.0/24"),
			with(node("a-2", "a", "10.1.0.2/24", "", "172.16.2.0/24"), ann("10.5.9.9/16"))},
		want: map[string]string{"a": "10.5.9.9/16"},
	}, {
		name:  "a live announced address wins over a new peer",
		nodes: []Node{with(locationNodes("a")[0], ann("10.5.100.10/16"))},
		peers: []Peer{laptopPeer()},
		want:  map[string]string{"a": "10.5.100.10/16"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			top := mustNew(t, tc.nodes, tc.peers, opts)
			a := newAllocator(opts.Subnet, newClaims())
			got := make(map[string]string)
			for n, p := range wireGuardIPs(top) {
				got[n] = p.String()
				if p.Addr() == a.addrAt(a.home(locationKey(n))) {
					got[n] = "hashed"
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WireGuard IPs (-want +got):\n%s", diff)
			}
			if len(tc.peers) > 0 && (len(top.Peers) != 0 || len(top.Problems) != 1 || top.Problems[0].Code != CodeOverlap) {
				t.Errorf("peers %v problems %v: want the peer excluded for overlap", top.Peers, top.Problems)
			}
		})
	}
}

func TestLastAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.5.0.0/16": "10.5.255.255", "10.5.0.0/30": "10.5.0.3", "0.0.0.0/0": "255.255.255.255",
		"10.5.0.7/32": "10.5.0.7", "2001:db8::/64": "2001:db8::ffff:ffff:ffff:ffff", "2001:db8::/127": "2001:db8::1",
		"10.5.0.0/13": "10.7.255.255",
	} {
		if got := lastAddr(pfx(in)); got != addr(want) {
			t.Errorf("lastAddr(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestClaimsFind(t *testing.T) {
	cs := newClaims()
	for _, p := range []string{"10.42.0.0/24", "10.0.1.10/32", "10.5.0.0/16", "2001:db8::/64"} {
		cs.add(claim{prefix: pfx(p), kind: claimService})
	}
	for _, tc := range []struct {
		name, query, want string
	}{
		{name: "equal", query: "10.42.0.0/24", want: "10.42.0.0/24"},
		{name: "inside", query: "10.42.0.128/25", want: "10.42.0.0/24"},
		{name: "contains: the lowest one inside", query: "10.0.0.0/8", want: "10.0.1.10/32"},
		{name: "contains one", query: "10.42.0.0/16", want: "10.42.0.0/24"},
		{name: "contains a host", query: "10.0.1.0/24", want: "10.0.1.10/32"},
		{name: "disjoint", query: "10.43.0.0/16", want: ""},
		{name: "all of IPv4", query: "0.0.0.0/0", want: "10.0.1.10/32"},
		{name: "other family", query: "::/0", want: "2001:db8::/64"},
		{name: "IPv6 disjoint", query: "2001:db9::/32", want: ""},
		{name: "host in subnet", query: "10.5.100.10/32", want: "10.5.0.0/16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := cs.find(pfx(tc.query), nil)
			if got := c.prefix.String(); ok != (tc.want != "") || (ok && got != tc.want) {
				t.Errorf("find(%s) = %q, %t; want %q", tc.query, got, ok, tc.want)
			}
		})
	}
}
