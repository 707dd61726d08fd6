package server

import (
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func exchange(t *testing.T, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: 65000}
	in, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s exchange %s: %v", network, m.Question[0].Name, err)
	}
	return in
}

func TestServerAnswersOverUDPAndTCP(t *testing.T) {
	addr := startServer(t, Config{Zone: testZone()})
	for _, network := range []string{"udp", "tcp"} {
		in := exchange(t, network, addr, query("web.prod.svc.clusterset.local.", dns.TypeA))
		if in.Rcode != dns.RcodeSuccess || len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "10.96.0.10" || !in.Authoritative {
			t.Errorf("%s: got %v", network, in)
		}
	}
}

func TestTruncatedUDPAnswerIsWholeOverTCP(t *testing.T) {
	addr := startServer(t, Config{Zone: testZone()})
	m := query("huge.prod.svc.clusterset.local.", dns.TypeA)
	m.SetEdns0(4096, false)
	udp := exchange(t, "udp", addr, m)
	if !udp.Truncated || len(udp.Answer) >= 200 {
		t.Fatalf("UDP: TC=%v with %d answers, want TC and fewer than 200", udp.Truncated, len(udp.Answer))
	}
	tcp := exchange(t, "tcp", addr, m)
	if tcp.Truncated || len(tcp.Answer) != 200 {
		t.Errorf("TCP retry: TC=%v with %d answers, want all 200", tcp.Truncated, len(tcp.Answer))
	}
}

func TestEDNS0BufferSizeOfTheClientIsUsed(t *testing.T) {
	addr := startServer(t, Config{Zone: testZone()})
	for _, tc := range []struct {
		name      string
		size      uint16 // 0: no EDNS0
		truncated bool
		maxLen    int
	}{
		{"no EDNS0: 512 bytes", 0, true, 512},
		{"EDNS0 4096: the 50 records fit", 4096, false, DefaultUDPSize},
		{"EDNS0 700", 700, true, 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := query("big.prod.svc.clusterset.local.", dns.TypeA)
			if tc.size > 0 {
				m.SetEdns0(tc.size, false)
			}
			in := exchange(t, "udp", addr, m)
			in.Compress = true
			b, err := in.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if in.Truncated != tc.truncated || len(b) > tc.maxLen {
				t.Errorf("TC=%v, %d bytes; want TC=%v, at most %d bytes", in.Truncated, len(b), tc.truncated, tc.maxLen)
			}
			if (in.IsEdns0() != nil) != (tc.size > 0) {
				t.Errorf("OPT in the answer: %v, in the query: %v", in.IsEdns0() != nil, tc.size > 0)
			}
		})
	}
}

func TestOtherNamesAreForwardedOverTheClientsTransport(t *testing.T) {
	up := startUpstream(t)
	addr := startServer(t, Config{Zone: testZone(), Upstreams: []string{up.addr}})
	for _, network := range []string{"udp", "tcp"} {
		in := exchange(t, network, addr, query("Example.COM.", dns.TypeA))
		if in.Rcode != dns.RcodeSuccess || len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "192.0.2.1" || in.Authoritative || !in.RecursionAvailable {
			t.Errorf("%s: got %v", network, in)
		}
	}
	// A forwarded answer truncated over UDP comes whole over TCP.
	if in := exchange(t, "udp", addr, query("example.com.", dns.TypeTXT)); !in.Truncated {
		t.Errorf("forwarded 40 TXT over UDP without EDNS0: not truncated")
	}
	if in := exchange(t, "tcp", addr, query("example.com.", dns.TypeTXT)); in.Truncated || len(in.Answer) != 40 {
		t.Errorf("forwarded 40 TXT over TCP: TC=%v, %d answers", in.Truncated, len(in.Answer))
	}
	// The PTR of an address the zone does not name is forwarded too.
	if in := exchange(t, "udp", addr, query("1.2.0.192.in-addr.arpa.", dns.TypePTR)); in.Rcode != dns.RcodeSuccess || in.Authoritative {
		t.Errorf("PTR of 192.0.2.1: %v", in)
	}
	if n := up.count.Load(); n != 5 {
		t.Errorf("upstream got %d questions, want 5", n)
	}
}

