package agent

import (
	"context"
	"time"
)

// RunHeartbeat renews this node's mesh lease every HeartbeatPeriod while the
// node can forward, until ctx ends; then it releases the lease so that
// another node takes over at once on a clean shutdown. A node that stops
// heartbeating for a lease duration starts again as new when it resumes
// (see k8s.Backend.Heartbeat), so it does not take the lead back.
func (a *Agent) RunHeartbeat(ctx context.Context) error {
	tick := time.NewTicker(a.cfg.HeartbeatPeriod)
	defer tick.Stop()
	h := heartbeats{a: a}
	for {
		h.beat(ctx, time.Now())
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return a.cfg.Backend.ReleaseHeartbeat(rctx, a.cfg.Hostname)
		case <-tick.C:
		}
	}
}

// heartbeats follows one RunHeartbeat loop, so that an outage (of the data
// plane or of the API server) is logged once when it starts and once when
// it ends, with how long it lasted, instead of once per period.
type heartbeats struct {
	a *Agent
	// notForwarding is when the node stopped forwarding; zero while it forwards.
	notForwarding time.Time
	// failing is when heartbeats started failing; zero while they succeed.
	failing time.Time
	// failures counts the failed heartbeats of the current outage.
	failures int
}

// beat checks forwarding and heartbeats once, at now.
func (h *heartbeats) beat(ctx context.Context, now time.Time) {
	log := h.a.log
	if f := h.a.cfg.Forwarding; f != nil {
		if err := f(); err != nil {
			if h.notForwarding.IsZero() {
				log.Warn("not forwarding: stopping heartbeats so that another node leads", "err", err)
				h.notForwarding = now
			}
			return
		}
	}
	if !h.notForwarding.IsZero() {
		log.Info("forwarding again: resuming heartbeats", "stopped_for", now.Sub(h.notForwarding).Round(time.Millisecond))
		h.notForwarding = time.Time{}
	}
	err := h.a.cfg.Backend.Heartbeat(ctx, h.a.cfg.Hostname)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil && h.failing.IsZero():
		log.Warn("heartbeat failed; retrying every period, logged again when it succeeds (the other nodes stop counting on this one after the lease duration)", "err", err)
		h.failing, h.failures = now, 1
	case err != nil:
		h.failures++
		log.Debug("heartbeat failed again", "err", err, "failures", h.failures)
	case !h.failing.IsZero():
		log.Info("heartbeat renewed again", "outage", now.Sub(h.failing).Round(time.Millisecond), "failures", h.failures)
		h.failing, h.failures = time.Time{}, 0
	}
}
