package topology

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// keyHolders maps each public key published by more than one node or peer
// to them all, as `node "a"` and `peer "p"`, sorted; only nodes and peers
// with a name of their own and a key count.
type keyHolders map[wgconf.Key][]string

func holdersOf(nodes []Node, peers []Peer, sc *scratch) keyHolders {
	if !mayShareKeys(nodes, peers, sc) {
		return nil
	}
	// Count the keys, and name the holders of the shared ones only.
	count := make(map[wgconf.Key]int, len(nodes)+len(peers))
	anyShared := false
	see := func(name string, key wgconf.Key) {
		if name != "" && !key.IsZero() {
			count[key]++
			anyShared = anyShared || count[key] > 1
		}
	}
	for i := range nodes {
		see(nodes[i].Name, nodes[i].Key)
	}
	for i := range peers {
		see(peers[i].Name, peers[i].PublicKey)
	}
	h := keyHolders{}
	if !anyShared {
		return h
	}
	add := func(kind, name string, key wgconf.Key, unique bool) {
		if name != "" && unique && !key.IsZero() && count[key] > 1 {
			h[key] = append(h[key], kind+" "+quote(name))
		}
	}
	nodeNames, peerNames := map[string]int{}, map[string]int{}
	for i := range nodes {
		nodeNames[nodes[i].Name]++
	}
	for i := range peers {
		peerNames[peers[i].Name]++
	}
	for i := range nodes {
		add(KindNode, nodes[i].Name, nodes[i].Key, nodeNames[nodes[i].Name] == 1)
	}
	for i := range peers {
		add(KindPeer, peers[i].Name, peers[i].PublicKey, peerNames[peers[i].Name] == 1)
	}
	for k := range h {
		if len(h[k]) < 2 {
			delete(h, k)
			continue
		}
		slices.Sort(h[k])
	}
	return h
}

// mayShareKeys reports whether two named nodes or peers may publish the
// same key: whether two keys begin with the same 8 bytes. Keys are random,
// so it is almost always false, found with a set of plain numbers.
func mayShareKeys(nodes []Node, peers []Peer, sc *scratch) bool {
	heads := newUint64Set(len(nodes)+len(peers), &sc.u64[0])
	seen := func(name string, key wgconf.Key) bool {
		return name != "" && !key.IsZero() && !heads.add(binary.BigEndian.Uint64(key[:8]))
	}
	for i := range nodes {
		if seen(nodes[i].Name, nodes[i].Key) {
			return true
		}
	}
	for i := range peers {
		if seen(peers[i].Name, peers[i].PublicKey) {
			return true
		}
	}
	return false
}

// uint64Set is a set of at most a given number of well-spread numbers
// (keys, addresses): open addressing in one array at most half full,
// indexed by their last bits. Zero marks a free slot, so 0 has a flag of
// its own.
type uint64Set struct {
	slots []uint64
	zero  bool
}

func newUint64Set(n int, buf *[]uint64) uint64Set {
	size := 2
	for size < 2*n {
		size <<= 1
	}
	return uint64Set{slots: buffer(buf, size)}
}

// add adds v and reports whether it was not in the set yet.
func (s *uint64Set) add(v uint64) bool {
	if v == 0 {
		was := s.zero
		s.zero = true
		return !was
	}
	mask := uint64(len(s.slots) - 1)
	for i := v & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case v:
			return false
		case 0:
			s.slots[i] = v
			return true
		}
	}
}

// has reports whether v is in the set.
func (s *uint64Set) has(v uint64) bool {
	if v == 0 {
		return s.zero
	}
	mask := uint64(len(s.slots) - 1)
	for i := v & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case v:
			return true
		case 0:
			return false
		}
	}
}

// nodeClash returns the holders of key other than the node or peer
// (kind) named name when one of them is a node: whoever copies a node's
// key, or a node that copies anyone's, must not take the other's place, so
// every holder is left out.
func (h keyHolders) nodeClash(key wgconf.Key, kind, name string) ([]string, bool) {
	if len(h[key]) == 0 {
		return nil, false
	}
	self := kind + " " + quote(name)
	others := slices.DeleteFunc(slices.Clone(h[key]), func(s string) bool { return s == self })
	if kind == KindNode {
		return others, len(others) > 0
	}
	return others, slices.ContainsFunc(others, func(s string) bool { return strings.HasPrefix(s, KindNode+" ") })
}

// joinNames joins names as `a`, `a and b`, `a, b and c`.
func joinNames(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
