package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// stuckResyncs is how many resync periods may pass without a finished
// reconciliation before Live reports the loop stuck.
const stuckResyncs = 3

// ticker is the part of time.Ticker the loop uses, so that tests can tick
// by hand.
type ticker interface {
	C() <-chan time.Time
	Stop()
}

type timeTicker struct{ *time.Ticker }

func (t timeTicker) C() <-chan time.Time { return t.Ticker.C }

func newTimeTicker(d time.Duration) ticker { return timeTicker{time.NewTicker(d)} }

// Run reconciles on every change and every resync period until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	resync := a.newTicker(a.cfg.ResyncPeriod)
	defer resync.Stop()
	nudge := a.newTicker(nudgeTick)
	defer nudge.Stop()
	for {
		start := time.Now()
		if err := a.Reconcile(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("reconcile failed", "err", err)
		}
		a.log.Debug("reconciled", "took", time.Since(start).Round(time.Millisecond))
		if !a.waitForChange(ctx, resync.C(), nudge.C()) {
			return nil
		}
	}
}

// waitForChange restarts first handshakes on every nudge tick until the
// cluster changes, the election takes a lead (setLeading) or the resync
// period passes (true), or ctx ends (false).
func (a *Agent) waitForChange(ctx context.Context, resync, nudge <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-a.cfg.Backend.Changes():
			return true
		case <-a.kick:
			return true
		case <-resync:
			a.resync = true
			return true
		case <-nudge:
			a.restartHandshakes(ctx)
		}
	}
}

// Live returns nil while the reconcile loop makes progress, whatever the
// outcome of its reconciliations: it fails only when none finished for
// stuckResyncs resync periods (since New, before the first one). A
// restart would drop this node's lead and tunnels, so partial errors,
// which the next reconciliation may repair, do not count; see Ready.
func (a *Agent) Live() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	since := a.lastDone
	if since.IsZero() {
		since = a.started
	}
	limit := stuckResyncs * a.cfg.ResyncPeriod
	if d := a.now().Sub(since); d > limit {
		if a.lastDone.IsZero() {
			return fmt.Errorf("stuck: the first reconciliation has not finished after %s (%d resync periods)", d.Round(time.Second), stuckResyncs)
		}
		return fmt.Errorf("stuck: no reconciliation finished for %s (%d resync periods)", d.Round(time.Second), stuckResyncs)
	}
	return nil
}

// Ready returns nil when the last reconciliation applied everything, and
// the errors of the steps that failed otherwise.
func (a *Agent) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastDone.IsZero() {
		return errors.New("not reconciled yet")
	}
	return a.lastErr
}
