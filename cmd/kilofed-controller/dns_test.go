package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
)

func TestDNSUpstreamFlag(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"10.0.0.2", []string{"10.0.0.2:53"}, false},
		{"10.0.0.2:5353, dns.example", []string{"10.0.0.2:5353", "dns.example:53"}, false},
		{"fd00::2,[fd00::3]:5353,[fd00::4]", []string{"[fd00::2]:53", "[fd00::3]:5353", "[fd00::4]:53"}, false},
		{"10.0.0.2:", nil, true},
		{"fd00::zz", nil, true},
	} {
		got, err := upstreams(tc.in)
		if (err != nil) != tc.wantErr || !cmp.Equal(tc.want, got) {
			t.Errorf("upstreams(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	o, err := parseFlags([]string{"--dns-listen=:5353", "--dns-upstream=10.0.0.2"})
	if err != nil || o.dnsListen != ":5353" || o.dnsUpstreams != "10.0.0.2" {
		t.Errorf("parseFlags: %+v, %v", o, err)
	}
	if o, _ := parseFlags(nil); o.dnsListen != "" {
		t.Errorf("--dns-listen defaults to %q, want off", o.dnsListen)
	}
}

// mcsFake is mcs-api's fake clientset, telling the reflector that it has no
// watch-list semantics.
type mcsFake struct{ *mcsfake.Clientset }

func (mcsFake) IsWatchListSemanticsUnSupported() bool { return true }

// TestDNSServesImportsAndForwards starts the DNS server as the controller
// does, on fake clients, and asks it for an import and for another name.
func TestDNSServesImportsAndForwards(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	upPC, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer upPC.Close()
	go (&dns.Server{PacketConn: upPC, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(192, 0, 2, 7)}}
		w.WriteMsg(m)
	})}).ActivateAndServe()

	mcs := mcsFake{mcsfake.NewSimpleClientset(&mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.7.7"}},
	})}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, err := startDNS(ctx, "127.0.0.1:0", upPC.LocalAddr().String(), kubefake.NewClientset(), mcs, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	ask := func(name string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		in, _, err := c.Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return in
	}
	// SERVFAIL until the informers have synced.
	deadline := time.Now().Add(10 * time.Second)
	in := ask("echo.default.svc.clusterset.local.")
	for ; in.Rcode == dns.RcodeServerFailure && time.Now().Before(deadline); in = ask("echo.default.svc.clusterset.local.") {
	}
	if len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "10.96.7.7" {
		t.Errorf("echo.default.svc.clusterset.local: %v", in)
	}
	if in := ask("example.org."); len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "192.0.2.7" {
		t.Errorf("example.org: %v", in)
	}
}
