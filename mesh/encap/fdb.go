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
