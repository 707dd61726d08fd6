package agent

import (
	"context"
	"time"
)

// RunHeartbeat renews this node's mesh lease every HeartbeatPeriod while the
// node can forward, until ctx ends; then it releases the lease so that
// another node takes over at once on a clean shutdown.
func (a *Agent) RunHeartbeat(ctx context.Context) error {
	tick := time.NewTicker(a.cfg.HeartbeatPeriod)
	defer tick.Stop()
	healthy := true
	for {
		err := error(nil)
		if a.cfg.Forwarding != nil {
			err = a.cfg.Forwarding()
		}
		switch {
		case err != nil && healthy:
			a.log.Warn("not forwarding: stopping heartbeats so that another node leads", "err", err)
		case err == nil && !healthy:
			a.log.Info("forwarding again: resuming heartbeats")
		}
		healthy = err == nil
		if healthy {
			if err := a.cfg.Backend.Heartbeat(ctx, a.cfg.Hostname); err != nil && ctx.Err() == nil {
				a.log.Warn("heartbeat failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return a.cfg.Backend.ReleaseHeartbeat(rctx, a.cfg.Hostname)
		case <-tick.C:
		}
	}
}
