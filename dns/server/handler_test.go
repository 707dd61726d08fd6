package server

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// reply is the part of an answer the handler tests compare.
type reply struct {
	Rcode         string
	Authoritative bool
	Truncated     bool
	Answers       int
	EDNS          bool
	Question      bool
}

func summary(m *dns.Msg) reply {
	if m == nil {
		return reply{Rcode: "no answer"}
	}
	return reply{Rcode: rcodeName(m.Rcode), Authoritative: m.Authoritative, Truncated: m.Truncated,
		Answers: len(m.Answer), EDNS: m.IsEdns0() != nil, Question: len(m.Question) == 1}
}

func TestHandlerAnswers(t *testing.T) {
	const web, big, huge = "web.prod.svc.clusterset.local.", "big.prod.svc.clusterset.local.", "huge.prod.svc.clusterset.local."
	edns := func(m *dns.Msg, size uint16) *dns.Msg { m.SetEdns0(size, false); return m }
	for _, tc := range []struct {
		name      string
		q         *dns.Msg
		client    net.Addr
		upstreams bool
		notReady  bool
		want      reply
	}{
		{"clusterset name, authoritative", query(web, dns.TypeA), udpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Answers: 1, Question: true}},
		{"not exported", query("nope.prod.svc.clusterset.local.", dns.TypeA), udpClient, false, false,
			reply{Rcode: "NXDOMAIN", Authoritative: true, Question: true}},
		{"NODATA", query(web, dns.TypeMX), udpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Question: true}},
		{"unknown type in the zone", query(web, 4321), udpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Question: true}},
		{"over 512 bytes without EDNS0: truncated", query(big, dns.TypeA), udpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Truncated: true, Answers: 29, Question: true}},
		{"the client's EDNS0 buffer is used", edns(query(big, dns.TypeA), 4096), udpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Answers: 50, EDNS: true, Question: true}},
		{"a small EDNS0 buffer truncates", edns(query(big, dns.TypeA), 600), udpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Truncated: true, Answers: 33, EDNS: true, Question: true}},
		{"an EDNS0 buffer under 512 counts as 512", edns(query(big, dns.TypeA), 100), udpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Truncated: true, Answers: 28, EDNS: true, Question: true}},
		{"no UDP answer over the server's own size", edns(query(huge, dns.TypeA), 65000), udpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Truncated: true, Answers: 73, EDNS: true, Question: true}},
		{"TCP: everything", query(huge, dns.TypeA), tcpClient, false, false,
			reply{Rcode: "NOERROR", Authoritative: true, Answers: 200, Question: true}},
		{"EDNS0 version 1: BADVERS", func() *dns.Msg { m := edns(query(web, dns.TypeA), 1232); m.IsEdns0().SetVersion(1); return m }(), udpClient, false, false,
			reply{Rcode: "BADVERS", EDNS: true}},
		{"two OPT records: FORMERR", func() *dns.Msg {
			m := edns(query(web, dns.TypeA), 1232)
			m.Extra = append(m.Extra, m.Extra[0])
			return m
		}(), udpClient, false, false, reply{Rcode: "FORMERR", EDNS: true}},
		{"no question: FORMERR", func() *dns.Msg { m := query(web, dns.TypeA); m.Question = nil; return m }(), udpClient, false, false,
			reply{Rcode: "FORMERR"}},
		{"two questions: FORMERR", func() *dns.Msg { m := query(web, dns.TypeA); m.Question = append(m.Question, m.Question[0]); return m }(), udpClient, false, false,
			reply{Rcode: "FORMERR"}},
		{"a record in the answer section: FORMERR", func() *dns.Msg {
			m := query(web, dns.TypeA)
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: web, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(1, 2, 3, 4)}}
			return m
		}(), udpClient, false, false, reply{Rcode: "FORMERR"}},
		{"NOTIFY: NOTIMP", func() *dns.Msg { m := query(web, dns.TypeSOA); m.Opcode = dns.OpcodeNotify; return m }(), udpClient, false, false,
			reply{Rcode: "NOTIMP", Question: true}},
		{"UPDATE: NOTIMP", func() *dns.Msg { m := query(web, dns.TypeSOA); m.Opcode = dns.OpcodeUpdate; return m }(), udpClient, false, false,
			reply{Rcode: "NOTIMP", Question: true}},
		{"OPT as the question type: FORMERR", query(web, dns.TypeOPT), udpClient, false, false,
			reply{Rcode: "FORMERR", Question: true}},
		{"zone transfer: REFUSED", query("clusterset.local.", dns.TypeAXFR), tcpClient, false, false,
			reply{Rcode: "REFUSED", Question: true}},
		{"MAILB: NOTIMP", query(web, dns.TypeMAILB), udpClient, false, false,
			reply{Rcode: "NOTIMP", Question: true}},
		{"CHAOS class in the zone: REFUSED", func() *dns.Msg { m := query(web, dns.TypeTXT); m.Question[0].Qclass = dns.ClassCHAOS; return m }(), udpClient, false, false,
			reply{Rcode: "REFUSED", Question: true}},
		{"before the first sync: SERVFAIL, not a cacheable NXDOMAIN", query(web, dns.TypeA), udpClient, false, true,
			reply{Rcode: "SERVFAIL", Question: true}},
		{"PTR of a headless endpoint: answered", query("1.0.1.10.in-addr.arpa.", dns.TypePTR), udpClient, true, false,
			reply{Rcode: "NOERROR", Authoritative: true, Answers: 1, Question: true}},
		{"PTR of another address is not the zone's: REFUSED without upstreams", query("1.2.0.192.in-addr.arpa.", dns.TypePTR), udpClient, false, false,
			reply{Rcode: "REFUSED", Question: true}},
		{"another name without upstreams: REFUSED", query("example.com.", dns.TypeA), udpClient, false, false,
			reply{Rcode: "REFUSED", Question: true}},
		{"another name, forwarded", query("example.com.", dns.TypeA), udpClient, true, false,
			reply{Rcode: "NOERROR", Answers: 1, Question: true}},
		{"forwarded answer over 512 bytes: truncated for UDP", query("example.com.", dns.TypeTXT), udpClient, true, false,
			reply{Rcode: "NOERROR", Truncated: true, Answers: 8, Question: true}},
		{"forwarded over TCP: whole", query("example.com.", dns.TypeTXT), tcpClient, true, false,
			reply{Rcode: "NOERROR", Answers: 40, Question: true}},
		{"forwarded with EDNS0", edns(query("example.com.", dns.TypeTXT), 4096), udpClient, true, false,
			reply{Rcode: "NOERROR", Answers: 21, Truncated: true, EDNS: true, Question: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Zone: testZone()}
			if tc.upstreams {
				cfg.Upstreams = []string{startUpstream(t).addr}
			}
			if tc.notReady {
				cfg.Ready = func() bool { return false }
			}
			w := &recorder{remote: tc.client}
			tc.q.Id = 4242
			NewHandler(cfg).ServeDNS(w, tc.q)
			if d := cmp.Diff(tc.want, summary(w.msg)); d != "" {
				t.Errorf("answer (-want +got):\n%s\n%v", d, w.msg)
			}
			if w.msg == nil {
				return
			}
			if w.msg.Id != 4242 {
				t.Errorf("answer ID %d, want the query's 4242", w.msg.Id)
			}
			b, err := w.msg.Pack()
			if err != nil {
				t.Fatalf("pack the answer: %v", err)
			}
			limit := dns.MaxMsgSize
			if _, udp := tc.client.(*net.UDPAddr); udp {
				limit = dns.MinMsgSize
				if o := tc.q.IsEdns0(); o != nil {
					limit = max(dns.MinMsgSize, min(int(o.UDPSize()), DefaultUDPSize))
				}
			}
			if len(b) > limit {
				t.Errorf("answer of %d bytes, over the client's %d", len(b), limit)
			}
		})
	}
}

func TestMetricsCountQueriesByTypeAndRcode(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, testZone().Services)
	h := NewHandler(Config{Zone: testZone(), Metrics: m, Upstreams: []string{startUpstream(t).addr}})
	for _, q := range []*dns.Msg{
		query("web.prod.svc.clusterset.local.", dns.TypeA),
		query("web.prod.svc.clusterset.local.", dns.TypeA),
		query("nope.prod.svc.clusterset.local.", dns.TypeAAAA),
		query("example.com.", dns.TypeA),
		query("web.prod.svc.clusterset.local.", 4321),
	} {
		h.ServeDNS(&recorder{remote: udpClient}, q)
	}
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"A", "NOERROR", "clusterset"}, 2},
		{[]string{"AAAA", "NXDOMAIN", "clusterset"}, 1},
		{[]string{"A", "NOERROR", "upstream"}, 1},
		{[]string{"other", "NOERROR", "clusterset"}, 1},
	} {
		if got := testutil.ToFloat64(m.queries.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("kilofed_dns_queries_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.forward); n != 1 {
		t.Errorf("forward latency series = %d, want 1", n)
	}
	if got := testutil.ToFloat64(m.services); got != 3 {
		t.Errorf("kilofed_dns_services = %v, want 3", got)
	}
}
