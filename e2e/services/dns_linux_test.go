//go:build linux

package services

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testClustersetDNS: a pod of prod resolves dr's exported Service by its
// clusterset.local name through prod's cluster DNS (the real CoreDNS at
// the kube-dns ClusterIP, which forwards the zone to kilofed-controller's
// DNS server) and gets an HTTP answer from dr's pod; a name that is not
// exported is NXDOMAIN, and a cluster.local name is still CoreDNS's own.
func testClustersetDNS(ctx context.Context, t *testing.T, s *svcs) {
	// CoreDNS runs in the namespace of the DNS node; the pod there reaches
	// it without pod routes between nodes.
	pod := "echo-" + s.prod.DNSNode().Name
	url := "http://echo.default.svc.clusterset.local:8080/"
	var answer string
	took, err := eventually(ctx, 30*time.Second, func() error {
		out, err := s.l.PodExec(ctx, "prod", "default", pod, s.l.LabBinary(), "workload", "get", "--timeout", "2s", url)
		answer = strings.TrimSpace(string(out))
		if err != nil {
			return fmt.Errorf("%w: %s", err, answer)
		}
		if f := strings.Fields(answer); len(f) < 2 || !strings.HasPrefix(f[0], "echo-dr-") || f[1] != "dr" {
			return fmt.Errorf("answered %q, want a pod of dr", answer)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("prod/%s GET %s: %v", pod, url, err)
	}
	t.Logf("prod/%s GET %s answered by %q after %v", pod, url, answer, took.Round(time.Millisecond))

	ns, err := s.prod.PodNamespace(ctx, "default", pod)
	if err != nil {
		t.Fatal(err)
	}
	server := netip.AddrPortFrom(s.prod.ClusterDNS, 53)
	for name, want := range map[string]int{
		"nothere.default.svc.clusterset.local.": dns.RcodeNameError,
		"echo.default.svc.clusterset.local.":    dns.RcodeSuccess,
		"kubernetes.default.svc.cluster.local.": dns.RcodeSuccess,
		"dns-version.clusterset.local.":         dns.RcodeSuccess,
	} {
		qtype := dns.TypeA
		if strings.HasPrefix(name, "dns-version") {
			qtype = dns.TypeTXT
		}
		m, err := ns.QueryDNS(ctx, "udp", server, name, qtype)
		if err != nil {
			t.Errorf("%s through %s: %v", name, server, err)
			continue
		}
		if m.Rcode != want || (want == dns.RcodeSuccess && len(m.Answer) == 0) {
			t.Errorf("%s through %s: %s with %d answers, want %s with answers", name, server, dns.RcodeToString[m.Rcode], len(m.Answer), dns.RcodeToString[want])
		}
	}
}
