package wireguard

import (
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestMemoryLimitForFollowsTheMemoryHeldBetweenTheFloorAndTheCeiling(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                    string
		held, extra, ceil, want int64
	}{
		{name: "no collection yet", held: 0, ceil: math.MaxInt64, want: DefaultMemoryLimit},
		{name: "a small cluster at rest", held: 30 * mib, ceil: math.MaxInt64, want: DefaultMemoryLimit},
		{name: "a small cluster at full throughput", held: 50 * mib, ceil: math.MaxInt64, want: DefaultMemoryLimit},
		{name: "just above the floor", held: 60 * mib, ceil: math.MaxInt64, want: 66 * mib},
		{name: "a large cluster's agent", held: 120 * mib, ceil: math.MaxInt64, want: 184 * mib},
		{name: "never above the limit set before", held: 120 * mib, ceil: 64 * mib, want: 64 * mib},
		{name: "a busy collector's extra room", held: 52 * mib, extra: 16 * mib, ceil: math.MaxInt64, want: 74 * mib},
		{name: "extra room, never above the limit set before", held: 52 * mib, extra: 16 * mib, ceil: 64 * mib, want: 64 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memoryLimitFor(tc.held, tc.extra, DefaultMemoryLimit, tc.ceil, memoryHeadroom); got != tc.want {
				t.Errorf("memoryLimitFor(%d MiB) = %d MiB, want %d MiB", tc.held/mib, got/mib, tc.want/mib)
			}
		})
	}
}

func TestExtraRoomGrowsWhileTheCollectorIsBusyAndShrinksWhileItIsCalm(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name       string
		extra      int64
		gc         float64
		held, want int64
	}{
		{name: "a small cluster at full throughput", extra: 0, gc: 0.03, held: 50 * mib, want: 0},
		{name: "busy: a first step", extra: 0, gc: 0.3, held: 52 * mib, want: 8 * mib},
		{name: "still busy: doubles", extra: 8 * mib, gc: 0.2, held: 52 * mib, want: 16 * mib},
		{name: "busy: never more than held", extra: 40 * mib, gc: 0.5, held: 52 * mib, want: 52 * mib},
		{name: "busy: never less than before, though held fell", extra: 60 * mib, gc: 0.5, held: 30 * mib, want: 60 * mib},
		{name: "in between: kept", extra: 16 * mib, gc: 0.07, held: 52 * mib, want: 16 * mib},
		{name: "calm: an eighth of a step less", extra: 16 * mib, gc: 0.01, held: 52 * mib, want: 15 * mib},
		{name: "calm: never below none", extra: 512 << 10, gc: 0, held: 52 * mib, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := extraRoom(tc.extra, tc.gc, tc.held); got != tc.want {
				t.Errorf("extraRoom(%d MiB, %.2f, %d MiB) = %d MiB, want %d MiB", tc.extra/mib, tc.gc, tc.held/mib, got/mib, tc.want/mib)
			}
		})
	}
}

// TestMemoryTrackerGivesABusyCollectorRoomAndTakesItBackOnceCalm feeds the
// tracker a collector that takes a full CPU, then none.
func TestMemoryTrackerGivesABusyCollectorRoomAndTakesItBackOnceCalm(t *testing.T) {
	h := &fakeHeap{held: 52 << 20, limit: math.MaxInt64}
	tr := h.tracker()
	var mu sync.Mutex
	busy, cpu := true, 0.0
	tr.gcCPU = func() float64 {
		mu.Lock()
		defer mu.Unlock()
		if busy {
			cpu++ // a second of CPU per check, about a millisecond apart
		}
		return cpu
	}
	if !tr.acquireUnlessBelow(tr.floor, nil) {
		t.Fatal("not acquired")
	}
	defer tr.release()
	eventually(t, "a busy collector got no room: the limit stayed at the memory held and the headroom", func() bool { l, _ := h.get(); return l >= 52<<20+10<<20+extraRoomStep })
	eventually(t, "the room went above a heap's worth", func() bool { l, _ := h.get(); return l == 52<<20+10<<20+52<<20 })
	mu.Lock()
	busy = false
	mu.Unlock()
	eventually(t, "the room did not go back once the collector was calm", func() bool { l, _ := h.get(); return l == 62<<20 })
}

// fakeHeap is the memory held and the memory limit of a memoryTracker.
type fakeHeap struct {
	mu    sync.Mutex
	held  int64
	limit int64
	sets  int
}

func (h *fakeHeap) tracker() *memoryTracker {
	return &memoryTracker{
		held:  func() int64 { h.mu.Lock(); defer h.mu.Unlock(); return h.held },
		set:   h.set,
		floor: 56 << 20, headroom: 10 << 20, period: time.Millisecond,
	}
}

func (h *fakeHeap) set(v int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.limit
	if v >= 0 {
		h.limit, h.sets = v, h.sets+1
	}
	return old
}

func (h *fakeHeap) get() (limit int64, sets int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.limit, h.sets
}

func (h *fakeHeap) setHeld(v int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = v
}

