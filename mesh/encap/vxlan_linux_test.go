//go:build linux

package encap

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kilofed/kilofed/mesh/link/linktest"
	"github.com/kilofed/kilofed/mesh/route"
	"github.com/kilofed/kilofed/mesh/topology"
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

// podIP is the address of the node's pod, .2 of its range.
func (n *vxNode) podIP() netip.Addr { return n.podCIDR.Addr().Next().Next() }

// newVXNode creates the pod namespace (address .2 of podCIDR, default route
// to the node at .1) and the node's encapsulator and router.
func newVXNode(t *testing.T, ns, underlay, internal, podCIDR string) *vxNode {
	n := &vxNode{ns: ns, pod: linktest.NetNS(t), underlay: underlay,
		internal: netip.MustParseAddr(internal), podCIDR: netip.MustParsePrefix(podCIDR)}
	gw := n.podCIDR.Addr().Next()
	bits := fmt.Sprintf("/%d", n.podCIDR.Bits())
	linktest.Veth(t, ns, linktest.Name(t, "pn"), gw.String()+bits, n.pod, linktest.Name(t, "pp"), n.podIP().String()+bits)
	linktest.IP(t, "-n", n.pod, "route", "add", "default", "via", gw.String())
	if out, err := linktest.Exec(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"); err != nil {
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
		gw, onlink, ok := KindVXLAN.NextHop(other.podCIDR, other.internal)
		if !ok {
			return fmt.Errorf("no next hop to %s via %s", other.podCIDR, other.internal)
		}
		return n.router.Set(context.Background(), []topology.Route{
			{Dst: other.podCIDR, Gw: gw, Dev: n.enc.Link(), OnLink: onlink},
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

// capture starts tcpdump for VXLAN packets on a link of namespace ns. The
// returned function waits until the output holds every wanted string, or
// 5 seconds, then stops tcpdump and returns its lines.
func capture(t *testing.T, ns, dev string) func(want []string) []string {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "tcpdump", "-n", "-l", "-i", dev,
		"udp", "port", fmt.Sprint(DefaultPort))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tcpdump: %v", err)
	}
	stop := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	t.Cleanup(func() {
		stop()
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
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return func(want []string) []string {
		var out []string
		deadline := time.After(5 * time.Second)
		for {
			all := strings.Join(out, "\n")
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(all, w) }) {
				stop()
				return out
			}
			select {
			case l, ok := <-lines:
				if !ok {
					return out
				}
				out = append(out, l)
			case <-deadline:
				stop()
				return out
			}
		}
	}
}

func TestPrivilegedVXLANCarriesPodTraffic(t *testing.T) {
	tests := []struct {
		name                 string
		underlayA, underlayB string
		podsA, podsB         string
		// packets expected on the underlay, in VXLAN, for one ping.
		packets   int
		wantInner []string
		// wantNeigh is how node A knows node B's VXLAN address.
		wantNeigh string
	}{
		{
			name: "IPv4", underlayA: "10.99.1.1/24", underlayB: "10.99.1.2/24",
			podsA: "10.95.1.0/24", podsB: "10.95.2.0/24",
			// ARP goes through the tunnel and node B answers for its
			// underlay address.
			packets:   4,
			wantInner: []string{"ARP, Request who-has 10.99.1.2", "ARP, Reply 10.99.1.2 is-at " + MAC(ip("10.99.1.2")).String(), "10.95.1.2 > 10.95.2.2: ICMP echo request", "10.95.2.2 > 10.95.1.2: ICMP echo reply"},
			wantNeigh: "10.99.1.2 lladdr " + MAC(ip("10.99.1.2")).String() + " REACHABLE",
		},
		{
			// No neighbour discovery crosses the tunnel: the next hop is
			// Gateway6 with a permanent entry.
			name: "IPv6", underlayA: "fd99:1::1/64", underlayB: "fd99:1::2/64",
			podsA: "fd95:1::/64", podsB: "fd95:2::/64",
			packets:   2,
			wantInner: []string{"fd95:1::2 > fd95:2::2: ICMP6, echo request", "fd95:2::2 > fd95:1::2: ICMP6, echo reply"},
			wantNeigh: Gateway6(ip("fd99:1::2")).String() + " lladdr " + MAC(ip("fd99:1::2")).String() + " PERMANENT",
		},
		{
			name: "IPv6 pods over IPv4", underlayA: "10.99.1.1/24", underlayB: "10.99.1.2/24",
			podsA: "fd95:1::/64", podsB: "fd95:2::/64",
			packets:   2,
			wantInner: []string{"fd95:1::2 > fd95:2::2: ICMP6, echo request", "fd95:2::2 > fd95:1::2: ICMP6, echo reply"},
			wantNeigh: Gateway6(ip("10.99.1.2")).String() + " lladdr " + MAC(ip("10.99.1.2")).String() + " PERMANENT",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testVXLAN(t, tt.underlayA, tt.underlayB, tt.podsA, tt.podsB, tt.packets, tt.wantInner, tt.wantNeigh)
		})
	}
}

func testVXLAN(t *testing.T, underlayA, underlayB, podsA, podsB string, packets int, wantInner []string, wantNeigh string) {
	linktest.Require(t)
	linktest.RequireBinary(t, "ping")
	linktest.RequireBinary(t, "tcpdump")
	nsA, nsB := linktest.NetNS(t), linktest.NetNS(t)
	ua, ub := linktest.Name(t, "ua"), linktest.Name(t, "ub")
	linktest.Veth(t, nsA, ua, underlayA, nsB, ub, underlayB)
	a := newVXNode(t, nsA, ua, netip.MustParsePrefix(underlayA).Addr().String(), podsA)
	b := newVXNode(t, nsB, ub, netip.MustParsePrefix(underlayB).Addr().String(), podsB)
	a.set(t, b)
	b.set(t, a)

	wait := capture(t, nsA, ua)
	var out string
	var err error
	for range 3 {
		if out, err = linktest.Exec(a.pod, "ping", "-c", "1", "-W", "2", b.podIP().String()); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("pod A cannot ping pod B through VXLAN: %v\n%s\nneighbours: %s\nfdb: %s", err, out,
			linktest.IP(t, "-n", nsA, "neigh"), mustOut(linktest.Exec(nsA, "bridge", "fdb", "show", "dev", VXLANLink)))
	}
	lines := wait(wantInner)
	t.Logf("underlay capture:\n%s", strings.Join(lines, "\n"))
	all := strings.Join(lines, "\n")
	if got := strings.Count(all, fmt.Sprintf(".%d: VXLAN", DefaultPort)); got < packets {
		t.Errorf("%d VXLAN packets on the underlay, want at least %d", got, packets)
	}
	for _, w := range wantInner {
		if !strings.Contains(all, w) {
			t.Errorf("no %q inside VXLAN on the underlay", w)
		}
	}
	if strings.Contains(all, "neighbor solicitation") {
		t.Errorf("neighbour discovery crossed the tunnel; Gateway6 should be resolved by a permanent entry")
	}
	for _, n := range []*vxNode{a, b} {
		if s := n.stats(t); s.TxPackets == 0 || s.RxPackets == 0 {
			t.Errorf("%s: %s counters tx %d rx %d, want both > 0", n.ns, VXLANLink, s.TxPackets, s.RxPackets)
		}
	}
	neigh := linktest.IP(t, "-n", nsA, "neigh", "show", "dev", VXLANLink)
	t.Logf("neighbours on %s: %s", VXLANLink, neigh)
	if !strings.Contains(neigh, wantNeigh) {
		t.Errorf("node A's neighbours on %s: %q, want %q", VXLANLink, neigh, wantNeigh)
	}

	a.changes.Store(0)
	a.set(t, b)
	if n := a.changes.Load(); n != 0 {
		t.Errorf("second Set with the same remotes made %d changes", n)
	}

	fdb := func() string { return mustOut(linktest.Exec(nsA, "bridge", "fdb", "show", "dev", VXLANLink)) }
	if got := fdb(); strings.Count(got, "dst "+b.internal.String()) != 2 {
		t.Errorf("fdb after Set: %q, want the flood and unicast entries for %s", got, b.internal)
	}
	linktest.Run(t, nsA, func() error { return a.enc.Set(context.Background(), nil) })
	if got := fdb(); strings.Contains(got, "dst ") {
		t.Errorf("fdb after Set(nil): %q", got)
	}
	if got := linktest.IP(t, "-n", nsA, "neigh", "show", "dev", VXLANLink, "nud", "permanent"); got != "" {
		t.Errorf("permanent neighbours after Set(nil): %q", got)
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