func TestClustersetNamesAreNeverForwarded(t *testing.T) {
	up := startUpstream(t)
	for _, ready := range []bool{false, true} {
		addr := startServer(t, Config{Zone: testZone(), Upstreams: []string{up.addr}, Ready: func() bool { return ready }})
		for _, name := range []string{
			"web.prod.svc.clusterset.local.", "nope.prod.svc.clusterset.local.", "CLUSTERSET.LOCAL.",
			"a.b.c.d.e.clusterset.local.", "dns-version.clusterset.local.", "x.web.prod.pod.clusterset.local.",
		} {
			for _, network := range []string{"udp", "tcp"} {
				in := exchange(t, network, addr, query(name, dns.TypeA))
				if in.Authoritative != ready {
					t.Errorf("ready=%v %s %s: AA=%v", ready, network, name, in.Authoritative)
				}
			}
		}
	}
	if n := up.count.Load(); n != 0 {
		t.Errorf("upstream got %d clusterset.local questions, want none: %v", n, <-up.names)
	}
}

func TestForwardTriesTheNextUpstream(t *testing.T) {
	dead := func() string {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().String()
	}
	up := startUpstream(t)
	addr := startServer(t, Config{Zone: testZone(), Upstreams: []string{dead(), up.addr}, ForwardTimeout: time.Second})
	if in := exchange(t, "udp", addr, query("example.com.", dns.TypeA)); in.Rcode != dns.RcodeSuccess || len(in.Answer) != 1 {
		t.Errorf("first upstream down: got %v", in)
	}
	addr = startServer(t, Config{Zone: testZone(), Upstreams: []string{dead()}, ForwardTimeout: time.Second})
	if in := exchange(t, "udp", addr, query("example.com.", dns.TypeA)); in.Rcode != dns.RcodeServerFailure {
		t.Errorf("every upstream down: rcode %s, want SERVFAIL", dns.RcodeToString[in.Rcode])
	}
}

