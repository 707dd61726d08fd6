package topology

import (
	"cmp"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// normalized returns nodes as New normalizes them, sorted by name, each
// with its own endpoint: input that New uses in place when every node has
// an endpoint (see normal).
func normalized(nodes []Node, port uint16) []Node {
	if port == 0 {
		port = DefaultPort
	}
	out := make([]Node, len(nodes))
	for i := range nodes {
		var m member
		m.Node = &out[i]
		n := 0
		n += len(nodes[i].PodCIDRs) + len(nodes[i].AllowedLocationIPs)
		arena := newPrefixArena(n)
		var ep Endpoint
		normalizeNode(&m, &nodes[i], &arena, &ep)
		m.fillEndpoint(port, &ep)
		if m.Endpoint != nil {
			e := *m.Endpoint
			out[i].Endpoint = &e
		}
	}
	slices.SortStableFunc(out, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// inPlace reports whether top uses nodes' own elements as its Nodes.
func inPlace(top *Topology, nodes []Node) bool {
	for _, m := range top.members {
		if m.Node != &nodes[m.idx] {
			return false
		}
	}
	return len(top.members) > 0
}

// TestNewInPlaceMatchesCopies feeds every scenario to New twice: as
// written, and normalized already, as an agent's nodes usually come (kg
// publishes each node's endpoint). Normalized input is used in place, with
// no copy of the nodes, and must give the very same mesh.
func TestNewInPlaceMatchesCopies(t *testing.T) {
	used := 0
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			want := render(t, mustNew(t, sc.nodes, sc.peers, sc.opts), sc.nodes, sc.peers)
			nodes := normalized(sc.nodes, sc.opts.Port)
			top := mustNew(t, nodes, sc.peers, sc.opts)
			if inPlace(top, nodes) {
				used++
			}
			if diff := gocmp.Diff(want, render(t, top, sc.nodes, sc.peers)); diff != "" {
				t.Errorf("normalized input gives another mesh (-as written +normalized):\n%s", diff)
			}
		})
	}
	if used < len(scenarios())/2 {
		t.Errorf("only %d of %d scenarios were used in place: the test no longer covers that path", used, len(scenarios()))
	}
}

// TestNewUsesOnlyNormalNodesInPlace checks when New keeps the caller's
// nodes: all of them normalized and in name order, and not otherwise.
func TestNewUsesOnlyNormalNodesInPlace(t *testing.T) {
	base := normalized(metaCloud(), 0)
	for _, tc := range []struct {
		name   string
		change func([]Node) []Node
		want   bool
	}{
		{name: "normalized, by name", change: func(ns []Node) []Node { return ns }, want: true},
		{name: "not in name order", change: func(ns []Node) []Node { slices.Reverse(ns); return ns }},
		{name: "an endpoint to fill in", change: func(ns []Node) []Node { ns[2].Endpoint = nil; return ns }},
		{name: "an endpoint without port", change: func(ns []Node) []Node {
			e := *ns[2].Endpoint
			e.Port = 0
			ns[2].Endpoint = &e
			return ns
		}},
		{name: "a pod CIDR with host bits", change: func(ns []Node) []Node { ns[0].PodCIDRs = pfxs("10.42.3.7/24"); return ns }},
		{name: "pod CIDRs out of order", change: func(ns []Node) []Node { ns[0].PodCIDRs = pfxs("10.42.9.0/24", "10.42.3.0/24"); return ns }},
		{name: "an empty, not nil, list", change: func(ns []Node) []Node { ns[0].AllowedLocationIPs = []netip.Prefix{}; return ns }},
		{name: "a mapped external IP", change: func(ns []Node) []Node { ns[0].ExternalIP = addr("::ffff:203.0.113.21"); return ns }},
		{name: "an IPv6 internal IP in InternalIP", change: func(ns []Node) []Node { ns[0].InternalIP = pfx("fd00::21/64"); return ns }},
		{name: "a keepalive under a second", change: func(ns []Node) []Node { ns[0].PersistentKeepalive = 1; return ns }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.change(slices.Clone(base))
			top := mustNew(t, nodes, nil, Options{})
			if got := inPlace(top, nodes); got != tc.want {
				t.Errorf("nodes used in place: %t, want %t", got, tc.want)
			}
			if tc.want {
				return
			}
			// Copies: the input as written, normalized, gives the same mesh.
			want := render(t, mustNew(t, normalized(nodes, 0), nil, Options{}), nodes, nil)
			if diff := gocmp.Diff(want, render(t, top, nodes, nil)); diff != "" {
				t.Errorf("(-normalized +as written):\n%s", diff)
			}
		})
	}
}

