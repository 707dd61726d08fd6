package topology

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortRuns checks the natural merge sort against slices.Sort on inputs
// made of 1 to 200 ascending runs, and on random ones.
func TestSortRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, runs := range []int{0, 1, 2, 3, 7, 8, 9, 200} {
		for _, n := range []int{0, 1, 5, 100} {
			var s []uint64
			for range runs {
				k := rng.Uint64N(1000)
				for range n {
					k += rng.Uint64N(3) // ascending, with ties
					s = append(s, k)
				}
			}
			if runs == 200 {
				rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
			}
			want := slices.Clone(s)
			slices.Sort(want)
			sortRuns(s)
			if !slices.Equal(s, want) {
				t.Errorf("%d runs of %d: %v, want %v", runs, n, s, want)
			}
		}
	}
}
