//go:build linux

package agent

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilofed/kilofed/mesh/topology"
)

// blackHole returns a loopback port whose SYNs are never answered: a
// listener with a backlog of 0 whose one queued connection is never
// accepted, so that Linux drops every later SYN (the accept queue is full)
// and the dialer retransmits it, as toward a peer that is gone.
func blackHole(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	// Fill the accept queue (a backlog of 0 holds one connection).
	for range 2 {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	return port
}

// synSent counts the IPv4 sockets of this network namespace still
// sending SYNs to port (state SYN_SENT in /proc/net/tcp).
func synSent(t *testing.T, port int) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		fields := strings.Fields(s.Text())
		if len(fields) > 3 && strings.HasSuffix(fields[2], want) && fields[3] == "02" {
			n++
		}
	}
	return n
}

// TestProbesLeaveNoDialBehindThemAtAPeerThatIsGone probes, as a standby
// and as a leader would, a port that drops every SYN. net/http's Transport
// lets a dial go on after its request gave up (for a later request), and
// the kernel then retransmits the SYN for about 2 minutes: through a
// tunnel to a location that is gone each retransmission waits in
// wireguard-go's queue for that peer, holding a 64 KiB buffer, and
// restarts its handshake attempts, so the queue never empties; over a cut
// LAN the probes of every 200 ms pile up sockets. Each dial must end with
// its probe.
func TestProbesLeaveNoDialBehindThemAtAPeerThatIsGone(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	probes := map[string]func(ctx context.Context, port int) error{
		"LAN probe": func(ctx context.Context, port int) error {
			return HTTPProbe(port)(ctx, topology.Node{Name: "l", InternalIP: netip.PrefixFrom(lo, 8)})
		},
		"tunnel probe": func(ctx context.Context, port int) error {
			return HTTPTunnelProbe(port, nil)(ctx, netip.MustParseAddr("127.0.0.2"), lo)
		},
	}
	for name, probe := range probes {
		t.Run(name, func(t *testing.T) {
			port := blackHole(t)
			ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
			defer cancel()
			if err := probe(ctx, port); err == nil {
				t.Fatal("a probe of a port that drops every SYN succeeded")
			}
			// The socket is closed as the probe returns; give the
			// runtime a moment to get there.
			deadline := time.Now().Add(time.Second)
			for synSent(t, port) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := synSent(t, port); n > 0 {
				t.Errorf("%d sockets still sending SYNs a second after the probe gave up, want none", n)
			}
		})
	}
}
