package topology

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLeaderElection(t *testing.T) {
	ready := func(r bool) func(*Node) { return func(n *Node) { n.Ready = r } }
	lead := func(n *Node) { n.Leader = true }
	forced := func(n *Node) { n.Endpoint = &Endpoint{DNS: "gw.example.com", Port: 51820} }
	forcedIP := func(n *Node) { n.Endpoint = &Endpoint{Addr: addrPort("198.51.100.99:51820")} }
	internalEndpoint := func(n *Node) { n.Endpoint = &Endpoint{Addr: addrPort("10.0.0.3:51820")} }
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  string
	}{{
		name:  "by name when nothing else differs",
		nodes: []Node{node("b", "l", "10.0.0.2/24", ""), node("a", "l", "10.0.0.1/24", "")},
		want:  "a",
	}, {
		name:  "a public external IP wins over the name",
		nodes: []Node{node("a", "l", "10.0.0.1/24", ""), node("b", "l", "10.0.0.2/24", "198.51.100.2")},
		want:  "b",
	}, {
		name:  "a DNS force-endpoint counts as public",
		nodes: []Node{node("a", "l", "10.0.0.1/24", ""), with(node("b", "l", "10.0.0.2/24", ""), forced)},
		want:  "b",
	}, {
		name:  "a forced IP endpoint counts as public",
		nodes: []Node{node("a", "l", "10.0.0.1/24", ""), with(node("b", "l", "10.0.0.2/24", ""), forcedIP)},
		want:  "b",
	}, {
		name: "an endpoint that is the internal IP is not public",
		nodes: []Node{node("a", "l", "10.0.0.1/24", ""),
			with(node("c", "l", "10.0.0.3/24", ""), internalEndpoint)},
		want: "a",
	}, {
		name: "the leader annotation wins over a public IP",
		nodes: []Node{node("a", "l", "10.0.0.1/24", "198.51.100.1"),
			with(node("b", "l", "10.0.0.2/24", ""), lead)},
		want: "b",
	}, {
		name: "among annotated nodes a public one wins",
		nodes: []Node{with(node("a", "l", "10.0.0.1/24", ""), lead),
			with(node("b", "l", "10.0.0.2/24", "198.51.100.2"), lead)},
		want: "b",
	}, {
		name: "a dead annotated public node never leads",
		nodes: []Node{with(with(node("a", "l", "10.0.0.1/24", "198.51.100.1"), lead), ready(false)),
			node("b", "l", "10.0.0.2/24", "")},
		want: "b",
	}, {
		name: "the next node leads when the leader dies",
		nodes: []Node{with(node("a", "l", "10.0.0.1/24", "198.51.100.1"), ready(false)),
			node("b", "l", "10.0.0.2/24", ""), node("c", "l", "10.0.0.3/24", "198.51.100.3")},
		want: "c",
	}, {
		name: "no node ready: the same order over all nodes",
		nodes: []Node{with(node("a", "l", "10.0.0.1/24", ""), ready(false)),
			with(node("b", "l", "10.0.0.2/24", "198.51.100.2"), ready(false))},
		want: "b",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			top := mustNew(t, tc.nodes, nil, Options{})
			got, ok := top.Leader("l")
			if !ok {
				t.Fatal("Leader(l) found no leader")
			}
			if diff := cmp.Diff(tc.want, got.Name); diff != "" {
				t.Errorf("leader (-want +got):\n%s", diff)
			}
			if !top.IsLeader(tc.want) {
				t.Errorf("IsLeader(%q) = false", tc.want)
			}
			for _, n := range tc.nodes {
				if n.Name != tc.want && top.IsLeader(n.Name) {
					t.Errorf("IsLeader(%q) = true, want only %q", n.Name, tc.want)
				}
			}
			s, _ := top.Segment(tc.want)
			if s.LeaderNode().Name != tc.want || s.Key() != testKey(tc.want) {
				t.Errorf("segment leader = %q key %v", s.LeaderNode().Name, s.Key())
			}
			// Every node stays in the segment, ready or not.
			if len(s.Nodes) != len(tc.nodes) {
				t.Errorf("segment has %d nodes, want %d", len(s.Nodes), len(tc.nodes))
			}
		})
	}
}

