//go:build linux

package lab

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDualStackUnderlayNodesAndPods checks a DualStack cluster: every
// Node has an IPv4 and an IPv6 InternalIP and a podCIDR of each family,
// pods get an address of each and reach each other over IPv6, the WAN
// routes the LANs' global IPv6 addresses (into a public location, out of a
// NAT one), and a NAT location's router lets no IPv6 connection in.
func TestDualStackUnderlayNodesAndPods(t *testing.T) {
	l := StartT(t, Spec{PodRoutes: true, Clusters: []ClusterSpec{{Name: "ds", DualStack: true, Locations: []LocationSpec{
		{Name: "cloud", Nodes: []NodeSpec{{Name: "pub-1"}, {Name: "pub-2"}}},
		{Name: "home", NAT: true, Nodes: []NodeSpec{{Name: "nat-1"}}},
	}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := l.Cluster("ds")
	pub1, pub2, nat1 := c.Node("pub-1"), c.Node("pub-2"), c.Node("nat-1")
	if want := netip.MustParseAddr("2001:db8:0:1::10"); pub1.LANIP6 != want {
		t.Errorf("pub-1 IPv6 %s, want %s", pub1.LANIP6, want)
	}

	t.Run("nodes have both families", func(t *testing.T) {
		for _, n := range c.Nodes() {
			obj, err := c.Client().CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var internal []string
			for _, a := range obj.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					internal = append(internal, a.Address)
				}
			}
			if want := []string{n.LANIP.String(), n.LANIP6.String()}; !slices.Equal(internal, want) {
				t.Errorf("node %s InternalIPs %v, want %v", n.Name, internal, want)
			}
			cidrs := n.PodCIDRs()
			if len(cidrs) != 2 || !c.PodCIDR.Contains(cidrs[0].Addr()) || !c.PodCIDR6.Contains(cidrs[1].Addr()) || cidrs[1].Bits() != 64 {
				t.Errorf("node %s podCIDRs %v, want one of %s and a /64 of %s", n.Name, cidrs, c.PodCIDR, c.PodCIDR6)
			}
		}
	})

	for _, n := range []*Node{pub1, pub2, nat1} {
		p, err := n.Start("echo", l.LabBinary(), "workload", "http", "--port", "8080", "--name", n.Name)
		if err != nil {
			t.Fatal(err)
		}
		waitGet(ctx, t, n.Namespace(), "http://[::1]:8080/", n.Name)
		t.Cleanup(func() { _ = p.Stop() })
	}
	url6 := func(a netip.Addr) string { return "http://" + net.JoinHostPort(a.String(), "8080") + "/" }

	t.Run("the WAN routes a public location's IPv6 both ways", func(t *testing.T) {
		if got, err := l.WAN().Get(ctx, url6(pub1.LANIP6)); err != nil || firstField(got) != "pub-1" {
			t.Errorf("GET pub-1 over IPv6 from the WAN = %q, %v", got, err)
		}
		if _, err := pub1.Exec(ctx, "ping", "-6", "-c", "1", "-W", "2", WANHostIP6.String()); err != nil {
			t.Errorf("ping the WAN host over IPv6: %v", err)
		}
		out, err := pub1.Exec(ctx, "ip", "-6", "route", "show", "default")
		if want := "default via " + c.Location("cloud").RouterIP6.String() + " dev " + NodeLANLink; err != nil || !strings.Contains(string(out), want) {
			t.Errorf("IPv6 default route = %q, %v; want %q", out, err, want)
		}
	})

	t.Run("a NAT location goes out over IPv6 and takes nothing in", func(t *testing.T) {
		if got, err := nat1.Namespace().Get(ctx, url6(pub1.LANIP6)); err != nil || firstField(got) != "pub-1" {
			t.Errorf("GET pub-1 over IPv6 from behind NAT = %q, %v", got, err)
		}
		if _, err := l.WAN().Exec(ctx, l.LabBinary(), "workload", "get", "--timeout", "1s", url6(nat1.LANIP6)); err == nil {
			t.Error("the WAN reached nat-1 over IPv6; want the router to let no connection in")
		}
		if _, err := pub1.Exec(ctx, l.LabBinary(), "workload", "get", "--timeout", "1s", url6(nat1.LANIP6)); err == nil {
			t.Error("pub-1 reached nat-1 over IPv6 across the WAN; want the router to let no connection in")
		}
	})

	t.Run("pods have both families and talk over IPv6", func(t *testing.T) {
		createPods(ctx, t, c, EchoPod("default", "echo-a", "echo", "pub-1"), EchoPod("default", "echo-b", "echo", "pub-2"))
		pods, err := c.WaitPods(ctx, "default", "app=echo", 2)
		if err != nil {
			t.Fatal(err)
		}
		ip6 := map[string]netip.Addr{}
		for _, p := range pods {
			var ips []netip.Addr
			for _, a := range p.Status.PodIPs {
				ips = append(ips, netip.MustParseAddr(a.IP))
			}
			if len(ips) != 2 || !c.PodCIDR.Contains(ips[0]) || !c.PodCIDR6.Contains(ips[1]) {
				t.Fatalf("pod %s IPs %v, want one of %s then one of %s", p.Name, ips, c.PodCIDR, c.PodCIDR6)
			}
			ip6[p.Name] = ips[1]
		}
		for _, pair := range [][2]string{{"echo-a", "echo-b"}, {"echo-b", "echo-a"}} {
			got, err := l.PodGet(ctx, c.Name, "default", pair[0], url6(ip6[pair[1]]))
			if err != nil || firstField(got) != pair[1] {
				t.Errorf("GET %s over IPv6 from pod %s = %q, %v", url6(ip6[pair[1]]), pair[0], got, err)
			}
		}
	})
}
