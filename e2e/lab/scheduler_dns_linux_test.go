//go:build linux

package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab/kubelet"
)

// TestSchedulerPlacesWorkloadsAndCoreDNSAnswersPods runs one lab (one
// location, two nodes, kube-proxy, CoreDNS) through the steps of a cluster
// that schedules and resolves as any other: a Deployment and a DaemonSet get
// nodes from the real kube-scheduler; their pods resolve
// kubernetes.default and a Service through the kube-dns ClusterIP served by
// the real CoreDNS and reach the Service by name; names outside the cluster
// are not forwarded; clusterset.local goes to the server SetClusterSetDNS
// names, and nowhere before.
func TestSchedulerPlacesWorkloadsAndCoreDNSAnswersPods(t *testing.T) {
	l := StartT(t, Spec{KubeProxy: true, PodRoutes: true, CoreDNS: true, Clusters: []ClusterSpec{{
		Locations: []LocationSpec{{Name: "dc", Nodes: []NodeSpec{{}, {}}}},
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	const ns = "default"
	nodes := map[string]bool{}
	for _, n := range c.Nodes() {
		nodes[n.Name] = true
	}

	t.Run("a Deployment's pods get nodes and run", func(t *testing.T) {
		d := EchoDeployment(ns, "echo", "", 2) // no spec.nodeName: the scheduler places them
		if _, err := c.Client().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client().CoreV1().Services(ns).Create(ctx, EchoService(ns, "echo", "echo", 80), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		pods, err := c.WaitPods(wctx, ns, "app=echo", 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if !nodes[p.Spec.NodeName] {
				t.Errorf("pod %s runs on %q, not a node of the cluster", p.Name, p.Spec.NodeName)
			}
		}
	})

	t.Run("a DaemonSet runs one pod on every node", func(t *testing.T) {
		labels := map[string]string{AppLabel: "client"}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "sleep", Image: SleepImage, Command: []string{"sleep", "infinity"},
					}}},
				},
			},
		}
		if _, err := c.Client().AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		pods, err := c.WaitPods(wctx, ns, "app=client", len(nodes))
		if err != nil {
			t.Fatal(err)
		}
		on := map[string]string{}
		for _, p := range pods {
			if prev, dup := on[p.Spec.NodeName]; dup {
				t.Errorf("pods %s and %s both on node %s", prev, p.Name, p.Spec.NodeName)
			}
			on[p.Spec.NodeName] = p.Name
		}
		for n := range nodes {
			if on[n] == "" {
				t.Errorf("no DaemonSet pod on node %s (placed: %v)", n, on)
			}
		}
	})

	clients, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=client"})
	if err != nil || len(clients.Items) != len(nodes) {
		t.Fatalf("client pods: %v (%d, want %d)", err, len(clients.Items), len(nodes))
	}
	svc, err := c.Client().CoreV1().Services(ns).Get(ctx, "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeDNS := netip.AddrPortFrom(c.ClusterDNS, 53)
	apiIP, _ := firstAddr(c.ServiceCIDR)

	t.Run("pods resolve cluster names through the kube-dns ClusterIP", func(t *testing.T) {
		got, err := c.Client().CoreV1().Services(metav1.NamespaceSystem).Get(ctx, KubeDNSService, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.ClusterIP != c.ClusterDNS.String() {
			t.Errorf("kube-dns ClusterIP %s, want %s", got.Spec.ClusterIP, c.ClusterDNS)
		}
		for _, p := range clients.Items {
			netns := kubelet.PodNetns(c.Node(p.Spec.NodeName).Netns, p.Namespace, p.Name)
			conf, err := os.ReadFile(filepath.Join("/etc/netns", netns, "resolv.conf"))
			if err != nil {
				t.Fatal(err)
			}
			if want := "nameserver " + c.ClusterDNS.String() + "\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"; string(conf) != want {
				t.Errorf("resolv.conf of pod %s:\n%s\nwant:\n%s", p.Name, conf, want)
			}
			for name, want := range map[string]string{
				"kubernetes.default.svc.cluster.local": apiIP.String(),
				"echo.default.svc.cluster.local":       svc.Spec.ClusterIP,
			} {
				eventually(ctx, t, 30*time.Second, func() error {
					return checkA(netns, kubeDNS, name, want)
				}, "pod %s on %s: A %s", p.Name, p.Spec.NodeName, name)
			}
			eventually(ctx, t, 30*time.Second, func() error {
				r, err := (&Namespace{Name: netns}).QueryDNS(ctx, "tcp", kubeDNS, "kubernetes.default.svc.cluster.local", dns.TypeA)
				if err != nil {
					return err
				}
				if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != apiIP.String() {
					return fmt.Errorf("answer %v, want %s", r.Answer, apiIP)
				}
				return nil
			}, "pod %s on %s: A kubernetes.default over TCP", p.Name, p.Spec.NodeName)
		}
	})

	t.Run("pods reach a Service by its name", func(t *testing.T) {
		for _, p := range clients.Items {
			for _, url := range []string{"http://echo.default.svc.cluster.local/", "http://echo/"} {
				eventually(ctx, t, 30*time.Second, func() error {
					got, err := l.PodGet(ctx, c.Name, ns, p.Name, url)
					if err != nil {
						return err
					}
					if !strings.HasPrefix(got, "echo-") || !strings.Contains(got, " "+c.Name+" ") {
						return fmt.Errorf("answer %q is not an echo pod's", got)
					}
					return nil
				}, "pod %s on %s: GET %s", p.Name, p.Spec.NodeName, url)
			}
		}
	})

	netns := kubelet.PodNetns(c.Node(clients.Items[0].Spec.NodeName).Netns, ns, clients.Items[0].Name)
	const remoteName = "echo.default.svc.clusterset.local."
	remoteIP := netip.MustParseAddr("10.21.0.7")

	t.Run("names outside the lab are not forwarded", func(t *testing.T) {
		for _, name := range []string{"example.com.", remoteName} {
			r, err := queryIn(netns, kubeDNS, name, dns.TypeA)
			if err != nil {
				t.Fatalf("A %s: %v", name, err)
			}
			if r.Rcode != dns.RcodeServerFailure && r.Rcode != dns.RcodeRefused {
				t.Errorf("A %s: rcode %s, answers %v; want SERVFAIL or REFUSED (no upstream)", name, dns.RcodeToString[r.Rcode], r.Answer)
			}
		}
	})

	t.Run("clusterset.local is forwarded to the server SetClusterSetDNS names", func(t *testing.T) {
		srv := startFakeClusterSetDNS(t, netip.AddrPortFrom(mgmtHostIP(l.slot), 0), remoteName, remoteIP)
		began := time.Now()
		if err := c.SetClusterSetDNS(ctx, srv.addr); err != nil {
			t.Fatal(err)
		}
		t.Logf("CoreDNS reloaded with the clusterset.local stanza in %s", time.Since(began).Round(time.Millisecond))
		if cf, _ := c.Corefile(); !strings.Contains(cf, "forward . "+srv.addr.String()) {
			t.Errorf("Corefile has no clusterset.local forward to %s:\n%s", srv.addr, cf)
		}
		eventually(ctx, t, 15*time.Second, func() error {
			return checkA(netns, kubeDNS, remoteName, remoteIP.String())
		}, "A %s after SetClusterSetDNS", remoteName)
		if srv.count() == 0 {
			t.Error("the clusterset.local server saw no query")
		}
		if err := checkA(netns, kubeDNS, "kubernetes.default.svc.cluster.local.", apiIP.String()); err != nil {
			t.Errorf("cluster.local after the reload: %v", err)
		}
		if err := c.SetClusterSetDNS(ctx, netip.AddrPort{}); err != nil {
			t.Fatal(err)
		}
		r, err := queryIn(netns, kubeDNS, remoteName, dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeServerFailure {
			t.Errorf("A %s once the stanza is gone: %v %v, want SERVFAIL", remoteName, r, err)
		}
	})
}

// queryIn sends one DNS query over UDP to server from inside the network
// namespace netns.
func queryIn(netns string, server netip.AddrPort, name string, qtype uint16) (*dns.Msg, error) {
	return (&Namespace{Name: netns}).QueryDNS(context.Background(), "udp", server, name, qtype)
}

// checkA asks server for the A record of name from inside netns and checks
// that the answer holds exactly one A record, of ip.
func checkA(netns string, server netip.AddrPort, name, ip string) error {
	r, err := queryIn(netns, server, name, dns.TypeA)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
	}
	var got []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			got = append(got, a.A.String())
		}
	}
	if len(got) != 1 || got[0] != ip {
		return fmt.Errorf("A records %v, want [%s]", got, ip)
	}
	return nil
}

// eventually retries check until it passes or within has passed, then
// fails the test with the last error.
func eventually(ctx context.Context, t *testing.T, within time.Duration, check func() error, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Errorf(format+": %v", append(args, err)...)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// fakeClusterSetDNS is a tiny DNS server standing for kilofed's: it answers
// one A record and counts the queries it gets.
type fakeClusterSetDNS struct {
	addr netip.AddrPort
	mu   sync.Mutex
	n    int
}

func (f *fakeClusterSetDNS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// startFakeClusterSetDNS serves UDP on addr (port 0: a free one) until the
// test ends.
func startFakeClusterSetDNS(t *testing.T, addr netip.AddrPort, name string, ip netip.Addr) *fakeClusterSetDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeClusterSetDNS{addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		if len(req.Question) == 1 && strings.EqualFold(req.Question[0].Name, name) && req.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: ip.AsSlice()})
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return f
}
