package k8s

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLeaseFresh(t *testing.T) {
	base := time.Now() // carries a monotonic reading, as in the Client
	const d = 3 * time.Second
	for _, tc := range []struct {
		name     string
		observed time.Time
		now      time.Time
		want     bool
	}{
		{name: "never observed", observed: time.Time{}, now: base, want: false},
		{name: "just renewed", observed: base, now: base, want: true},
		{name: "within the duration", observed: base, now: base.Add(2999 * time.Millisecond), want: true},
		{name: "exactly one duration: expired", observed: base, now: base.Add(d), want: false},
		{name: "long ago", observed: base, now: base.Add(time.Hour), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LeaseFresh(tc.observed, tc.now, d); got != tc.want {
				t.Errorf("LeaseFresh(%v after) = %v, want %v", tc.now.Sub(tc.observed), got, tc.want)
			}
		})
	}
}

// created is the API server's creation time of the Leases built by lease.
var created = time.Date(2026, 5, 1, 11, 0, 0, 0, time.UTC)

func lease(name, holder string, renew time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", CreationTimestamp: metav1.NewTime(created)}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	if !renew.IsZero() {
		m := metav1.NewMicroTime(renew)
		l.Spec.RenewTime = &m
	}
	return l
}

// TestLeaseTracking walks the tracker through the events an informer delivers.
func TestLeaseTracking(t *testing.T) {
	const d = 3 * time.Second
	t0 := time.Now()
	wall := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) // the renewing node's clock, never compared
	ls := newLeases()
	step := ""
	turned := func(got, want bool) {
		if got != want {
			t.Errorf("%s: observe reported turned fresh = %v, want %v", step, got, want)
		}
	}
	steps := []struct {
		name  string
		do    func()
		at    time.Duration // local time of the readiness check, after t0
		want  map[string]bool
		unobs bool
	}{
		{
			name: "initial list: known but not yet seen renewing",
			do: func() {
				turned(ls.observe(lease("kilo-a", "a", wall), t0, true, d), false)
				turned(ls.observe(lease("kilo-b", "", wall), t0, true, d), false) // holder from the name
			},
			want: map[string]bool{"a": false, "b": false}, unobs: true,
		},
		{
			name: "a renews",
			do: func() {
				turned(ls.observe(lease("kilo-a", "a", wall.Add(time.Second)), t0.Add(time.Second), false, d), true)
			},
			at:   time.Second,
			want: map[string]bool{"a": true, "b": false}, unobs: true,
		},
		{
			name: "b renews with a renewTime an hour behind: only the change counts",
			do: func() {
				turned(ls.observe(lease("kilo-b", "b", wall.Add(-time.Hour)), t0.Add(2*time.Second), false, d), true)
			},
			at:   2 * time.Second,
			want: map[string]bool{"a": true, "b": true},
		},
		{
			name: "a resent unchanged (resync) does not count as a renewal",
			do: func() {
				turned(ls.observe(lease("kilo-a", "a", wall.Add(time.Second)), t0.Add(3500*time.Millisecond), false, d), false)
			},
			at:   4 * time.Second,
			want: map[string]bool{"a": false, "b": true},
		},
		{
			name: "c appears after the initial list: a live renewal",
			do:   func() { turned(ls.observe(lease("kilo-c", "c", wall), t0.Add(4*time.Second), false, d), true) },
			at:   4 * time.Second,
			want: map[string]bool{"a": false, "b": true, "c": true},
		},
		{
			name: "a Lease named after c but held by b is not trusted for either",
			do: func() {
				turned(ls.observe(lease("kilo-c", "b", wall.Add(time.Hour)), t0.Add(4*time.Second), false, d), false)
			},
			at:   4 * time.Second,
			want: map[string]bool{"a": false, "b": true, "c": true},
		},
		{
			name: "b's lease deleted",
			do:   func() { ls.forget(lease("kilo-b", "b", wall)) },
			at:   4 * time.Second,
			want: map[string]bool{"a": false, "c": true},
		},
		{
			name: "c renews while fresh: no transition",
			do: func() {
				turned(ls.observe(lease("kilo-c", "c", wall.Add(time.Second)), t0.Add(5*time.Second), false, d), false)
			},
			at:   5 * time.Second,
			want: map[string]bool{"a": false, "c": true},
		},
		{
			// With the watch live (a renews again): a silent watch would
			// stop the clock Leases age by (watchclock.go).
			name: "time passes",
			do: func() {
				for i, at := range []time.Duration{6 * time.Second, 7 * time.Second, 8 * time.Second} {
					ls.observe(lease("kilo-a", "a", wall.Add(time.Duration(2+i)*time.Second)), t0.Add(at), false, d)
				}
			},
			at:   8 * time.Second,
			want: map[string]bool{"a": true, "c": false},
		},
	}
	for _, s := range steps {
		step = s.name
		s.do()
		if diff := cmp.Diff(s.want, ls.ready(t0.Add(s.at), d)); diff != "" {
			t.Errorf("%s: ready (-want +got):\n%s", s.name, diff)
		}
		if got := ls.unobserved(); got != s.unobs {
			t.Errorf("%s: unobserved = %v, want %v", s.name, got, s.unobs)
		}
	}
}

// TestLeaseSince checks that a node's Since is its Lease's creation time,
// which only the API server's clock sets: a renewal keeps it, a Lease
// created again (the node starts anew) moves it, and the renewing node's
// own clock (renewTime, acquireTime) plays no part.
func TestLeaseSince(t *testing.T) {
	const d = 3 * time.Second
	t0 := time.Now()
	ls := newLeases()
	a := lease("kilo-a", "a", created.Add(time.Hour)) // a's clock is an hour ahead
	acquired := metav1.NewMicroTime(created.Add(-24 * time.Hour))
	a.Spec.AcquireTime = &acquired
	ls.observe(a, t0, false, d)
	b := lease("kilo-b", "b", created)
	b.CreationTimestamp = metav1.NewTime(created.Add(time.Second))
	ls.observe(b, t0, false, d)
	want := map[string]time.Time{"a": created, "b": created.Add(time.Second)}
	if diff := cmp.Diff(want, ls.since()); diff != "" {
		t.Fatalf("since (-want +got):\n%s", diff)
	}
	renewed := a.DeepCopy()
	m := metav1.NewMicroTime(created.Add(2 * time.Hour))
	renewed.Spec.RenewTime = &m
	ls.observe(renewed, t0.Add(time.Second), false, d)
	if got := ls.since()["a"]; !got.Equal(created) {
		t.Errorf("a renewal moved Since to %v", got)
	}
	// a's Lease created again, seen as an update (a watch that missed the
	// delete) with the same renewTime: it is a new run.
	again := renewed.DeepCopy()
	again.CreationTimestamp = metav1.NewTime(created.Add(time.Minute))
	for s := 2; s < 10; s++ { // b renews meanwhile: the watch is live, a's Lease goes stale
		ls.observe(lease("kilo-b", "b", created.Add(time.Duration(s)*time.Second)), t0.Add(time.Duration(s)*time.Second), false, d)
	}
	if !ls.observe(again, t0.Add(10*time.Second), false, d) {
		t.Error("the recreated Lease of a stale node did not turn it fresh")
	}
	if got := ls.since()["a"]; !got.Equal(created.Add(time.Minute)) {
		t.Errorf("Since = %v after the Lease was created again, want %v", got, created.Add(time.Minute))
	}
}
