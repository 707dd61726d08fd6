package topology

import (
	"slices"
	"strings"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// keyHolders maps each public key to the nodes and peers that publish it,
// as `node "a"` and `peer "p"`, sorted; only nodes and peers with a name
// of their own and a key count.
type keyHolders map[wgconf.Key][]string

func holdersOf(nodes []Node, peers []Peer) keyHolders {
	h := keyHolders{}
	add := func(kind, name string, key wgconf.Key, unique bool) {
		if name != "" && unique && !key.IsZero() {
			h[key] = append(h[key], kind+" "+quote(name))
		}
	}
	nodeNames, peerNames := map[string]int{}, map[string]int{}
	for _, n := range nodes {
		nodeNames[n.Name]++
	}
	for _, p := range peers {
		peerNames[p.Name]++
	}
	for _, n := range nodes {
		add(KindNode, n.Name, n.Key, nodeNames[n.Name] == 1)
	}
	for _, p := range peers {
		add(KindPeer, p.Name, p.PublicKey, peerNames[p.Name] == 1)
	}
	for k := range h {
		slices.Sort(h[k])
	}
	return h
}

// others returns the holders of key other than self.
func (h keyHolders) others(key wgconf.Key, self string) []string {
	return slices.DeleteFunc(slices.Clone(h[key]), func(s string) bool { return s == self })
}

// nodeClash returns the holders of key other than self when one of them
// is a node: whoever copies a node's key, or a node that copies anyone's,
// must not take the other's place, so every holder is left out.
func (h keyHolders) nodeClash(key wgconf.Key, self string) ([]string, bool) {
	others := h.others(key, self)
	if strings.HasPrefix(self, KindNode+" ") {
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
