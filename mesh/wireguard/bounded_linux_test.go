//go:build linux

package wireguard

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/tun/tuntest"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/kilofed/kilofed/mesh/link/linktest"
)

func TestInFlightWaitReturnsBelowMax(t *testing.T) {
	f := newInFlight(2, time.Hour)
	f.add(1)
	f.wait() // would block for an hour if it did not return at once
	if got := f.load(); got != 1 {
		t.Fatalf("in flight = %d, want 1", got)
	}
}

func TestInFlightWaitBlocksAtMaxUntilDone(t *testing.T) {
	f := newInFlight(2, time.Hour)
	f.add(2)
	returned := make(chan struct{})
	go func() {
		f.wait()
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("wait returned with max packets in flight")
	default:
	}
	f.done(1)
	<-returned
	if got := f.load(); got != 1 {
		t.Fatalf("in flight = %d, want 1", got)
	}
}

func TestInFlightWaitForgetsPacketsAfterStall(t *testing.T) {
	f := newInFlight(2, time.Millisecond)
	f.add(5) // dropped inside the device: never done
	f.wait()
	if got := f.load(); got != 0 {
		t.Fatalf("in flight after a stall = %d, want 0", got)
	}
	if got := f.peak.Load(); got != 5 {
		t.Fatalf("peak = %d, want 5", got)
	}
}

func TestInFlightDoneNeverGoesBelowZero(t *testing.T) {
	f := newInFlight(2, time.Hour)
	f.add(1)
	f.done(3) // handshakes and keepalives leave without coming in
	if got := f.load(); got != 0 {
		t.Fatalf("in flight = %d, want 0", got)
	}
	f.add(2)
	if got := f.load(); got != 2 {
		t.Fatalf("in flight = %d, want 2", got)
	}
}

