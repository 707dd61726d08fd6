package topology

import "slices"

// sortKeys sorts s, keys that New, Routes and WireGuardConfig build as
// single numbers, by whichever of three sorts suits their shape (measured
// on the shapes they have: BenchmarkSortKeys):
//
//   - a few long ascending runs (the nodes' ranges, most of a host's
//     routes in location granularity) are merged pairwise, in a few passes;
//   - a thousand keys or more in short runs (a WireGuard IP beside each
//     node's pod CIDR in full granularity, random public keys) are sorted
//     by radix, in at most eight passes that neither compare nor branch on
//     the keys;
//   - the others by pdqsort (slices.Sort), which costs less below about
//     a thousand keys.
func sortKeys(s []uint64) {
	if len(s) <= 64 {
		// In place, without buffers: a fixed cost that shows in small
		// clusters.
		slices.Sort(s)
		return
	}
	runs := 1
	for i := 1; i < len(s); i++ {
		runs += b2i(s[i-1] > s[i])
	}
	switch {
	case runs == 1:
	case runs <= len(s)/16:
		mergeRuns(s, runs)
	case len(s) < 1024:
		slices.Sort(s)
	default:
		sc := getScratch()
		radixSort(s, buffer(&sc.u64[0], len(s)))
		sc.release()
	}
}

// mergeRuns sorts s, made of runs ascending runs: a natural merge sort.
func mergeRuns(s []uint64, runs int) {
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

// radixSort sorts s with tmp, as long, as its buffer: a least significant
// digit first radix sort on bytes. It leaves out the passes whose byte is
// the same in every key, and those of the low bytes when s is already
// sorted by them (the keys carry their index in their low bits).
func radixSort(s, tmp []uint64) {
	first := 0 // the first byte to sort by
	for d := 7; d >= 1; d-- {
		if low := uint64(1)<<(8*d) - 1; slices.IsSortedFunc(s, func(a, b uint64) int { return cmpLow(a, b, low) }) {
			first = d
			break
		}
	}
	var counts [8][256]int32
	for _, k := range s {
		k >>= 8 * first
		for d := first; d < 8; d++ {
			counts[d][byte(k)]++
			k >>= 8
		}
	}
	src, dst := s, tmp[:len(s)]
	for d := first; d < 8; d++ {
		c, shift := &counts[d], 8*d
		if int(c[byte(src[0]>>shift)]) == len(src) {
			continue // the same byte everywhere
		}
		var off int32
		for i, n := range c {
			c[i], off = off, off+n
		}
		for _, k := range src {
			b := byte(k >> shift)
			dst[c[b]] = k
			c[b]++
		}
		src, dst = dst, src
	}
	copy(s, src) // a no-op when src is s
}

// cmpLow compares the bits of a and b under mask.
func cmpLow(a, b, mask uint64) int {
	switch a, b = a&mask, b&mask; {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