// TestNewNeverWritesNodesUsedInPlace drops ranges of nodes New uses in
// place, an overlapping pod CIDR and an allowed location IP that overlaps
// a Peer, while another goroutine reads the nodes (the agent's election
// does): New must drop them from its own copies, never from the caller's
// nodes. Under the race detector, a write would also be reported.
func TestNewNeverWritesNodesUsedInPlace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func([]Node)
		dropped func(*Topology) bool
	}{
		{
			name:   "a pod CIDR claimed twice",
			change: func(ns []Node) { ns[1].PodCIDRs = pfxs("10.42.1.0/24", "10.42.4.0/24") }, // aws-2, first by name, takes scw-1's
			dropped: func(top *Topology) bool {
				n, _ := top.Node("scw-1")
				return len(n.PodCIDRs) == 0
			},
		},
		{
			name:   "an allowed location IP over a Peer's range",
			change: func(ns []Node) { ns[0].AllowedLocationIPs = pfxs("10.5.100.0/24", "192.168.50.0/24") }, // aws-1
			dropped: func(top *Topology) bool {
				n, _ := top.Node("aws-1")
				return slices.Equal(n.AllowedLocationIPs, pfxs("192.168.50.0/24"))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := normalized(metaCloud(), 0)
			tc.change(nodes)
			want := deepCopyNodes(nodes)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Add(1)
			go func() { // a reader, as the agent's election step
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					for _, n := range nodes {
						_ = len(n.PodCIDRs) + len(n.AllowedLocationIPs)
						for range n.PodCIDRs {
						}
						for range n.AllowedLocationIPs {
						}
					}
				}
			}()
			top := mustNew(t, nodes, []Peer{laptopPeer()}, Options{Subnet: pfx("10.5.0.0/16")})
			close(stop)
			wg.Wait()
			if !tc.dropped(top) {
				t.Errorf("the overlapping range was not dropped from the mesh; problems: %v", top.Problems)
			}
			if diff := gocmp.Diff(want, nodes, netipCmp); diff != "" {
				t.Errorf("New wrote to the caller's nodes (-before +after):\n%s", diff)
			}
			if inPlace(top, nodes) {
				t.Error("the mesh still uses the caller's nodes after dropping a range of one")
			}
		})
	}
}

// deepCopyNodes copies nodes with their own slices and endpoints.
func deepCopyNodes(nodes []Node) []Node {
	out := slices.Clone(nodes)
	for i := range out {
		out[i].PodCIDRs = slices.Clone(out[i].PodCIDRs)
		out[i].AllowedLocationIPs = slices.Clone(out[i].AllowedLocationIPs)
		if e := out[i].Endpoint; e != nil {
			c := *e
			out[i].Endpoint = &c
		}
	}
	return out
}

// TestNewUsesNormalPeersInPlace checks that a Peer's allowed IPs and
// endpoint are used as they are when they need no normalizing, copied
// otherwise, and that neither New nor the per-node methods write to them.
func TestNewUsesNormalPeersInPlace(t *testing.T) {
	messy := drPeer()
	messy.Name = "messy"
	messy.PublicKey = testKey("messy")
	messy.AllowedIPs = pfxs("10.61.0.0/16", "10.60.0.7/16") // out of order, host bits
	messy.Endpoint = &Endpoint{Addr: addrPort("[::ffff:203.0.113.9]:51820")}
	peers := []Peer{laptopPeer(), drPeer(), messy}
	want := slices.Clone(peers)
	for i := range want {
		want[i].AllowedIPs = slices.Clone(want[i].AllowedIPs)
		if e := want[i].Endpoint; e != nil {
			c := *e
			want[i].Endpoint = &c
		}
	}
	nodes := normalized(metaCloud(), 0)
	top := mustNew(t, nodes, peers, Options{Subnet: pfx("10.5.0.0/16"), Links: links})
	for _, n := range nodes {
		if _, err := top.WireGuardConfig(n.Name, [32]byte{}); err != nil {
			t.Fatal(err)
		}
		top.Routes(n.Name)
	}
	if diff := gocmp.Diff(want, peers, netipCmp); diff != "" {
		t.Errorf("peers changed (-before +after):\n%s", diff)
	}
	for _, p := range top.Peers {
		i := slices.IndexFunc(peers, func(q Peer) bool { return q.Name == p.Name })
		shared := &p.AllowedIPs[0] == &peers[i].AllowedIPs[0]
		if normal := p.Name != "messy"; shared != normal {
			t.Errorf("peer %s: allowed IPs used in place: %t, want %t", p.Name, shared, normal)
		}
		if p.Endpoint != nil && (p.Endpoint == peers[i].Endpoint) != (p.Name == "cluster-dr-ovhcloud") {
			t.Errorf("peer %s: endpoint used in place: %t", p.Name, p.Endpoint == peers[i].Endpoint)
		}
	}
	if m, _ := top.peerIndex("messy"); !slices.Equal(top.Peers[m].AllowedIPs, pfxs("10.60.0.0/16", "10.61.0.0/16")) {
		t.Errorf("messy's allowed IPs: %v", top.Peers[m].AllowedIPs)
	}
}

