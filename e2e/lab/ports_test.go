package lab

import "testing"

// TestPortBlocksOfSlotsAreDisjointAndBelowTheEphemeralRange: no two labs
// hand out the same port, and no outgoing connection of the machine takes
// one (Linux's ephemeral range starts at 32768 by default).
func TestPortBlocksOfSlotsAreDisjointAndBelowTheEphemeralRange(t *testing.T) {
	const ephemeralStart = 32768
	prevEnd := 0
	for s := range maxSlots {
		first, end, err := portBlock(s)
		if err != nil {
			t.Fatalf("slot %d: %v", s, err)
		}
		if first < prevEnd {
			t.Errorf("slot %d starts at %d, inside slot %d's block (ends at %d)", s, first, s-1, prevEnd)
		}
		if end > ephemeralStart {
			t.Errorf("slot %d's block ends at %d, inside the ephemeral range (from %d)", s, end, ephemeralStart)
		}
		prevEnd = end
	}
	for _, s := range []int{-1, maxSlots} {
		if _, _, err := portBlock(s); err == nil {
			t.Errorf("portBlock(%d) = nil error, want an error", s)
		}
	}
}
