package topology

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// TestCopiedKeyEvictsNobody: whoever publishes a key another node or peer
// already publishes is left out together with its owner, whatever their
// names, so copying a key never knocks a node out of the mesh alone.
func TestCopiedKeyEvictsNobody(t *testing.T) {
	copyKey := func(n Node, from string) Node { n.Key = testKey(from); return n }
	a := node("a", "eu", "10.0.1.10/24", "203.0.113.1", "10.42.1.0/24")
	b := node("b", "eu", "10.0.1.11/24", "", "10.42.2.0/24")
	c := node("c", "us", "10.0.2.10/24", "203.0.113.2", "10.42.3.0/24")
	peer := Peer{Name: "laptop", PublicKey: testKey("laptop"), AllowedIPs: pfxs("10.5.100.1/32"), Created: time.Unix(1, 0)}
	for _, tc := range []struct {
		name  string
		nodes []Node
		peers []Peer
		// excluded maps each left-out node or peer ("node a", "peer laptop")
		// to the holders its reason must name.
		excluded map[string][]string
	}{{
		name:  "distinct keys: nobody is left out",
		nodes: []Node{a, b, c},
		peers: []Peer{peer},
	}, {
		name:     "a later name copies an earlier one: both are left out",
		nodes:    []Node{a, copyKey(b, "a"), c},
		excluded: map[string][]string{"node a": {`node "b"`}, "node b": {`node "a"`}},
	}, {
		name:     "an earlier name copies a later one: both are left out",
		nodes:    []Node{copyKey(a, "c"), b, c},
		excluded: map[string][]string{"node a": {`node "c"`}, "node c": {`node "a"`}},
	}, {
		name:  "three holders: each names the other two",
		nodes: []Node{a, copyKey(b, "a"), copyKey(c, "a")},
		excluded: map[string][]string{
			"node a": {`node "b" and node "c"`}, "node b": {`node "a" and node "c"`}, "node c": {`node "a" and node "b"`},
		},
	}, {
		name:     "a node copies a peer's key: both are left out",
		nodes:    []Node{a, copyKey(b, "laptop"), c},
		peers:    []Peer{peer},
		excluded: map[string][]string{"node b": {`peer "laptop"`}, "peer laptop": {`node "b"`}},
	}, {
		name:     "a peer copies a node's key: both are left out",
		nodes:    []Node{a, b, c},
		peers:    []Peer{{Name: "laptop", PublicKey: testKey("c"), AllowedIPs: pfxs("10.5.100.1/32")}},
		excluded: map[string][]string{"node c": {`peer "laptop"`}, "peer laptop": {`node "c"`}},
	}, {
		name:     "two nodes with one name do not make a clash",
		nodes:    []Node{a, copyKey(b, "a"), copyKey(b, "a")},
		excluded: map[string][]string{"node b": {"2 nodes are named"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			top := mustNew(t, tc.nodes, tc.peers, Options{Subnet: pfx("10.5.0.0/16")})
			got := map[string]string{}
			for _, p := range top.Problems {
				if p.Severity == Excluded {
					got[p.Kind+" "+p.Name] = p.Reason
				}
			}
			var gotNames, wantNames []string
			for k := range got {
				gotNames = append(gotNames, k)
			}
			for k := range tc.excluded {
				wantNames = append(wantNames, k)
			}
			slices.Sort(gotNames)
			slices.Sort(wantNames)
			if diff := cmp.Diff(wantNames, gotNames); diff != "" {
				t.Fatalf("excluded (-want +got):\n%s\nproblems: %v", diff, top.Problems)
			}
			for who, words := range tc.excluded {
				for _, w := range words {
					if !strings.Contains(got[who], w) {
						t.Errorf("%s: reason %q does not name %s", who, got[who], w)
					}
				}
			}
			for _, n := range tc.nodes {
				_, left := got["node "+n.Name]
				if _, in := top.Segment(n.Name); in == left {
					t.Errorf("node %s: in the mesh %v, excluded %v", n.Name, in, left)
				}
			}
		})
	}
}

// TestMayShareKeys checks the quick test holdersOf starts with: it may
// answer yes for keys that only begin alike, never no for a shared key.
func TestMayShareKeys(t *testing.T) {
	alike := testKey("a")
	alike[31] ^= 1 // the same first 8 bytes, another key
	for _, tc := range []struct {
		name  string
		nodes []Node
		peers []Peer
		want  bool
	}{
		{name: "nobody"},
		{name: "distinct", nodes: []Node{{Name: "a", Key: testKey("a")}, {Name: "b", Key: testKey("b")}}, peers: []Peer{{Name: "p", PublicKey: testKey("p")}}},
		{name: "two nodes", nodes: []Node{{Name: "a", Key: testKey("a")}, {Name: "b", Key: testKey("a")}}, want: true},
		{name: "a node and a peer", nodes: []Node{{Name: "a", Key: testKey("a")}}, peers: []Peer{{Name: "p", PublicKey: testKey("a")}}, want: true},
		{name: "keys that begin alike", nodes: []Node{{Name: "a", Key: testKey("a")}, {Name: "b", Key: alike}}, want: true},
		{name: "zero keys do not count", nodes: []Node{{Name: "a"}, {Name: "b"}}},
		{name: "keys beginning with zeros", nodes: []Node{{Name: "a", Key: wgconf.Key{31: 1}}, {Name: "b", Key: wgconf.Key{31: 2}}}, want: true},
		{name: "one key beginning with zeros", nodes: []Node{{Name: "a", Key: wgconf.Key{31: 1}}, {Name: "b", Key: testKey("b")}}},
		{name: "unnamed holders do not count", nodes: []Node{{Name: "a", Key: testKey("a")}, {Key: testKey("a")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayShareKeys(tc.nodes, tc.peers, new(scratch)); got != tc.want {
				t.Errorf("mayShareKeys = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestMayShareKeysMany checks the set of key heads once it probes past
// taken slots: many distinct keys, then one of them again.
func TestMayShareKeysMany(t *testing.T) {
	var nodes []Node
	for i := range 500 {
		nodes = append(nodes, Node{Name: fmt.Sprint("n", i), Key: testKey(fmt.Sprint("n", i))})
	}
	if mayShareKeys(nodes, nil, new(scratch)) {
		t.Fatal("500 distinct keys: mayShareKeys = true")
	}
	if !mayShareKeys(nodes, []Peer{{Name: "p", PublicKey: testKey("n0")}}, new(scratch)) {
		t.Error("a peer copying the first key: mayShareKeys = false")
	}
}

// TestUint64Set checks the set of numbers: zero, numbers sharing their
// last bits (probing), and a full half of the slots.
func TestUint64Set(t *testing.T) {
	s := newUint64Set(8, new([]uint64))
	for _, tc := range []struct {
		v        uint64
		wantNew  bool
		wantHasB bool // has(v) before add
	}{
		{0, true, false},
		{0, false, true},
		{16, true, false},
		{32, true, false}, // the same last bits as 16
		{16, false, true},
		{48, true, false},
		{1, true, false},
		{17, true, false},
		{^uint64(0), true, false},
		{32, false, true},
	} {
		if got := s.has(tc.v); got != tc.wantHasB {
			t.Errorf("has(%d) = %t before add, want %t", tc.v, got, tc.wantHasB)
		}
		if got := s.add(tc.v); got != tc.wantNew {
			t.Errorf("add(%d) = %t, want %t", tc.v, got, tc.wantNew)
		}
		if !s.has(tc.v) {
			t.Errorf("has(%d) = false after add", tc.v)
		}
	}
	if s.has(64) {
		t.Error("has(64) = true, never added")
	}
}
