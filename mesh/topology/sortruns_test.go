package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// keysOf returns n keys in runs ascending runs (ties among them), with
// their index in the low bits when indexed, as the callers of sortKeys
// build them, shuffled when runs is 0.
func keysOf(rng *rand.Rand, n, runs int, indexed bool) []uint64 {
	s := make([]uint64, 0, n)
	for range max(runs, 1) {
		k := rng.Uint64N(1 << 40)
		for range n / max(runs, 1) {
			k += rng.Uint64N(3) << 20
			s = append(s, k)
		}
	}
	if runs == 0 {
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	}
	if indexed {
		for i := range s {
			s[i] = s[i]&^(1<<20-1) | uint64(i)
		}
	}
	return s
}

// TestSortKeysSortsEveryShape checks sortKeys against slices.Sort on the
// shapes that pick each of its sorts: few long runs (merge), many short
// runs and shuffled keys, below and above maxPooled (pdqsort, radix),
// with and without an index in the low bits (radix leaves out those
// passes), and keys alike in whole bytes (passes left out).
func TestSortKeysSortsEveryShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 5, 64, 65, 100, 1000, maxPooled + 1, 3 * maxPooled} {
		for _, runs := range []int{0, 1, 2, 7, 200, n / 2} {
			for _, indexed := range []bool{false, true} {
				s := keysOf(rng, n, runs, indexed)
				want := slices.Clone(s)
				slices.Sort(want)
				sortKeys(s)
				if !slices.Equal(s, want) {
					t.Errorf("%d keys in %d runs (indexed %t): not sorted as slices.Sort sorts them", n, runs, indexed)
				}
			}
		}
	}
	// Every key alike but in one byte, and all alike.
	for _, s := range [][]uint64{
		func() []uint64 {
			s := make([]uint64, 2*maxPooled)
			for i := range s {
				s[i] = 0xdead_0000_beef_0000 | uint64(rng.Uint32N(256))<<24
			}
			return s
		}(),
		slices.Repeat([]uint64{42}, 2*maxPooled),
	} {
		want := slices.Clone(s)
		slices.Sort(want)
		sortKeys(s)
		if !slices.Equal(s, want) {
			t.Errorf("keys alike in all bytes but one: not sorted")
		}
	}
}

// BenchmarkSortKeys compares the three sorts sortKeys picks from on the
// shapes of its callers' keys: a host's routes in full granularity (runs
// of two), random public keys, and a few long runs.
func BenchmarkSortKeys(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{200, 1000, 10000} {
		for _, shape := range []struct {
			name string
			runs int
		}{{"runs-of-2", n / 2}, {"random", 0}, {"10-runs", 10}} {
			in := keysOf(rng, n, shape.runs, true)
			s, tmp := make([]uint64, n), make([]uint64, n)
			for _, sort := range []struct {
				name string
				f    func([]uint64)
			}{
				{"merge", func(s []uint64) {
					runs := 1
					for i := 1; i < len(s); i++ {
						runs += b2i(s[i-1] > s[i])
					}
					if runs > 1 {
						mergeRuns(s, runs)
					}
				}},
				{"radix", func(s []uint64) { radixSort(s, tmp) }},
				{"pdqsort", slices.Sort[[]uint64]},
				{"sortKeys", sortKeys},
			} {
				b.Run(fmt.Sprintf("keys=%d/%s/%s", n, shape.name, sort.name), func(b *testing.B) {
					for b.Loop() {
						copy(s, in)
						sort.f(s)
					}
				})
			}
		}
	}
}
