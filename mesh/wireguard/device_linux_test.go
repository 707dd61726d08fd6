//go:build linux

package wireguard_test

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kilofed/kilofed/mesh/link"
	"github.com/kilofed/kilofed/mesh/link/linktest"
	"github.com/kilofed/kilofed/mesh/wireguard"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// requireTUN stops the test unless /dev/net/tun exists.
func requireTUN(t *testing.T) {
	t.Helper()
	linktest.Require(t)
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("privileged test cannot run: %v", err)
		}
		t.Skipf("privileged test: %v", err)
	}
}

// node is one end of the test tunnel: a namespace with an embedded device.
type node struct {
	ns, name string
	key      wgconf.SecretKey
	dev      wireguard.Device
}

func newNode(t *testing.T, ns, tunnelAddr string, mode wireguard.Mode) *node {
	t.Helper()
	n := &node{ns: ns, name: linktest.Name(t, "wg")}
	var err error
	if n.key, err = wgconf.GeneratePrivateKey(); err != nil {
		t.Fatal(err)
	}
	n.dev, err = wireguard.Open(context.Background(), wireguard.OpenOptions{
		Name: n.name, Mode: mode, NetNS: linktest.Path(ns), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("Open %s in %s: %v", n.name, ns, err)
	}
	t.Cleanup(func() {
		if err := n.dev.Close(); err != nil {
			t.Errorf("Close %s: %v", n.name, err)
		}
	})
	linktest.Run(t, ns, func() error {
		if err := link.SetAddresses(n.name, []netip.Prefix{netip.MustParsePrefix(tunnelAddr)}); err != nil {
			return err
		}
		return link.SetUp(n.name)
	})
	return n
}

func (n *node) set(t *testing.T, cfg wgconf.Config) {
	t.Helper()
	cfg.PrivateKey = n.key
	if err := n.dev.Set(context.Background(), cfg); err != nil {
		t.Fatalf("Set %s: %v", n.name, err)
	}
}

func (n *node) peer(t *testing.T, key wgconf.Key) wireguard.PeerState {
	t.Helper()
	s, err := n.dev.Show(context.Background())
	if err != nil {
		t.Fatalf("Show %s: %v", n.name, err)
	}
	p, ok := s.Peer(key)
	if !ok {
		t.Fatalf("Show %s: peer %s missing from %+v", n.name, key, s.Peers)
	}
	return p
}

func ping(t *testing.T, ns, addr string) {
	t.Helper()
	var out string
	var err error
	for range 5 {
		if out, err = linktest.Exec(ns, "ping", "-c", "1", "-W", "2", addr); err == nil {
			return
		}
	}
	t.Fatalf("ping %s from %s: %v\n%s", addr, ns, err, out)
}

func TestPrivilegedUserspaceTunnelCarriesPing(t *testing.T) {
	requireTUN(t)
	linktest.RequireBinary(t, "ping")
	nsA, nsB := linktest.NetNS(t), linktest.NetNS(t)
	linktest.Veth(t, nsA, linktest.Name(t, "va"), "10.99.0.1/24", nsB, linktest.Name(t, "vb"), "10.99.0.2/24")
	a := newNode(t, nsA, "10.98.0.1/24", wireguard.ModeUserspace)
	b := newNode(t, nsB, "10.98.0.2/24", wireguard.ModeUserspace)
	p := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	// c is a peer that never answers: it only shows that peers are
	// updated independently.
	c, _ := wgconf.GeneratePrivateKey()
	cfgA := wgconf.Config{ListenPort: 51820, Peers: []wgconf.Peer{
		{PublicKey: b.key.PublicKey(), Endpoint: netip.MustParseAddrPort("10.99.0.2:51820"), AllowedIPs: p("10.98.0.2/32")},
		{PublicKey: c.PublicKey(), AllowedIPs: p("10.97.3.0/24")},
	}}
	a.set(t, cfgA)
	b.set(t, wgconf.Config{ListenPort: 51820, Peers: []wgconf.Peer{
		{PublicKey: a.key.PublicKey(), Endpoint: netip.MustParseAddrPort("10.99.0.1:51820"), AllowedIPs: p("10.98.0.1/32")},
	}})

	ping(t, nsA, "10.98.0.2")
	ping(t, nsB, "10.98.0.1")
	s, err := a.dev.Show(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != "userspace" || s.ListenPort != 51820 || s.PublicKey != a.key.PublicKey() || len(s.Peers) != 2 {
		t.Errorf("Show = type %q port %d key %s, %d peers; want userspace, 51820, %s, 2 peers",
			s.Type, s.ListenPort, s.PublicKey, len(s.Peers), a.key.PublicKey())
	}
	before := a.peer(t, b.key.PublicKey())
	if before.LastHandshake.IsZero() || before.ReceiveBytes == 0 || before.TransmitBytes == 0 {
		t.Fatalf("after ping, peer B = %+v; want a handshake and bytes both ways", before)
	}
	if before.Endpoint != netip.MustParseAddrPort("10.99.0.2:51820") {
		t.Errorf("peer B endpoint = %s", before.Endpoint)
	}
	// wg(8) reads the same control socket.
	if _, err := exec.LookPath("wg"); err == nil {
		out, err := exec.Command("wg", "show", a.name, "latest-handshakes").CombinedOutput()
		if err != nil || !strings.Contains(string(out), b.key.PublicKey().String()) {
			t.Errorf("wg show %s: %v\n%s", a.name, err, out)
		}
	}

	untouched := func(step string) {
		t.Helper()
		now := a.peer(t, b.key.PublicKey())
		if !now.LastHandshake.Equal(before.LastHandshake) || now.ReceiveBytes < before.ReceiveBytes || now.TransmitBytes < before.TransmitBytes {
			t.Errorf("%s: peer B session disturbed: before %+v, now %+v", step, before, now)
		}
	}
	a.set(t, cfgA)
	untouched("same config again")

	cfgA.Peers[1].AllowedIPs = p("10.97.3.0/24", "10.97.4.0/24")
	a.set(t, cfgA)
	untouched("peer C allowed IPs changed")
	if got := a.peer(t, c.PublicKey()).AllowedIPs; len(got) != 2 {
		t.Errorf("peer C allowed IPs = %v, want 2 ranges", got)
	}

	cfgA.Peers[0].AllowedIPs = p("10.98.0.2/32", "10.97.2.0/24")
	a.set(t, cfgA)
	untouched("peer B allowed IPs changed")
	if got := a.peer(t, c.PublicKey()).AllowedIPs; len(got) != 2 {
		t.Errorf("peer C disturbed by peer B's change: allowed IPs %v", got)
	}
	ping(t, nsA, "10.98.0.2")

	cfgA.Peers = cfgA.Peers[:1]
	a.set(t, cfgA)
	if s, _ := a.dev.Show(context.Background()); len(s.Peers) != 1 {
		t.Errorf("after removing peer C, %d peers", len(s.Peers))
	}
	untouched("peer C removed")

	if err := a.dev.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/var/run/wireguard/" + a.name + ".sock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("control socket after Close: %v, want not exist", err)
	}
	if out, err := linktest.Exec(nsA, "ip", "link", "show", a.name); err == nil {
		t.Errorf("link %s still exists after Close: %s", a.name, out)
	}
	if err := a.dev.Set(context.Background(), cfgA); !errors.Is(err, wireguard.ErrClosed) {
		t.Errorf("Set after Close = %v, want ErrClosed", err)
	}
}

// TestPrivilegedAutoMode checks that auto picks the kernel exactly when the
// kernel can create wireguard links.
func TestPrivilegedAutoMode(t *testing.T) {
	requireTUN(t)
	ns := linktest.NetNS(t)
	probe := linktest.Name(t, "wp")
	want := "userspace"
	if _, err := linktest.Exec(ns, "ip", "link", "add", probe, "type", "wireguard"); err == nil {
		want = "Linux kernel"
	}
	d, err := wireguard.Open(context.Background(), wireguard.OpenOptions{
		Name: linktest.Name(t, "wg"), NetNS: linktest.Path(ns), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.Show(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != want {
		t.Errorf("auto mode picked %q, want %q", s.Type, want)
	}
	if _, err := wireguard.Open(context.Background(), wireguard.OpenOptions{
		Name: s.Name, Mode: wireguard.ModeUserspace, NetNS: linktest.Path(ns),
	}); !errors.Is(err, wireguard.ErrLinkBusy) {
		t.Errorf("second Open of %s = %v, want ErrLinkBusy", s.Name, err)
	}
	if want == "userspace" {
		if _, err := wireguard.Open(context.Background(), wireguard.OpenOptions{
			Name: linktest.Name(t, "wg"), Mode: wireguard.ModeKernel, NetNS: linktest.Path(ns),
		}); !errors.Is(err, wireguard.ErrKernelUnsupported) {
			t.Errorf("kernel mode without module = %v, want ErrKernelUnsupported", err)
		}
	}
}
