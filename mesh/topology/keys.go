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

func holdersOf(nodes []Node, peers []Peer) keyHolders {
	if !mayShareKeys(nodes, peers) {
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
func mayShareKeys(nodes []Node, peers []Peer) bool {
	// An open-addressing set of the keys' first 8 bytes, at most half full,
	// indexed by their last bits; zero marks a free slot, so the head 0
	// has a flag of its own.
	size := 1
	for size < 2*(len(nodes)+len(peers)) {
		size <<= 1
	}
	set, zero := make([]uint64, size), false
	seen := func(name string, key wgconf.Key) bool {
		if name == "" || key.IsZero() {
			return false
		}
		h := binary.BigEndian.Uint64(key[:8])
		if h == 0 {
			was := zero
			zero = true
			return was
		}
		for i := h & uint64(size-1); ; i = (i + 1) & uint64(size-1) {
			switch set[i] {
			case h:
				return true
			case 0:
				set[i] = h
				return false
			}
		}
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
