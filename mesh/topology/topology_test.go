package topology

import (
	"github.com/kilofed/kilofed/mesh/golden"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func addrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestGolden renders every scenario (WireGuard config, routes and rules per
// node, peer configs, problems, DOT) and compares it with testdata.
func TestGolden(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			top, err := New(sc.nodes, sc.peers, sc.opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			golden.Check(t, sc.name+".golden", render(t, top, sc.nodes, sc.peers))
		})
	}
}

// TestDeterministic shuffles nodes and peers: the output must not change.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			top, err := New(sc.nodes, sc.peers, sc.opts)
			if err != nil {
				t.Fatal(err)
			}
			want := render(t, top, sc.nodes, sc.peers)
			for range 20 {
				nodes, peers := slices.Clone(sc.nodes), slices.Clone(sc.peers)
				rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
				rng.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
				top, err := New(nodes, peers, sc.opts)
				if err != nil {
					t.Fatal(err)
				}
				// Render in the original order so only New's output differs.
				if diff := cmp.Diff(want, render(t, top, sc.nodes, sc.peers)); diff != "" {
					t.Fatalf("output depends on input order (-first +shuffled):\n%s", diff)
				}
			}
		})
	}
}

// TestNewDoesNotModifyInput checks that New copies what it normalizes, and
// that changing its output leaves the input alone. (Input that needs no
// normalizing may be used in place: see TestNewNeverWritesNodesUsedInPlace.)
func TestNewDoesNotModifyInput(t *testing.T) {
	nodes := metaCloud()
	nodes[0].PodCIDRs = pfxs("10.42.1.7/24", "10.42.1.0/24") // host bits and a duplicate
	nodes[1].Endpoint = &Endpoint{Addr: addrPort("[::ffff:198.51.100.12]:0")}
	dr := drPeer()
	dr.AllowedIPs = pfxs("10.21.0.0/16", "10.11.0.0/16") // out of order
	dr.Endpoint.Port = 0                                 // the default port to fill in
	peers := []Peer{laptopPeer(), dr}
	snapshot := func() ([]Node, []Peer) {
		ns, ps := slices.Clone(nodes), slices.Clone(peers)
		for i := range ns {
			ns[i].PodCIDRs = slices.Clone(ns[i].PodCIDRs)
			if ns[i].Endpoint != nil {
				e := *ns[i].Endpoint
				ns[i].Endpoint = &e
			}
		}
		for i := range ps {
			ps[i].AllowedIPs = slices.Clone(ps[i].AllowedIPs)
			if ps[i].Endpoint != nil {
				e := *ps[i].Endpoint
				ps[i].Endpoint = &e
			}
		}
		return ns, ps
	}
	wantNodes, wantPeers := snapshot()
	top := mustNew(t, nodes, peers, Options{})
	for _, s := range top.Segments {
		for i := range s.Nodes {
			s.Nodes[i].PodCIDRs[0] = pfx("0.0.0.0/0")
			s.Nodes[i].Endpoint.Port = 1
		}
	}
	top.Peers[0].AllowedIPs[0] = pfx("0.0.0.0/0")
	top.Peers[0].Endpoint.Port = 1
	if diff := cmp.Diff(wantNodes, nodes, netipCmp); diff != "" {
		t.Errorf("nodes changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(wantPeers, peers, netipCmp); diff != "" {
		t.Errorf("peers changed (-before +after):\n%s", diff)
	}
}

// TestDOTParses feeds every scenario's DOT to Graphviz when it is installed.
func TestDOTParses(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("graphviz dot is not installed; the DOT syntax check is skipped")
	}
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			top := mustNew(t, sc.nodes, sc.peers, sc.opts)
			cmd := exec.Command(dot, "-Tcanon")
			cmd.Stdin = strings.NewReader(top.DOT())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("dot rejected the graph: %v\n%s", err, out)
			}
			if strings.Contains(string(out), "Warning") || strings.Contains(string(out), "Error") {
				t.Fatalf("dot complained:\n%s", out)
			}
		})
	}
}

func mustNew(t testing.TB, nodes []Node, peers []Peer, opts Options) *Topology {
	t.Helper()
	top, err := New(nodes, peers, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return top
}

func TestMeshRanges(t *testing.T) {
	top := mustNew(t, seedChina(), []Peer{laptopPeer(), drPeer()}, Options{Subnet: pfx("10.5.0.0/16")})
	b, _ := top.Segment("node-beijing")
	s, _ := top.Segment("node-shanghai")
	want := append(pfxs("10.0.1.10/32", "10.0.2.20/32", "10.5.100.10/32", "10.11.0.0/16", "10.21.0.0/16",
		"10.42.0.0/24", "10.42.1.0/24"), hostPrefix(b.WireGuardIP.Addr()), hostPrefix(s.WireGuardIP.Addr()))
	if diff := cmp.Diff(normPrefixes(want), top.MeshRanges(), netipCmp); diff != "" {
		t.Errorf("MeshRanges (-want +got):\n%s", diff)
	}
}
