package topology

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// benchCluster returns n nodes spread evenly over locs locations, and two
// Peers, generated deterministically so that another implementation can be
// fed the very same inputs (docs/performance.md compares with Kilo):
//
//   - node i is "node-%05d", in location "loc-%03d" (i*locs/n), with the key
//     sha256("key:"+name), pod CIDR 100.64.0.0/10 + i*256 (/24) and internal IP
//     10.(128+location).(j/250).(j%250+1)/16, j its index in the location;
//   - the first node of each location has the external IP
//     198.18.(location/250).(location%250+1) and leads it;
//   - every node has its endpoint, as kg publishes it: the external IP, or
//     the internal IP for the others, port 51820 (what New would fill in,
//     and what Kilo's nodes are given);
//   - with alips, node i also has the allowed location IP 172.16.0.0 + i*16
//     (/28);
//   - peer "laptop" (10.200.0.10/32, roaming, 25 s keepalive) and peer "dr"
//     (10.201.0.0/16, 10.202.0.0/16, endpoint 203.0.113.1:51820).
func benchCluster(n, locs int, alips bool) ([]Node, []Peer) {
	nodes := make([]Node, 0, n)
	perLoc := make([]int, locs)
	for i := range n {
		loc := i * locs / n
		j := perLoc[loc]
		perLoc[loc]++
		name := fmt.Sprintf("node-%05d", i)
		nd := Node{
			Name:       name,
			Location:   fmt.Sprintf("loc-%03d", loc),
			Key:        wgconf.Key(sha256.Sum256([]byte("key:" + name))),
			InternalIP: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + loc), byte(j / 250), byte(j%250 + 1)}), 16),
			PodCIDRs:   []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(64 + i/256), byte(i % 256), 0}), 24)},
			Ready:      true,
		}
		nd.Endpoint = &Endpoint{Addr: netip.AddrPortFrom(nd.InternalIP.Addr(), DefaultPort), Port: DefaultPort}
		if j == 0 {
			nd.ExternalIP = netip.AddrFrom4([4]byte{198, 18, byte(loc / 250), byte(loc%250 + 1)})
			nd.Endpoint = &Endpoint{Addr: netip.AddrPortFrom(nd.ExternalIP, DefaultPort), Port: DefaultPort}
		}
		if alips {
			a := 172<<24 | 16<<16 | uint32(i)*16
			nd.AllowedLocationIPs = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), 28)}
		}
		nodes = append(nodes, nd)
	}
	peers := []Peer{
		{
			Name:                "laptop",
			AllowedIPs:          []netip.Prefix{netip.MustParsePrefix("10.200.0.10/32")},
			PublicKey:           wgconf.Key(sha256.Sum256([]byte("key:laptop"))),
			PersistentKeepalive: 25 * time.Second,
		},
		{
			Name:       "dr",
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.201.0.0/16"), netip.MustParsePrefix("10.202.0.0/16")},
			PublicKey:  wgconf.Key(sha256.Sum256([]byte("key:dr"))),
			Endpoint:   &Endpoint{Addr: netip.MustParseAddrPort("203.0.113.1:51820"), Port: 51820},
		},
	}
	return nodes, peers
}

// BenchmarkHostWork measures one host's work per change: New, then the
// WireGuard configuration and the routes of node-00000 (the leader of the
// first location), at 10 to 5000 nodes in 1 to 100 locations, location and
// full granularity, with and without one allowed location IP per node. On
// a shared machine the wall time (ns/op) suffers from the other processes;
// cpu-ns/op is the CPU time the process used per operation, the garbage
// collector's included.
func BenchmarkHostWork(b *testing.B) {
	const host = "node-00000"
	for _, n := range []int{10, 100, 1000, 5000} {
		for _, locs := range []int{1, 10, 100} {
			if locs > n {
				continue
			}
			for _, g := range []Granularity{LocationGranularity, FullGranularity} {
				for _, alips := range []bool{false, true} {
					nodes, peers := benchCluster(n, locs, alips)
					opts := Options{Granularity: g, Links: Links{WireGuard: "kilo0", Underlay: "eth0"}}
					name := fmt.Sprintf("nodes=%d/locations=%d/granularity=%s/alips=%t", n, locs, g, alips)
					b.Run(name, func(b *testing.B) {
						b.ReportAllocs()
						cpu0, cpuOK := processCPU()
						for b.Loop() {
							top, err := New(nodes, peers, opts)
							if err != nil {
								b.Fatal(err)
							}
							if _, err := top.WireGuardConfig(host, wgconf.SecretKey{}); err != nil {
								b.Fatal(err)
							}
							top.Routes(host)
						}
						if cpu1, ok := processCPU(); ok && cpuOK {
							b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
						}
					})
				}
			}
		}
	}
}

// TestBenchClusterIsClean checks that the benchmark's inputs raise no
// problem and are used in place, as an agent's nodes, so that
// BenchmarkHostWork measures the common path and matches what Kilo is fed.
func TestBenchClusterIsClean(t *testing.T) {
	for _, g := range []Granularity{LocationGranularity, FullGranularity} {
		nodes, peers := benchCluster(1000, 10, true)
		top, err := New(nodes, peers, Options{Granularity: g})
		if err != nil {
			t.Fatal(err)
		}
		if len(top.Problems) > 0 {
			t.Errorf("%s: %d problems, first: %s", g, len(top.Problems), top.Problems[0])
		}
		if !inPlace(top, nodes) {
			t.Errorf("%s: the nodes are copied, not used in place", g)
		}
		if !top.IsLeader("node-00000") {
			t.Errorf("%s: node-00000 does not lead", g)
		}
		if want := map[Granularity]int{LocationGranularity: 10, FullGranularity: 1000}[g]; len(top.Segments) != want {
			t.Errorf("%s: %d segments, want %d", g, len(top.Segments), want)
		}
	}
}