func TestIsDataCountsTransportPacketsOnly(t *testing.T) {
	msg := func(typ uint32, size int) []byte {
		p := make([]byte, size)
		p[0] = byte(typ)
		return p
	}
	for _, c := range []struct {
		name string
		p    []byte
		want bool
	}{
		{"transport", msg(device.MessageTransportType, 128), true},
		{"keepalive", msg(device.MessageTransportType, device.MessageKeepaliveSize), false},
		{"initiation", msg(device.MessageInitiationType, device.MessageInitiationSize), false},
		{"response", msg(device.MessageResponseType, device.MessageResponseSize), false},
		{"cookie", msg(device.MessageCookieReplyType, device.MessageCookieReplySize), false},
		{"short", []byte{4}, false},
	} {
		if got := isData(c.p); got != c.want {
			t.Errorf("isData(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}

// pairEnd is one of two in-process wireguard-go devices joined by
// channels (wireguard-go's own test doubles).
type pairEnd struct {
	tun *tuntest.ChannelTUN
	dev *device.Device
	ip  netip.Addr
}

// newPair starts two devices; b, when not nil, bounds the second one.
func newPair(t *testing.T, b *bounds) [2]pairEnd {
	t.Helper()
	var keys [2]wgtypes.Key
	for i := range keys {
		k, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	binds := bindtest.NewChannelBinds()
	var ends [2]pairEnd
	for i := range ends {
		e := &ends[i]
		e.tun = tuntest.NewChannelTUN()
		e.ip = netip.AddrFrom4([4]byte{10, 9, 0, byte(i + 1)})
		var tdev tun.Device = e.tun.TUN()
		bind := binds[i]
		if i == 1 && b != nil {
			tdev = boundedTUN{Device: tdev, b: b}
			bind = boundedBind{Bind: bind, b: b}
		}
		e.dev = device.NewDevice(tdev, bind, deviceLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		t.Cleanup(e.dev.Close)
		other := keys[1-i].PublicKey()
		// bindtest's ends reach each other at ports 1 and 2.
		cfg := fmt.Sprintf("private_key=%s\nreplace_peers=true\npublic_key=%s\nendpoint=127.0.0.1:%d\nallowed_ip=10.9.0.%d/32\n",
			hex.EncodeToString(keys[i][:]), hex.EncodeToString(other[:]), i+1, 2-i)
		if err := e.dev.IpcSet(cfg); err != nil {
			t.Fatalf("configure device %d: %v", i, err)
		}
		if err := e.dev.Up(); err != nil {
			t.Fatalf("up device %d: %v", i, err)
		}
	}
	return ends
}

// ping sends one packet from -> to and waits for it.
func ping(t *testing.T, from, to pairEnd, seq int) {
	t.Helper()
	msg := tuntest.Ping(to.ip, from.ip)
	msg[len(msg)-1] = byte(seq) // tell the packets apart
	from.tun.Outbound <- msg
	select {
	case got := <-to.tun.Inbound:
		if !bytes.Equal(got, msg) {
			t.Fatalf("packet %d did not transit intact", seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("packet %d did not arrive in 10 s", seq)
	}
}

func TestBoundedDeviceCarriesPacketsBothWaysAndBalancesItsCounts(t *testing.T) {
	b := newBounds(4, time.Hour)
	ends := newPair(t, b)
	for i := range 20 {
		ping(t, ends[0], ends[1], i)
		ping(t, ends[1], ends[0], i)
	}
	eventually(t, "every packet counted in left the bounded device", func() bool {
		return b.in.load() == 0 && b.out.load() == 0
	})
	if b.in.peak.Load() == 0 || b.out.peak.Load() == 0 {
		t.Fatalf("peaks in %d, out %d: the bounded device counted no packets", b.in.peak.Load(), b.out.peak.Load())
	}
}

func TestBoundedDeviceHoldsAtMostInFlightPacketsWhileItsTUNIsStuck(t *testing.T) {
	const max, sent = 8, 200
	b := newBounds(max, time.Hour)
	ends := newPair(t, b)
	ping(t, ends[0], ends[1], 0) // handshake
	// Nothing reads the receiver's TUN: its writer blocks, and the packets
	// behind it must wait in the socket (here bindtest's channel), not in
	// wireguard-go's queues.
	go func() {
		for i := range sent {
			msg := tuntest.Ping(ends[1].ip, ends[0].ip)
			msg[len(msg)-1] = byte(i)
			ends[0].tun.Outbound <- msg
		}
	}()
	eventually(t, fmt.Sprintf("the receiver holds %d packets", max), func() bool { return b.in.load() >= max })
	for i := range sent {
		select {
		case <-ends[1].tun.Inbound:
		case <-time.After(10 * time.Second):
			t.Fatalf("packet %d of %d did not arrive in 10 s", i+1, sent)
		}
	}
	// A batch more than max may come in; bindtest's batches hold one packet.
	if peak := b.in.peak.Load(); peak > max+1 {
		t.Fatalf("the receiver held %d packets at once, want at most %d", peak, max+1)
	}
}

// withMemoryLimit restores the process's Go memory limit after the test.
func withMemoryLimit(t *testing.T, limit int64) {
	old := debug.SetMemoryLimit(limit)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
}

// withoutGOMEMLIMIT unsets GOMEMLIMIT for the test.
func withoutGOMEMLIMIT(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "") // restores it after the test
	os.Unsetenv("GOMEMLIMIT")
}

func TestOpenSetsTheDefaultMemoryLimit(t *testing.T) {
	withMemoryLimit(t, math.MaxInt64)
	withoutGOMEMLIMIT(t)
	if !applyMemoryLimit(OpenOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil))) {
		t.Fatal("the default limit does not follow the live heap")
	}
	t.Cleanup(defaultTracker.release)
	if got := debug.SetMemoryLimit(-1); got != DefaultMemoryLimit {
		t.Fatalf("memory limit = %d, want %d", got, DefaultMemoryLimit)
	}
}

func TestOpenKeepsTheMemoryLimitOfGOMEMLIMIT(t *testing.T) {
	withMemoryLimit(t, 1<<40)
	t.Setenv("GOMEMLIMIT", "1TiB")
	if applyMemoryLimit(OpenOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil))) {
		t.Error("a limit it did not set follows the live heap")
		defaultTracker.release()
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Fatalf("memory limit = %d, want GOMEMLIMIT's %d", got, int64(1<<40))
	}
}

func TestOpenNeverRaisesAMemoryLimit(t *testing.T) {
	withMemoryLimit(t, 16<<20)
	if applyMemoryLimit(OpenOptions{MemoryLimit: 1 << 30}, slog.New(slog.NewTextHandler(io.Discard, nil))) {
		t.Error("a limit it did not set follows the live heap")
		defaultTracker.release()
	}
	if got := debug.SetMemoryLimit(-1); got != 16<<20 {
		t.Fatalf("memory limit = %d, want the lower one set before, %d", got, 16<<20)
	}
}

func TestOpenLeavesTheMemoryLimitAloneWhenNegative(t *testing.T) {
	withMemoryLimit(t, math.MaxInt64)
	withoutGOMEMLIMIT(t)
	if applyMemoryLimit(OpenOptions{MemoryLimit: -1}, slog.New(slog.NewTextHandler(io.Discard, nil))) {
		t.Error("a limit it did not set follows the live heap")
		defaultTracker.release()
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit = %d, want none", got)
	}
}

func TestInFlightOfDefaultsAndUnbounded(t *testing.T) {
	for _, c := range []struct{ set, want int }{{0, DefaultInFlight}, {-1, 0}, {32, 32}} {
		if got := inFlightOf(OpenOptions{InFlight: c.set}); got != c.want {
			t.Errorf("InFlight %d: bound %d, want %d", c.set, got, c.want)
		}
	}
}

func TestPrivilegedUserspaceDeviceIsBoundedByDefaultAndSetsTheMemoryLimit(t *testing.T) {
	linktest.Require(t)
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("privileged test cannot run: %v", err)
		}
		t.Skipf("privileged test: %v", err)
	}
	withMemoryLimit(t, math.MaxInt64)
	withoutGOMEMLIMIT(t)
	ns := linktest.NetNS(t)
	for _, c := range []struct {
		inFlight, want int
	}{{0, DefaultInFlight}, {32, 32}, {-1, 0}} {
		d, err := Open(context.Background(), OpenOptions{
			Name: linktest.Name(t, "wg"), Mode: ModeUserspace, NetNS: linktest.Path(ns), InFlight: c.inFlight,
		})
		if err != nil {
			t.Fatal(err)
		}
		u := d.(*wgDevice).user
		got := 0
		if u.bounds != nil {
			got = int(u.bounds.in.max)
			if u.bounds.out.max != u.bounds.in.max {
				t.Errorf("InFlight %d: bounds in %d, out %d", c.inFlight, u.bounds.in.max, u.bounds.out.max)
			}
		}
		if got != c.want {
			t.Errorf("InFlight %d: device bounded to %d packets, want %d", c.inFlight, got, c.want)
		}
		if got := debug.SetMemoryLimit(-1); got != DefaultMemoryLimit {
			t.Errorf("InFlight %d: memory limit while open = %d, want %d", c.inFlight, got, DefaultMemoryLimit)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit after the last Close = %d, want the one from before (none)", got)
	}
}

var _ conn.Bind = boundedBind{}
