package topology

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoutes(t *testing.T) {
	twoSites := func(mod func([]Node)) []Node {
		ns := []Node{
			node("a-1", "a", "10.1.0.1/24", "198.51.100.1", "10.42.1.0/24"),
			node("a-2", "a", "10.1.0.2/24", "", "10.42.2.0/24"),
			node("a-3", "a", "10.1.7.3/24", "", "10.42.3.0/24"),
			node("b-1", "b", "10.2.0.1/24", "203.0.113.1", "10.42.4.0/24"),
		}
		if mod != nil {
			mod(ns)
		}
		return ns
	}
	for _, tc := range []struct {
		name   string
		nodes  []Node
		peers  []Peer
		opts   Options
		node   string
		want   []string // route lines that must be there
		absent []string // destinations that must not be routed
		rules  []string
	}{{
		name: "leader: other segments through WireGuard with the internal IP as source",
		node: "a-1", nodes: twoSites(nil), opts: Options{Links: links},
		want: []string{"10.42.4.0/24 dev kilo0 src 10.1.0.1", "10.2.0.1/32 dev kilo0 src 10.1.0.1",
			"10.42.2.0/24 via 10.1.0.2 dev eth0", "10.42.3.0/24 via 10.1.7.3 dev eth0 onlink"},
		absent: []string{"10.42.1.0/24", "10.1.0.2/32"},
	}, {
		name: "non-leader: other segments and the own WireGuard IP via the leader",
		node: "a-2", nodes: twoSites(nil), opts: Options{Links: links},
		want:   []string{"10.42.4.0/24 via 10.1.0.1 dev eth0", "10.2.0.1/32 via 10.1.0.1 dev eth0"},
		absent: []string{"10.42.2.0/24", "10.1.0.2/32", "10.1.0.1/32"},
	}, {
		name: "encapsulate always: through the tunnel, on-link, with a source, plus pod rules",
		node: "a-2", nodes: twoSites(nil), opts: Options{Links: links, Encapsulate: EncapsulateAlways},
		want: []string{"10.42.4.0/24 via 10.1.0.1 dev kilo-vxlan src 10.1.0.2 onlink",
			"10.42.1.0/24 via 10.1.0.1 dev kilo-vxlan src 10.1.0.2 onlink",
			"10.1.0.1/32 via 10.1.0.1 dev kilo-vxlan src 10.1.0.2 table 1107 onlink"},
		rules: []string{"from 10.42.2.0/24 to 10.1.0.1/32 table 1107", "from 10.42.2.0/24 to 10.1.7.3/32 table 1107"},
	}, {
		name: "crosssubnet: natively inside a subnet, encapsulated across",
		node: "a-2", nodes: twoSites(nil), opts: Options{Links: links, Encapsulate: EncapsulateCrossSubnet},
		want: []string{"10.42.1.0/24 via 10.1.0.1 dev eth0", "10.42.3.0/24 via 10.1.7.3 dev kilo-vxlan src 10.1.0.2 onlink",
			"10.1.7.3/32 via 10.1.7.3 dev kilo-vxlan src 10.1.0.2 table 1107 onlink"},
		absent: []string{"10.1.0.1/32"},
		rules:  []string{"from 10.42.2.0/24 to 10.1.7.3/32 table 1107"},
	}, {
		name: "no local routes: only what leaves the location",
		node: "a-2", nodes: twoSites(nil), opts: Options{Links: links, NoLocalRoutes: true, Encapsulate: EncapsulateAlways},
		want:   []string{"10.42.4.0/24 via 10.1.0.1 dev kilo-vxlan src 10.1.0.2 onlink"},
		absent: []string{"10.42.1.0/24", "10.42.3.0/24", "10.1.0.1/32"},
	}, {
		name: "a range holding the node's own address is not routed",
		node: "b-1", opts: Options{Links: links},
		nodes: twoSites(func(ns []Node) { ns[0].AllowedLocationIPs = pfxs("10.0.0.0/14") }),
		want:  []string{"10.1.0.2/32 dev kilo0 src 10.2.0.1"},
		// 10.0.0.0/14 holds b-1's own 10.2.0.1.
		absent: []string{"10.0.0.0/14"},
	}, {
		name: "the internal IP a leader is reached at (no public endpoint) is not routed",
		node: "b-1", opts: Options{Links: links},
		nodes:  twoSites(func(ns []Node) { ns[0].ExternalIP = netip.Addr{} }),
		want:   []string{"10.1.0.2/32 dev kilo0 src 10.2.0.1", "10.42.1.0/24 dev kilo0 src 10.2.0.1"},
		absent: []string{"10.1.0.1/32"},
	}, {
		name: "a node without internal IP: only WireGuard routes, no source",
		node: "b-1", opts: Options{Links: links},
		nodes: twoSites(func(ns []Node) {
			ns[3].InternalIP = netip.Prefix{}
			ns[3].Endpoint = &Endpoint{Addr: addrPort("203.0.113.1:51820")}
		}),
		want: []string{"10.42.1.0/24 dev kilo0", "10.42.2.0/24 dev kilo0"},
	}, {
		// Another cluster (the seed's DR Peer) routes back the other
		// side's WireGuard subnet, not its LAN: a leader's own traffic
		// to a Peer leaves from the segment's WireGuard IP (as Kilo's,
		// from kilo0's address), which it keeps through leader changes.
		name: "leader: a Peer's ranges through WireGuard with the segment's WireGuard IP as source",
		node: "a-1", peers: []Peer{drPeer()}, opts: Options{Links: links},
		nodes: twoSites(func(ns []Node) { ns[0].WireGuardIP = pfx("10.4.0.7/16") }),
		want: []string{"10.11.0.0/16 dev kilo0 src 10.4.0.7", "10.21.0.0/16 dev kilo0 src 10.4.0.7",
			"10.42.4.0/24 dev kilo0 src 10.1.0.1"},
	}, {
		name: "leader: a Peer's range of the other family keeps the internal IP of that family",
		node: "a-1", opts: Options{Links: links},
		peers: func() []Peer { p := drPeer(); p.AllowedIPs = pfxs("2001:db8:11::/48"); return []Peer{p} }(),
		nodes: twoSites(func(ns []Node) {
			ns[0].WireGuardIP = pfx("10.4.0.7/16")
			ns[0].InternalIP6 = pfx("2001:db8:1::1/64")
		}),
		want: []string{"2001:db8:11::/48 dev kilo0 src 2001:db8:1::1"},
	}, {
		name: "non-leader: a Peer's ranges via the leader, without source",
		node: "a-2", peers: []Peer{drPeer()}, opts: Options{Links: links},
		nodes: twoSites(func(ns []Node) { ns[0].WireGuardIP = pfx("10.4.0.7/16") }),
		want:  []string{"10.11.0.0/16 via 10.1.0.1 dev eth0", "10.21.0.0/16 via 10.1.0.1 dev eth0"},
	}, {
		name: "no underlay link: native next hops without on-link",
		node: "a-2", nodes: twoSites(nil), opts: Options{},
		want: []string{"10.42.4.0/24 via 10.1.0.1", "10.42.3.0/24 via 10.1.7.3"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			top := mustNew(t, tc.nodes, tc.peers, tc.opts)
			routes, rules := top.Routes(tc.node)
			var lines []string
			dsts := make(map[string]bool)
			for _, r := range routes {
				lines = append(lines, routeLine(r))
				dsts[r.Dst.String()] = true
			}
			for _, w := range tc.want {
				if !slices.Contains(lines, w) {
					t.Errorf("missing route %q in:\n%s", w, strings.Join(lines, "\n"))
				}
			}
			for _, a := range tc.absent {
				if dsts[a] {
					t.Errorf("route to %s present, want none:\n%s", a, strings.Join(lines, "\n"))
				}
			}
			var got []string
			for _, r := range rules {
				got = append(got, ruleLine(r))
			}
			if diff := cmp.Diff(tc.rules, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if !slices.IsSortedFunc(routes, func(a, b Route) int { return a.Dst.Compare(b.Dst) }) {
				t.Errorf("routes are not sorted by destination")
			}
		})
	}
}

func TestTunnelRemotes(t *testing.T) {
	top := mustNew(t, metaCloud(), nil, Options{Links: links, Encapsulate: EncapsulateCrossSubnet})
	for name, want := range map[string][]string{
		"aws-1": {"172.31.32.22"}, "aws-2": {"172.31.0.21"}, "scw-1": nil, "dc-1": nil,
	} {
		var got []string
		for _, a := range top.TunnelRemotes(name) {
			got = append(got, a.String())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("TunnelRemotes(%s) (-want +got):\n%s", name, diff)
		}
	}
	top = mustNew(t, metaCloud(), nil, Options{Links: links, Encapsulate: EncapsulateAlways, Granularity: CrossGranularity})
	if got := top.TunnelRemotes("dc-2"); len(got) != 1 || got[0] != addr("192.168.10.31") {
		t.Errorf("TunnelRemotes(dc-2) in cross mode = %v, want [192.168.10.31]", got)
	}
	if got := top.TunnelRemotes("nobody"); got != nil {
		t.Errorf("TunnelRemotes(nobody) = %v", got)
	}
}

// checkSortedMatchesCollected checks that for every node of top the plan
// built by sorted, from the sorted node ranges, has the routes, rules and
// tunnel remotes that collect and sortRoutes give.
func checkSortedMatchesCollected(t *testing.T, top *Topology) {
	t.Helper()
	if top.nodeRanges == nil {
		return
	}
	for _, m := range top.members {
		want := top.newPlan(m)
		want.collect()
		want.routes = sortRoutes(want.routes)
		want.finish()
		got := top.newPlan(m)
		if !got.sorted() {
			continue // plan falls back to collect
		}
		if !slices.Equal(got.routes, want.routes) || !slices.Equal(got.rules, want.rules) || !slices.Equal(got.remotes, want.remotes) {
			t.Errorf("node %s: sorted gives\n%v %v %v\ncollect gives\n%v %v %v", m.Name, got.routes, got.rules, got.remotes, want.routes, want.rules, want.remotes)
		}
	}
}

// TestSortedRoutesMatchCollected checks the merge of the sorted node
// ranges against collecting every route and sorting them, on the
// scenarios and on generated clusters in every granularity, with and
// without encapsulation.
func TestSortedRoutesMatchCollected(t *testing.T) {
	for _, sc := range scenarios() {
		top, err := New(sc.nodes, sc.peers, sc.opts)
		if err != nil {
			t.Fatal(err)
		}
		checkSortedMatchesCollected(t, top)
	}
	for _, g := range []Granularity{LocationGranularity, FullGranularity, CrossGranularity} {
		for _, e := range []Encapsulate{EncapsulateNever, EncapsulateAlways, EncapsulateCrossSubnet} {
			for _, alips := range []bool{false, true} {
				nodes, peers := benchCluster(60, 4, alips)
				top, err := New(nodes, peers, Options{Granularity: g, Encapsulate: e, Links: Links{WireGuard: "kilo0", Underlay: "eth0", Tunnel: "tunl0"}})
				if err != nil {
					t.Fatal(err)
				}
				if top.nodeRanges == nil {
					t.Fatalf("%s/%s: the generated cluster's node ranges overlap", g, e)
				}
				checkSortedMatchesCollected(t, top)
			}
		}
	}
}

// TestPlanSkipsEveryOwnPodCIDR gives a node more IPv4 pod CIDRs than the
// route plan keeps as numbers: skip must refuse a route into any of them,
// the last included, and no other.
func TestPlanSkipsEveryOwnPodCIDR(t *testing.T) {
	nodes := []Node{
		node("a-1", "paris", "10.1.0.1/24", "198.51.100.1", "10.42.1.0/24", "10.42.2.0/24", "10.42.3.0/24", "fd00:42:1::/64"),
		node("a-2", "paris", "10.1.0.2/24", "", "10.42.4.0/24"),
	}
	top := mustNew(t, nodes, nil, Options{Links: links})
	m, _ := top.member("a-1")
	p := top.newPlan(m)
	for _, dst := range pfxs("10.42.1.0/24", "10.42.2.128/25", "10.42.3.7/32", "10.42.0.0/16", "fd00:42:1::/64") {
		if !p.skip(dst, false) {
			t.Errorf("a-1 would route %s, which holds its own pods", dst)
		}
	}
	for _, dst := range pfxs("10.42.4.0/24", "10.43.3.0/24", "fd00:42:2::/64") {
		if p.skip(dst, false) {
			t.Errorf("a-1 would not route %s", dst)
		}
	}
}
