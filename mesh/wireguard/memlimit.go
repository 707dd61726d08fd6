package wireguard

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// The Go memory limit that an embedded device sets (DefaultMemoryLimit)
// keeps the heap from doubling over wireguard-go's live buffers, but a
// fixed limit leaves the data plane less room as the agent's own heap grows
// with its cluster (the Nodes it watches, its topology, routes and
// firewall): once the live heap nears the limit, the collector runs
// without pause and takes the CPU the packets need. So the limit that kg
// sets itself follows the live heap: memoryHeadroom above it, never below
// DefaultMemoryLimit.

const (
	// memoryHeadroom is how far above the live heap the limit that kg sets
	// stays: in a small cluster at full throughput (about 46 MiB live:
	// 24 MiB of read buffers, 16 MiB of packets in flight, the agent's own
	// few MiB) it gives DefaultMemoryLimit, where 52 MiB still held and
	// 48 MiB starved the device (docs/performance.md, Data plane).
	memoryHeadroom = 10 << 20
	// memoryCheckPeriod is how often the limit follows the live heap.
	memoryCheckPeriod = time.Second
	// memoryLimitStep is the least change of the limit worth setting.
	memoryLimitStep = 1 << 20
)

// memoryLimitFor returns the memory limit for a live heap of live bytes:
// headroom above it, never below floor.
func memoryLimitFor(live, floor, headroom int64) int64 {
	return max(floor, live+headroom)
}

// liveHeap returns the live heap marked by the last garbage collection
// (runtime/metrics /gc/heap/live:bytes), 0 before the first.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// memoryTracker moves the process's memory limit with its live heap while
// at least one embedded device that set it is open.
type memoryTracker struct {
	live     func() int64
	set      func(int64) int64
	floor    int64
	headroom int64
	period   time.Duration

	mu    sync.Mutex
	users int
	stop  chan struct{}
	done  chan struct{}
	last  int64 // the limit last set
}

// defaultTracker tracks the limit that kg's embedded devices set.
var defaultTracker = &memoryTracker{
	live: liveHeap, set: debug.SetMemoryLimit,
	floor: DefaultMemoryLimit, headroom: memoryHeadroom, period: memoryCheckPeriod,
}

// acquireUnlessBelow reports whether it started (or joined) following the
// live heap: not when nobody follows it yet and the process's limit is
// already floor or lower (someone else set it). It sets the limit for the
// live heap at once; each successful call needs a release.
func (t *memoryTracker) acquireUnlessBelow(floor int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.users == 0 && t.set(-1) <= floor {
		return false
	}
	t.users++
	if t.users > 1 {
		return true
	}
	t.last = 0
	t.adjustLocked()
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	go t.run(t.stop, t.done)
	return true
}

// release stops following the live heap once no user is left; the limit
// stays where it was.
func (t *memoryTracker) release() {
	t.mu.Lock()
	t.users--
	if t.users > 0 {
		t.mu.Unlock()
		return
	}
	stop, done := t.stop, t.done
	t.stop, t.done = nil, nil
	t.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (t *memoryTracker) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(t.period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			t.mu.Lock()
			t.adjustLocked()
			t.mu.Unlock()
		}
	}
}

// adjustLocked sets the limit for the live heap when it moved by
// memoryLimitStep or more.
func (t *memoryTracker) adjustLocked() {
	limit := memoryLimitFor(t.live(), t.floor, t.headroom)
	if d := limit - t.last; d >= memoryLimitStep || d <= -memoryLimitStep {
		t.set(limit)
		t.last = limit
	}
}

// limit returns the limit last set, 0 before any.
func (t *memoryTracker) limit() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}
