package wireguard

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestMemoryLimitForFollowsTheLiveHeapAboveTheFloor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name       string
		live, want int64
	}{
		{name: "no collection yet", live: 0, want: DefaultMemoryLimit},
		{name: "a small cluster at rest", live: 30 * mib, want: DefaultMemoryLimit},
		{name: "a small cluster at full throughput", live: 46 * mib, want: DefaultMemoryLimit},
		{name: "a large cluster's agent", live: 70 * mib, want: 80 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memoryLimitFor(tc.live, DefaultMemoryLimit, memoryHeadroom); got != tc.want {
				t.Errorf("memoryLimitFor(%d MiB) = %d MiB, want %d MiB", tc.live/mib, got/mib, tc.want/mib)
			}
		})
	}
}

// fakeHeap is a live heap and a memory limit for a memoryTracker.
type fakeHeap struct {
	mu    sync.Mutex
	live  int64
	limit int64
	sets  int
}

func (h *fakeHeap) tracker() *memoryTracker {
	return &memoryTracker{
		live: func() int64 { h.mu.Lock(); defer h.mu.Unlock(); return h.live },
		set: func(v int64) int64 {
			h.mu.Lock()
			defer h.mu.Unlock()
			old := h.limit
			if v >= 0 {
				h.limit, h.sets = v, h.sets+1
			}
			return old
		},
		floor: 56 << 20, headroom: 10 << 20, period: time.Millisecond,
	}
}

func (h *fakeHeap) get() (limit int64, sets int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.limit, h.sets
}

func (h *fakeHeap) setLive(v int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live = v
}

func TestMemoryTrackerRaisesTheLimitAsTheAgentsHeapGrowsAndLowersItBack(t *testing.T) {
	h := &fakeHeap{live: 20 << 20, limit: 1 << 62}
	tr := h.tracker()
	if !tr.acquireUnlessBelow(tr.floor) {
		t.Fatal("not acquired with no limit set")
	}
	if l, _ := h.get(); l != 56<<20 {
		t.Fatalf("limit at once = %d MiB, want the floor, 56", l>>20)
	}
	h.setLive(90 << 20) // the cluster grew
	eventually(t, "the limit did not follow the live heap up to 100 MiB", func() bool { l, _ := h.get(); return l == 100<<20 })
	_, sets := h.get()
	h.setLive(90<<20 + 512<<10) // less than a step
	time.Sleep(20 * time.Millisecond)
	if l, s := h.get(); l != 100<<20 || s != sets {
		t.Errorf("a change of half a MiB set the limit again: %d bytes, %d sets (was %d)", l, s, sets)
	}
	h.setLive(10 << 20)
	eventually(t, "the limit did not come back to the floor", func() bool { l, _ := h.get(); return l == 56<<20 })
	tr.release()
	h.setLive(200 << 20)
	time.Sleep(20 * time.Millisecond)
	if l, _ := h.get(); l != 56<<20 {
		t.Errorf("the limit moved after the last release: %d MiB", l>>20)
	}
}

func TestMemoryTrackerIsSharedByTheDevicesOfAProcess(t *testing.T) {
	h := &fakeHeap{live: 20 << 20, limit: 1 << 62}
	tr := h.tracker()
	tr.acquireUnlessBelow(tr.floor)
	if !tr.acquireUnlessBelow(tr.floor) {
		t.Fatal("a second device did not join the tracking (the limit is the tracker's own, at its floor)")
	}
	tr.release()
	h.setLive(90 << 20)
	eventually(t, "the limit stopped following the heap while a device is still open", func() bool { l, _ := h.get(); return l == 100<<20 })
	tr.release()
}

func TestMemoryTrackerLeavesALowerLimitAlone(t *testing.T) {
	h := &fakeHeap{live: 20 << 20, limit: 16 << 20}
	tr := h.tracker()
	if tr.acquireUnlessBelow(tr.floor) {
		tr.release()
		t.Fatal("acquired although a lower limit was set")
	}
	if l, sets := h.get(); l != 16<<20 || sets != 0 {
		t.Errorf("limit %d MiB after %d sets, want 16 MiB untouched", l>>20, sets)
	}
}

func TestLiveHeapCountsWhatTheProcessHolds(t *testing.T) {
	const hold = 64 << 20
	held := make([]byte, hold)
	for i := range held {
		held[i] = byte(i)
	}
	runtime.GC()
	if got := liveHeap(); got < hold {
		t.Errorf("live heap %d MiB while %d MiB are held", got>>20, hold>>20)
	}
	h := &fakeHeap{limit: 1 << 62}
	tr := h.tracker()
	tr.live = liveHeap
	tr.acquireUnlessBelow(tr.floor)
	defer tr.release()
	if l, _ := h.get(); l < hold+tr.headroom {
		t.Errorf("limit %d MiB, want at least the %d MiB held and the headroom", l>>20, hold>>20)
	}
	runtime.KeepAlive(held)
}
