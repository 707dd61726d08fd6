package join

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
)

// waitHandshake waits until each side's RemoteCluster of the other reports
// a tunnel up (a handshake with one of the other's gateways), for at most d.
func waitHandshake(ctx context.Context, a, b *member, d time.Duration, p *progress) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		up := 0
		state := ""
		for _, pair := range [][2]*member{{a, b}, {b, a}} {
			var rc fedv1.RemoteCluster
			err := pair[0].side.Cluster.Client.Get(ctx, client.ObjectKey{Name: pair[1].ranges.ID}, &rc)
			switch {
			case err != nil:
				state += fmt.Sprintf("%s: %v; ", pair[0].ranges.ID, err)
			case rc.Status.TunnelsUp > 0:
				up++
				state += fmt.Sprintf("%s -> %s: %d of %d tunnels up; ", pair[0].ranges.ID, pair[1].ranges.ID, rc.Status.TunnelsUp, rc.Status.Gateways)
			default:
				state += fmt.Sprintf("%s -> %s: %s; ", pair[0].ranges.ID, pair[1].ranges.ID, waitingFor(rc))
			}
		}
		if state != last {
			p.detail("%s", state[:len(state)-2])
			last = state
		}
		if up == 2 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no handshake between them within %s (is kilofed-controller running in both? kilofed status says what is wrong)", d)
		case <-tick.C:
		}
	}
}

// waitingFor says what rc is waiting for, from its first condition that is
// not True.
func waitingFor(rc fedv1.RemoteCluster) string {
	if len(rc.Status.Conditions) == 0 {
		return "no status yet (the controller has not seen it)"
	}
	for _, c := range rc.Status.Conditions {
		if c.Status != "True" && c.Type != fedv1.Ready {
			return c.Type + " " + string(c.Status) + ": " + c.Message
		}
	}
	return "waiting for a handshake"
}
