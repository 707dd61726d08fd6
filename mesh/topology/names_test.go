package topology

import (
	"slices"
	"testing"
)

// TestNodesSharingANameAreLeftOut checks that every node of a shared name
// is excluded, whether the nodes come sorted by name or not.
func TestNodesSharingANameAreLeftOut(t *testing.T) {
	a1 := node("a", "eu", "10.0.0.1/24", "203.0.113.1", "10.42.1.0/24")
	a2 := node("a", "eu", "10.0.0.2/24", "", "10.42.2.0/24")
	a2.Key = testKey("a2")
	b := node("b", "eu", "10.0.0.3/24", "", "10.42.3.0/24")
	c := node("c", "eu", "10.0.0.4/24", "", "10.42.4.0/24")
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  []string // the accepted nodes
	}{
		{name: "distinct, sorted", nodes: []Node{a1, b, c}, want: []string{"a", "b", "c"}},
		{name: "distinct, unsorted", nodes: []Node{c, a1, b}, want: []string{"a", "b", "c"}},
		{name: "shared, sorted", nodes: []Node{a1, a2, b, c}, want: []string{"b", "c"}},
		{name: "shared, unsorted", nodes: []Node{b, a1, c, a2}, want: []string{"b", "c"}},
		{name: "shared last", nodes: []Node{c, b, with(b, func(n *Node) { n.Key = testKey("b2") })}, want: []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := mustNew(t, tc.nodes, nil, Options{})
			var got []string
			for _, s := range top.Segments {
				for _, n := range s.Nodes {
					got = append(got, n.Name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("accepted %v, want %v", got, tc.want)
			}
			for _, p := range top.Problems {
				if p.Code == CodeDuplicateName && p.Reason != `2 nodes are named "`+p.Name+`"; all of them are left out until the names are unique` {
					t.Errorf("reason %q", p.Reason)
				}
			}
		})
	}
}

// TestKeyIndexNumbersKeysInOrder checks the numbering of group keys, below
// and past the count where it switches from a scan to a map.
func TestKeyIndexNumbersKeysInOrder(t *testing.T) {
	var x keyIndex
	want := map[segKey]int32{}
	for round := range 2 {
		for i := range 20 {
			k := segKey{name: string(rune('a' + i)), node: i%3 == 0}
			if round == 0 {
				want[k] = int32(i)
			}
			if got := x.id(k); got != want[k] {
				t.Fatalf("round %d: id(%v) = %d, want %d", round, k, got, want[k])
			}
			if other := (segKey{name: k.name, node: !k.node}); round == 1 && i < 2 {
				if got := x.id(other); got != int32(20+i) {
					t.Errorf("id(%v) = %d, want the new %d", other, got, 20+i)
				}
			}
		}
	}
}
