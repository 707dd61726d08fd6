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
// sets itself follows what the runtime holds besides the heap's free
// space (the live heap and the runtime's own memory), memoryHeadroom above
// it, with more room while the collector is busy (extraRoom), never below
// DefaultMemoryLimit nor above the limit from before, which it gives back
// when the last device closes.

const (
	// memoryHeadroom is how far above the memory held the limit that kg
	// sets stays. In a small cluster at full throughput about 46 MiB are
	// live (24 MiB of read buffers, 16 MiB of packets in flight, the
	// agent's own few MiB) and the runtime holds a few MiB more: the limit
	// is then about DefaultMemoryLimit, where 52 MiB still held and 48 MiB
	// starved the device (docs/performance.md, Data plane).
	memoryHeadroom = 6 << 20
	// memoryCheckPeriod is how often the limit follows the memory held.
	memoryCheckPeriod = time.Second
	// memoryLimitStep is the least change of the limit worth setting.
	memoryLimitStep = 1 << 20
	// gcBusy is the collector's CPU time per second (a moving average)
	// above which the limit gets more room (extraRoom), gcCalm the one
	// below which that room shrinks again. Measured at full TCP
	// throughput, 6 MiB above the memory held: 0.01-0.04 in a small
	// cluster; 0.2-0.6 in a 1000-node cluster, whose agent allocates more
	// besides the device, where each collection also empties
	// wireguard-go's buffer pools, so that the device allocates more in
	// turn (15-77 collections a second instead of 0-8, at half the
	// throughput: docs/performance.md, In a large cluster).
	gcBusy = 0.10
	gcCalm = 0.04
	// extraRoomStep is the first step of extraRoom; it doubles while the
	// collector stays busy and gives back an eighth of it per check while
	// the collector is calm.
	extraRoomStep = 8 << 20
)

// memoryLimitFor returns the memory limit for held bytes, never below
// floor nor above ceiling: headroom above them while they are near floor
// (a small cluster: the device's buffers are most of it), and as much
// room as they exceed floor by once they are more (a large cluster's agent:
// the collector then marks a larger heap each time, and must run less
// often, as Go's default GOGC=100 would make it), plus extra, the room
// that a busy collector asked for (extraRoom).
func memoryLimitFor(held, extra, floor, ceiling, headroom int64) int64 {
	return min(ceiling, max(floor, held+max(headroom, held-floor)+extra))
}

// extraRoom returns the extra room of the limit after a check in which the
// collector took gc CPU seconds per second (a moving average): more while
// it is busy, doubling from extraRoomStep, never more than held (Go's
// default GOGC=100 leaves a heap's worth of room); less, an eighth of a
// step per check, while it is calm; the same in between.
func extraRoom(extra int64, gc float64, held int64) int64 {
	switch {
	case gc > gcBusy:
		return max(extra, min(held, max(2*extra, extraRoomStep)))
	case gc < gcCalm:
		return max(0, extra-extraRoomStep/8)
	}
	return extra
}

// gcCPU returns the CPU time the collector took so far, in seconds
// (runtime/metrics, an estimate the runtime updates as it collects).
func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// heldMemory returns what the runtime holds besides the heap's free space,
// as the memory limit counts it (runtime/metrics): the live heap marked by
// the last garbage collection and the memory that is not heap (stacks,
// metadata, the runtime's buffers).
func heldMemory() int64 {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	var v [6]int64
	for i := range s {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		v[i] = int64(s[i].Value.Uint64())
	}
	return v[0] + max(0, v[1]-v[2]-v[3]-v[4]-v[5])
}

// memoryTracker moves the process's memory limit with the memory it holds
// while at least one embedded device that set it is open.
type memoryTracker struct {
	held     func() int64
	gcCPU    func() float64    // the collector's CPU seconds so far; nil: no extra room
	set      func(int64) int64 // debug.SetMemoryLimit
	floor    int64
	headroom int64
	period   time.Duration

	mu     sync.Mutex
	users  int
	stop   chan struct{}
	done   chan struct{}
	before int64 // the limit before the first user, given back after the last
	last   int64 // the limit last set (or found)
	lost   bool  // someone else set the limit since: it is left alone
	log    func(limit, held, extra int64)
	// extra is the room a busy collector asked for (extraRoom); gcAvg the
	// collector's CPU seconds per second, a moving average over the
	// checks; gcLast and gcAt its CPU time and the time at the last check.
	extra  int64
	gcAvg  float64
	gcLast float64
	gcAt   time.Time
}

// defaultTracker tracks the limit that kg's embedded devices set.
var defaultTracker = &memoryTracker{
	held: heldMemory, gcCPU: gcCPU, set: debug.SetMemoryLimit,
	floor: DefaultMemoryLimit, headroom: memoryHeadroom, period: memoryCheckPeriod,
}

// acquireUnlessBelow reports whether it started (or joined) following the
// memory held: not when nobody follows it yet and the process's limit is
// already floor or lower (someone else set it). It sets the limit for the
// memory held at once, and tells log (if not nil) of each limit it sets
// until the last release; each successful call needs a release.
func (t *memoryTracker) acquireUnlessBelow(floor int64, log func(limit, held, extra int64)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.set(-1)
	if t.users == 0 && cur <= floor {
		return false
	}
	t.users++
	if t.users > 1 {
		return true
	}
	t.before, t.last, t.lost, t.log = cur, cur, false, log
	t.extra, t.gcAvg, t.gcAt = 0, 0, time.Time{}
	t.adjustLocked()
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	go t.run(t.stop, t.done)
	return true
}

// release stops following the memory held once no user is left, and gives
// back the limit from before the first user, unless someone else set one
// since.
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.lost && t.set(-1) == t.last {
		t.set(t.before)
	}
	t.last = 0
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

// adjustLocked sets the limit for the memory held when it moved by
// memoryLimitStep or more, unless someone else set a limit since it last
// did.
func (t *memoryTracker) adjustLocked() {
	if t.lost || t.set(-1) != t.last {
		t.lost = true
		return
	}
	held := t.held()
	if t.gcCPU != nil {
		now, cpu := time.Now(), t.gcCPU()
		if !t.gcAt.IsZero() {
			if dt := now.Sub(t.gcAt).Seconds(); dt > 0 {
				t.gcAvg = (t.gcAvg + (cpu-t.gcLast)/dt) / 2
				t.extra = extraRoom(t.extra, t.gcAvg, held)
			}
		}
		t.gcLast, t.gcAt = cpu, now
	}
	limit := memoryLimitFor(held, t.extra, t.floor, t.before, t.headroom)
	if d := limit - t.last; d >= memoryLimitStep || d <= -memoryLimitStep {
		t.set(limit)
		t.last = limit
		if t.log != nil {
			t.log(limit, held, t.extra)
		}
	}
}

// limit returns the limit last set, 0 while nobody follows the memory held.
func (t *memoryTracker) limit() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}
