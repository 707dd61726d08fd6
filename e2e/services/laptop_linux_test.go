//go:build linux

package services

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/mesh/kgctl"
	"github.com/kilofed/kilofed/servicesync"
)

// laptopPeerIP is the seed's address of the laptop, in prod's WireGuard
// subnet (10.5.0.0/16 in this lab; dr has 10.6.0.0/16).
const laptopPeerIP = "10.5.100.10/32"

// testLaptopResolvesAndReachesThroughTheTunnel runs the French seed's
// developer VPN flow to its end against prod, while dr's echo is exported:
// a laptop at home (behind NAT, with kubectl access) makes its key pair
// with wg genkey, applies the seed's Peer with kubectl, takes its WireGuard
// configuration from the real kgctl showconf peer (which must route prod's
// service CIDR, where the kube-dns ClusterIP is) and joins with kgctl
// connect (the embedded stand-in for wg-quick up, as e2e/mesh does); its
// resolver then points at the kube-dns ClusterIP for cluster.local (the
// seed's resolvectl dns/domain), and over the tunnel the cluster DNS
// answers both my-service.default.svc.cluster.local and dr's
// echo.default.svc.clusterset.local, and HTTP GETs of both names (curl)
// answer: from prod's pods and from dr's.
func testLaptopResolvesAndReachesThroughTheTunnel(ctx context.Context, t *testing.T, s *svcs) {
	c := s.prod
	my, err := c.Client().CoreV1().Services("default").Create(ctx, lab.EchoService("default", "my-service", "echo", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client().CoreV1().Services("default").Delete(context.Background(), my.Name, metav1.DeleteOptions{})
	})
	var derived corev1.Service
	if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: servicesync.DerivedName("echo")}, &derived); err != nil {
		t.Fatalf("prod has no derived Service of dr's echo (the export step must run first): %v", err)
	}

	laptop, err := s.l.AddHost(ctx, "seb-laptop", lab.HostOptions{NAT: true, Mgmt: true})
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	sh := func(script string) string {
		t.Helper()
		full := "set -e; cd " + home + "; export PATH=" + binDir + ":" + s.l.Bins() + ":$PATH KUBECONFIG=" + c.Kubeconfig + "; " + script
		out, err := laptop.Exec(ctx, "sh", "-c", full)
		if err != nil {
			t.Fatalf("on the laptop: %s\n%v\n%s", script, err, out)
		}
		return string(out)
	}
	// 1. The key pair. 2. The seed's Peer. 3. kgctl showconf peer.
	sh("wg genkey | tee dev-private.key | wg pubkey > dev-public.key")
	sh(`cat <<EOF | kubectl apply -f -
apiVersion: kilo.squat.ai/v1alpha1
kind: Peer
metadata:
  name: seb-laptop
spec:
  allowedIPs:
    - ` + laptopPeerIP + `
  publicKey: $(cat dev-public.key)
  persistentKeepalive: 25
EOF`)
	t.Cleanup(func() { _, _ = c.Kubectl(context.Background(), "delete", "peer", "seb-laptop", "--wait=false") })
	var conf string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		conf = sh("kgctl showconf peer seb-laptop --private-key-file dev-private.key > wg-cluster.conf; cat wg-cluster.conf")
		if strings.Contains(conf, "Endpoint =") || time.Now().After(deadline) {
			break
		}
	}
	allowed := allowedIPsOf(conf)
	if !slices.ContainsFunc(allowed, func(p netip.Prefix) bool { return p.Bits() <= c.ServiceCIDR.Bits() && p.Contains(c.ServiceCIDR.Addr()) }) {
		t.Errorf("kgctl showconf peer seb-laptop: AllowedIPs %v do not route prod's service CIDR %s, where the cluster DNS IP %s is:\n%s", allowed, c.ServiceCIDR, c.ClusterDNS, conf)
	}
	if !strings.Contains(conf, "Address = "+laptopPeerIP) || !strings.Contains(conf, "Endpoint =") {
		t.Errorf("kgctl showconf peer seb-laptop lacks the Address or the Endpoint:\n%s", conf)
	}
	sh("wg-quick strip ./wg-cluster.conf > /dev/null") // wg-quick accepts the file
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("kgctl showconf peer seb-laptop (AllowedIPs %v)", allowed)
	// Without the tunnel, the laptop does not reach the cluster DNS.
	server := netip.AddrPortFrom(c.ClusterDNS, 53)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	if m, err := laptop.Namespace().QueryDNS(short, "udp", server, "my-service.default.svc.cluster.local", dns.TypeA); err == nil {
		t.Fatalf("laptop: the cluster DNS %s answers before the tunnel is up: %v", server, m)
	}
	cancel()
	// 4. Up: kgctl connect applies that configuration (embedded WireGuard).
	conn, err := laptop.Start("connect", "sh", "-c", "cd "+home+" && mkdir -p /run/wireguard && mount -t tmpfs kfl-wg /run/wireguard && KUBECONFIG="+c.Kubeconfig+
		" exec "+filepath.Join(binDir, "kgctl")+" connect seb-laptop --private-key-file dev-private.key")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kgctl connect:\n%s", conn.Tail(40))
			t.Logf("CoreDNS of prod:\n%s", c.CoreDNSProcess().Tail(40))
		}
		_ = conn.Stop()
	})
	// 5. resolvectl dns wg-cluster <kube-dns IP>; resolvectl domain
	// wg-cluster cluster.local: the laptop's resolver (ip netns exec binds
	// /etc/netns/<netns>/resolv.conf over /etc/resolv.conf; the lab sweeps
	// /etc/netns/kfl-*).
	etc := filepath.Join("/etc/netns", laptop.Netns)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(etc) })
	if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver "+c.ClusterDNS.String()+"\nsearch cluster.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// DNS over the tunnel to the cluster DNS IP.
	for name, want := range map[string]string{
		"my-service.default.svc.cluster.local": my.Spec.ClusterIP,
		"echo.default.svc.clusterset.local":    derived.Spec.ClusterIP,
	} {
		var got []string
		var tries []string // failed tries: when and why
		took, err := eventually(ctx, time.Minute, func() error {
			// Short tries: the first ones may leave before the tunnel's
			// first handshake.
			try, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			var err error
			got, err = queryA(try, laptop.Namespace(), "udp", server, name)
			if err == nil && !slices.Equal(got, []string{want}) {
				err = fmt.Errorf("A %v, want %s", got, want)
			}
			if err != nil {
				tries = append(tries, time.Now().Format("15:04:05.000")+" "+err.Error())
			}
			return err
		})
		if len(tries) > 2 {
			t.Logf("laptop: %s: %d failed tries before the answer:\n%s", name, len(tries), strings.Join(tries, "\n"))
		}
		if err != nil {
			t.Fatalf("laptop: %s through %s over the tunnel after %v: %v", name, server, took.Round(time.Millisecond), err)
		}
		t.Logf("laptop: %s A %v through the cluster DNS %s over the tunnel after %v", name, got, server, took.Round(time.Millisecond))
		if m, err := laptop.Namespace().QueryDNS(ctx, "tcp", server, name, dns.TypeA); err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			t.Errorf("laptop: %s over TCP: %v (%v)", name, m, err)
		}
	}

	// Both the cluster DNS IP and the clusterset IP go through the tunnel.
	for _, ip := range []string{c.ClusterDNS.String(), derived.Spec.ClusterIP} {
		out, err := laptop.Exec(ctx, "ip", "route", "get", ip)
		if err != nil || !strings.Contains(string(out), " dev "+kgctl.DefaultConnectInterface+" ") {
			t.Errorf("laptop: ip route get %s: %q (%v), want dev %s (kgctl connect's interface)", ip, out, err, kgctl.DefaultConnectInterface)
		}
	}

	// curl, through the laptop's resolver.
	for _, g := range []struct{ url, pod, cluster string }{
		{"http://my-service.default.svc.cluster.local", "echo-prod-", "prod"},
		{"http://echo.default.svc.clusterset.local:8080", "echo-dr-", "dr"},
	} {
		var answer string
		took, err := eventually(ctx, 30*time.Second, func() error {
			out, err := laptopGet(ctx, s.l, laptop, g.url)
			answer = strings.TrimSpace(out)
			if err != nil {
				return fmt.Errorf("%w: %s", err, answer)
			}
			if f := strings.Fields(answer); len(f) < 2 || !strings.HasPrefix(f[0], g.pod) || f[1] != g.cluster {
				return fmt.Errorf("answered %q, want a pod of %s", answer, g.cluster)
			}
			return nil
		})
		if err != nil {
			t.Errorf("laptop: GET %s after %v: %v", g.url, took.Round(time.Millisecond), err)
			continue
		}
		t.Logf("laptop: GET %s answered by %q after %v", g.url, answer, took.Round(time.Millisecond))
	}
}

// allowedIPsOf returns the AllowedIPs of every [Peer] of a WireGuard
// configuration.
func allowedIPsOf(conf string) []netip.Prefix {
	var ps []netip.Prefix
	for _, line := range strings.Split(conf, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "AllowedIPs" {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if p, err := netip.ParsePrefix(strings.TrimSpace(f)); err == nil {
				ps = append(ps, p.Masked())
			}
		}
	}
	return ps
}

// laptopGet makes an HTTP GET of url on the laptop with curl (the lab's
// workload client when curl is missing), resolving through the laptop's
// resolv.conf, and returns the body.
func laptopGet(ctx context.Context, l *lab.Lab, h *lab.Host, url string) (string, error) {
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := h.Exec(ctx, curl, "-sS", "--fail", "--max-time", "3", url)
		return string(out), err
	}
	out, err := h.Exec(ctx, l.LabBinary(), "workload", "get", "--timeout", "3s", url)
	return string(out), err
}
