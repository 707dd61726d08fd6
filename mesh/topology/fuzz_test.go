package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// fuzzInput turns fuzzer bytes into options, nodes and peers drawn from
// small pools, so that names, keys and ranges collide often.
type fuzzInput struct {
	data []byte
}

func (f *fuzzInput) byte() byte {
	if len(f.data) == 0 {
		return 0
	}
	b := f.data[0]
	f.data = f.data[1:]
	return b
}

func pick[T any](f *fuzzInput, pool []T) T { return pool[int(f.byte())%len(pool)] }

var (
	fuzzPrefixes = []string{"", "10.42.0.0/16", "10.42.1.0/24", "10.42.1.128/25", "10.42.2.0/24", "10.5.0.0/16",
		"10.5.100.10/32", "10.5.0.1/32", "10.1.0.1/24", "10.1.0.2/24", "10.1.1.3/24", "0.0.0.0/0", "10.96.0.0/12",
		"2001:db8:42:1::/64", "2001:db8:a::1/64", "2001:db8:a::2/64", "::/0", "::ffff:10.42.3.0/120", "203.0.113.0/24",
		"10.5.0.0/32", "10.5.255.255/32", "192.168.1.0/24", "2001:db8:5::7/128"}
	fuzzAddrs   = []string{"", "203.0.113.1", "203.0.113.2", "10.1.0.1", "2001:db8:a::1", "::ffff:198.51.100.1"}
	fuzzSubnets = []string{"10.5.0.0/16", "10.5.0.0/29", "10.5.0.0/30", "2001:db8:5::/64", "10.5.0.0/24", "2001:db8:5::/120"}
)

func (f *fuzzInput) prefix() netip.Prefix {
	s := pick(f, fuzzPrefixes)
	if s == "" {
		return netip.Prefix{}
	}
	return netip.MustParsePrefix(s)
}

func (f *fuzzInput) prefixes() []netip.Prefix {
	var out []netip.Prefix
	for range f.byte() % 4 {
		out = append(out, f.prefix())
	}
	return out
}

func (f *fuzzInput) addr() netip.Addr {
	s := pick(f, fuzzAddrs)
	if s == "" {
		return netip.Addr{}
	}
	return netip.MustParseAddr(s)
}

func (f *fuzzInput) key() wgconf.Key {
	if k := f.byte() % 8; k > 0 {
		return testKey(fmt.Sprint("k", k))
	}
	return wgconf.Key{}
}

func (f *fuzzInput) endpoint() *Endpoint {
	switch f.byte() % 4 {
	case 1:
		return &Endpoint{DNS: "gw.example.com", Port: uint16(f.byte())}
	case 2:
		return &Endpoint{Addr: netip.AddrPortFrom(f.addr(), uint16(f.byte()))}
	case 3:
		return &Endpoint{}
	}
	return nil
}

func (f *fuzzInput) build() ([]Node, []Peer, Options) {
	opts := Options{
		Granularity:   pick(f, []Granularity{LocationGranularity, FullGranularity, CrossGranularity}),
		Encapsulate:   pick(f, []Encapsulate{EncapsulateNever, EncapsulateCrossSubnet, EncapsulateAlways}),
		Subnet:        netip.MustParsePrefix(pick(f, fuzzSubnets)),
		NoLocalRoutes: f.byte()%4 == 0,
		Links:         pick(f, []Links{links, {}}),
	}
	if f.byte()%2 == 0 {
		opts.ServiceCIDRs = []netip.Prefix{pfx("10.96.0.0/12")}
	}
	var nodes []Node
	for range f.byte() % 8 {
		nodes = append(nodes, Node{
			Name:                pick(f, []string{"n0", "n1", "n2", "n3", "n4", "n5", ""}),
			Location:            pick(f, []string{"", "a", "b", "c", "n1"}),
			Key:                 f.key(),
			Endpoint:            f.endpoint(),
			InternalIP:          f.prefix(),
			InternalIP6:         f.prefix(),
			ExternalIP:          f.addr(),
			PodCIDRs:            f.prefixes(),
			AllowedLocationIPs:  f.prefixes(),
			WireGuardIP:         f.prefix(),
			PersistentKeepalive: time.Duration(int8(f.byte())) * time.Second / 3,
			Leader:              f.byte()%3 == 0,
			Ready:               f.byte()%4 != 0,
		})
	}
	var peers []Peer
	for range f.byte() % 5 {
		p := Peer{
			Name:                pick(f, []string{"p0", "p1", "p2", "p3", ""}),
			AllowedIPs:          f.prefixes(),
			PublicKey:           f.key(),
			Created:             time.Unix(int64(f.byte()%3), 0),
			Endpoint:            f.endpoint(),
			PersistentKeepalive: time.Duration(f.byte()) * time.Second,
		}
		if f.byte()%3 == 0 {
			k := wgconf.SecretKey(testKey("psk"))
			p.PresharedKey = &k
		}
		peers = append(peers, p)
	}
	return nodes, peers, opts
}

