//go:build linux

package wireguard

import (
	"encoding/binary"
	"log/slog"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
)

// wireguard-go on Linux holds every packet in a 64 KiB buffer
// (device.MaxMessageSize) and queues up to 1024 batches of 128 packets per
// stage (device.QueueOutboundSize...), constants that its Linux build
// cannot change (device.PreallocatedBuffersPerPool is 0 there: unbounded
// pools). At full TCP throughput the stages fill with whatever the TCP
// window lets in, a few thousand packets, hundreds of MB. The embedded
// device bounds them from outside instead: its TUN reader and its UDP
// readers wait while too many packets read are not written out yet, so the
// backlog stays in the kernel (the TUN queue, the UDP socket buffer), which
// drops and makes TCP slow down, as the kernel's WireGuard does.

// inFlightStall is how long a reader waits for the device to hand packets
// on before it forgets the ones counted: packets the device drops (no
// peer for them, failed authentication, replays, a full staging queue)
// never leave it and would otherwise fill the bound for good.
const inFlightStall = 20 * time.Millisecond

// inFlight counts packets between a reader and a writer of the device.
type inFlight struct {
	n        atomic.Int64
	peak     atomic.Int64 // the largest n seen
	max      int64
	stall    time.Duration
	progress chan struct{}
}

func newInFlight(max int, stall time.Duration) *inFlight {
	return &inFlight{max: int64(max), stall: stall, progress: make(chan struct{}, 1)}
}

// wait returns once fewer than max packets are in flight, or after stall
// without any leaving, when it forgets them all.
func (f *inFlight) wait() {
	if f.n.Load() < f.max {
		return
	}
	t := time.NewTimer(f.stall)
	defer t.Stop()
	for f.n.Load() >= f.max {
		select {
		case <-f.progress:
		case <-t.C:
			f.n.Store(0)
			return
		}
	}
}

// add counts k packets in.
func (f *inFlight) add(k int) {
	if k <= 0 {
		return
	}
	n := f.n.Add(int64(k))
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
}

// done counts k packets out (never below zero: handshakes and keepalives
// leave without having been counted in) and wakes a waiting reader.
func (f *inFlight) done(k int) {
	if k <= 0 {
		return
	}
	for {
		cur := f.n.Load()
		if f.n.CompareAndSwap(cur, max(cur-int64(k), 0)) {
			break
		}
	}
	select {
	case f.progress <- struct{}{}:
	default:
	}
}

// load returns the packets counted in flight.
func (f *inFlight) load() int64 { return f.n.Load() }

// bounds are the two directions of one device: out (TUN -> UDP) and in
// (UDP -> TUN).
type bounds struct {
	out, in *inFlight
}

func newBounds(max int, stall time.Duration) *bounds {
	return &bounds{out: newInFlight(max, stall), in: newInFlight(max, stall)}
}

// boundedTUN counts the packets read from the TUN link against out and
// those written to it against in.
type boundedTUN struct {
	tun.Device
	b *bounds
}

func (t boundedTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	t.b.out.wait()
	n, err := t.Device.Read(bufs, sizes, offset)
	k := 0
	for _, s := range sizes[:max(n, 0)] {
		if s > 0 {
			k++
		}
	}
	t.b.out.add(k)
	return n, err
}

func (t boundedTUN) Write(bufs [][]byte, offset int) (int, error) {
	n, err := t.Device.Write(bufs, offset)
	t.b.in.done(len(bufs))
	return n, err
}

// boundedBind counts the data packets received from UDP against in and
// those sent against out.
type boundedBind struct {
	conn.Bind
	b *bounds
}

func (b boundedBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, actual, err := b.Bind.Open(port)
	for i, fn := range fns {
		fns[i] = b.receive(fn)
	}
	return fns, actual, err
}

// receive wraps fn, keeping its name (wireguard-go logs it).
func (b boundedBind) receive(fn conn.ReceiveFunc) conn.ReceiveFunc {
	in := b.b.in
	return conn.ReceiveFunc(func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		in.wait()
		n, err := fn(bufs, sizes, eps)
		k := 0
		for i := range max(n, 0) {
			if isData(bufs[i][:sizes[i]]) {
				k++
			}
		}
		in.add(k)
		return n, err
	})
}

func (b boundedBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	err := b.Bind.Send(bufs, ep)
	k := 0
	for _, p := range bufs {
		if isData(p) {
			k++
		}
	}
	b.b.out.done(k)
	return err
}

// isData says whether p is a WireGuard transport message that carries a
// packet (not a handshake, a cookie or a keepalive).
func isData(p []byte) bool {
	return len(p) > device.MessageKeepaliveSize &&
		binary.LittleEndian.Uint32(p[:4]) == device.MessageTransportType
}

// inFlightOf returns the bound of opts, 0 for none.
func inFlightOf(opts OpenOptions) int {
	n := opts.InFlight
	switch {
	case n < 0:
		return 0
	case n == 0:
		return DefaultInFlight
	}
	return n
}

// applyMemoryLimit sets the Go memory limit of opts for the process, never
// above one set already, and reports whether it follows the memory held
// (defaultTracker): kg's own default does, and a close must then release
// it.
func applyMemoryLimit(opts OpenOptions, log *slog.Logger) (tracked bool) {
	switch limit := opts.MemoryLimit; {
	case limit < 0:
		return false
	case limit > 0:
		if debug.SetMemoryLimit(-1) <= limit {
			return false
		}
		debug.SetMemoryLimit(limit)
		log.Info("Go memory limit set for the embedded WireGuard device", "bytes", limit)
		return false
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return false
	}
	followed := func(limit, held, extra int64) {
		log.Debug("Go memory limit follows the memory held", "bytes", limit, "held", held, "extra", extra)
	}
	if !defaultTracker.acquireUnlessBelow(DefaultMemoryLimit, followed) {
		return false // a lower limit set by someone else
	}
	log.Info("Go memory limit set for the embedded WireGuard device; it follows the memory held",
		"bytes", defaultTracker.limit(), "floor", DefaultMemoryLimit, "headroom", memoryHeadroom)
	return true
}
