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

func TestNodeReady(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		condition, fresh, forwarding bool
		want                         bool
	}{
		{name: "all good", condition: true, fresh: true, forwarding: true, want: true},
		{name: "Node Ready False", condition: false, fresh: true, forwarding: true},
		{name: "stale lease", condition: true, fresh: false, forwarding: true},
		{name: "probe says not forwarding", condition: true, fresh: true, forwarding: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeReady(tc.condition, tc.fresh, tc.forwarding); got != tc.want {
				t.Errorf("NodeReady = %v, want %v", got, tc.want)
			}
		})
	}
}

func lease(name, holder string, renew time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}
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
			name: "probe marks c not forwarding",
			do:   func() { ls.setForwarding("c", false) },
			at:   4 * time.Second,
			want: map[string]bool{"a": false, "b": true, "c": false},
		},
		{
			name: "b's lease deleted, c forwards again",
			do:   func() { ls.forget(lease("kilo-b", "b", wall)); ls.setForwarding("c", true) },
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
			name: "time passes",
			do:   func() {},
			at:   8 * time.Second,
			want: map[string]bool{"a": false, "c": false},
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
	if !ls.setForwarding("x", false) || ls.setForwarding("x", false) || !ls.setForwarding("x", true) {
		t.Error("setForwarding does not report changes exactly")
	}
}
