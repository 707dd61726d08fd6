package firewall

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPlanChain(t *testing.T) {
	tests := []struct {
		name             string
		current, desired []string
		want             []op
	}{
		{name: "empty"},
		{name: "unchanged", current: []string{"a", "b", "c"}, desired: []string{"a", "b", "c"}},
		{
			name: "fill an empty chain", desired: []string{"a", "b"},
			want: []op{{insert: true, pos: 1, line: "a"}, {insert: true, pos: 2, line: "b"}},
		},
		{
			name: "one rule deleted by hand comes back in place", current: []string{"a", "c"}, desired: []string{"a", "b", "c"},
			want: []op{{insert: true, pos: 2, line: "b"}},
		},
		{
			name: "stale rule removed", current: []string{"a", "x", "b"}, desired: []string{"a", "b"},
			want: []op{{pos: 2, line: "x"}},
		},
		{
			name: "trailing stale rules removed from the end", current: []string{"a", "x", "y"}, desired: []string{"a"},
			want: []op{{pos: 3, line: "y"}, {pos: 2, line: "x"}},
		},
		{
			name: "rule added by hand at the top is removed", current: []string{"x", "a", "b"}, desired: []string{"a", "b"},
			want: []op{{pos: 1, line: "x"}},
		},
		{
			name: "order matters: RETURN must precede MASQUERADE", current: []string{"masq", "ret"}, desired: []string{"ret", "masq"},
			want: []op{{insert: true, pos: 1, line: "ret"}, {pos: 3, line: "ret"}},
		},
		{
			name: "duplicate current rule removed", current: []string{"a", "a", "b"}, desired: []string{"a", "b"},
			want: []op{{pos: 2, line: "a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planChain(tt.current, tt.desired)
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(op{}), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("planChain (-want +got):\n%s", d)
			}
			// Replaying the edits on the current list gives the desired one.
			cur := slices.Clone(tt.current)
			for _, o := range got {
				if o.insert {
					cur = slices.Insert(cur, o.pos-1, o.line)
				} else {
					if cur[o.pos-1] != o.line {
						t.Fatalf("delete at %d removes %q, planned %q", o.pos, cur[o.pos-1], o.line)
					}
					cur = slices.Delete(cur, o.pos-1, o.pos)
				}
			}
			if d := cmp.Diff(tt.desired, cur, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("replayed chain (-want +got):\n%s", d)
			}
		})
	}
}