// TestMalformedPacketsNeverStopTheServer sends broken packets over UDP and
// TCP, checks the answer to each (FORMERR, NOTIMP or none), then that the
// server still answers.
func TestMalformedPacketsNeverStopTheServer(t *testing.T) {
	addr := startServer(t, Config{Zone: testZone()})
	hdr := func(id, bits, qd, an, ns, ar uint16) []byte {
		b := make([]byte, 12)
		for i, v := range []uint16{id, bits, qd, an, ns, ar} {
			binary.BigEndian.PutUint16(b[2*i:], v)
		}
		return b
	}
	good, _ := query("web.prod.svc.clusterset.local.", dns.TypeA).Pack()
	pointerLoop := append(hdr(7, 0, 1, 0, 0, 0), 0xc0, 12, 0, 1, 0, 1)
	huge := append(hdr(8, 0, 1, 0, 0, 0), make([]byte, 5000)...)
	for _, tc := range []struct {
		name  string
		pkt   []byte
		rcode int // -1: no answer
	}{
		{"empty", nil, -1},
		{"short header", []byte{1, 2, 3}, -1},
		{"header only, one question promised", hdr(1, 0, 1, 0, 0, 0), dns.RcodeFormatError},
		{"no question", hdr(2, 0, 0, 0, 0, 0), dns.RcodeFormatError},
		{"a response", hdr(3, 1<<15, 1, 0, 0, 0), -1},
		{"opcode UPDATE", hdr(4, dns.OpcodeUpdate<<11, 1, 0, 0, 0), dns.RcodeNotImplemented},
		{"question cut short", good[:len(good)-3], dns.RcodeFormatError},
		{"compression pointer loop", pointerLoop, dns.RcodeFormatError},
		{"5000 bytes of zeros", huge, dns.RcodeFormatError},
		{"65535 questions promised", append(hdr(9, 0, 65535, 0, 0, 0), good[12:]...), dns.RcodeFormatError},
		{"trailing bytes are ignored", append(append([]byte{}, good...), 0xff, 0xff, 0xff), dns.RcodeSuccess},
	} {
		for _, network := range []string{"udp", "tcp"} {
			if network == "tcp" && len(tc.pkt) == 0 {
				continue
			}
			t.Run(tc.name+"/"+network, func(t *testing.T) {
				conn, err := net.Dial(network, addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				dc := &dns.Conn{Conn: conn}
				if _, err := dc.Write(tc.pkt); err != nil {
					t.Fatal(err)
				}
				wait := 5 * time.Second
				if tc.rcode < 0 {
					wait = 200 * time.Millisecond
				}
				conn.SetReadDeadline(time.Now().Add(wait))
				in, err := dc.ReadMsg()
				switch {
				case tc.rcode < 0 && err == nil:
					t.Errorf("got an answer %v, want none", in)
				case tc.rcode >= 0 && err != nil:
					t.Errorf("no answer: %v", err)
				case tc.rcode >= 0 && in.Rcode != tc.rcode:
					t.Errorf("rcode %s, want %s", dns.RcodeToString[in.Rcode], dns.RcodeToString[tc.rcode])
				}
			})
		}
	}
	for _, network := range []string{"udp", "tcp"} {
		if in := exchange(t, network, addr, query("web.prod.svc.clusterset.local.", dns.TypeA)); len(in.Answer) != 1 {
			t.Errorf("%s after the garbage: %v", network, in)
		}
	}
}

func TestUDPQueriesAreCutAt4096Bytes(t *testing.T) {
	addr := startServer(t, Config{Zone: testZone()})
	m := query("web.prod.svc.clusterset.local.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: 65001, Data: make([]byte, 4500)}}
	raw, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	for network, want := range map[string]int{"udp": dns.RcodeFormatError, "tcp": dns.RcodeSuccess} {
		conn, err := net.Dial(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		dc := &dns.Conn{Conn: conn, UDPSize: 65000}
		if _, err := dc.Write(raw); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		in, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		if in.Rcode != want {
			t.Errorf("%s query of %d bytes: %s, want %s", network, len(raw), dns.RcodeToString[in.Rcode], dns.RcodeToString[want])
		}
	}
}

func TestEDNS0DOBitIsEchoed(t *testing.T) {
	addr := startServer(t, Config{Zone: testZone()})
	for _, do := range []bool{false, true} {
		m := query("web.prod.svc.clusterset.local.", dns.TypeA)
		m.SetEdns0(1232, do)
		in := exchange(t, "udp", addr, m)
		if o := in.IsEdns0(); o == nil || o.Do() != do || o.UDPSize() != DefaultUDPSize {
			t.Errorf("query DO=%v: answer OPT %v, want DO=%v and buffer %d", do, o, do, DefaultUDPSize)
		}
	}
}

func TestForwardsInFlightAreBounded(t *testing.T) {
	// An upstream that never answers holds the one forward allowed.
	hole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	h := NewHandler(Config{Zone: testZone(), Upstreams: []string{hole.LocalAddr().String()}, MaxForwards: 1, ForwardTimeout: 3 * time.Second})
	first := make(chan *dns.Msg)
	go func() {
		w := &recorder{remote: udpClient}
		h.ServeDNS(w, query("slow.example.", dns.TypeA))
		first <- w.msg
	}()
	for len(h.forwards) == 0 {
		runtime.Gosched()
	}
	start := time.Now()
	w := &recorder{remote: udpClient}
	h.ServeDNS(w, query("other.example.", dns.TypeA))
	if w.msg.Rcode != dns.RcodeServerFailure || time.Since(start) > time.Second {
		t.Errorf("second forward while the first is in flight: %s after %v, want SERVFAIL at once", dns.RcodeToString[w.msg.Rcode], time.Since(start))
	}
	// clusterset.local names do not wait for forwards.
	w = &recorder{remote: udpClient}
	h.ServeDNS(w, query("web.prod.svc.clusterset.local.", dns.TypeA))
	if len(w.msg.Answer) != 1 {
		t.Errorf("clusterset name while forwards are full: %v", w.msg)
	}
	if m := <-first; m.Rcode != dns.RcodeServerFailure {
		t.Errorf("forward to an upstream that never answers: %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
}
