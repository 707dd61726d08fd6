//go:build linux

package lab

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestNetworkRoutersNATAndManagement checks the lab's network without any
// pod: management links reach the API server, a public location maps its
// nodes 1:1 (inbound, outbound and hairpin), a NAT location masquerades and
// takes nothing inbound, and Node.Down cuts a node off its LAN.
func TestNetworkRoutersNATAndManagement(t *testing.T) {
	l := StartT(t, Spec{Clusters: []ClusterSpec{{Locations: []LocationSpec{
		{Name: "cloud", Nodes: []NodeSpec{{Name: "pub-1"}, {Name: "pub-2"}}},
		{Name: "home", NAT: true, Nodes: []NodeSpec{{Name: "nat-1"}}},
	}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	pub1, pub2, nat1 := c.Node("pub-1"), c.Node("pub-2"), c.Node("nat-1")
	home := c.Location("home")

	t.Run("kubectl version is v1.37.2", func(t *testing.T) {
		out, err := c.Kubectl(ctx, "version")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "Server Version: v1.37.2") || !strings.Contains(string(out), "Client Version: v1.37.2") {
			t.Errorf("kubectl version:\n%s", out)
		}
	})

	t.Run("node reaches its API server over mgmt0 only", func(t *testing.T) {
		out, err := nat1.Exec(ctx, "ip", "-4", "route", "get", c.APIServerIP.String())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "dev "+NodeMgmtLink) {
			t.Errorf("route to the API server is not via %s: %s", NodeMgmtLink, out)
		}
		out, err = nat1.Exec(ctx, "ip", "-4", "route", "show", "default")
		if err != nil {
			t.Fatal(err)
		}
		if want := "default via " + home.RouterIP.String() + " dev " + NodeLANLink; !strings.Contains(string(out), want) {
			t.Errorf("default route = %q, want %q", out, want)
		}
		out, err = nat1.Exec(ctx, l.Bins()+"/kubectl", "--kubeconfig="+c.Kubeconfig, "get", "--raw", "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("/readyz from the node = %q", out)
		}
	})

	// An HTTP echo on each node, as a server reachable from elsewhere.
	for _, n := range []*Node{pub1, pub2, nat1} {
		p, err := n.Start("echo", l.LabBinary(), "workload", "http", "--port", "8080", "--name", n.Name)
		if err != nil {
			t.Fatal(err)
		}
		waitGet(ctx, t, n.Namespace(), "http://127.0.0.1:8080/", n.Name)
		t.Cleanup(func() { _ = p.Stop() })
	}

	t.Run("WAN reaches a public node by its public IP", func(t *testing.T) {
		got, err := l.WAN().Get(ctx, "http://"+pub1.PublicIP.String()+":8080/")
		if err != nil || firstField(got) != "pub-1" {
			t.Errorf("GET from the WAN = %q, %v; want pub-1's answer", got, err)
		}
	})

	t.Run("hairpin: a node reaches its neighbour by its public IP", func(t *testing.T) {
		got, err := pub2.Namespace().Get(ctx, "http://"+pub1.PublicIP.String()+":8080/")
		if err != nil || firstField(got) != "pub-1" {
			t.Errorf("GET = %q, %v; want pub-1's answer", got, err)
		}
	})

	t.Run("NAT node goes out behind its router's address", func(t *testing.T) {
		if _, err := nat1.Exec(ctx, "ping", "-c", "1", "-W", "2", WANHostIP.String()); err != nil {
			t.Fatalf("ping the WAN host from behind NAT: %v", err)
		}
		got, err := nat1.Namespace().Get(ctx, "http://"+pub1.PublicIP.String()+":8080/")
		if err != nil || firstField(got) != "pub-1" {
			t.Errorf("GET pub-1 from behind NAT = %q, %v", got, err)
		}
		out, err := home.Router.Exec(ctx, "conntrack", "-L", "-p", "tcp", "--orig-src", nat1.LANIP.String())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "dst="+home.PublicIP.String()) {
			t.Errorf("no masqueraded connection (reply to %s) in the router's conntrack:\n%s", home.PublicIP, out)
		}
	})

	t.Run("nothing reaches into a NAT location", func(t *testing.T) {
		if _, err := l.WAN().Exec(ctx, l.LabBinary(), "workload", "get", "--timeout", "1s", "http://"+home.PublicIP.String()+":8080/"); err == nil {
			t.Error("GET of the NAT router's public address answered; want no inbound mapping")
		}
	})

	t.Run("Down cuts a node off its LAN, Up restores it", func(t *testing.T) {
		if err := pub1.Down(); err != nil {
			t.Fatal(err)
		}
		if _, err := pub2.Exec(ctx, "ping", "-c", "1", "-W", "1", pub1.LANIP.String()); err == nil {
			t.Error("pub-1 answers ping while down")
		}
		if err := pub1.Up(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := pub2.Exec(ctx, "ping", "-c", "1", "-W", "1", pub1.LANIP.String())
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pub-1 still unreachable after Up: %v", err)
			}
		}
	})

	t.Run("Kill ends a node process at once", func(t *testing.T) {
		p, err := pub2.Start("sleeper", "sleep", "300")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		if !p.Exited() {
			t.Error("process still running after Kill")
		}
	})

	t.Run("addresses", func(t *testing.T) {
		if !PublicRangeA.Contains(pub1.PublicIP) || nat1.PublicIP.IsValid() {
			t.Errorf("public IPs: pub-1 %v, nat-1 %v", pub1.PublicIP, nat1.PublicIP)
		}
		if !netip.MustParsePrefix("100.64.0.0/10").Contains(pub1.MgmtIP) {
			t.Errorf("management IP %v outside 100.64.0.0/10", pub1.MgmtIP)
		}
	})
}

// waitGet polls an HTTP GET from ns until the answer starts with want.
func waitGet(ctx context.Context, t *testing.T, ns *Namespace, url, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		got, err := ns.Get(ctx, url)
		if err == nil && firstField(got) == want {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GET %s from %s: got %q, %v; want an answer starting with %q", url, ns.Name, got, err, want)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// firstField returns the first word of an echo answer (the pod's name).
func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}
