//go:build linux

package mesh

import (
	"context"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// TestMeshDualStackPodsReachEveryLocationOverIPv6 runs the meta-cloud as a
// dual-stack cluster (IPv6 on every LAN, every node and every pod) and
// checks that pods of every location reach each other over IPv6 as over
// IPv4, through the mesh: without kg no pod reaches another location, and
// no pod address of either family crosses the WAN in the clear.
func TestMeshDualStackPodsReachEveryLocationOverIPv6(t *testing.T) {
	spec := metaCloud()
	spec.Clusters[0].DualStack = true
	ctx, l, c, ips := startMetaCloud(t, spec, 8*time.Minute)
	ips6 := podIPs6(ctx, t, c)
	if got, err := probe(ctx, l, c, "echo-scw-1", ips6["echo-aws-1"], 2*time.Second); err == nil {
		t.Fatalf("echo-scw-1 reached echo-aws-1 over IPv6 (%q) before any agent ran: the lab leaks", got)
	}
	startMesh(t, c, meshOptions{granularity: "location", encapsulate: "never"})
	checkAllPairs(ctx, t, l, c, ips6, 60*time.Second)
	checkAllPairs(ctx, t, l, c, ips, 30*time.Second)
	if t.Failed() {
		return
	}
	for _, n := range c.Nodes() {
		out, err := n.Exec(ctx, "ip", "-6", "route", "show", "proto", "75")
		t.Logf("%s: IPv6 routes of kg:\n%s%v", n.Name, out, errOrEmpty(err))
	}
	checkWANCarriesNoPodAddress(ctx, t, l, c, ips6)
}

// podIPs6 returns the IPv6 address of every echo pod, by pod name.
func podIPs6(ctx context.Context, t testing.TB, c *lab.Cluster) map[string]string {
	t.Helper()
	pods, err := c.Client().CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		for _, a := range p.Status.PodIPs {
			if ip, err := netip.ParseAddr(a.IP); err == nil && ip.Is6() && c.PodCIDR6.Contains(ip) {
				out[p.Name] = a.IP
			}
		}
		if out[p.Name] == "" {
			t.Fatalf("pod %s has no IPv6 address of %s: %v", p.Name, c.PodCIDR6, p.Status.PodIPs)
		}
	}
	return out
}

// checkWANCarriesNoPodAddress captures on the WAN while pods of different
// locations talk over IPv6, and checks that WireGuard carried it: no packet
// with a pod address of either family.
func checkWANCarriesNoPodAddress(ctx context.Context, t *testing.T, l *lab.Lab, c *lab.Cluster, ips6 map[string]string) {
	t.Helper()
	pcap := filepath.Join(t.TempDir(), "wan.pcap")
	capture, err := l.WAN().Start("tcpdump", "tcpdump", "-Z", "root", "--immediate-mode", "-i", "any", "-n", "-U", "-w", pcap, "ip or ip6")
	if err != nil {
		t.Fatalf("start tcpdump in the WAN: %v", err)
	}
	time.Sleep(time.Second) // tcpdump opens its socket
	for _, pair := range [][2]string{{"echo-scw-2", "echo-aws-2"}, {"echo-dc-2", "echo-scw-1"}, {"echo-aws-1", "echo-dc-1"}} {
		if _, err := probe(ctx, l, c, pair[0], ips6[pair[1]], 5*time.Second); err != nil {
			t.Errorf("%s -> %s over IPv6 during capture: %v", pair[0], pair[1], err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if err := capture.Stop(); err != nil {
		t.Logf("stop tcpdump: %v", err)
	}
	count := func(filter string) (int, string) {
		out, err := exec.CommandContext(ctx, "tcpdump", "-r", pcap, "-n", filter).Output()
		if err != nil {
			t.Fatalf("read capture with filter %q: %v", filter, err)
		}
		s := strings.TrimSpace(string(out))
		if s == "" {
			return 0, ""
		}
		return len(strings.Split(s, "\n")), s
	}
	wire, _ := count("udp port 51820")
	pods, what := count("net " + c.PodCIDR.String() + " or net " + c.PodCIDR6.String())
	t.Logf("WAN capture: %d WireGuard packets, %d with pod addresses", wire, pods)
	if wire == 0 {
		t.Errorf("no WireGuard packet crossed the WAN while pods of different locations talked over IPv6")
	}
	if pods != 0 {
		t.Errorf("pod addresses crossed the WAN in the clear:\n%s", what)
	}
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
