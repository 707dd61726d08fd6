package topology

import (
	"time"

	"github.com/kilofed/kilofed/mesh/encap"
)

type scenario struct {
	name  string
	nodes []Node
	peers []Peer
	opts  Options
}

var links = Links{WireGuard: "kilo0", Underlay: "eth0", Tunnel: "kilo-vxlan"}

// seedChina is the Chinese seed's two-node cluster: Beijing and Shanghai.
func seedChina() []Node {
	return []Node{
		node("node-beijing", "cn-beijing", "10.0.1.10/24", "203.0.113.10", "10.42.0.0/24"),
		node("node-shanghai", "cn-shanghai", "10.0.2.20/24", "198.51.100.20", "10.42.1.0/24"),
	}
}

// metaCloud is the French seed's meta-cloud: three locations of two nodes;
// lyon-dc sits behind NAT (no external IP, keepalive 25s).
func metaCloud() []Node {
	nat := func(n *Node) { n.PersistentKeepalive = 25 * time.Second }
	return []Node{
		node("scw-1", "scaleway-paris", "10.1.0.11/24", "", "10.42.1.0/24"),
		node("scw-2", "scaleway-paris", "10.1.0.12/24", "198.51.100.12", "10.42.2.0/24"),
		node("aws-1", "aws-euwest3", "172.31.0.21/20", "203.0.113.21", "10.42.3.0/24"),
		node("aws-2", "aws-euwest3", "172.31.32.22/20", "203.0.113.22", "10.42.4.0/24"),
		with(node("dc-1", "lyon-dc", "192.168.10.31/24", "", "10.42.5.0/24"), nat),
		with(node("dc-2", "lyon-dc", "192.168.10.32/24", "", "10.42.6.0/24"), nat),
	}
}

func scenarios() []scenario {
	seedSubnet := Options{Subnet: pfx("10.5.0.0/16"), Links: links}
	deadLeader := metaCloud()
	deadLeader[1].Ready = false // scw-2, the public node, is dead
	forced := []Node{
		node("edge-a", "edge", "10.9.0.1/24", "", "10.42.10.0/24"),
		node("edge-b", "edge", "10.9.0.2/24", "198.51.100.40", "10.42.11.0/24"),
		with(node("edge-c", "edge", "10.9.0.3/24", "", "10.42.12.0/24"), func(n *Node) { n.Leader = true }),
		with(node("gw-1", "core", "10.8.0.1/24", "", "10.42.20.0/24"), func(n *Node) {
			n.Endpoint = &Endpoint{DNS: "gw.example.com", Port: 51821}
		}),
		node("gw-2", "core", "10.8.0.2/24", "203.0.113.50", "10.42.21.0/24"),
	}
	bad := []Node{
		node("ok-1", "paris", "10.1.0.1/24", "198.51.100.1", "10.42.1.0/24"),
		node("ok-2", "paris", "10.1.0.2/24", "", "10.42.2.0/24"),
		with(node("no-key", "paris", "10.1.0.3/24", "", "10.42.3.0/24"), func(n *Node) { n.Key = [32]byte{} }),
		node("no-location", "", "10.2.0.1/24", "203.0.113.2", "10.42.4.0/24"),
		node("no-podcidr", "paris", "10.1.0.4/24", ""),
		node("no-address", "paris", "", ""),
		with(node("endpoint-only", "paris", "", "", "10.42.5.0/24"), func(n *Node) {
			n.Endpoint = &Endpoint{Addr: addrPort("203.0.113.9:51820")}
		}),
		node("pod-overlap", "paris", "10.1.0.5/24", "", "10.42.1.128/25"),
		with(node("same-key", "paris", "10.1.0.6/24", "", "10.42.6.0/24"), func(n *Node) { n.Key = testKey("ok-1") }),
		with(node("lan", "paris", "10.1.0.7/24", "", "10.42.7.0/24"), func(n *Node) {
			n.AllowedLocationIPs = pfxs("10.1.0.0/24", "10.42.0.0/16", "192.168.50.0/24")
		}),
	}
	dual := []Node{
		node6("d-a1", "site-a", "10.1.0.1/24", "2001:db8:a::1/64", "198.51.100.61", "10.42.1.0/24", "2001:db8:42:1::/64"),
		node6("d-a2", "site-a", "10.1.1.2/24", "2001:db8:a::2/64", "", "10.42.2.0/24", "2001:db8:42:2::/64"),
		node6("d-b1", "site-b", "10.2.0.1/24", "2001:db8:b::1/64", "203.0.113.61", "10.42.3.0/24", "2001:db8:42:3::/64"),
		node6("d-b2", "site-b", "10.2.0.2/24", "", "", "10.42.4.0/24", "2001:db8:42:4::/64"),
	}
	twoPeers := []Peer{laptopPeer(), drPeer(),
		{Name: "alice-laptop", AllowedIPs: pfxs("10.5.100.10/32", "10.5.100.11/32"), PublicKey: testKey("alice-laptop"),
			Created: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)},
		{Name: "pod-thief", AllowedIPs: pfxs("10.42.0.0/16"), PublicKey: testKey("pod-thief")},
		{Name: "no-key-peer", AllowedIPs: pfxs("10.5.200.1/32")},
		// A node's key copied by a peer excludes both (see TestCopiedKeyEvictsNobody);
		// a peer's key copied by a younger peer excludes only the copy.
		{Name: "copycat", AllowedIPs: pfxs("10.5.200.2/32"), PublicKey: testKey("seb-laptop"),
			Created: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{Name: "empty", PublicKey: testKey("empty")},
	}
	return []scenario{
		{name: "seed-china", nodes: seedChina(), opts: seedSubnet},
		{name: "seed-china-peers", nodes: seedChina(), peers: []Peer{laptopPeer(), drPeer()}, opts: seedSubnet},
		{name: "peer-conflicts", nodes: seedChina(), peers: twoPeers, opts: seedSubnet},
		{name: "meta-cloud-location", nodes: metaCloud(), peers: []Peer{laptopPeer(), drPeer()},
			opts: Options{Subnet: pfx("10.5.0.0/16"), Links: links, ServiceCIDRs: pfxs("10.96.0.0/12")}},
		{name: "meta-cloud-crosssubnet", nodes: metaCloud(),
			opts: Options{Links: links, Encapsulate: EncapsulateCrossSubnet}},
		{name: "meta-cloud-full", nodes: metaCloud(), peers: []Peer{laptopPeer()},
			opts: Options{Subnet: pfx("10.5.0.0/16"), Links: links, Granularity: FullGranularity}},
		{name: "meta-cloud-cross", nodes: metaCloud(), peers: []Peer{laptopPeer()},
			opts: Options{Subnet: pfx("10.5.0.0/16"), Links: links, Granularity: CrossGranularity, Encapsulate: EncapsulateAlways}},
		{name: "dead-leader", nodes: deadLeader, opts: Options{Links: links}},
		{name: "forced-leader", nodes: forced, opts: Options{Links: links}},
		{name: "bad-nodes", nodes: bad, peers: []Peer{laptopPeer()}, opts: seedSubnet},
		{name: "dual-stack", nodes: dual, opts: Options{Links: links, Encapsulate: EncapsulateCrossSubnet, TunnelNextHop: encap.KindVXLAN.NextHop}},
	}
}

func node6(name, location, in4, in6, external string, pods ...string) Node {
	n := node(name, location, in4, external, pods...)
	if in6 != "" {
		n.InternalIP6 = pfx(in6)
	}
	return n
}
