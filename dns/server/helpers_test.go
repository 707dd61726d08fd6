package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/kilofed/kilofed/dns/zone"
)

// testZone has a ClusterSetIP import web.prod and Headless imports big.prod
// (50 ready endpoints) and huge.prod (200).
func testZone() *zone.Zone {
	z := zone.New(zone.Config{})
	z.SetImport(zone.Import{Namespace: "prod", Name: "web", IPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Ports: []zone.Port{{Name: "http", Protocol: "TCP", Port: 80}}})
	for name, n := range map[string]int{"big": 50, "huge": 200} {
		z.SetImport(zone.Import{Namespace: "prod", Name: name, Headless: true, Ports: []zone.Port{{Name: "http", Port: 80}}})
		var eps []zone.Endpoint
		for i := range n {
			eps = append(eps, zone.Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)})}, Ready: true})
		}
		z.SetSlice(zone.Slice{Namespace: "prod", Name: name + "-a", Service: name, Cluster: "a", Endpoints: eps})
	}
	return z
}

// recorder is a dns.ResponseWriter that keeps the message written.
type recorder struct {
	remote net.Addr
	msg    *dns.Msg
}

func (r *recorder) LocalAddr() net.Addr         { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (r *recorder) RemoteAddr() net.Addr        { return r.remote }
func (r *recorder) WriteMsg(m *dns.Msg) error   { r.msg = m; return nil }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) Close() error                { return nil }
func (r *recorder) TsigStatus() error           { return nil }
func (r *recorder) TsigTimersOnly(bool)         {}
func (r *recorder) Hijack()                     {}

var udpClient = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
var tcpClient = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}

// fakeUpstream is a DNS server on loopback that answers every A question
// with 192.0.2.1 (and TXT questions with 40 long strings, to overflow 512
// bytes) and counts the questions it got.
type fakeUpstream struct {
	addr  string
	count atomic.Int64
	names chan string
}

func startUpstream(t testing.TB) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{names: make(chan string, 1000)}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.count.Add(1)
		select {
		case u.names <- r.Question[0].Name:
		default:
		}
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch q.Qtype {
		case dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)})
		case dns.TypeTXT:
			for i := range 40 {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
					Txt: []string{fmt.Sprintf("%02d-%s", i, "0123456789012345678901234567890123456789")}})
			}
		}
		size := dns.MinMsgSize
		if _, tcp := w.RemoteAddr().(*net.TCPAddr); tcp {
			size = dns.MaxMsgSize
		} else if o := r.IsEdns0(); o != nil {
			size = int(o.UDPSize())
			m.SetEdns0(o.UDPSize(), false)
		}
		m.Truncate(size)
		w.WriteMsg(m)
	})
	pc, ln, err := listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	us := &dns.Server{PacketConn: pc, Handler: h}
	ts := &dns.Server{Listener: ln, Handler: h}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	t.Cleanup(func() { pc.Close(); ln.Close() })
	u.addr = pc.LocalAddr().String()
	return u
}

// startServer serves cfg on a loopback port until the test ends.
func startServer(t testing.TB, cfg Config) string {
	t.Helper()
	s, err := Listen("127.0.0.1:0", NewHandler(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s.Addr()
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}
