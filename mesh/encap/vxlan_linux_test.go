//go:build linux

package encap

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kilofed/kilofed/mesh/link/linktest"
	"github.com/kilofed/kilofed/mesh/route"
)

// countHandler counts log records: the VXLAN encapsulator logs one per
// kernel change.
type countHandler struct {
	slog.Handler
	n *atomic.Int64
}

func (h countHandler) Handle(ctx context.Context, r slog.Record) error {
	h.n.Add(1)
	return h.Handler.Handle(ctx, r)
}

// vxNode is a node namespace with a pod namespace behind it.
type vxNode struct {
	ns, pod, underlay string
	internal          netip.Addr
	podCIDR           netip.Prefix
	enc               Encapsulator
	router            route.Router
	changes           atomic.Int64
}

// newVXNode creates the pod namespace (address .2 of podCIDR, default route
// to the node at .1) and the node's encapsulator and router.
func newVXNode(t *testing.T, ns, underlay, internal, podCIDR string) *vxNode {
	n := &vxNode{ns: ns, pod: linktest.NetNS(t), underlay: underlay,
		internal: netip.MustParseAddr(internal), podCIDR: netip.MustParsePrefix(podCIDR)}
	base := n.podCIDR.Addr().As4()
	gw, podIP := base, base
	gw[3], podIP[3] = 1, 2
	prefixLen := fmt.Sprintf("/%d", n.podCIDR.Bits())
	linktest.Veth(t, ns, linktest.Name(t, "pn"), netip.AddrFrom4(gw).String()+prefixLen,
		n.pod, linktest.Name(t, "pp"), netip.AddrFrom4(podIP).String()+prefixLen)
	linktest.IP(t, "-n", n.pod, "route", "add", "default", "via", netip.AddrFrom4(gw).String())
	if out, err := linktest.Exec(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		t.Fatalf("enable forwarding: %v: %s", err, out)
	}
	log := slog.New(countHandler{slog.NewTextHandler(testWriter{t}, nil), &n.changes})
	linktest.Run(t, ns, func() (err error) {
		if n.enc, err = New(Options{Kind: KindVXLAN, Local: n.internal, Underlay: underlay, Logger: log}); err != nil {
			return err
		}
		n.router, err = route.NewRouter(route.RouterOptions{Logger: log})
		return err
	})
	return n
}

// set points the node's tunnel and routes at the other node.
func (n *vxNode) set(t *testing.T, other *vxNode) {
	t.Helper()
	linktest.Run(t, n.ns, func() error {
		if err := n.enc.Set(context.Background(), []netip.Addr{other.internal}); err != nil {
			return err
		}
		return n.router.Set(context.Background(), []route.Route{
			{Dst: other.podCIDR, Gw: other.internal, Dev: n.enc.Link(), OnLink: true},
		}, nil)
	})
}

func (n *vxNode) stats(t *testing.T) *netlink.LinkStatistics {
	t.Helper()
	var s *netlink.LinkStatistics
	linktest.Run(t, n.ns, func() error {
		l, err := netlink.LinkByName(VXLANLink)
		if err != nil {
			return err
		}
		s = l.Attrs().Statistics
		return nil
	})
	return s
}

// capture starts tcpdump for VXLAN packets on a link of namespace ns and
// returns a function that waits for the first count lines.
func capture(t *testing.T, ns, dev string, count int) func() []string {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "tcpdump", "-n", "-l", "-i", dev,
		"-c", fmt.Sprint(count), "udp", "port", fmt.Sprint(DefaultPort))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tcpdump: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				close(listening)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("tcpdump did not start listening")
	}
	lines := make(chan []string, 1)
	go func() {
		var out []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		lines <- out
	}()
	return func() []string {
		select {
		case out := <-lines:
			return out
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return <-lines
		}
	}
}

