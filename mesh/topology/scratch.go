package topology

import (
	"net/netip"
	"sync"
)

// scratch is working memory that New, Routes and sortKeys use and drop
// before they return. An agent builds a topology of about the same
// size on every change, so the buffers go back to a pool and serve the
// next call: allocating, zeroing and collecting them anew each time is a
// fixed cost that small clusters feel most.
type scratch struct {
	nodes []*Node
	peers []Peer
	keys  []segKey
	addrs []netip.Addr
	ids   []int32
	ints  []int
	u64   [2][]uint64
	cs    claims
	refs  []peerRef
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// release gives s back to the pool, without the pointers it held: the
// pool must not keep the caller's nodes and peers alive. Each buffer's
// length is what its last call used (buffer, and the appends of
// groupMembers), and what lies beyond was cleared by an earlier release.
func (s *scratch) release() {
	clear(s.nodes)
	clear(s.peers)
	clear(s.keys)
	if cap(s.cs.all) > maxPooledClaims {
		s.cs = claims{}
	} else {
		clear(s.cs.all) // their names
		s.cs.base = nil
	}
	scratchPool.Put(s)
}

// newClaims returns the claims of s, empty: New's claims are working
// memory but for their base, which the Topology keeps in its own field.
func (s *scratch) newClaims() *claims {
	s.cs.reset()
	return &s.cs
}

// maxPooled is the most elements a pooled buffer keeps. A cluster large
// enough to need more allocates several MB per topology, so the collector
// runs about once per call and empties the pools anyway; buffers kept
// alive across those cycles only cost the runtime more work (measured:
// 5000 nodes took 1.5 times as long, with 25 times the page faults).
const maxPooled = 4096

// maxPooledClaims is the most claims the pooled trie keeps (see
// newClaims). Claims hold names, so the collector scans a pooled trie
// and release clears it; from about a thousand claims (one allowed
// location IP per node at 1000 nodes) that cost more than a fresh trie
// (measured: 7% slower), while below it the trie's allocations were a
// tenth of a small cluster's.
const maxPooledClaims = 256

// buffer returns (*buf)[:n], zeroed, and keeps it in *buf, grown when it
// is too small, unless n is above maxPooled.
func buffer[T any](buf *[]T, n int) []T {
	if n > maxPooled {
		return make([]T, n)
	}
	if cap(*buf) < n {
		*buf = make([]T, n)
		return *buf
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}
