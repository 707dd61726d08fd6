package agent

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/kilofed/kilofed/mesh/topology"
)

// A leader that is Ready, whose WireGuard link is up and that forwards may
// still drop its location's traffic: its WireGuard port filtered, its NAT
// broken (Kilo's issue 489). While a node leads its location, it checks
// its tunnels every probe interval: it asks the agents of the leaders of up
// to tunnelTargets other locations for /health at their segment's WireGuard
// IP, through its WireGuard link (Config.TunnelProbe).
const (
	// tunnelTargets is how many other locations a leader probes per round.
	tunnelTargets = 3
	// soloTunnelRounds is how many silent rounds fail the tunnels when the
	// cluster has only one other location: its own failover (2 s at most)
	// silences it as a broken tunnel here would, and only a longer silence
	// tells them apart.
	soloTunnelRounds = 15
	// tunnelTimeout bounds one probe through a tunnel: a WAN round trip,
	// not a LAN one. The probes of a round are answered in the background;
	// the next round counts them.
	tunnelTimeout = time.Second
)

// tunnelTarget is the leader of another location, as the tunnel check
// reaches it.
type tunnelTarget struct {
	// Location is the location's segment name.
	Location string
	// IP is the segment's WireGuard IP, which its leader wears.
	IP netip.Addr
	// From is the prober's own segment's WireGuard IP, the probe's
	// source: the answer comes back through the tunnel, never in the clear
	// to a LAN address.
	From netip.Addr
}

// tunnelTargetsOf returns the other locations whose leaders node probes in
// round (all of them up to tunnelTargets; else tunnelTargets taken in turn
// from the segments sorted by name, starting after node's own so that the
// locations spread their probes) and how many there are to probe. There are none outside location
// granularity, where no node leads a location, and for a node that is not
// in topo.
func tunnelTargetsOf(topo *topology.Topology, node string, round int) ([]tunnelTarget, int) {
	if topo == nil || topo.Options().Granularity != topology.LocationGranularity {
		return nil, 0
	}
	own, ok := topo.Segment(node)
	if !ok {
		return nil, 0
	}
	var all []tunnelTarget
	start := 0
	for i := range topo.Segments {
		s := &topo.Segments[i]
		if cmp.Less(s.Name, own.Name) {
			start++
		}
		if s.Location == own.Location || !s.WireGuardIP.IsValid() {
			continue
		}
		all = append(all, tunnelTarget{Location: s.Name, IP: s.WireGuardIP.Addr(), From: own.WireGuardIP.Addr()})
	}
	slices.SortFunc(all, func(a, b tunnelTarget) int { return cmp.Compare(a.Location, b.Location) })
	// start counted the segments before node's own: its own is not in all.
	start = min(start, len(all))
	n := len(all)
	if n <= tunnelTargets {
		return all, n
	}
	out := make([]tunnelTarget, 0, tunnelTargets)
	for i := range tunnelTargets {
		out = append(out, all[(start+round*tunnelTargets+i)%n])
	}
	return out, n
}

// tunnelRoundsNeeded is how many silent rounds in a row fail the tunnels of
// a leader with the given number of other locations to probe: failures
// (Config.ProbeFailures), soloTunnelRounds when a single one cannot be told
// from its own failover, zero (never) when there is none.
func tunnelRoundsNeeded(locations, failures int) int {
	switch locations {
	case 0:
		return 0
	case 1:
		return soloTunnelRounds
	}
	return failures
}

// tunnelCheck counts the rounds of one lead's tunnel check.
type tunnelCheck struct {
	// Armed says that an answer came through during this lead: a new
	// leader whose tunnels never worked yet, or a whole WAN down, does not
	// make the lead move from node to node.
	Armed bool
	// Silent is how many rounds in a row no probed location answered.
	Silent int
}

// next returns the check after a round in which answered says whether any
// probed location answered, and whether the tunnels count as failed: armed,
// and silent for need rounds in a row (need 0: nothing to check, never).
func (c tunnelCheck) next(answered bool, need int) (tunnelCheck, bool) {
	if answered {
		return tunnelCheck{Armed: true}, false
	}
	c.Silent++
	return c, need > 0 && c.Armed && c.Silent >= need
}

// tunnelProbes runs the probes of a lead's rounds in the background and
// records whether one answered since the last round took the count.
type tunnelProbes struct {
	mu       sync.Mutex
	lead     int  // bumped at each new lead: answers of an older one do not count
	answered bool // an answer of lead came since the last take
	wg       sync.WaitGroup
}

// reset starts the count of a new lead.
func (p *tunnelProbes) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lead++
	p.answered = false
}

// take reports whether an answer came since the last take.
func (p *tunnelProbes) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.answered
	p.answered = false
	return a
}

// launch probes each target in the background, each for tunnelTimeout at
// most.
func (p *tunnelProbes) launch(ctx context.Context, probe func(ctx context.Context, from, to netip.Addr) error, targets []tunnelTarget) {
	p.mu.Lock()
	lead := p.lead
	p.mu.Unlock()
	for _, t := range targets {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pctx, cancel := context.WithTimeout(ctx, tunnelTimeout)
			defer cancel()
			if probe(pctx, t.From, t.IP) != nil {
				return
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.lead == lead {
				p.answered = true
			}
		}()
	}
}

// wait waits for the probes in flight (tests).
func (p *tunnelProbes) wait() { p.wg.Wait() }

// HTTPTunnelProbe returns a Config.TunnelProbe that asks the agent at to
// (another location's leader, at its segment's WireGuard IP) for /health
// on port (kg's --listen), from this node's segment's WireGuard IP (so that
// the answer comes back through the tunnel, not in the clear to a LAN
// address), dialing with control (kg binds the socket to its WireGuard
// link, so that the probe goes through the tunnel as the location's traffic
// does): nil when anything answered, an HTTP error (503) or a refusal
// included, since the answer came back through the tunnel; an error when
// nothing did in time or the probe could not go out.
func HTTPTunnelProbe(port int, control func(network, address string, c syscall.RawConn) error) func(ctx context.Context, from, to netip.Addr) error {
	var (
		mu      sync.Mutex
		clients = map[netip.Addr]*http.Client{}
	)
	clientFrom := func(from netip.Addr) *http.Client {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := clients[from]; ok {
			return c
		}
		for a, c := range clients { // a new lead, another address: the old ones go
			c.CloseIdleConnections()
			delete(clients, a)
		}
		dialer := &net.Dialer{Control: control}
		if from.IsValid() {
			dialer.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
		}
		c := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: dialer.DialContext, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}}
		clients[from] = c
		return c
	}
	return func(ctx context.Context, from, to netip.Addr) error {
		url := "http://" + net.JoinHostPort(to.String(), strconv.Itoa(port)) + "/health"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := clientFrom(from).Do(req)
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 512))
		return resp.Body.Close()
	}
}
