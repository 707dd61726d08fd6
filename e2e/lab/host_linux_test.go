//go:build linux

package lab

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPrivilegedInternetHosts adds hosts to a running lab: a public one
// (a gateway of another datacenter) and a laptop behind its home NAT with
// kubectl access. It checks what each reaches and what reaches them, then
// that Close removes them.
func TestPrivilegedInternetHosts(t *testing.T) {
	l := StartT(t, Spec{Clusters: []ClusterSpec{{Locations: []LocationSpec{
		{Name: "cloud", Nodes: []NodeSpec{{Name: "pub-1"}}},
	}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	pub1 := c.Node("pub-1")
	gw, err := l.AddHost(ctx, "gw", HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := l.AddHost(ctx, "seb-laptop", HostOptions{NAT: true, Mgmt: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AddHost(ctx, "gw", HostOptions{}); !errors.Is(err, ErrInvalidHost) {
		t.Errorf("second host named gw: %v, want ErrInvalidHost", err)
	}
	t.Logf("hosts:\n%s", l.Describe())
	if !PublicRangeB.Contains(gw.PublicIP) || gw.PublicIP == laptop.PublicIP || !laptop.PrivateIP.IsValid() {
		t.Errorf("addresses: gw %v, laptop %v behind NAT as %v", gw.PublicIP, laptop.PublicIP, laptop.PrivateIP)
	}

	for _, s := range []struct {
		name string
		ns   *Namespace
	}{{"pub-1", pub1.Namespace()}, {"gw", gw.Namespace()}, {"seb-laptop", laptop.Namespace()}} {
		p, err := s.ns.Start("echo", l.LabBinary(), "workload", "http", "--port", "8080", "--name", s.name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop() })
		waitGet(ctx, t, s.ns, "http://127.0.0.1:8080/", s.name)
	}

	for _, h := range []*Host{gw, laptop} {
		t.Run(h.Name+" pings the Internet host and a public node", func(t *testing.T) {
			for _, ip := range []string{WANHostIP.String(), pub1.PublicIP.String()} {
				if out, err := h.Exec(ctx, "ping", "-c", "1", "-W", "2", ip); err != nil {
					t.Errorf("ping %s: %v\n%s", ip, err, out)
				}
			}
			got, err := h.Namespace().Get(ctx, "http://"+pub1.PublicIP.String()+":8080/")
			if err != nil || firstField(got) != "pub-1" {
				t.Errorf("GET pub-1's public address = %q, %v", got, err)
			}
		})
	}

	t.Run("the WAN and a node reach the public host", func(t *testing.T) {
		for _, ns := range []*Namespace{l.WAN(), pub1.Namespace()} {
			got, err := ns.Get(ctx, "http://"+gw.PublicIP.String()+":8080/")
			if err != nil || firstField(got) != "gw" {
				t.Errorf("GET gw from %s = %q, %v", ns.Name, got, err)
			}
		}
	})

	t.Run("the laptop goes out behind its home router's address", func(t *testing.T) {
		got, err := laptop.Namespace().Get(ctx, "http://"+gw.PublicIP.String()+":8080/")
		if err != nil || firstField(got) != "gw" {
			t.Fatalf("GET gw from the laptop = %q, %v", got, err)
		}
		out, err := laptop.Router.Exec(ctx, "conntrack", "-L", "-p", "tcp", "--orig-src", laptop.PrivateIP.String())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "dst="+laptop.PublicIP.String()) {
			t.Errorf("no masqueraded connection (reply to %s) in the home router's conntrack:\n%s", laptop.PublicIP, out)
		}
	})

	t.Run("nothing reaches into the laptop", func(t *testing.T) {
		for _, url := range []string{"http://" + laptop.PublicIP.String() + ":8080/", "http://" + laptop.PrivateIP.String() + ":8080/"} {
			for _, ns := range []*Namespace{l.WAN(), gw.Namespace()} {
				if out, err := ns.Exec(ctx, l.LabBinary(), "workload", "get", "--timeout", "1s", url); err == nil {
					t.Errorf("GET %s from %s answered %q; want nothing through the home NAT", url, ns.Name, out)
				}
			}
		}
	})

	kubectl := func(h *Host, args ...string) ([]byte, error) {
		return h.Exec(ctx, append([]string{l.Bins() + "/kubectl", "--kubeconfig", c.Kubeconfig, "--request-timeout=3s"}, args...)...)
	}
	t.Run("the laptop with a management link runs kubectl", func(t *testing.T) {
		out, err := kubectl(laptop, "version")
		if err != nil || !strings.Contains(string(out), "Server Version: v") {
			t.Errorf("kubectl version from the laptop: %v\n%s", err, out)
		}
	})
	t.Run("a host without one reaches no API server", func(t *testing.T) {
		if out, err := kubectl(gw, "get", "--raw", "/readyz"); err == nil {
			t.Errorf("kubectl from gw answered %q; want no route to %s", out, c.APIServer)
		}
	})

	t.Run("Close removes the hosts", func(t *testing.T) {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AddHost(ctx, "late", HostOptions{}); !errors.Is(err, ErrClosed) {
			t.Errorf("AddHost after Close: %v, want ErrClosed", err)
		}
		for _, name := range []string{gw.Netns, laptop.Netns, laptop.Router.Name} {
			if _, err := os.Stat(netnsDir + "/" + name); !os.IsNotExist(err) {
				t.Errorf("namespace %s left behind", name)
			}
		}
		out, err := execIn(ctx, "", "ip", "-o", "link", "show")
		if err != nil {
			t.Fatal(err)
		}
		if link := hostMgmtLink(l.Spec.Name, 2); strings.Contains(string(out), link+"@") || strings.Contains(string(out), link+":") {
			t.Errorf("management link %s left behind", link)
		}
	})
}