// TestNormalMeansNothingToNormalize draws nodes from tricky values (host
// bits, IPv4-mapped and zoned addresses, invalid prefixes, families in the
// wrong field, keepalives to round or clamp, endpoints without port) and
// checks normal against its definition: the node has an endpoint, and
// normalizeNode and fillEndpoint leave it as it is.
func TestNormalMeansNothingToNormalize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	prefixes := func() []netip.Prefix {
		var out []netip.Prefix
		switch rng.IntN(6) {
		case 0:
			return nil
		case 1:
			return []netip.Prefix{}
		}
		for range 1 + rng.IntN(3) {
			switch s := pick("10.42.1.0/24", "10.42.1.7/24", "10.42.2.0/24", "::ffff:10.42.3.0/120", "fd00:1::/64", "fd00:1::5/64", "fe80::/64", "0.0.0.0/0", "bad"); s {
			case "bad":
				out = append(out, netip.PrefixFrom(netip.MustParseAddr("10.0.0.1"), 40))
			default:
				out = append(out, netip.MustParsePrefix(s))
			}
		}
		return out
	}
	optAddr := func(vs ...string) netip.Addr {
		s := pick(append(vs, "")...)
		if s == "" {
			return netip.Addr{}
		}
		return netip.MustParseAddr(s)
	}
	optPrefix := func(vs ...string) netip.Prefix {
		s := pick(append(vs, "")...)
		if s == "" {
			return netip.Prefix{}
		}
		a, bits, _ := strings.Cut(s, "/") // ParsePrefix refuses zones
		b, _ := strconv.Atoi(bits)
		return netip.PrefixFrom(netip.MustParseAddr(a), b)
	}
	normals := 0
	for round := range 5000 {
		n := Node{
			Name:                "n",
			PodCIDRs:            prefixes(),
			AllowedLocationIPs:  prefixes(),
			ExternalIP:          optAddr("203.0.113.1", "::ffff:203.0.113.1", "2001:db8::1", "fe80::1%eth0"),
			WireGuardIP:         optPrefix("10.4.0.1/16", "::ffff:10.4.0.1/112", "fd00:4::1/64"),
			InternalIP:          optPrefix("10.1.0.1/24", "fd00::1/64", "::ffff:10.1.0.1/120"),
			InternalIP6:         optPrefix("fd00::1/64", "10.1.0.2/24", "fe80::1/64", "::ffff:10.1.0.3/120"),
			PersistentKeepalive: []time.Duration{0, 25 * time.Second, 500 * time.Millisecond, 25500 * time.Millisecond, 70000 * time.Second, -time.Second}[rng.IntN(6)],
		}
		switch rng.IntN(5) {
		case 1:
			n.Endpoint = &Endpoint{DNS: "gw.example.com", Port: uint16(rng.IntN(2)) * 51820}
		case 2, 3:
			a := optAddr("198.51.100.1", "::ffff:198.51.100.1", "2001:db8::2")
			port := uint16(rng.IntN(2)) * 51821
			n.Endpoint = &Endpoint{Addr: netip.AddrPortFrom(a, port), Port: port}
			switch rng.IntN(6) {
			case 0:
				n.Endpoint.Port = 0
			case 1:
				n.Endpoint.Port = 51820 // not the address's port
			}
		case 4:
			n.Endpoint = &Endpoint{}
		}
		if round%2 == 1 { // a normal node with one field drawn
			drawn := n
			n = Node{
				Name:                "n",
				PodCIDRs:            pfxs("10.42.1.0/24", "fd00:42::/64"),
				ExternalIP:          addr("203.0.113.1"),
				WireGuardIP:         pfx("10.4.0.1/16"),
				InternalIP:          pfx("10.1.0.1/24"),
				InternalIP6:         pfx("fd00::1/64"),
				PersistentKeepalive: 25 * time.Second,
				Endpoint:            &Endpoint{Addr: addrPort("198.51.100.1:51821"), Port: 51821},
			}
			switch rng.IntN(8) {
			case 0:
				n.PodCIDRs = drawn.PodCIDRs
			case 1:
				n.AllowedLocationIPs = drawn.AllowedLocationIPs
			case 2:
				n.ExternalIP = drawn.ExternalIP
			case 3:
				n.WireGuardIP = drawn.WireGuardIP
			case 4:
				n.InternalIP = drawn.InternalIP
			case 5:
				n.InternalIP6 = drawn.InternalIP6
			case 6:
				n.PersistentKeepalive = drawn.PersistentKeepalive
			case 7:
				n.Endpoint = drawn.Endpoint
			}
		}
		var m member
		var got Node
		m.Node = &got
		arena := newPrefixArena(len(n.PodCIDRs) + len(n.AllowedLocationIPs))
		var ep Endpoint
		normalizeNode(&m, &n, &arena, &ep)
		m.fillEndpoint(DefaultPort, &ep)
		// An endpoint is required too: a node with neither one nor an
		// address to make one of is left as it is, and excluded.
		same := gocmp.Equal(n, got, netipCmp) && n.Endpoint != nil
		if normal(&n) != same {
			t.Fatalf("round %d: normal says %t, but normalizing changes the node: %t\n%s", round, normal(&n), !same, gocmp.Diff(n, got, netipCmp))
		}
		if same {
			normals++
		}
	}
	if normals < 500 {
		t.Errorf("only %d normal nodes drawn: the test no longer covers them", normals)
	}
}
