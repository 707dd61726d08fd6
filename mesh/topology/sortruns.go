package topology

import "slices"

// sortRuns sorts s by cmp, stable: a natural merge sort, which finds the
// ascending runs s is made of and merges them pairwise. The nodes' ranges
// and a host's routes come in runs (the ranges of each kind in the order of
// the node names, each segment's allowed IPs sorted), so it does a few
// passes where a sort from scratch does many.
func sortRuns[T any](s []T, cmp func(a, b T) int) {
	if len(s) <= 16 {
		slices.SortStableFunc(s, cmp) // an insertion sort, in place
		return
	}
	bounds := []int{0} // run r is s[bounds[r]:bounds[r+1]]
	for i := 1; i < len(s); i++ {
		if cmp(s[i-1], s[i]) > 0 {
			bounds = append(bounds, i)
		}
	}
	if len(bounds) == 1 {
		return
	}
	bounds = append(bounds, len(s))
	src, dst := s, make([]T, len(s))
	for len(bounds) > 2 {
		next := bounds[:1]
		for r := 0; r+1 < len(bounds); r += 2 {
			lo, mid, hi := bounds[r], bounds[r+1], bounds[r+1]
			if r+2 < len(bounds) {
				hi = bounds[r+2]
			}
			merge(dst[lo:hi], src[lo:mid], src[mid:hi], cmp)
			next = append(next, hi) // overwrites bounds[r/2+1], already read
		}
		src, dst, bounds = dst, src, next
	}
	copy(s, src) // a no-op when src is s
}

// merge merges the sorted a and b into dst, a first among equals.
func merge[T any](dst, a, b []T, cmp func(a, b T) int) {
	i, j := 0, 0
	for k := range dst {
		if j == len(b) || (i < len(a) && cmp(a[i], b[j]) <= 0) {
			dst[k], i = a[i], i+1
		} else {
			dst[k], j = b[j], j+1
		}
	}
}
