package topology

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// acceptPeers validates peers, oldest first (by Created, then Name), against
// the ranges claimed so far, claims the ranges of the accepted ones, and
// returns them normalized and sorted by name.
func acceptPeers(peers []Peer, holders keyHolders, opts Options, cs *claims, ps *problems, sc *scratch) []Peer {
	// count returns how many peers are named name: a scan while they are
	// few, a search in their sorted names otherwise.
	var names []string
	if len(peers) > 16 {
		names = make([]string, len(peers))
		for i := range peers {
			names[i] = peers[i].Name
		}
		slices.Sort(names)
	}
	count := func(name string) int {
		if names == nil {
			n := 0
			for i := range peers {
				n += b2i(peers[i].Name == name)
			}
			return n
		}
		i, _ := slices.BinarySearch(names, name)
		j := i
		for j < len(names) && names[j] == name {
			j++
		}
		return j - i
	}
	sorted := buffer(&sc.peers, len(peers))
	copy(sorted, peers)
	slices.SortStableFunc(sorted, func(a, b Peer) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
	})
	out := make([]Peer, 0, len(peers))
	// The peers' allowed IPs and endpoints: the caller's when they are
	// normalized already, else copies cut from one array each.
	nIPs, nEnds := 0, 0
	for i := range peers {
		if !normalPrefixes(peers[i].AllowedIPs) {
			nIPs += len(peers[i].AllowedIPs)
		}
		if e := peers[i].Endpoint; e != nil && !normalPeerEndpoint(e) {
			nEnds++
		}
	}
	arena := newPrefixArena(nIPs)
	var ends []Endpoint
	if nEnds > 0 {
		ends = make([]Endpoint, 0, nEnds)
	}
	// The keys of the peers accepted so far, to their names: a scan of out
	// while peers are few (a map is a fixed cost small clusters feel), a
	// map otherwise.
	var keys map[wgconf.Key]string
	if len(peers) > 16 {
		keys = make(map[wgconf.Key]string, len(peers))
	}
	ownerOf := func(k wgconf.Key) (string, bool) {
		if keys != nil {
			name, ok := keys[k]
			return name, ok
		}
		for i := range out {
			if out[i].PublicKey == k {
				return out[i].Name, true
			}
		}
		return "", false
	}
	for _, p := range sorted {
		switch {
		case p.Name == "":
			ps.add(KindPeer, "", Excluded, CodeNoName, "a peer has an empty name; it is ignored")
			continue
		case count(p.Name) > 1:
			ps.add(KindPeer, p.Name, Excluded, CodeDuplicateName,
				"%d peers are named %q; all of them are left out until the names are unique", count(p.Name), p.Name)
			continue
		case p.PublicKey == (wgconf.Key{}):
			ps.add(KindPeer, p.Name, Excluded, CodeNoKey,
				"the peer has no WireGuard public key; set spec.publicKey to the output of `wg pubkey` on the peer")
			continue
		}
		if others, ok := holders.nodeClash(p.PublicKey, KindPeer, p.Name); ok {
			ps.add(KindPeer, p.Name, Excluded, CodeDuplicateKey,
				"the peer's public key is also published by %s; a copied key must not evict its owner, so all of them are left out until each has its own key pair (wg genkey | wg pubkey)", joinNames(others))
			continue
		}
		if owner, ok := ownerOf(p.PublicKey); ok {
			ps.add(KindPeer, p.Name, Excluded, CodeDuplicateKey,
				"the peer's public key is already used by peer %q; every peer needs its own key pair (wg genkey | wg pubkey)", owner)
			continue
		}
		p = normalizePeer(p, opts.Port, &arena, &ends)
		if reason, ok := peerConflict(p, cs); ok {
			ps.add(KindPeer, p.Name, Excluded, CodeOverlap, "%s", reason)
			continue
		}
		if len(p.AllowedIPs) == 0 {
			ps.add(KindPeer, p.Name, Warning, CodeNoAllowedIPs,
				"the peer has no allowed IPs, so nothing is routed to it; list the peer's addresses in spec.allowedIPs")
		}
		if keys != nil {
			keys[p.PublicKey] = p.Name
		}
		for _, a := range p.AllowedIPs {
			cs.add(claim{prefix: a, kind: claimPeer, name: p.Name})
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// peerConflict explains why p may not have its allowed IPs.
func peerConflict(p Peer, cs *claims) (string, bool) {
	for _, a := range p.AllowedIPs {
		c, ok := cs.find(a, nil)
		if !ok {
			continue
		}
		if c.kind == claimPeer {
			return fmt.Sprintf("allowed IP %s overlaps the %s, which is older and keeps it; change spec.allowedIPs of one of the two Peers", a, c.owner()), true
		}
		return fmt.Sprintf("allowed IP %s overlaps the %s; a Peer may only claim ranges the cluster does not use: pick one outside the pod CIDRs, node IPs, service CIDRs and WireGuard IPs of the cluster", a, c.owner()), true
	}
	return "", false
}

// normalizePeer copies p with canonical prefixes, a port on its endpoint
// and a sane keepalive. Allowed IPs and an endpoint that need a change are
// copied, into arena and ends; the others are p's own.
func normalizePeer(p Peer, port uint16, arena *prefixArena, ends *[]Endpoint) Peer {
	if !normalPrefixes(p.AllowedIPs) {
		p.AllowedIPs = normPrefixesTo(arena.take(len(p.AllowedIPs)), p.AllowedIPs)
		if len(p.AllowedIPs) == 0 {
			p.AllowedIPs = nil
		}
	}
	p.PersistentKeepalive = clampKeepalive(p.PersistentKeepalive)
	if p.PresharedKey != nil {
		k := *p.PresharedKey
		p.PresharedKey = &k
	}
	if p.Endpoint != nil && !normalPeerEndpoint(p.Endpoint) {
		e := *p.Endpoint
		a := unmapAddr(e.Addr.Addr())
		if e.Port == 0 {
			e.Port = e.Addr.Port()
		}
		if e.Port == 0 {
			e.Port = port
		}
		e.Addr = netip.AddrPort{}
		if a.IsValid() {
			e.Addr = netip.AddrPortFrom(a, e.Port)
		}
		p.Endpoint = nil
		if e.DNS != "" || a.IsValid() {
			*ends = append(*ends, e)
			p.Endpoint = &(*ends)[len(*ends)-1]
		}
	}
	return p
}

// normalPeerEndpoint reports whether normalizePeer would keep e as it is:
// it has a port, and an unmapped address with that port, or a DNS name
// and no address.
func normalPeerEndpoint(e *Endpoint) bool {
	a := e.Addr.Addr()
	if a.IsValid() {
		return e.Port != 0 && e.Addr.Port() == e.Port && plainAddr(a)
	}
	return e.Port != 0 && e.DNS != "" && e.Addr == netip.AddrPort{}
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
