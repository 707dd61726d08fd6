package agent

import (
	"cmp"
	"context"
	"errors"
	"io"
	"maps"
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
// IP, through its WireGuard link (Config.TunnelProbe). It judges its
// tunnels only against the locations that answered during this lead: a
// location whose leader never answered (a lost site, a partner offline)
// says nothing about this leader's tunnels.
const (
	// tunnelTargets is how many other locations a leader probes per round.
	tunnelTargets = 3
	// soloTunnelRounds is how many silent rounds fail the tunnels when only
	// one other location answered during the lead: its own failover (2 s at
	// most) silences it as a broken tunnel here would, and only a longer
	// silence tells them apart.
	soloTunnelRounds = 15
	// tunnelTimeout bounds one probe through a tunnel: a WAN round trip,
	// not a LAN one. The probes of a round are answered in the background;
	// the next round counts them.
	tunnelTimeout = time.Second
	// discoveryInterval is how often a location that has not answered
	// during this lead is probed again, for its first discoveryTries
	// probes. Until its tunnel has a session, each probe waits in
	// wireguard-go's queue for the peer, each packet holding a 64 KiB
	// buffer in the embedded device. WireGuard retries a handshake every 5
	// s whatever the traffic, so probing more often finds nobody sooner.
	discoveryInterval = 5 * time.Second
	// discoveryTries is how many probes, discoveryInterval apart, a
	// location that has not answered gets before it counts as lost.
	discoveryTries = 6
	// lostInterval is how often a lost location is probed. Every packet
	// sent to a peer without a session restarts wireguard-go's handshake
	// attempts (MaxTimerHandshakes+2 initiations, 5 s and up to 334 ms
	// apart: 100-107 s), and its queue is emptied only when they run out:
	// probed every 5 s, a lost location's queue never empties and fills to
	// its 128 entries (at least a 64 KiB buffer each: 8 MiB) per lost
	// location. A probe every lostInterval, longer than those attempts,
	// holds one probe's packets at most, and finds a location that comes
	// back within it.
	lostInterval = 2 * time.Minute
)

// discovery is how a location that has not answered during this lead was
// probed; the zero value is a location not probed yet.
type discovery struct {
	// last is the round of its last probe.
	last int
	// tries counts its probes.
	tries int
}

// probed returns d after one more probe, in round.
func (d discovery) probed(round int) discovery {
	return discovery{last: round, tries: d.tries + 1}
}

// cadence is the discovery's intervals in rounds of the probe interval.
type cadence struct {
	// every is discoveryInterval, lost lostInterval, in rounds.
	every, lost int
}

// discoveryCadence is the discovery's cadence in rounds of interval, each
// at least one round; lost is rounded up, never shorter than lostInterval.
func discoveryCadence(interval time.Duration) cadence {
	if interval <= 0 {
		return cadence{every: 1, lost: 1}
	}
	return cadence{every: max(1, int(discoveryInterval/interval)), lost: max(1, int((lostInterval+interval-1)/interval))}
}

// due reports whether a location probed as d is probed (again) in round.
func (c cadence) due(d discovery, round int) bool {
	switch {
	case d.tries == 0:
		return true
	case d.tries < discoveryTries:
		return round-d.last >= c.every
	}
	return round-d.last >= c.lost
}

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

// otherLeaders returns the segment name of node's own location and the
// other locations whose leaders it can probe, sorted by name. There are none
// outside location granularity, where no node leads a location, and for a
// node that is not in topo.
func otherLeaders(topo *topology.Topology, node string) (string, []tunnelTarget) {
	if topo == nil || topo.Options().Granularity != topology.LocationGranularity {
		return "", nil
	}
	own, ok := topo.Segment(node)
	if !ok {
		return "", nil
	}
	var all []tunnelTarget
	for i := range topo.Segments {
		s := &topo.Segments[i]
		if s.Location == own.Location || !s.WireGuardIP.IsValid() {
			continue
		}
		all = append(all, tunnelTarget{Location: s.Name, IP: s.WireGuardIP.Addr(), From: own.WireGuardIP.Addr()})
	}
	slices.SortFunc(all, func(a, b tunnelTarget) int { return cmp.Compare(a.Location, b.Location) })
	return own.Name, all
}

// chooseTunnelTargets returns the locations of others (sorted by name)
// probed in round by the leader of location own: first up to tunnelTargets
// of those in heard (that answered during this lead), taken in turn when
// there are more; then, in the slots left, the others taken in turn
// (discovery), leaving out those tried (probed during this lead without an
// answer) that the cadence does not make due. Both turns start after own,
// so that the locations spread their probes.
func chooseTunnelTargets(own string, others []tunnelTarget, heard map[string]int, tried map[string]discovery, round int, c cadence) []tunnelTarget {
	var known, rest []tunnelTarget
	for _, t := range others {
		if _, ok := heard[t.Location]; ok {
			known = append(known, t)
		} else if c.due(tried[t.Location], round) {
			rest = append(rest, t)
		}
	}
	out := make([]tunnelTarget, 0, tunnelTargets)
	out = inTurn(out, own, known, round, tunnelTargets)
	return inTurn(out, own, rest, round, tunnelTargets-len(out))
}

// inTurn appends to out n of ts (sorted by name) in round: all of them when
// there are no more than n, else the n that come in turn, starting after
// own.
func inTurn(out []tunnelTarget, own string, ts []tunnelTarget, round, n int) []tunnelTarget {
	if n <= 0 {
		return out
	}
	if len(ts) <= n {
		return append(out, ts...)
	}
	start, _ := slices.BinarySearchFunc(ts, own, func(t tunnelTarget, own string) int { return cmp.Compare(t.Location, own) })
	for i := range n {
		out = append(out, ts[(start+round*n+i)%len(ts)])
	}
	return out
}

// tunnelRoundsNeeded is how many silent rounds in a row fail the tunnels of
// a leader that heard the given number of other locations answer during
// its lead: failures (Config.ProbeFailures), soloTunnelRounds when a single
// one cannot be told from its own failover, zero (never) when none did.
func tunnelRoundsNeeded(heard, failures int) int {
	switch heard {
	case 0:
		return 0
	case 1:
		return soloTunnelRounds
	}
	return failures
}

// tunnelCheck counts the rounds of one lead's tunnel check.
type tunnelCheck struct {
	// Heard holds the locations that answered during this lead, with the
	// round each last answered in; the check is armed once one did: a new
	// leader whose tunnels never worked yet, or a whole WAN down, does not
	// make the lead move from node to node. next never writes the map it
	// was given.
	Heard map[string]int
	// Round is how many rounds this lead has had; LastAnswer the last one
	// in which any location answered.
	Round, LastAnswer int
	// Silent is how many rounds no probed location answered, since the
	// last answer, among those that probed a location of Heard.
	Silent int
	// Stopped holds the locations of Heard probed in those silent rounds:
	// the ones that stopped answering.
	Stopped []string
}

// next returns the check after a round whose probes went to probed and in
// which the locations of answered answered (late answers to earlier rounds
// included), others being the other locations now in the cluster, and
// whether the tunnels count as failed. A silent round counts only when it
// probed a location that answered during this lead; the tunnels fail after
// tunnelRoundsNeeded such rounds in a row for the locations of Heard still
// in the cluster that answered lately: within soloTunnelRounds before the
// last answer (a location lost for good counts no more: the one left then
// has its unhurried count, since its own failover silences it too). Never
// when none did.
func (c tunnelCheck) next(probed, answered, others []string, failures int) (tunnelCheck, bool) {
	c.Round++
	if len(answered) > 0 {
		heard := make(map[string]int, len(c.Heard)+len(answered))
		maps.Copy(heard, c.Heard)
		for _, l := range answered {
			heard[l] = c.Round
		}
		return tunnelCheck{Heard: heard, Round: c.Round, LastAnswer: c.Round}, false
	}
	counts := false
	for _, l := range probed {
		if _, ok := c.Heard[l]; ok {
			counts = true
			if !slices.Contains(c.Stopped, l) {
				c.Stopped = append(slices.Clip(c.Stopped), l)
			}
		}
	}
	if counts {
		c.Silent++
	}
	still := 0
	for _, l := range others {
		if r, ok := c.Heard[l]; ok && c.LastAnswer-r < soloTunnelRounds {
			still++
		}
	}
	need := tunnelRoundsNeeded(still, failures)
	return c, need > 0 && c.Silent >= need
}

// tunnelProbes runs the probes of a lead's rounds in the background and
// records which locations answered since the last round took them.
type tunnelProbes struct {
	mu       sync.Mutex
	lead     int             // bumped at each new lead: answers of an older one do not count
	answered map[string]bool // the locations whose answers for lead came since the last take
	wg       sync.WaitGroup
}

// reset starts the count of a new lead.
func (p *tunnelProbes) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lead++
	clear(p.answered)
}

// take returns the locations that answered since the last take, sorted.
func (p *tunnelProbes) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.answered) == 0 {
		return nil
	}
	a := slices.Sorted(maps.Keys(p.answered))
	clear(p.answered)
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
				if p.answered == nil {
					p.answered = map[string]bool{}
				}
				p.answered[t.Location] = true
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
		c := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: dialWithin(dialer), MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}}
		clients[from] = c
		return c
	}
	return func(ctx context.Context, from, to netip.Addr) error {
		req, err := probeRequest(ctx, "http://"+net.JoinHostPort(to.String(), strconv.Itoa(port))+"/health")
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
