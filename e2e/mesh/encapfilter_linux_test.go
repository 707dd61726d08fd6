//go:build linux

package mesh

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/mesh/encap"
)

// Inner UDP ports of the injected packets, counted in the target pod.
const (
	injectedPort = 9999 // sent by hosts outside the location
	controlPort  = 9998 // sent by the other node of the location
)

// TestMeshTakesEncapsulatedPacketsOnlyFromTheLocation sends hand-made
// VXLAN packets, aimed at a pod, to a node of a public location: from a
// host on the WAN and from a node of another location they must not reach
// the pod (they would enter the pod network unencrypted, around
// WireGuard); from the other node of the location they do. The mesh keeps
// working throughout.
func TestMeshTakesEncapsulatedPacketsOnlyFromTheLocation(t *testing.T) {
	ctx, l, c, ips := startMetaCloud(t, metaCloud(), 8*time.Minute)
	startMesh(t, c, meshOptions{granularity: "location", encapsulate: "always", extra: []string{"--tunnel=vxlan"}})
	checkAllPairs(ctx, t, l, c, ips, 60*time.Second)
	if t.Failed() {
		return
	}

	target, peer, outsider := c.Node("scw-1"), c.Node("scw-2"), c.Node("aws-1")
	pod, podIP := "echo-scw-1", netip.MustParseAddr(ips["echo-scw-1"])
	for _, port := range []int{injectedPort, controlPort} {
		if out, err := l.PodExec(ctx, c.Name, "default", pod, "iptables", "-w", "-I", "INPUT", "1",
			"-p", "udp", "--dport", strconv.Itoa(port)); err != nil {
			t.Fatalf("counting rule in %s: %v\n%s", pod, err, out)
		}
	}
	mac := vxlanMAC(ctx, t, target)
	frame := func(port uint16) []byte {
		// The inner source is the other node's pod: an address that the
		// target routes back through the tunnel, as a forger would pick.
		return vxlanFrame(encap.DefaultVNI, mac, netip.MustParseAddr(ips["echo-scw-2"]), podIP, port, []byte("kilofed-injected"))
	}

	attacker, err := l.AddHost(ctx, "attacker", lab.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	public := netip.AddrPortFrom(target.PublicIP, encap.DefaultPort)
	for _, from := range []struct{ name, netns string }{
		{"WAN host " + attacker.Name, attacker.Netns},
		{"node " + outsider.Name + " of " + outsider.Location, outsider.Netns},
	} {
		if err := sendUDPFrom(from.netns, public, frame(injectedPort), 5); err != nil {
			t.Fatalf("send from %s: %v", from.name, err)
		}
	}
	// The other node's packets, sent after the forged ones, show that the
	// frames are well made and that the forged ones had their chance.
	lan := netip.AddrPortFrom(target.LANIP, encap.DefaultPort)
	deadline := time.Now().Add(15 * time.Second)
	for podUDPCount(ctx, t, l, c, pod, controlPort) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no VXLAN packet from %s (same location) reached %s: the test's frames are wrong or the location's own tunnel is filtered", peer.Name, pod)
		}
		if err := sendUDPFrom(peer.Netns, lan, frame(controlPort), 1); err != nil {
			t.Fatalf("send from %s: %v", peer.Name, err)
		}
		time.Sleep(200 * time.Millisecond) // polls the counter
	}
	if n := podUDPCount(ctx, t, l, c, pod, injectedPort); n != 0 {
		t.Errorf("%d VXLAN packets from outside location %s reached pod %s through %s's public address", n, target.Location, pod, target.Name)
	}

	checkAllPairs(ctx, t, l, c, ips, 30*time.Second)
}

// vxlanMAC returns the link address of node n's VXLAN link.
func vxlanMAC(ctx context.Context, t *testing.T, n *lab.Node) net.HardwareAddr {
	t.Helper()
	out, err := n.Exec(ctx, "ip", "-j", "link", "show", encap.VXLANLink)
	if err != nil {
		t.Fatalf("ip link show %s on %s: %v\n%s", encap.VXLANLink, n.Name, err, out)
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show %s on %s: %v\n%s", encap.VXLANLink, n.Name, err, out)
	}
	mac, err := net.ParseMAC(links[0].Address)
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// podUDPCount reads the packet counter of the rule that counts UDP to port
// in the pod's INPUT chain.
func podUDPCount(ctx context.Context, t *testing.T, l *lab.Lab, c *lab.Cluster, pod string, port int) int {
	t.Helper()
	out, err := l.PodExec(ctx, c.Name, "default", pod, "iptables", "-w", "-v", "-S", "INPUT")
	if err != nil {
		t.Fatalf("iptables -v -S INPUT in %s: %v\n%s", pod, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if !strings.Contains(line, "--dport "+strconv.Itoa(port)+" ") {
			continue
		}
		for i := range f {
			if f[i] == "-c" && i+1 < len(f) {
				n, err := strconv.Atoi(f[i+1])
				if err != nil {
					t.Fatalf("counter in %q: %v", line, err)
				}
				return n
			}
		}
	}
	t.Fatalf("no counting rule for UDP port %d in %s:\n%s", port, pod, out)
	return 0
}

// sendUDPFrom sends payload count times to dst from a UDP socket opened in
// the named network namespace.
func sendUDPFrom(netnsName string, dst netip.AddrPort, payload []byte, count int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		h, err := netns.GetFromName(netnsName)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", netnsName, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", netnsName, err)
			return
		}
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			errc <- err
			return
		}
		defer conn.Close()
		for range count {
			if _, err := conn.Write(payload); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	return <-errc
}

// vxlanFrame is a VXLAN payload (RFC 7348) carrying an Ethernet frame to
// dstMAC with an IPv4 UDP packet src -> dst:port.
func vxlanFrame(vni int, dstMAC net.HardwareAddr, src, dst netip.Addr, port uint16, data []byte) []byte {
	udp := make([]byte, 8, 8+len(data))
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], port)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(data)))
	udp = append(udp, data...) // checksum 0: none, valid over IPv4

	ip := make([]byte, 20, 20+len(udp))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	ip[8], ip[9] = 64, 17 // TTL, UDP
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	ip = append(ip, udp...)

	out := []byte{0x08, 0, 0, 0, byte(vni >> 16), byte(vni >> 8), byte(vni), 0}
	out = append(out, dstMAC...)
	out = append(out, 0x02, 0x6b, 0x66, 0, 0, 1, 0x08, 0x00) // a local source MAC, IPv4
	return append(out, ip...)
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
