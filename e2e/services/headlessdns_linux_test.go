//go:build linux

package services

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// headlessWeb is dr's headless Service of testHeadlessThroughCoreDNS: pods
// web-pod-<i> on dr's nodes, with spec.hostname web-<i> and spec.subdomain
// web (as a StatefulSet sets them), so that dr's endpointslice controller
// gives their endpoints the hostname.
const headlessWeb = "web"

// testHeadlessThroughCoreDNS exports dr's headless Service web (whose name
// is NXDOMAIN before) and, from a pod of prod, asks prod's cluster DNS (the real CoreDNS at the kube-dns
// ClusterIP, forwarding clusterset.local to kilofed's DNS server): the
// service name gives every ready pod IP of dr, each per-pod name
// <hostname>.dr.web.default.svc.clusterset.local gives its pod, the SRV of
// the named port and of the bare service name give one record per pod to
// those names, <clusterid>.<svc> has no record; then the pod IPs returned
// answer from dr, by IP and by the per-pod name through the pod's resolver.
func testHeadlessThroughCoreDNS(ctx context.Context, t *testing.T, s *svcs) {
	svc := lab.EchoService("default", headlessWeb, headlessWeb, 8080)
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	if _, err := s.dr.Client().CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hostnames := map[string]string{} // pod name -> hostname
	for i, n := range s.dr.Nodes() {
		pod := lab.EchoPod("default", fmt.Sprintf("web-pod-%d", i), headlessWeb, n.Name)
		pod.Spec.Hostname, pod.Spec.Subdomain = fmt.Sprintf("web-%d", i), headlessWeb
		if _, err := s.dr.Client().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hostnames[pod.Name] = pod.Spec.Hostname
	}
	pods, err := s.dr.WaitPods(ctx, "default", lab.AppLabel+"="+headlessWeb, len(hostnames))
	if err != nil {
		t.Fatal(err)
	}
	byHost := map[string]string{} // hostname -> pod IP
	podOf := map[string]string{}  // pod IP -> pod name
	for _, p := range pods {
		byHost[hostnames[p.Name]] = p.Status.PodIP
		podOf[p.Status.PodIP] = p.Name
	}
	t.Cleanup(func() {
		_ = s.dr.Client().CoreV1().Services("default").Delete(context.Background(), headlessWeb, metav1.DeleteOptions{})
		for name := range hostnames {
			_ = s.dr.Client().CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})

	// The pod on the DNS node reaches CoreDNS without pod routes between
	// nodes, as in testClustersetDNS.
	from := "echo-" + s.prod.DNSNode().Name
	ns, err := s.prod.PodNamespace(ctx, "default", from)
	if err != nil {
		t.Fatal(err)
	}
	server := netip.AddrPortFrom(s.prod.ClusterDNS, 53)
	zone := ".default.svc.clusterset.local."
	name := headlessWeb + zone

	// Not exported yet: no such name.
	if m, err := ns.QueryDNS(ctx, "udp", server, name, dns.TypeA); err != nil || m.Rcode != dns.RcodeNameError {
		t.Fatalf("%s before the export: %v (%v), want NXDOMAIN", name, m, err)
	}
	ex := export(ctx, t, s.k["dr"], headlessWeb)
	t.Cleanup(func() { _ = s.k["dr"].Delete(context.Background(), ex) })
	var all []string
	for _, ip := range byHost {
		all = append(all, ip)
	}
	slices.Sort(all)

	// The service name: every ready pod IP of dr, once the import is there.
	took, err := eventually(ctx, 30*time.Second, func() error {
		got, err := queryA(ctx, ns, "udp", server, name)
		if err == nil && !slices.Equal(got, all) {
			err = fmt.Errorf("A %v, want %v", got, all)
		}
		return err
	})
	if err != nil {
		t.Fatalf("prod/%s: %s through the kube-dns ClusterIP %s after %v: %v", from, name, server, took.Round(time.Millisecond), err)
	}
	t.Logf("prod/%s: %s A %v through the kube-dns ClusterIP after %v", from, name, all, took.Round(time.Millisecond))

	// Per-pod names, over UDP and TCP.
	var targets []string
	for host, ip := range byHost {
		pname := host + ".dr." + name
		targets = append(targets, pname)
		for _, network := range []string{"udp", "tcp"} {
			got, err := queryA(ctx, ns, network, server, pname)
			if err != nil || !slices.Equal(got, []string{ip}) {
				t.Errorf("%s over %s: A %v (%v), want %s (pod %s)", pname, network, got, err, ip, podOf[ip])
			}
		}
	}
	slices.Sort(targets)
	t.Logf("per-pod names %v resolve to their pods", targets)

	// SRV of the named port and of the bare service name: one record per
	// pod, port 8080, to its per-pod name, whose address comes along.
	for _, q := range []string{"_http._tcp." + name, name} {
		m, err := ns.QueryDNS(ctx, "udp", server, q, dns.TypeSRV)
		if err != nil {
			t.Errorf("SRV %s: %v", q, err)
			continue
		}
		var got []string
		for _, rr := range m.Answer {
			if srv, ok := rr.(*dns.SRV); ok && srv.Port == 8080 {
				got = append(got, strings.ToLower(srv.Target))
			}
		}
		slices.Sort(got)
		if m.Rcode != dns.RcodeSuccess || !slices.Equal(got, targets) {
			t.Errorf("SRV %s: %s, targets on port 8080 %v, want %v\n%v", q, dns.RcodeToString[m.Rcode], got, targets, m)
			continue
		}
		extra := map[string]string{}
		for _, rr := range m.Extra {
			if a, ok := rr.(*dns.A); ok {
				extra[strings.ToLower(a.Hdr.Name)] = a.A.String()
			}
		}
		for host, ip := range byHost {
			if got := extra[host+".dr."+name]; got != ip {
				t.Errorf("SRV %s: additional A of %s %q, want %s", q, host+".dr."+name, got, ip)
			}
		}
	}

	// <clusterid>.<svc>.<ns>.svc.clusterset.local exists with no record.
	if m, err := ns.QueryDNS(ctx, "udp", server, "dr."+name, dns.TypeA); err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Errorf("dr.%s: %v (%v), want NOERROR without records", name, m, err)
	}

	// A TCP connection to each pod IP returned answers from that pod of dr,
	// and so does the per-pod name through the pod's own resolver.
	for _, ip := range all {
		got, err := probe(ctx, s.l, s.prod, from, ip, 8080, 2*time.Second)
		if err != nil || got[0] != podOf[ip] || got[1] != "dr" {
			t.Errorf("prod/%s -> %s:8080: %q, %v; want %s of dr", from, ip, got, err, podOf[ip])
		}
	}
	for host, ip := range byHost {
		url := "http://" + host + ".dr." + strings.TrimSuffix(name, ".") + ":8080/"
		out, err := s.l.PodExec(ctx, "prod", "default", from, s.l.LabBinary(), "workload", "get", "--timeout", "2s", url)
		if f := strings.Fields(string(out)); err != nil || len(f) < 2 || f[0] != podOf[ip] || f[1] != "dr" {
			t.Errorf("prod/%s GET %s: %q, %v; want %s of dr", from, url, out, err, podOf[ip])
		} else {
			t.Logf("prod/%s GET %s answered by %s of dr", from, url, f[0])
		}
	}
}

// queryA asks server for the A records of name from ns and returns their
// addresses, sorted; an answer other than NOERROR is an error, and so is a
// TTL above the zone's 5 s.
func queryA(ctx context.Context, ns *lab.Namespace, network string, server netip.AddrPort, name string) ([]string, error) {
	m, err := ns.QueryDNS(ctx, network, server, name, dns.TypeA)
	if err != nil {
		return nil, err
	}
	if m.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s %s", name, dns.RcodeToString[m.Rcode])
	}
	var ips []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			if a.Hdr.Ttl > 5 {
				return nil, fmt.Errorf("%s A %s with TTL %d, want at most 5", name, a.A, a.Hdr.Ttl)
			}
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	return ips, nil
}
