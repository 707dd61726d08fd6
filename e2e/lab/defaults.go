package lab

import (
	"crypto/rand"
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// withDefaults returns a deep copy of s with every zero field filled in, or
// an error wrapping ErrInvalidSpec when a default cannot be found (an
// address pool is used up). It does not validate: see validate.
func (s Spec) withDefaults() (Spec, error) {
	out := s
	if out.Name == "" {
		out.Name = randomRunID()
	}
	out.Clusters = slices.Clone(s.Clusters)
	usedPublic := map[netip.Addr]bool{WANHostIP: true}
	var explicitLANs []netip.Prefix
	for ci := range out.Clusters {
		c := &out.Clusters[ci]
		c.Locations = slices.Clone(c.Locations)
		for li := range c.Locations {
			l := &c.Locations[li]
			l.Nodes = slices.Clone(l.Nodes)
			if l.LAN.IsValid() {
				explicitLANs = append(explicitLANs, l.LAN.Masked())
			}
			if l.PublicIP.IsValid() {
				usedPublic[l.PublicIP] = true
			}
			for ni := range l.Nodes {
				n := &l.Nodes[ni]
				n.Labels = maps.Clone(n.Labels)
				n.Annotations = maps.Clone(n.Annotations)
				if n.PublicIP.IsValid() {
					usedPublic[n.PublicIP] = true
				}
			}
		}
	}
	routerPool := newAddrPool(usedPublic, PublicRangeB, 1)
	nodePool := newAddrPool(usedPublic, PublicRangeA, 10)
	nodePoolB := newAddrPool(usedPublic, PublicRangeB, 10)
	nextLAN := 1
	for ci := range out.Clusters {
		c := &out.Clusters[ci]
		i := ci + 1
		if c.Name == "" {
			c.Name = fmt.Sprintf("c%d", i)
		}
		if !c.PodCIDR.IsValid() {
			c.PodCIDR = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(9 + i), 0, 0}), 16)
		}
		if !c.ServiceCIDR.IsValid() {
			c.ServiceCIDR = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(19 + i), 0, 0}), 16)
		}
		if !c.WireGuardSubnet.IsValid() {
			c.WireGuardSubnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(4 + i), 0, 0}), 16)
		}
		if c.NodeCIDRMaskSize == 0 {
			c.NodeCIDRMaskSize = 24
		}
		if !c.ClusterDNS.IsValid() {
			c.ClusterDNS = nthAddr(c.ServiceCIDR.Masked(), 10)
		}
		if c.ClusterDomain == "" {
			c.ClusterDomain = "cluster.local"
		}
		if c.DualStack {
			if !c.PodCIDR6.IsValid() {
				c.PodCIDR6 = netip.PrefixFrom(mirror6(c.PodCIDR.Masked().Addr()), 56)
			}
			if !c.ServiceCIDR6.IsValid() {
				c.ServiceCIDR6 = netip.PrefixFrom(mirror6(c.ServiceCIDR.Masked().Addr()), 112)
			}
			if c.NodeCIDRMaskSize6 == 0 {
				c.NodeCIDRMaskSize6 = 64
			}
		}
		for li := range c.Locations {
			l := &c.Locations[li]
			if l.Name == "" {
				l.Name = fmt.Sprintf("loc%d", li+1)
			}
			if !l.LAN.IsValid() {
				for {
					p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(nextLAN), 0}), 24)
					nextLAN++
					if !slices.ContainsFunc(explicitLANs, p.Overlaps) {
						l.LAN = p
						break
					}
					if nextLAN > 255 {
						return Spec{}, fmt.Errorf("%w: no free default LAN left in 10.0.0.0/16: give LocationSpec.LAN", ErrInvalidSpec)
					}
				}
			}
			if !l.PublicIP.IsValid() {
				a, ok := routerPool.next()
				if !ok {
					return Spec{}, fmt.Errorf("%w: no free public address left for the router of location %s/%s", ErrInvalidSpec, c.Name, l.Name)
				}
				l.PublicIP = a
			}
			if c.DualStack && !l.LAN6.IsValid() {
				l.LAN6 = netip.PrefixFrom(mirror6(l.LAN.Masked().Addr()), 64)
			}
			usedLAN := map[netip.Addr]bool{}
			for _, n := range l.Nodes {
				if n.LANIP.IsValid() {
					usedLAN[n.LANIP] = true
				}
			}
			lanPool := newAddrPool(usedLAN, l.LAN.Masked(), 10)
			for ni := range l.Nodes {
				n := &l.Nodes[ni]
				if n.Name == "" {
					n.Name = fmt.Sprintf("%s-%d", l.Name, ni+1)
				}
				if !n.LANIP.IsValid() {
					a, ok := lanPool.next()
					if !ok {
						return Spec{}, fmt.Errorf("%w: LAN %s of location %s/%s is too small for its nodes", ErrInvalidSpec, l.LAN, c.Name, l.Name)
					}
					n.LANIP = a
				}
				if !l.NAT && !n.PublicIP.IsValid() {
					a, ok := nodePool.next()
					if !ok {
						a, ok = nodePoolB.next()
					}
					if !ok {
						return Spec{}, fmt.Errorf("%w: no free public address left for node %s/%s", ErrInvalidSpec, c.Name, n.Name)
					}
					n.PublicIP = a
				}
				if c.DualStack && !n.LANIP6.IsValid() {
					n.LANIP6 = withHost6(l.LAN6, hostNumber(l.LAN, n.LANIP))
				}
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				if _, ok := n.Labels[RegionLabel]; !ok {
					n.Labels[RegionLabel] = l.Name
				}
			}
		}
	}
	return out, nil
}

