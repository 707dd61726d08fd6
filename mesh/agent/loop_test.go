package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// handTicker is a ticker the test ticks by hand. Its channel is
// unbuffered, so a tick returns only once the loop took it: the loop has
// finished whatever it did before.
type handTicker struct {
	c       chan time.Time
	stopped bool
}

func (h *handTicker) C() <-chan time.Time { return h.c }
func (h *handTicker) Stop()               { h.stopped = true }

// handChanges is a backend whose change signal the test sends by hand, as
// unbuffered as handTicker's.
type handChanges struct {
	*k8s.Fake
	c chan struct{}
}

func (h handChanges) Changes() <-chan struct{} { return h.c }

// handLoop gives r's agent hand tickers and a hand change signal.
func handLoop(r *rig) (resync, nudge *handTicker, changes chan struct{}) {
	resync, nudge = &handTicker{c: make(chan time.Time)}, &handTicker{c: make(chan time.Time)}
	changes = make(chan struct{})
	r.agent.cfg.Backend = handChanges{Fake: r.backend, c: changes}
	r.agent.newTicker = func(d time.Duration) ticker {
		if d == r.agent.cfg.ResyncPeriod {
			return resync
		}
		return nudge
	}
	return resync, nudge, changes
}

func TestRunReconcilesAtStartOnChangeAndOnResyncOnly(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	resync, nudge, changes := handLoop(r)
	reconciles := func() float64 { return testutil.ToFloat64(r.agent.cfg.Metrics.reconciles) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.agent.Run(ctx) }()

	changes <- struct{}{}   // taken after the first reconcile
	resync.c <- time.Time{} // taken after the reconcile of the change
	nudge.c <- time.Time{}  // taken after the resync's reconcile
	nudge.c <- time.Time{}  // taken after the first nudge, which does not reconcile
	if got := reconciles(); got != 3 {
		t.Errorf("reconciles after start, a change and a resync tick = %v, want 3", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil when its context ends", err)
	}
	if got := reconciles(); got != 3 {
		t.Errorf("reconciles after two nudges and the end = %v, want 3", got)
	}
	if !resync.stopped || !nudge.stopped {
		t.Errorf("tickers stopped: resync %v, nudge %v; want both", resync.stopped, nudge.stopped)
	}
}

func TestWaitForChangeNudgesUntilAChangeOrResync(t *testing.T) {
	var leading func(string)
	for _, tt := range []struct {
		name string
		end  func(resync chan time.Time, changes chan struct{}, cancel context.CancelFunc)
		want bool
	}{
		{name: "the election took the lead", end: func(chan time.Time, chan struct{}, context.CancelFunc) { leading("cn-beijing") }, want: true},
		{name: "a change", end: func(_ chan time.Time, c chan struct{}, _ context.CancelFunc) { c <- struct{}{} }, want: true},
		{name: "a resync tick", end: func(r chan time.Time, _ chan struct{}, _ context.CancelFunc) { r <- time.Time{} }, want: true},
		{name: "the end of the context", end: func(_ chan time.Time, _ chan struct{}, cancel context.CancelFunc) { cancel() }, want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, "node-beijing", 1)
			if err := r.agent.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			clock := time.Unix(1e9, 0)
			r.agent.now = func() time.Time { return clock }
			r.agent.nudge = newNudger()
			r.agent.nudge.track(r.agent.applied, clock)
			resync, nudge, changes := handLoop(r)
			leading = func(loc string) { r.agent.setLeading(loc) }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan bool)
			go func() { got <- r.agent.waitForChange(ctx, resync.c, nudge.c) }()
			before := r.device.Record()
			clock = clock.Add(1100 * time.Millisecond)
			nudge.c <- time.Time{}
			nudge.c <- time.Time{} // taken once the first nudge restarted the handshake
			tt.end(resync.c, changes, cancel)
			if g := <-got; g != tt.want {
				t.Errorf("waitForChange = %v, want %v", g, tt.want)
			}
			if restarts := strings.Count(strings.TrimPrefix(r.device.Record(), before), "remove peer"); restarts != 1 {
				t.Errorf("handshake restarts while waiting = %d, want 1 (the second nudge is within a second):\n%s",
					restarts, strings.TrimPrefix(r.device.Record(), before))
			}
		})
	}
}

func TestRestartHandshakesOnlyForFreshSilentReachablePeers(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	t0 := time.Unix(1e9, 0)
	clock := t0
	r.agent.now = func() time.Time { return clock }
	ctx := context.Background()
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	shanghai := pubKey(t, 3)
	restarts := func() string {
		before := r.device.Record()
		r.agent.restartHandshakes(ctx)
		return strings.TrimPrefix(r.device.Record(), before)
	}
	for _, step := range []struct {
		name    string
		at      time.Duration
		observe *wireguard.PeerState
		want    []string // lines the device must record, in order; none for no change
	}{
		{name: "too early: the peer's own first initiation has its chance", at: 500 * time.Millisecond},
		{name: "a second without handshake: removed and added again", at: 1100 * time.Millisecond,
			want: []string{"set kilo0", "remove peer " + shanghai.String()[:8], "set kilo0", "add peer " + shanghai.String()[:8]}},
		{name: "not again within a second", at: 1500 * time.Millisecond},
		{name: "again a second later", at: 2200 * time.Millisecond,
			want: []string{"remove peer " + shanghai.String()[:8], "add peer " + shanghai.String()[:8]}},
		{name: "after a handshake: left alone", at: 3500 * time.Millisecond,
			observe: &wireguard.PeerState{PublicKey: shanghai, LastHandshake: t0.Add(3 * time.Second)}},
	} {
		clock = t0.Add(step.at)
		if step.observe != nil && !r.device.Observe(*step.observe) {
			t.Fatalf("%s: peer %s not configured", step.name, step.observe.PublicKey)
		}
		got := restarts()
		if len(step.want) == 0 && got != "" {
			t.Errorf("%s: device changed:\n%s", step.name, got)
		}
		rest := got
		for _, w := range step.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: %q missing (in order) from:\n%s", step.name, w, got)
				break
			}
			rest = rest[i+len(w):]
		}
	}
}
