package firewall

import "slices"

// op is one edit of a chain: insert a rule at a 1-based position, or
// delete the rule at that position.
type op struct {
	insert bool
	pos    int
	line   string
}

// planChain returns the edits that turn the current rules of a chain into
// the desired ones, both as iptables -S lines. Rules already in place are
// kept, so an unchanged chain gives no edits and one deleted rule gives one
// insert.
func planChain(current, desired []string) []op {
	cur := slices.Clone(current)
	var ops []op
	for i, want := range desired {
		// Drop current rules at this position that no later desired rule
		// needs.
		for i < len(cur) && cur[i] != want && !slices.Contains(desired[i+1:], cur[i]) {
			ops = append(ops, op{pos: i + 1, line: cur[i]})
			cur = slices.Delete(cur, i, i+1)
		}
		if i < len(cur) && cur[i] == want {
			continue
		}
		ops = append(ops, op{insert: true, pos: i + 1, line: want})
		cur = slices.Insert(cur, i, want)
	}
	for j := len(cur) - 1; j >= len(desired); j-- {
		ops = append(ops, op{pos: j + 1, line: cur[j]})
	}
	return ops
}
