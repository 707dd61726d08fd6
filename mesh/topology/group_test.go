package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestGroupRunsMatchesIndexed checks groupRuns, the shortcut for members
// whose location keys never decrease, against the general grouping: the
// same groups, members and leaders, in the same order; and that it
// declines members whose keys go back.
func TestGroupRunsMatchesIndexed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	runs, declined := 0, 0
	for round := range 500 {
		n := 1 + rng.IntN(12)
		members := make([]*member, n)
		for i := range members {
			nd := &Node{Name: fmt.Sprintf("n%02d", i), Ready: rng.IntN(4) > 0, Leader: rng.IntN(8) == 0}
			m := &member{Node: nd, public: rng.IntN(2) == 0}
			if rng.IntN(5) == 0 {
				m.group = segKey{name: nd.Name, node: true} // alone
			} else {
				m.group = segKey{name: fmt.Sprintf("loc-%d", rng.IntN(4))}
			}
			members[i] = m
		}
		if round%2 == 0 { // keys in order, as when names follow locations
			slices.SortStableFunc(members, func(a, b *member) int { return a.group.compare(b.group) })
			for i, m := range members {
				m.Name = fmt.Sprintf("n%02d", i)
			}
		}
		got, ok := groupRuns(members)
		want := groupIndexed(members, getScratch())
		if !ok {
			declined++
			if slices.IsSortedFunc(members, func(a, b *member) int { return a.group.compare(b.group) }) {
				t.Fatalf("round %d: groupRuns declined members in key order: %s", round, groupKeys(members))
			}
			continue
		}
		runs++
		if render := func(gs []group) string {
			var b strings.Builder
			for _, g := range gs {
				fmt.Fprintf(&b, "%s leader %s:", g.key(), g.leader.Name)
				for _, m := range g.members {
					b.WriteString(" " + m.Name)
				}
				b.WriteString("\n")
			}
			return b.String()
		}; render(got) != render(want) {
			t.Fatalf("round %d: groupRuns\n%s\ngeneral grouping\n%s", round, render(got), render(want))
		}
	}
	if runs < 100 || declined < 100 {
		t.Errorf("%d rounds grouped as runs, %d declined: the test no longer covers both", runs, declined)
	}
}

func groupKeys(ms []*member) string {
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.group.String())
	}
	return strings.Join(keys, ",")
}