func FuzzNew(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1, 0, 6, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 2, 1, 2, 3})
	f.Add([]byte("a fuzz seed with enough bytes to build a few nodes and peers, and then some more bytes"))
	f.Add([]byte{2, 2, 3, 1, 0, 0, 7, 1, 1, 1, 2, 2, 8, 9, 3, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{data: data}
		nodes, peers, opts := in.build()
		top, err := New(nodes, peers, opts)
		if err != nil {
			t.Fatalf("New with valid options: %v", err)
		}
		checkInvariants(t, top, nodes, peers)
		// Determinism: reversed input, same output.
		rn, rp := slices.Clone(nodes), slices.Clone(peers)
		slices.Reverse(rn)
		slices.Reverse(rp)
		again, err := New(rn, rp, opts)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := render(t, top, nodes, peers), render(t, again, nodes, peers); a != b {
			t.Fatalf("output depends on input order:\n%s\n----\n%s", a, b)
		}
	})
}

func checkInvariants(t *testing.T, top *Topology, nodes []Node, peers []Peer) {
	t.Helper()
	accounted := make(map[string]bool)
	for _, p := range top.Problems {
		accounted[p.Kind+":"+p.Name] = true
	}
	for _, n := range nodes {
		if _, ok := top.Node(n.Name); !ok && !accounted[KindNode+":"+n.Name] {
			t.Errorf("node %q neither accepted nor reported", n.Name)
		}
	}
	for _, p := range peers {
		if _, ok := top.peerIndex(p.Name); !ok && !accounted[KindPeer+":"+p.Name] {
			t.Errorf("peer %q neither accepted nor reported", p.Name)
		}
	}
	subnet := top.opts.Subnet
	ips := make(map[netip.Addr]string)
	for _, s := range top.Segments {
		if !s.WireGuardIP.IsValid() {
			continue
		}
		a := s.WireGuardIP.Addr()
		if !subnet.Contains(a) || a == subnet.Addr() || a == lastAddr(subnet) || s.WireGuardIP.Bits() != subnet.Bits() {
			t.Errorf("segment %s WireGuard IP %s is not a host of %s", s.Name, s.WireGuardIP, subnet)
		}
		if other, ok := ips[a]; ok {
			t.Errorf("segments %s and %s share WireGuard IP %s", other, s.Name, a)
		}
		ips[a] = s.Name
	}
	for _, m := range top.members {
		name := m.Name
		c, err := top.WireGuardConfig(name, wgconf.SecretKey(testKey("private")))
		if err != nil {
			t.Fatalf("WireGuardConfig(%s): %v", name, err)
		}
		keys := make(map[wgconf.Key]bool)
		allowed := make(map[netip.Prefix]string)
		for _, p := range c.Peers {
			if keys[p.PublicKey] || p.PublicKey == m.Key {
				t.Errorf("node %s: key of %s appears twice or is its own", name, p.Name)
			}
			keys[p.PublicKey] = true
			for _, a := range p.AllowedIPs {
				if other, ok := allowed[a]; ok {
					t.Errorf("node %s: allowed IP %s given to both %s and %s", name, a, other, p.Name)
				}
				allowed[a] = p.Name
			}
		}
		routes, _ := top.Routes(name)
		for i, r := range routes {
			if !r.Dst.IsValid() || (r.Gw.IsValid() && r.Gw.Is4() != r.Dst.Addr().Is4()) {
				t.Errorf("node %s: bad route %s", name, routeLine(r))
			}
			if i > 0 && routes[i-1].Dst == r.Dst && routes[i-1].Table == r.Table {
				t.Errorf("node %s: duplicate route to %s", name, r.Dst)
			}
		}
		_ = top.TunnelRemotes(name)
		_ = top.AsPeer(name)
	}
	checkSortedMatchesCollected(t, top)
	for _, p := range top.Peers {
		if _, err := top.PeerConf(p.Name); err != nil {
			t.Errorf("PeerConf(%s): %v", p.Name, err)
		}
	}
	if top.DOT() == "" {
		t.Error("empty DOT")
	}
}