// addrPool hands out the addresses of an IPv4 /24 (or larger) prefix in
// order, from a start offset, skipping used ones, the network and the
// broadcast address. Handed-out addresses are marked used.
type addrPool struct {
	used   map[netip.Addr]bool
	prefix netip.Prefix
	cur    netip.Addr
}

func newAddrPool(used map[netip.Addr]bool, p netip.Prefix, start int) *addrPool {
	return &addrPool{used: used, prefix: p, cur: nthAddr(p, start)}
}

func (p *addrPool) next() (netip.Addr, bool) {
	for ; p.cur.IsValid() && p.prefix.Contains(p.cur); p.cur = p.cur.Next() {
		a := p.cur
		if p.used[a] || a == lastAddr(p.prefix) {
			continue
		}
		p.used[a] = true
		p.cur = a.Next()
		return a, true
	}
	return netip.Addr{}, false
}

// nthAddr returns the n-th address of the prefix (0 is the network address).
func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// lastAddr returns the last address of an IPv4 prefix (its broadcast).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// mirror6 returns the IPv6 address that reads like an IPv4 one:
// 10.b1.b2.b3 gives 2001:db8:<b1>:<b2>:: with the same digits (10.0.1.0 ->
// 2001:db8:0:1::, 10.10.0.0 -> 2001:db8:10::), so that a dual-stack lab's
// ranges are recognisable in both families.
func mirror6(a netip.Addr) netip.Addr {
	b4 := a.As4()
	b := IPv6Range.Addr().As16()
	g3, g4 := digitsAsHex(int(b4[1])), digitsAsHex(int(b4[2]))
	b[4], b[5], b[6], b[7] = byte(g3>>8), byte(g3), byte(g4>>8), byte(g4)
	return netip.AddrFrom16(b)
}

// withHost6 returns the address of prefix p whose last 16-bit group is
// host, written with the same digits (10 -> ::10).
func withHost6(p netip.Prefix, host int) netip.Addr {
	b := p.Masked().Addr().As16()
	h := digitsAsHex(host)
	b[14], b[15] = byte(h>>8), byte(h)
	return netip.AddrFrom16(b)
}

// digitsAsHex reads the decimal digits of n as hexadecimal (10 -> 0x10),
// for n up to 9999; larger n are returned as they are.
func digitsAsHex(n int) uint16 {
	if n < 0 || n > 9999 {
		return uint16(n)
	}
	var h uint16
	for _, d := range fmt.Sprint(n) {
		h = h<<4 | uint16(d-'0')
	}
	return h
}

// hostNumber returns a's offset from the start of prefix p (IPv4).
func hostNumber(p netip.Prefix, a netip.Addr) int {
	n, x := p.Masked().Addr().As4(), a.As4()
	return int(uint32(x[0])<<24|uint32(x[1])<<16|uint32(x[2])<<8|uint32(x[3])) -
		int(uint32(n[0])<<24|uint32(n[1])<<16|uint32(n[2])<<8|uint32(n[3]))
}

// randomRunID returns 4 random characters of [a-z0-9].
func randomRunID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