// TestLeaderOtherGranularities checks IsLeader and Leader when every node
// leads its own segment.
func TestLeaderOtherGranularities(t *testing.T) {
	for _, g := range []Granularity{FullGranularity, CrossGranularity} {
		t.Run(string(g), func(t *testing.T) {
			top := mustNew(t, metaCloud(), nil, Options{Granularity: g})
			for _, n := range metaCloud() {
				if !top.IsLeader(n.Name) {
					t.Errorf("IsLeader(%q) = false, want true", n.Name)
				}
				if got := top.Addresses(n.Name); len(got) != 1 {
					t.Errorf("Addresses(%q) = %v, want one WireGuard IP", n.Name, got)
				}
			}
			for loc, want := range map[string]string{"scaleway-paris": "scw-2", "aws-euwest3": "aws-1", "lyon-dc": "dc-1"} {
				if got, ok := top.Leader(loc); !ok || got.Name != want {
					t.Errorf("Leader(%q) = %q, %t; want %q", loc, got.Name, ok, want)
				}
			}
			if len(top.Segments) != len(metaCloud()) {
				t.Errorf("%d segments, want one per node", len(top.Segments))
			}
		})
	}
}

func TestLeaderUnknown(t *testing.T) {
	top := mustNew(t, seedChina(), nil, Options{})
	if _, ok := top.Leader("mars"); ok {
		t.Error("Leader(mars) found a leader")
	}
	if top.IsLeader("nobody") {
		t.Error("IsLeader(nobody) = true")
	}
	if _, ok := top.Segment("nobody"); ok {
		t.Error("Segment(nobody) found a segment")
	}
}

func TestLongestRunningAgentKeepsTheLead(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	node := func(name string, since time.Time) Node {
		return Node{Name: name, Location: "paris", Ready: true, Key: testKey(name), Since: since,
			InternalIP: pfx("10.0.1." + map[string]string{"a": "10", "b": "11", "c": "12"}[name] + "/24"),
			ExternalIP: netip.MustParseAddr("203.0.113." + map[string]string{"a": "10", "b": "11", "c": "12"}[name])}
	}
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  string
	}{
		{name: "a started after b: b keeps the lead", nodes: []Node{node("a", t0.Add(time.Second)), node("b", t0)}, want: "b"},
		{name: "same start: the name decides", nodes: []Node{node("b", t0), node("a", t0)}, want: "a"},
		{name: "unknown start counts as newest", nodes: []Node{node("a", time.Time{}), node("c", t0)}, want: "c"},
		{name: "no start known: the name decides", nodes: []Node{node("c", time.Time{}), node("b", time.Time{})}, want: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, err := New(tc.nodes, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := top.Leader("paris"); got.Name != tc.want {
				t.Errorf("leader %s, want %s", got.Name, tc.want)
			}
		})
	}
}

// TestPublicIsWhatTheElectionRanksBy checks Public, which the agents'
// location election ranks candidates by, against the leader New elects
// between a node that is public and one that is not (the public one must
// lead, whatever the names), so that both elections agree.
func TestPublicIsWhatTheElectionRanksBy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Node)
		public bool
	}{
		{"nothing but an internal IP", func(*Node) {}, false},
		{"an external IP", func(n *Node) { n.ExternalIP = addr("198.51.100.2") }, true},
		{"an IPv4-mapped external IP", func(n *Node) { n.ExternalIP = addr("::ffff:198.51.100.2") }, true},
		{"a DNS endpoint", func(n *Node) { n.Endpoint = &Endpoint{DNS: "gw.example.com", Port: 51820} }, true},
		{"a forced IP endpoint", func(n *Node) { n.Endpoint = &Endpoint{Addr: addrPort("198.51.100.99:51820")} }, true},
		{"an endpoint at its internal IP", func(n *Node) { n.Endpoint = &Endpoint{Addr: addrPort("10.0.0.2:51820")} }, false},
		{"an endpoint at its IPv4-mapped internal IP", func(n *Node) { n.Endpoint = &Endpoint{Addr: addrPort("[::ffff:10.0.0.2]:51820")} }, false},
		{"an endpoint at its IPv6 internal IP", func(n *Node) {
			n.InternalIP6 = pfx("fd10::2/64")
			n.Endpoint = &Endpoint{Addr: addrPort("[fd10::2]:51820")}
		}, false},
		{"an endpoint with neither address nor name", func(n *Node) { n.Endpoint = &Endpoint{Port: 51820} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := with(node("b", "l", "10.0.0.2/24", ""), tc.edit)
			if got := Public(&b); got != tc.public {
				t.Fatalf("Public = %t, want %t", got, tc.public)
			}
			// a comes first by name: b leads only if New ranks it public.
			top := mustNew(t, []Node{node("a", "l", "10.0.0.1/24", ""), b}, nil, Options{})
			leader, ok := top.Leader("l")
			if !ok {
				t.Fatal("no leader")
			}
			if (leader.Name == "b") != tc.public {
				t.Errorf("New elected %s; Public(b) = %t", leader.Name, tc.public)
			}
		})
	}
}
