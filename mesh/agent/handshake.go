package agent

import (
	"context"
	"slices"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// WireGuard retries a lost handshake initiation only after 5 s (its
// REKEY_TIMEOUT). After a failover both ends of a new tunnel are
// reconfigured within milliseconds of each other, so the first initiation
// often reaches a side that does not know the sender yet, and traffic waits
// 5 s more. The agent shortens that: a peer configured moments ago that has
// not completed a handshake is removed and added again, which gives it a
// fresh handshake state, and its keepalive sends a new initiation at once.
const (
	// nudgeWindow is how long after a peer is configured its first
	// handshake is helped.
	nudgeWindow = 15 * time.Second
	// nudgeEvery is the time between two restarts of one peer's handshake.
	nudgeEvery = time.Second
	// nudgeTick is how often the agent looks for such peers.
	nudgeTick = 250 * time.Millisecond
)

// nudger decides which peers' first handshakes to restart. It is pure: the
// agent feeds it the applied configuration and the device's state.
type nudger struct {
	since map[wgconf.Key]time.Time // when each peer was first configured
	last  map[wgconf.Key]time.Time // when its handshake was last restarted
}

func newNudger() *nudger {
	return &nudger{since: map[wgconf.Key]time.Time{}, last: map[wgconf.Key]time.Time{}}
}

// track records the peers of an applied configuration: new ones start their
// window now, and peers no longer configured are forgotten.
func (n *nudger) track(conf wgconf.Config, now time.Time) {
	keep := map[wgconf.Key]bool{}
	for _, p := range conf.Peers {
		keep[p.PublicKey] = true
		if _, ok := n.since[p.PublicKey]; !ok {
			n.since[p.PublicKey] = now
		}
	}
	for k := range n.since {
		if !keep[k] {
			delete(n.since, k)
			delete(n.last, k)
		}
	}
}

// forget drops every tracked peer, so that the next track starts each
// window again (after a key rotation, every tunnel has a handshake to make).
func (n *nudger) forget() {
	clear(n.since)
	clear(n.last)
}

// due returns the peers, among those reachable (it is their side that can
// initiate), whose handshake to restart now: configured within nudgeWindow,
// no handshake completed since, not restarted within nudgeEvery. A peer is
// first restarted nudgeEvery after it was configured, once its own first
// initiation had its chance.
func (n *nudger) due(st wireguard.State, reachable func(wgconf.Key) bool, now time.Time) []wgconf.Key {
	var out []wgconf.Key
	for k, since := range n.since {
		if now.Sub(since) > nudgeWindow || now.Sub(since) < nudgeEvery || now.Sub(n.last[k]) < nudgeEvery || !reachable(k) {
			continue
		}
		if p, ok := st.Peer(k); ok && !p.LastHandshake.Before(since) {
			continue
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b wgconf.Key) int { return slices.Compare(a[:], b[:]) })
	return out
}

// restartHandshakes restarts the first handshake of the peers that need it,
// by applying the last configuration without them, then with them.
func (a *Agent) restartHandshakes(ctx context.Context) {
	a.mu.Lock()
	conf, topo := a.applied, a.topo
	a.mu.Unlock()
	if topo == nil || len(conf.Peers) == 0 {
		return
	}
	st, err := a.cfg.Device.Show(ctx)
	if err != nil {
		return
	}
	now := a.now()
	keys := a.nudge.due(st, func(k wgconf.Key) bool { return !topo.PreferLearntEndpoint(k) }, now)
	if len(keys) == 0 {
		return
	}
	without := conf
	without.Peers = slices.DeleteFunc(slices.Clone(conf.Peers), func(p wgconf.Peer) bool {
		return slices.Contains(keys, p.PublicKey)
	})
	if err := a.cfg.Device.Set(ctx, without); err != nil {
		a.log.Warn("restart handshakes", "err", err)
		return
	}
	if err := a.cfg.Device.Set(ctx, conf); err != nil {
		a.log.Warn("restart handshakes", "err", err)
		return
	}
	for _, k := range keys {
		a.nudge.last[k] = now
		a.log.Debug("no handshake yet with a new peer: restarting it", "peer", k.String())
	}
}