func TestMemoryTrackerRaisesTheLimitAsTheAgentGrowsAndGivesTheOldOneBack(t *testing.T) {
	h := &fakeHeap{held: 20 << 20, limit: math.MaxInt64}
	tr := h.tracker()
	var logged []int64
	if !tr.acquireUnlessBelow(tr.floor, func(limit, _, _ int64) { logged = append(logged, limit) }) {
		t.Fatal("not acquired with no limit set")
	}
	if l, _ := h.get(); l != 56<<20 {
		t.Fatalf("limit at once = %d MiB, want the floor, 56", l>>20)
	}
	h.setHeld(90 << 20) // the cluster grew
	eventually(t, "the limit did not follow the memory held up to 124 MiB", func() bool { l, _ := h.get(); return l == 124<<20 })
	_, sets := h.get()
	h.setHeld(90<<20 + 256<<10) // the limit moves by less than a step
	time.Sleep(20 * time.Millisecond)
	if l, s := h.get(); l != 124<<20 || s != sets {
		t.Errorf("a change of half a MiB of the limit set it again: %d bytes, %d sets (was %d)", l, s, sets)
	}
	h.setHeld(10 << 20)
	eventually(t, "the limit did not come back to the floor", func() bool { l, _ := h.get(); return l == 56<<20 })
	tr.release()
	if l, _ := h.get(); l != math.MaxInt64 {
		t.Errorf("limit after the last release = %d, want the one from before (none)", l)
	}
	h.setHeld(200 << 20)
	time.Sleep(20 * time.Millisecond)
	if l, _ := h.get(); l != math.MaxInt64 {
		t.Errorf("the limit moved after the last release: %d", l)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(logged) < 3 || logged[0] != 56<<20 {
		t.Errorf("logged limits %v, want each one set, from 56 MiB", logged)
	}
}

func TestMemoryTrackerNeverGoesAboveALimitSetBefore(t *testing.T) {
	h := &fakeHeap{held: 20 << 20, limit: 64 << 20}
	tr := h.tracker()
	if !tr.acquireUnlessBelow(tr.floor, nil) {
		t.Fatal("not acquired under a limit above the floor")
	}
	h.setHeld(200 << 20)
	time.Sleep(20 * time.Millisecond)
	if l, _ := h.get(); l != 64<<20 {
		t.Errorf("limit %d MiB, want at most the 64 MiB set before", l>>20)
	}
	tr.release()
	if l, _ := h.get(); l != 64<<20 {
		t.Errorf("limit after the last release %d MiB, want the 64 MiB from before", l>>20)
	}
}

func TestMemoryTrackerLeavesALimitSetBySomeoneElseSinceAlone(t *testing.T) {
	h := &fakeHeap{held: 20 << 20, limit: math.MaxInt64}
	tr := h.tracker()
	tr.acquireUnlessBelow(tr.floor, nil)
	h.set(200 << 20) // the program embedding the agent sets its own
	h.setHeld(300 << 20)
	time.Sleep(20 * time.Millisecond)
	tr.release()
	if l, _ := h.get(); l != 200<<20 {
		t.Errorf("limit %d MiB, want the 200 MiB set by someone else kept", l>>20)
	}
}

func TestMemoryTrackerIsSharedByTheDevicesOfAProcess(t *testing.T) {
	h := &fakeHeap{held: 20 << 20, limit: math.MaxInt64}
	tr := h.tracker()
	tr.acquireUnlessBelow(tr.floor, nil)
	if !tr.acquireUnlessBelow(tr.floor, nil) {
		t.Fatal("a second device did not join the tracking (the limit is the tracker's own, at its floor)")
	}
	tr.release()
	h.setHeld(90 << 20)
	eventually(t, "the limit stopped following the memory held while a device is still open", func() bool { l, _ := h.get(); return l == 124<<20 })
	tr.release()
	if !tr.acquireUnlessBelow(tr.floor, nil) {
		t.Fatal("a device opened again does not follow the memory held (the last release must give the old limit back)")
	}
	tr.release()
}

func TestMemoryTrackerLeavesALowerLimitAlone(t *testing.T) {
	h := &fakeHeap{held: 20 << 20, limit: 16 << 20}
	tr := h.tracker()
	if tr.acquireUnlessBelow(tr.floor, nil) {
		tr.release()
		t.Fatal("acquired although a lower limit was set")
	}
	if l, sets := h.get(); l != 16<<20 || sets != 0 {
		t.Errorf("limit %d MiB after %d sets, want 16 MiB untouched", l>>20, sets)
	}
}

func TestHeldMemoryCountsWhatTheProcessHolds(t *testing.T) {
	const hold = 64 << 20
	held := make([]byte, hold)
	for i := range held {
		held[i] = byte(i)
	}
	runtime.GC()
	if got := heldMemory(); got < hold {
		t.Errorf("memory held %d MiB while %d MiB are live", got>>20, hold>>20)
	}
	h := &fakeHeap{limit: math.MaxInt64}
	tr := h.tracker()
	tr.held = heldMemory
	tr.acquireUnlessBelow(tr.floor, nil)
	defer tr.release()
	if l, _ := h.get(); l < hold+tr.headroom {
		t.Errorf("limit %d MiB, want at least the %d MiB held and the headroom", l>>20, hold>>20)
	}
	runtime.KeepAlive(held)
}