func TestPrivilegedVXLANCarriesPodTraffic(t *testing.T) {
	linktest.Require(t)
	linktest.RequireBinary(t, "ping")
	linktest.RequireBinary(t, "tcpdump")
	nsA, nsB := linktest.NetNS(t), linktest.NetNS(t)
	ua, ub := linktest.Name(t, "ua"), linktest.Name(t, "ub")
	linktest.Veth(t, nsA, ua, "10.99.1.1/24", nsB, ub, "10.99.1.2/24")
	a := newVXNode(t, nsA, ua, "10.99.1.1", "10.95.1.0/24")
	b := newVXNode(t, nsB, ub, "10.99.1.2", "10.95.2.0/24")
	a.set(t, b)
	b.set(t, a)

	wait := capture(t, nsA, ua, 4)
	var out string
	var err error
	for range 3 {
		if out, err = linktest.Exec(a.pod, "ping", "-c", "1", "-W", "2", "10.95.2.2"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("pod A cannot ping pod B through VXLAN: %v\n%s\nneighbours: %s\nfdb: %s", err, out,
			linktest.IP(t, "-n", nsA, "neigh"), mustOut(linktest.Exec(nsA, "bridge", "fdb", "show", "dev", VXLANLink)))
	}
	lines := wait()
	t.Logf("underlay capture:\n%s", strings.Join(lines, "\n"))
	// ARP request and reply, then the echo request and reply, each inside
	// VXLAN on UDP 4789.
	if all := strings.Join(lines, "\n"); strings.Count(all, ".4789: VXLAN") < 4 || !strings.Contains(all, "ARP, Reply 10.99.1.2") ||
		!strings.Contains(all, "10.95.1.2 > 10.95.2.2: ICMP echo request") {
		t.Errorf("tcpdump on the underlay: %q; want ARP and ICMP inside VXLAN", lines)
	}
	for _, n := range []*vxNode{a, b} {
		if s := n.stats(t); s.TxPackets == 0 || s.RxPackets == 0 {
			t.Errorf("%s: %s counters tx %d rx %d, want both > 0", n.ns, VXLANLink, s.TxPackets, s.RxPackets)
		}
	}
	// Node A resolved node B's address by ARP through the tunnel, and got
	// the address of B's VXLAN link.
	neigh := linktest.IP(t, "-n", nsA, "neigh", "show", "dev", VXLANLink)
	t.Logf("neighbours on %s: %s", VXLANLink, neigh)
	if !strings.Contains(neigh, "10.99.1.2 lladdr "+MAC(b.internal).String()) {
		t.Errorf("node A's neighbour table on %s: %q, want 10.99.1.2 at %s", VXLANLink, neigh, MAC(b.internal))
	}

	a.changes.Store(0)
	a.set(t, b)
	if n := a.changes.Load(); n != 0 {
		t.Errorf("second Set with the same remotes made %d changes", n)
	}

	fdb := func() string { return mustOut(linktest.Exec(nsA, "bridge", "fdb", "show", "dev", VXLANLink)) }
	if got := fdb(); strings.Count(got, "dst 10.99.1.2") != 2 {
		t.Errorf("fdb after Set: %q, want the flood and unicast entries for 10.99.1.2", got)
	}
	linktest.Run(t, nsA, func() error { return a.enc.Set(context.Background(), nil) })
	if got := fdb(); strings.Contains(got, "dst ") {
		t.Errorf("fdb after Set(nil): %q", got)
	}
	linktest.Run(t, nsA, func() error { return a.enc.Close(context.Background()) })
	if out, err := linktest.Exec(nsA, "ip", "link", "show", VXLANLink); err == nil {
		t.Errorf("%s still exists after Close: %s", VXLANLink, out)
	}
}

func TestPrivilegedDetect(t *testing.T) {
	linktest.Require(t)
	ns := linktest.NetNS(t)
	want := KindVXLAN
	if _, err := linktest.Exec(ns, "ip", "link", "add", linktest.Name(t, "ip"), "type", "ipip"); err == nil {
		want = KindIPIP
	}
	var got Kind
	linktest.Run(t, ns, func() (err error) {
		got, err = Detect()
		return err
	})
	if got != want {
		t.Errorf("Detect() = %q, want %q", got, want)
	}
}

func mustOut(out string, err error) string {
	if err != nil {
		return fmt.Sprintf("%v: %s", err, out)
	}
	return out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
