package server

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkServerQueriesPerSecond sends clusterset.local A queries to a
// server on a loopback UDP port from parallel clients, each on its own
// socket, and reports queries/s.
func BenchmarkServerQueriesPerSecond(b *testing.B) {
	addr := startServer(b, Config{Zone: testZone()})
	q, err := query("web.prod.svc.clusterset.local.", dns.TypeA).Pack()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close()
		buf := make([]byte, 512)
		for pb.Next() {
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := conn.Write(q); err != nil {
				b.Error(err)
				return
			}
			if _, err := conn.Read(buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}
