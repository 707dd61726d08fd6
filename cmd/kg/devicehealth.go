package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kilofed/kilofed/mesh/wireguard"
)

// deviceHealth says whether the WireGuard device answered lately, from a
// check that runs beside the standbys' probes (GET /forwarding) instead of
// inside them. A probe has 150 ms (agent.DefaultProbeInterval * 3/4); reading
// the device's whole state takes longer in a large cluster (thousands of
// allowed IPs to print and parse, behind the reconciliation's own reads and
// writes of the device): probes that waited for it timed out, the standby
// took a lead that worked, every agent moved its routes to it, and the
// leaders of a 1000-node cluster changed every second or two.
type deviceHealth struct {
	stale time.Duration // how long without an answer makes the device dead
	now   func() time.Time

	mu      sync.Mutex
	lastOK  time.Time // the last answer, or when the check started
	lastErr error     // the last failure since then
}

func newDeviceHealth(stale time.Duration, now func() time.Time) *deviceHealth {
	return &deviceHealth{stale: stale, now: now, lastOK: now()}
}

// record notes the outcome of one check that ended at.
func (h *deviceHealth) record(err error, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.lastOK, h.lastErr = at, nil
		return
	}
	h.lastErr = err
}

// err returns nil while the device answered within stale, and how long it
// has not otherwise.
func (h *deviceHealth) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.now().Sub(h.lastOK)
	if d <= h.stale {
		return nil
	}
	if h.lastErr != nil {
		return fmt.Errorf("no answer for %s: %w", d.Round(time.Millisecond), h.lastErr)
	}
	return fmt.Errorf("no answer for %s", d.Round(time.Millisecond))
}

// watch reads dev's state every period (each read given stale) until ctx
// ends.
func (h *deviceHealth) watch(ctx context.Context, dev wireguard.Device, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, h.stale)
		_, err := dev.Show(sctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.record(err, h.now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
