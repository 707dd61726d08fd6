package k8s

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLeasesKeepTheirFreshnessWhileTheWatchIsSilent plays an API server
// outage to the Lease tracker: three nodes renew every second, a, b and c
// a third of a second apart; then no event comes for 20 s; then the
// renewals come back one at a time. The readiness of no node may change
// during the outage or when it ends (a flap would change a leader), and a
// node that died during the outage expires a lease duration after the
// watch is back.
func TestLeasesKeepTheirFreshnessWhileTheWatchIsSilent(t *testing.T) {
	const d = 3 * time.Second
	t0 := time.Now()
	ls := newLeases()
	version := map[string]int{}
	renew := func(node string, at time.Duration) {
		version[node]++
		ls.observe(lease("kilo-"+node, node, created.Add(time.Duration(version[node])*time.Second)), t0.Add(at), false, d)
	}
	all := map[string]bool{"a": true, "b": true, "c": true}
	check := func(when string, at time.Duration, want map[string]bool) {
		t.Helper()
		if diff := cmp.Diff(want, ls.ready(t0.Add(at), d)); diff != "" {
			t.Errorf("%s (%v): ready (-want +got):\n%s", when, at, diff)
		}
	}
	// Before: renewals every second, staggered.
	var last time.Duration
	for s := time.Duration(0); s < 5*time.Second; s += time.Second {
		for i, n := range []string{"a", "b", "c"} {
			last = s + time.Duration(i)*time.Second/3
			renew(n, last)
		}
	}
	check("before the outage", last, all)
	// The outage: nothing for 20 s, checked ten times a second.
	for at := last; at < last+20*time.Second; at += 100 * time.Millisecond {
		check("during the outage", at, all)
	}
	// The watch is back: c renews first, then b, then a, 10 ms apart; c
	// dies during the outage in a second run below.
	back := last + 20*time.Second
	for i, n := range []string{"c", "b", "a"} {
		at := back + time.Duration(i)*10*time.Millisecond
		renew(n, at)
		check(fmt.Sprintf("after %s renewed", n), at, all)
	}
	for s := time.Second; s < 10*time.Second; s += time.Second {
		for _, n := range []string{"c", "b", "a"} {
			renew(n, back+s)
		}
		check("after the outage", back+s, all)
	}

	// A node dead during the outage: b and c come back, a does not.
	ls = newLeases()
	for _, n := range []string{"a", "b", "c"} {
		renew(n, 0)
	}
	check("second run, before", 0, all)
	check("second run, outage", 15*time.Second, all)
	renew("b", 15*time.Second)
	renew("c", 15*time.Second)
	check("second run, watch back", 15*time.Second, all)
	renew("b", 16*time.Second)
	renew("c", 16*time.Second)
	// a had aged half a lease duration (the grace) when the watch went
	// silent: it expires the rest of a lease duration after the watch is
	// back.
	check("second run, a still counted", 16*time.Second, all)
	renew("b", 17*time.Second)
	renew("c", 17*time.Second)
	want := maps.Clone(all)
	want["a"] = false
	check("second run, a expired", 17*time.Second, want)
}

// TestWatchClock checks the clock itself: it runs while events come at most
// half a lease duration apart, stands still after that, and goes on from
// where it stood when events resume.
func TestWatchClock(t *testing.T) {
	const d = 3 * time.Second
	t0 := time.Now()
	var w watchClock
	sec := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Second))) }
	since := func(got time.Time) float64 { return got.Sub(t0).Seconds() }
	for _, tc := range []struct {
		name  string
		event bool
		at    float64
		want  float64
	}{
		{name: "no event yet: this process's clock", at: 1, want: 1},
		{name: "first event", event: true, at: 1, want: 1},
		{name: "events a second apart", event: true, at: 2, want: 2},
		{name: "between events", at: 2.5, want: 2.5},
		{name: "grace ends", at: 3.5, want: 3.5},
		{name: "silence: the clock stands", at: 10, want: 3.5},
		{name: "an event resumes it", event: true, at: 20, want: 3.5},
		{name: "and it runs again", at: 21, want: 4.5},
		{name: "an event from the past does not step back", event: true, at: 19, want: 3.5},
	} {
		var got time.Time
		if tc.event {
			got = w.event(sec(tc.at), d)
		} else {
			got = w.at(sec(tc.at), d)
		}
		if since(got) != tc.want {
			t.Errorf("%s: watch time %.3fs at %.3fs, want %.3fs", tc.name, since(got), tc.at, tc.want)
		}
	}
}
