package topology

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"testing"

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
		normalizeNode(&m, &nodes[i], &arena)
		m.fillEndpoint(port)
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
