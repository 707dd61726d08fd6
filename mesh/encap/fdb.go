package encap

import (
	"hash/fnv"
	"net"
	"net/netip"
	"slices"
)

// Entry is one static VXLAN forwarding entry: frames for MAC go to Dst.
type Entry struct {
	// MAC is the destination link address; all zeros matches broadcast,
	// multicast and unknown unicast.
	MAC [6]byte
	// Dst is the remote node's IP.
	Dst netip.Addr
}

// MAC returns the link address kilofed gives the VXLAN link of the node
// with internal IP ip: locally administered, 02:4b ('K') followed by the
// IPv4 address, or by a hash of an IPv6 address. Every node can thus
// compute the others' addresses without asking them.
func MAC(ip netip.Addr) net.HardwareAddr {
	ip = ip.Unmap()
	mac := net.HardwareAddr{0x02, 0x4b, 0, 0, 0, 0}
	if ip.Is4() {
		b := ip.As4()
		copy(mac[2:], b[:])
		return mac
	}
	h := fnv.New32a()
	b := ip.As16()
	h.Write(b[:])
	copy(mac[2:], h.Sum(nil))
	return mac
}

// Gateway6 returns the IPv6 next hop for routes to a remote node's IPv6
// pod ranges through the VXLAN link: the link-local address that EUI-64
// gives MAC(remote). Set keeps a permanent neighbour entry for it, since
// Linux, unlike ARP, answers neighbour solicitations only for addresses of
// the receiving link. It works over IPv4 and IPv6 underlays alike.
func Gateway6(remote netip.Addr) netip.Addr {
	m := MAC(remote)
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	b[8], b[9], b[10] = m[0]^0x02, m[1], m[2]
	b[11], b[12] = 0xff, 0xfe
	b[13], b[14], b[15] = m[3], m[4], m[5]
	return netip.AddrFrom16(b)
}

// NextHop returns how a route to dst reaches the node whose underlay
// address is remote through a tunnel of kind k: the gateway and whether the
// route needs the onlink flag. IPv4 ranges go via the remote's address
// itself (resolved by ARP through the tunnel); IPv6 ranges through VXLAN go
// via Gateway6(remote). ok is false when k cannot carry dst to remote (no
// tunnel, or IPIP with an IPv6 range or remote).
func (k Kind) NextHop(dst netip.Prefix, remote netip.Addr) (gw netip.Addr, onlink, ok bool) {
	remote = remote.Unmap()
	switch {
	case k == KindVXLAN && dst.Addr().Is6():
		return Gateway6(remote), false, true
	case (k == KindVXLAN || k == KindIPIP) && dst.Addr().Is4() && remote.Is4():
		return remote, true, true
	}
	return netip.Addr{}, false, false
}

// Entries returns the forwarding entries for remotes, sorted: for each
// remote of local's family other than local, one all-zeros entry and one
// for its MAC.
func Entries(local netip.Addr, remotes []netip.Addr) []Entry {
	var out []Entry
	for _, r := range remotes {
		r = r.Unmap()
		if !r.IsValid() || r.Is4() != local.Unmap().Is4() || r == local.Unmap() {
			continue
		}
		var m [6]byte
		copy(m[:], MAC(r))
		out = append(out, Entry{Dst: r}, Entry{MAC: m, Dst: r})
	}
	slices.SortFunc(out, compareEntries)
	return slices.Compact(out)
}

// DiffEntries returns the entries to add and to delete so that current
// becomes desired; both results are sorted.
func DiffEntries(desired, current []Entry) (add, del []Entry) {
	for _, d := range desired {
		if !slices.Contains(current, d) {
			add = append(add, d)
		}
	}
	for _, c := range current {
		if !slices.Contains(desired, c) {
			del = append(del, c)
		}
	}
	slices.SortFunc(add, compareEntries)
	slices.SortFunc(del, compareEntries)
	return slices.Compact(add), slices.Compact(del)
}

func compareEntries(a, b Entry) int {
	if c := a.Dst.Compare(b.Dst); c != 0 {
		return c
	}
	return slices.Compare(a.MAC[:], b.MAC[:])
}

// gatewayMAC inverts Gateway6: the MAC whose EUI-64 is gw's interface ID.
func gatewayMAC(gw netip.Addr) net.HardwareAddr {
	b := gw.As16()
	return net.HardwareAddr{b[8] ^ 0x02, b[9], b[10], b[13], b[14], b[15]}
}
