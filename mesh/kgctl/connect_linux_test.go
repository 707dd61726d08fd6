//go:build linux

package kgctl

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilofed/kilofed/mesh/link"
	"github.com/kilofed/kilofed/mesh/link/linktest"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// lines is an io.Writer that a test can wait on.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits until the output holds want, after the first skip bytes.
func (l *lines) waitFor(t *testing.T, want string, skip int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if s := l.String(); len(s) >= skip {
			if i := strings.Index(s[skip:], want); i >= 0 {
				return skip + i + len(want)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %q in connect's output after %v:\n%s", want, timeout, l.String())
	return 0
}

// meshNode is a node namespace running an embedded WireGuard device that
// the test configures by hand from topology.WireGuardConfig.
type meshNode struct {
	name, ns, link string
	key            wgconf.SecretKey
	dev            wireguard.Device
}

func newMeshNode(t *testing.T, name, ns string) *meshNode {
	t.Helper()
	n := &meshNode{name: name, ns: ns, link: linktest.Name(t, "wg"), key: privateKey(name)}
	dev, err := wireguard.Open(t.Context(), wireguard.OpenOptions{Name: n.link, Mode: wireguard.ModeUserspace, NetNS: linktest.Path(ns)})
	if err != nil {
		t.Fatalf("open %s's WireGuard device: %v", name, err)
	}
	n.dev = dev
	t.Cleanup(func() { _ = dev.Close() })
	return n
}

// configure applies the node's share of topo: WireGuard peers, address,
// and a route back to the Peer's address.
func (n *meshNode) configure(t *testing.T, topo *topology.Topology) {
	t.Helper()
	cfg, err := topo.WireGuardConfig(n.name, n.key)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.dev.Set(t.Context(), cfg); err != nil {
		t.Fatalf("configure %s: %v", n.name, err)
	}
	linktest.Run(t, n.ns, func() error {
		if err := link.SetAddresses(n.link, topo.Addresses(n.name)); err != nil {
			return err
		}
		return link.SetUp(n.link)
	})
	if len(cfg.Peers) > 0 {
		linktest.IP(t, "-n", n.ns, "route", "replace", "10.5.100.10/32", "dev", n.link)
	}
}

func pingFrom(t *testing.T, ns, addr string) {
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

// TestPrivilegedConnect joins a "laptop" namespace to a one-location mesh
// as the seed's Peer seb-laptop with Connect, pings a pod address behind
// the location's leader, fails the leader over to the other node and pings
// a pod behind the new leader, then stops Connect and checks that its
// interface and routes are gone.
func TestPrivilegedConnect(t *testing.T) {
	linktest.Require(t)
	linktest.RequireBinary(t, "ping")
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("privileged test cannot run: %v", err)
		}
		t.Skipf("privileged test: %v", err)
	}
	nsA, nsB, nsL := linktest.NetNS(t), linktest.NetNS(t), linktest.NetNS(t)
	linktest.Veth(t, nsL, linktest.Name(t, "la"), "203.0.113.99/24", nsA, linktest.Name(t, "al"), "203.0.113.10/24")
	linktest.Veth(t, nsL, linktest.Name(t, "lb"), "198.51.100.99/24", nsB, linktest.Name(t, "bl"), "198.51.100.30/24")
	linktest.IP(t, "-n", nsA, "addr", "add", "10.42.0.5/32", "dev", "lo") // a pod on node-beijing
	linktest.IP(t, "-n", nsB, "addr", "add", "10.42.1.5/32", "dev", "lo") // a pod on node-beijing-2

	snap := Snapshot{
		Nodes: []topology.Node{
			seedNode("node-beijing", "cn-beijing", "10.0.1.10/24", "203.0.113.10", "10.42.0.0/24", "10.5.0.1/16"),
			seedNode("node-beijing-2", "cn-beijing", "10.0.1.11/24", "198.51.100.30", "10.42.1.0/24", "10.5.0.1/16"),
		},
		Peers:         seedPeers()[2:], // seb-laptop
		Granularities: map[string]topology.Granularity{"node-beijing": "location", "node-beijing-2": "location"},
	}
	topo := func(s Snapshot) *topology.Topology {
		m, err := Compute(s, MeshFlags{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Topology
	}
	a, b := newMeshNode(t, "node-beijing", nsA), newMeshNode(t, "node-beijing-2", nsB)
	a.configure(t, topo(snap))
	b.configure(t, topo(snap))

	src := NewFakeSource(snap)
	var out lines
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	iface := linktest.Name(t, "kc")
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- Connect(ctx, ConnectConfig{
			Peer: "seb-laptop", PrivateKey: privateKey("seb-laptop"), Source: src,
			Interface: iface, Mode: wireguard.ModeUserspace, NetNS: linktest.Path(nsL), Out: &out,
			HandshakeWarning: 5 * time.Second,
		})
	}()
	// stop ends Connect once and returns its error.
	stop := sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Error("Connect did not return after its context ended")
			return nil
		}
	})
	t.Cleanup(func() { _ = stop() })

	pos := out.waitFor(t, "peer seb-laptop: interface "+iface+" up (userspace WireGuard), address 10.5.100.10/32, 1 WireGuard peers, 5 routes", 0, 10*time.Second)
	pos = out.waitFor(t, "handshake with location cn-beijing (leader node-beijing), endpoint 203.0.113.10:51820 after", pos, 10*time.Second)
	t.Logf("first handshake %v after Connect started", time.Since(start))
	pingFrom(t, nsL, "10.42.0.5")
	pingFrom(t, nsL, "10.5.0.1")
	routes := linktest.IP(t, "-n", nsL, "route", "show", "proto", "76")
	for _, r := range []string{"10.0.1.10 dev " + iface, "10.0.1.11 dev " + iface, "10.5.0.1 dev " + iface,
		"10.42.0.0/24 dev " + iface, "10.42.1.0/24 dev " + iface} {
		if !strings.Contains(routes, r) {
			t.Errorf("no route %q in the laptop's routes:\n%s", r, routes)
		}
	}

	// Failover: node-beijing stops; node-beijing-2 leads and the laptop follows.
	snap.Nodes[0].Ready = false
	b.configure(t, topo(snap))
	failover := time.Now()
	src.Set(snap)
	pos = out.waitFor(t, "topology changed: new peer: location cn-beijing (leader node-beijing-2), endpoint 198.51.100.30:51820", pos, 10*time.Second)
	out.waitFor(t, "handshake with location cn-beijing (leader node-beijing-2), endpoint 198.51.100.30:51820 after", pos, 10*time.Second)
	t.Logf("handshake with the new leader %v after the topology changed", time.Since(failover))
	pingFrom(t, nsL, "10.42.1.5")
	if !strings.Contains(out.String(), "topology changed: peer gone: location cn-beijing (leader node-beijing)") {
		t.Errorf("the old leader's removal was not reported:\n%s", out.String())
	}

	if err := stop(); err != nil {
		t.Fatalf("Connect: %v\n%s", err, out.String())
	}
	out.waitFor(t, "interface "+iface+" and its 5 routes removed", 0, time.Second)
	if o, err := linktest.Exec(nsL, "ip", "link", "show", iface); err == nil {
		t.Errorf("interface %s still exists after Connect returned:\n%s", iface, o)
	}
	if r := linktest.IP(t, "-n", nsL, "route", "show", "proto", "76"); strings.TrimSpace(r) != "" {
		t.Errorf("routes left behind:\n%s", r)
	}
	t.Logf("connect's output:\n%s", out.String())
}

// TestPrivilegedConnectUnknownPeer checks that Connect fails before it
// creates anything when the Peer does not exist or has another key.
func TestPrivilegedConnectUnknownPeer(t *testing.T) {
	linktest.Require(t)
	ns := linktest.NetNS(t)
	for _, tt := range []struct{ name, peer, want string }{
		{name: "unknown", peer: "nobody", want: "peer nobody: unknown peer"},
		{name: "other key", peer: "admin-workstation", want: "private key does not match the Peer's public key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			iface := linktest.Name(t, "kc")
			err := Connect(t.Context(), ConnectConfig{Peer: tt.peer, PrivateKey: privateKey("seb-laptop"),
				Source: NewFakeSource(seedSnapshot()), Interface: iface, Mode: wireguard.ModeUserspace, NetNS: linktest.Path(ns)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if o, err := linktest.Exec(ns, "ip", "link", "show", iface); err == nil {
				t.Errorf("interface %s created anyway:\n%s", iface, o)
			}
		})
	}
}
