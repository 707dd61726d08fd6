package server

import (
	"encoding/binary"
	"testing"

	"github.com/miekg/dns"
)

// servePacket takes raw the way the miekg server does (header, accept
// function, parse) and returns what the handler would send, or nil.
func servePacket(t *testing.T, h *Handler, raw []byte, tcp bool) (*dns.Msg, *dns.Msg) {
	if len(raw) < 12 {
		return nil, nil
	}
	dh := dns.Header{Id: binary.BigEndian.Uint16(raw), Bits: binary.BigEndian.Uint16(raw[2:]),
		Qdcount: binary.BigEndian.Uint16(raw[4:]), Ancount: binary.BigEndian.Uint16(raw[6:]),
		Nscount: binary.BigEndian.Uint16(raw[8:]), Arcount: binary.BigEndian.Uint16(raw[10:])}
	if h.Accept(dh) != dns.MsgAccept {
		return nil, nil
	}
	req := new(dns.Msg)
	if err := req.Unpack(raw); err != nil {
		return nil, nil
	}
	w := &recorder{remote: udpClient}
	if tcp {
		w.remote = tcpClient
	}
	h.ServeDNS(w, req)
	return req, w.msg
}

// checkAnswer fails unless resp is a well-formed answer to req that fits
// the client's buffer.
func checkAnswer(t *testing.T, req, resp *dns.Msg, tcp bool) {
	t.Helper()
	if resp == nil {
		t.Fatalf("no answer to %v", req)
	}
	if resp.Id != req.Id || !resp.Response {
		t.Fatalf("answer ID %d QR %v to query %d", resp.Id, resp.Response, req.Id)
	}
	b, err := resp.Pack()
	if err != nil {
		t.Fatalf("answer does not pack: %v\n%v", err, resp)
	}
	limit := dns.MaxMsgSize
	if !tcp {
		limit = dns.MinMsgSize
		if o := req.IsEdns0(); o != nil {
			limit = max(dns.MinMsgSize, min(int(o.UDPSize()), DefaultUDPSize))
		}
	}
	if len(b) > limit {
		t.Fatalf("answer of %d bytes over UDP, client's limit %d", len(b), limit)
	}
	if err := new(dns.Msg).Unpack(b); err != nil {
		t.Fatalf("answer does not parse back: %v", err)
	}
	if zoneName := len(req.Question) == 1 && dns.IsSubDomain("clusterset.local.", dns.CanonicalName(req.Question[0].Name)); zoneName && resp.Rcode == dns.RcodeSuccess && len(resp.Answer) > 0 && !resp.Authoritative {
		t.Fatalf("clusterset.local answer not authoritative: %v", resp)
	}
}

func fuzzHandler(f *testing.F) *Handler {
	up := startUpstream(f)
	return NewHandler(Config{Zone: testZone(), Upstreams: []string{up.addr}})
}

// FuzzPacket feeds raw packets to the packet path: the accept function, the
// parser and the handler. Nothing may panic, and every answer must pack,
// parse back and fit the client's buffer.
func FuzzPacket(f *testing.F) {
	for _, m := range seedQueries() {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, false)
	f.Add(make([]byte, 12), false)
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, raw []byte, tcp bool) {
		if req, resp := servePacket(t, h, raw, tcp); req != nil {
			checkAnswer(t, req, resp, tcp)
		}
	})
}

// FuzzQuery builds queries from their fields (name, type, class, opcode,
// EDNS0 buffer and DO bit, transport) and runs them through the query path.
func FuzzQuery(f *testing.F) {
	for _, m := range seedQueries() {
		q := m.Question[0]
		size, do := uint16(0), false
		if o := m.IsEdns0(); o != nil {
			size, do = o.UDPSize(), o.Do()
		}
		f.Add(q.Name, q.Qtype, q.Qclass, uint8(m.Opcode), size, do, false)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, name string, qtype, qclass uint16, opcode uint8, size uint16, do, tcp bool) {
		m := new(dns.Msg)
		m.Id = 77
		m.RecursionDesired = true
		m.Opcode = int(opcode & 0xF)
		m.Question = []dns.Question{{Name: name, Qtype: qtype, Qclass: qclass}}
		if size > 0 {
			m.SetEdns0(size, do)
		}
		raw, err := m.Pack()
		if err != nil {
			return // not a packet anyone can send
		}
		if req, resp := servePacket(t, h, raw, tcp); req != nil {
			checkAnswer(t, req, resp, tcp)
		}
	})
}

func seedQueries() []*dns.Msg {
	var out []*dns.Msg
	for _, q := range []struct {
		name  string
		qtype uint16
		edns  uint16
	}{
		{"web.prod.svc.clusterset.local.", dns.TypeA, 0},
		{"web.prod.svc.clusterset.local.", dns.TypeAAAA, 1232},
		{"_http._tcp.web.prod.svc.clusterset.local.", dns.TypeSRV, 0},
		{"big.prod.svc.clusterset.local.", dns.TypeSRV, 4096},
		{"huge.prod.svc.clusterset.local.", dns.TypeANY, 0},
		{"1-1-0-1.a.big.prod.svc.clusterset.local.", dns.TypeA, 0},
		{"dns-version.clusterset.local.", dns.TypeTXT, 0},
		{"clusterset.local.", dns.TypeSOA, 512},
		{"nope.prod.svc.clusterset.local.", dns.TypeA, 0},
		{"example.com.", dns.TypeA, 0},
		{"example.com.", dns.TypeTXT, 1232},
		{"web.prod.svc.clusterset.local.", 65280, 0},
		{"1.0.1.10.in-addr.arpa.", dns.TypePTR, 0},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, 1232},
	} {
		m := query(q.name, q.qtype)
		if q.edns > 0 {
			m.SetEdns0(q.edns, true)
		}
		out = append(out, m)
	}
	return out
}
