package topology

import "slices"

// sortRuns sorts s: a natural merge sort, which finds the ascending runs s
// is made of and merges them pairwise. The nodes' ranges
// and a host's routes come in runs (the ranges of each kind in the order of
// the node names, each segment's allowed IPs sorted), so it does a few
// passes where a sort from scratch does many.
func sortRuns(s []uint64) {
	if len(s) <= 64 {
		// In place, without the merge's buffers: a fixed cost that shows
		// in small clusters.
		slices.Sort(s)
		return
	}
	runs := 1
	for i := 1; i < len(s); i++ {
		runs += b2i(s[i-1] > s[i])
	}
	if runs == 1 {
		return
	}
	sc := getScratch()
	defer sc.release()
	bounds := buffer(&sc.ints, runs+1)[:1] // run r is s[bounds[r]:bounds[r+1]]
	for i := 1; i < len(s); i++ {
		if s[i-1] > s[i] {
			bounds = append(bounds, i)
		}
	}
	bounds = append(bounds, len(s))
	src, dst := s, buffer(&sc.u64[0], len(s))
	for len(bounds) > 2 {
		next := bounds[:1]
		for r := 0; r+1 < len(bounds); r += 2 {
			lo, mid, hi := bounds[r], bounds[r+1], bounds[r+1]
			if r+2 < len(bounds) {
				hi = bounds[r+2]
			}
			merge(dst[lo:hi], src[lo:mid], src[mid:hi])
			next = append(next, hi) // overwrites bounds[r/2+1], already read
		}
		src, dst, bounds = dst, src, next
	}
	copy(s, src) // a no-op when src is s
}

// merge merges the sorted a and b into dst.
func merge(dst, a, b []uint64) {
	i, j := 0, 0
	for k := range dst {
		if j == len(b) || (i < len(a) && a[i] <= b[j]) {
			dst[k], i = a[i], i+1
		} else {
			dst[k], j = b[j], j+1
		}
	}
}
