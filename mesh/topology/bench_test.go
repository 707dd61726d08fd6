package topology

import (
	"fmt"
	"testing"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// bigCluster returns n nodes in n/10 locations, one public node each.
func bigCluster(n int) []Node {
	var out []Node
	for i := range n {
		ext := ""
		if i%10 == 0 {
			ext = fmt.Sprintf("198.51.%d.%d", 100+i/2500, i/10%250+1)
		}
		out = append(out, node(fmt.Sprintf("node-%04d", i), fmt.Sprintf("loc-%03d", i/10),
			fmt.Sprintf("10.%d.%d.%d/24", 100+i/2500, i/10%250, i%10+1), ext,
			fmt.Sprintf("172.%d.%d.0/24", 16+i/250, i%250)))
	}
	return out
}

// BenchmarkNew measures the whole computation one agent does per change:
// New plus its own WireGuard configuration and routes.
func BenchmarkNew(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, g := range []Granularity{LocationGranularity, FullGranularity} {
			nodes := bigCluster(n)
			peers := []Peer{laptopPeer(), drPeer()}
			b.Run(fmt.Sprintf("%s/%d", g, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					top, err := New(nodes, peers, Options{Subnet: pfx("10.5.0.0/16"), Granularity: g, Links: links})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := top.WireGuardConfig("node-0000", wgconf.SecretKey(testKey("private"))); err != nil {
						b.Fatal(err)
					}
					top.Routes("node-0001")
				}
			})
		}
	}
}
