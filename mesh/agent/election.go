package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
)

// Defaults of the location election (Config.Election).
const (
	// DefaultProbeInterval is how often the best standbys of a location
	// probe its leader over the LAN.
	DefaultProbeInterval = 200 * time.Millisecond
	// DefaultProbeFailures is how many probes in a row must fail before the
	// best standby takes the lead (the next ones wait one more each).
	DefaultProbeFailures = 3
	// probers is how many standbys, the best ranked, probe the leader.
	probers = 3
	// rankDelay is how long each rank waits after the one before it to take
	// a vacant lead, so that the preferred candidate wins.
	rankDelay = 300 * time.Millisecond
	// leadApplyWait bounds how long a new leader waits for WireGuard to
	// take its lead before it publishes it.
	leadApplyWait = 300 * time.Millisecond
	// handoverBackoff is how long a last-resort leader waits before it
	// hands its lead over again when the standby it handed it to did not
	// take it.
	handoverBackoff = 30 * time.Second
)

// candidates returns the nodes of location loc that have a key ranked as leaders are
// preferred: the kilo.squat.ai/leader annotation first, then a public
// endpoint, then the name. Liveness is not part of it: the election Lease
// says who leads, and a live holder keeps the lead (sticky).
func candidates(nodes []topology.Node, loc string) []string {
	type cand struct {
		name           string
		leader, public bool
	}
	var cs []cand
	for _, n := range nodes {
		if n.Location != loc || n.Key.IsZero() {
			continue // another location, or no agent published a key yet
		}
		cs = append(cs, cand{name: n.Name, leader: n.Leader, public: topology.Public(&n)})
	}
	slices.SortFunc(cs, func(a, b cand) int {
		return cmp.Or(boolFirst(a.leader, b.leader), boolFirst(a.public, b.public), cmp.Compare(a.name, b.name))
	})
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}

// outranks reports whether node n's preference (the kilo.squat.ai/leader
// annotation, then a public endpoint) is strictly above that of the node
// named holder; false when holder is not in nodes.
func outranks(n topology.Node, nodes []topology.Node, holder string) bool {
	j := slices.IndexFunc(nodes, func(m topology.Node) bool { return m.Name == holder })
	if j < 0 {
		return false
	}
	h := nodes[j]
	return cmp.Or(boolFirst(n.Leader, h.Leader), boolFirst(topology.Public(&n), topology.Public(&h))) < 0
}

func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// electionInput is what one election step decides from.
type electionInput struct {
	// Lease is the location's election Lease as this node sees it.
	Lease k8s.LocationLease
	// Self is this node's name.
	Self string
	// Trusted says that the Lease's holder is a node of the location.
	Trusted bool
	// Forwarding says that this node can forward (Config.Forwarding).
	Forwarding bool
	// Rank is this node's rank among the location's candidates, the holder
	// left out (0 is the best); -1 when it is not one.
	Rank int
	// VacantFor is how long the lead has been vacant (no Lease, released,
	// held by a node of another location), as this node saw it.
	VacantFor time.Duration
	// LeaseDuration is how long a holder's renewal counts.
	LeaseDuration time.Duration
	// ProbeArmed says that a probe of the holder succeeded during its
	// current term: probes work, so their failures count.
	ProbeArmed bool
	// Failures is how many probes of the holder failed in a row.
	Failures int
	// Prober says that this node is one of the best standbys, which probe
	// the holder: only they take a held lead.
	Prober bool
	// ProbeFailures is DefaultProbeFailures or its replacement.
	ProbeFailures int
	// Outranks says that this node's preference is strictly above the
	// holder's: the kilo.squat.ai/leader annotation it lacks, or else a
	// public endpoint it lacks.
	Outranks bool
	// TunnelsFailed says, for the holder, that its check through the
	// tunnels failed during this lead (tunnelCheck); for a standby, that
	// it failed the last time this node led and no tunnel answered since.
	TunnelsFailed bool
	// Standbys is how many standbys the location has, the holder left out.
	Standbys int
}

// electionAction is what one election step does.
type electionAction int

const (
	// wait changes nothing.
	wait electionAction = iota
	// renew renews this node's hold of the Lease.
	renew
	// release gives the Lease up (this node cannot forward).
	release
	// takeVacant takes a Lease nobody (trusted) holds.
	takeVacant
	// takeDead takes the Lease from a holder that does not answer probes.
	takeDead
	// takeExpired takes the Lease from a holder that stopped renewing it
	// while probes do not tell (they never worked during its term).
	takeExpired
	// takePreferred takes the Lease from a live holder that this node
	// outranks (the leader annotation, a public endpoint), as Kilo's
	// annotation makes a node the leader.
	takePreferred
)

func (a electionAction) String() string {
	return [...]string{"wait", "renew", "release", "take vacant lease", "take lease of a leader that does not answer probes", "take expired lease", "take lease of a leader this node outranks (kilo.squat.ai/leader, public endpoint)"}[a]
}

// decide returns what a node does in one election step: the holder renews
// while it can forward and its tunnels answer, and releases when not; a
// standby whose tunnels failed when it last led ranks after every other
// standby and preempts no holder, so that it does not take the lead back
// while another node can hold it, yet a location keeps a leader; a standby that can
// forward takes a vacant lead after a delay of its rank, and, if it is one
// of the best standbys (Prober), a held one only when the holder fails the
// probes (the best standby first), or, when probes never worked during the
// holder's term, once the holder stopped renewing for a lease duration. A
// live holder is preempted only by the best standby when it outranks the
// holder (the kilo.squat.ai/leader annotation, then a public endpoint, as
// in Kilo and in the node-leases order); among equals a node that comes back
// does not take the lead from a working one, and an API outage, which stops
// renewals but not probes, changes no leader.
func decide(in electionInput) electionAction {
	if !in.Lease.Known {
		return wait
	}
	if in.Lease.Exists && in.Lease.Holder == in.Self {
		if !in.Forwarding || in.TunnelsFailed {
			return release
		}
		return renew
	}
	if !in.Forwarding || in.Rank < 0 {
		return wait
	}
	rank := in.Rank
	if in.TunnelsFailed {
		rank = max(rank, in.Standbys)
	}
	delay := time.Duration(rank) * rankDelay
	switch {
	case !in.Lease.Exists || in.Lease.Holder == "" || !in.Trusted:
		if in.VacantFor >= delay {
			return takeVacant
		}
	case in.Outranks && in.Rank == 0 && !in.TunnelsFailed:
		return takePreferred
	case !in.Prober:
	case in.ProbeArmed && in.Failures >= in.ProbeFailures+rank:
		return takeDead
	case !in.ProbeArmed && in.Lease.Age >= in.LeaseDuration+delay:
		return takeExpired
	}
	return wait
}

// election is the state of one RunElection loop.
type election struct {
	a  *Agent
	el k8s.Elector

	loc       string
	published string // the LeadsAnnotation value last published
	renewed   time.Time
	vacant    time.Time // since when the lead is vacant; zero when held
	untrusted string    // the untrusted holder last reported

	probed     string // the holder and term the probe state is about
	armed      bool
	failures   int
	lastProbe  time.Time
	notForward bool
	former     string    // the last trusted holder seen: last in line for the lead it left
	left       time.Time // when this node stopped holding the lead it still publishes

	// The check through the tunnels while this node leads.
	tunnelLead    string // the term the check is about
	tunnelCheck   tunnelCheck
	tunnelFailed  bool // the check of this lead failed
	tunnelRound   int
	lastTunnel    time.Time
	tunnelProbed  []string             // the locations probed in the last round
	tunnelTried   map[string]discovery // how each location that has not answered was probed
	tunnelsBroken bool                 // failed when this node last led, no answer since
	tunnels       tunnelProbes

	// The hand-over of a last-resort lead (handOver).
	handedOver    time.Time // when this node last handed its lead over
	handingOver   string    // the lead it hands over, until released
	handoverProbe time.Time // when it last asked a standby
	handoverTurn  int       // which of the best standbys it asks next
}

// newElection returns the state of a new election loop; what it published
// starts unknown, so that a node that comes back withdraws the lead its
// previous run left on its Node.
func newElection(a *Agent, el k8s.Elector) *election {
	return &election{a: a, el: el, published: "?"}
}

// RunElection elects this node's location's leader with the location's
// election Lease (Config.Election) until ctx ends, then releases the Lease
// if this node holds it and withdraws its LeadsAnnotation, so that another
// node takes over at once on a clean shutdown.
func (a *Agent) RunElection(ctx context.Context) error {
	el := a.cfg.Election
	if el == nil {
		return errors.New("agent: RunElection needs Config.Election")
	}
	e := newElection(a, el)
	// Ticks at half the probe interval: a failed probe is retried then.
	tick := time.NewTicker(a.cfg.ProbeInterval / 2)
	defer tick.Stop()
	for {
		last := time.Now()
		e.step(ctx, last)
	wait:
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return e.stop(rctx)
		case now := <-tick.C:
			if now.Sub(last) < a.cfg.ProbeInterval*9/10 && !e.retryDue(now) {
				goto wait
			}
		case <-el.LeaseChanges():
		}
	}
}

// retryDue reports whether the last probe of the holder failed and its
// retry, half a probe interval later, is due at now.
func (e *election) retryDue(now time.Time) bool {
	return e.failures > 0 && now.Sub(e.lastProbe) >= e.a.cfg.ProbeInterval*9/20
}

// stop releases the Lease and withdraws the annotation.
func (e *election) stop(ctx context.Context) error {
	var errs []error
	if e.loc != "" {
		errs = append(errs, e.el.ReleaseLocation(ctx, e.loc, e.a.cfg.Hostname))
	}
	if e.published != "" {
		errs = append(errs, e.el.PublishLeads(ctx, e.a.cfg.Hostname, ""))
	}
	return errors.Join(errs...)
}

// step runs one election step at now.
func (e *election) step(ctx context.Context, now time.Time) {
	a, log, self := e.a, e.a.log, e.a.cfg.Hostname
	nodes := a.lastNodes()
	i := slices.IndexFunc(nodes, func(n topology.Node) bool { return n.Name == self })
	if i < 0 {
		return // not reconciled yet, or this node's Node is not known
	}
	loc := nodes[i].Location
	if loc != e.loc {
		if e.loc != "" {
			actx, cancel := context.WithTimeout(ctx, apiTimeout)
			if err := e.el.ReleaseLocation(actx, e.loc, self); err != nil {
				log.Warn("election lease of the former location not released", "location", e.loc, "err", err)
			}
			cancel()
		}
		log.Info("following the election lease of the location", "location", loc, "lease", k8s.LocationLeaseName(loc))
		e.loc, e.vacant, e.probed = loc, time.Time{}, ""
		e.el.FollowLocation(loc)
	}
	if loc == "" {
		e.publish(ctx, "")
		return
	}
	l := e.el.LocationLease(loc)
	forwarding := true
	if f := a.cfg.Forwarding; f != nil {
		if err := f(); err != nil {
			forwarding = false
			if !e.notForward {
				log.Warn("not forwarding: giving up the lead or not taking it, so that another node leads", "err", err)
			}
		} else if e.notForward {
			log.Info("forwarding again")
		}
	}
	e.notForward = !forwarding
	cands := candidates(nodes, loc)
	trusted := slices.Contains(cands, l.Holder)
	if trusted && l.Holder != "" {
		e.former = l.Holder
	}
	if l.Holder != "" && !trusted && l.Holder != e.untrusted {
		log.Warn("the location's election lease is held by a node that is not in the location: ignored, as if vacant",
			"location", loc, "holder", l.Holder)
	}
	if !trusted {
		e.untrusted = l.Holder
	} else {
		e.untrusted = ""
	}
	vacant := l.Known && (!l.Exists || l.Holder == "" || !trusted)
	standbys := slices.DeleteFunc(slices.Clone(cands), func(n string) bool { return n == l.Holder })
	if vacant {
		standbys = formerLast(standbys, e.former)
	}
	rank := slices.Index(standbys, self)
	switch {
	case !vacant:
		e.vacant = time.Time{}
	case e.vacant.IsZero():
		e.vacant = now
	}
	if l.Holder != self && trusted && rank >= 0 && rank < probers {
		e.probe(ctx, nodes, l, now)
	} else {
		e.probed, e.armed, e.failures = "", false, 0
	}
	holding := l.Exists && l.Holder == self
	tunnelsFailed := e.tunnelsBroken
	if holding && forwarding {
		tunnelsFailed = e.checkTunnels(ctx, l, len(cands), now)
		if !tunnelsFailed && e.handOver(ctx, nodes, cands, now) {
			tunnelsFailed = true // released below, as after a failed check
		}
	} else {
		e.tunnelLead = ""
	}
	in := electionInput{
		Lease: l, Self: self, Trusted: trusted, Forwarding: forwarding, Rank: rank,
		LeaseDuration: a.cfg.LeaseDuration, ProbeArmed: e.armed, Failures: e.failures,
		ProbeFailures: a.cfg.ProbeFailures, Prober: rank >= 0 && rank < probers,
		Outranks:      trusted && outranks(nodes[i], nodes, l.Holder),
		TunnelsFailed: tunnelsFailed, Standbys: len(standbys),
	}
	if !e.vacant.IsZero() {
		in.VacantFor = now.Sub(e.vacant)
	}
	act := decide(in)
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	switch act {
	case wait:
		if l.Known && l.Holder != self {
			a.setLeading("")
			e.withdraw(actx, now)
		}
	case release:
		a.setLeading("")
		if err := e.el.ReleaseLocation(actx, loc, self); err != nil {
			log.Warn("election lease not released", "err", err)
		}
		e.withdraw(actx, now)
	case renew:
		if now.Sub(e.renewed) >= a.cfg.HeartbeatPeriod {
			e.hold(actx, loc, l, 0, act, now)
		} else {
			a.setLeading(loc)
			e.publish(actx, k8s.Leads{Term: l.Term, Location: loc}.String())
		}
	default:
		e.hold(actx, loc, l, e.el.LeadTerm(loc)+1, act, now)
	}
}

// hold writes this node as the Lease's holder and publishes the lead.
func (e *election) hold(ctx context.Context, loc string, seen k8s.LocationLease, minTerm int32, act electionAction, now time.Time) {
	log, self := e.a.log, e.a.cfg.Hostname
	l, err := e.el.HoldLocation(ctx, loc, self, seen, minTerm)
	switch {
	case errors.Is(err, k8s.ErrLeaseTaken):
		if act == renew {
			log.Warn("lost the lead: another node holds the location's election lease", "location", loc, "holder", l.Holder)
		}
		e.a.setLeading("")
		e.withdraw(ctx, now)
		return
	case err != nil && act == renew:
		// An API outage: keep leading (the standbys' probes still answer).
		log.Debug("election lease not renewed", "err", err)
		e.a.setLeading(loc)
		return
	case err != nil:
		log.Debug("election lease not taken", "action", act.String(), "err", err)
		return
	}
	e.renewed, e.left = now, time.Time{}
	// Lead at once: this node's reconciliation need not wait for its lead
	// to come back through the API. The other locations reconfigure when
	// it is published; configured first, this node answers their first
	// handshake (from behind NAT, the only one that can come) instead of
	// dropping it until the handshake is restarted a second later.
	if ready := e.a.setLeading(loc); ready != nil && act != renew {
		wait := time.NewTimer(leadApplyWait)
		select {
		case <-ready:
		case <-wait.C:
			log.Debug("lead published before WireGuard took it", "waited", leadApplyWait)
		case <-ctx.Done():
		}
		wait.Stop()
	}
	if act != renew {
		log.Info("took the lead of the location", "location", loc, "why", act.String(), "term", l.Term)
		e.vacant = time.Time{}
	}
	e.publish(ctx, k8s.Leads{Term: l.Term, Location: loc}.String())
}

// formerLast returns standbys with former, the holder that left the lead
// vacant (it could not forward, or it stopped), moved last.
func formerLast(standbys []string, former string) []string {
	i := slices.Index(standbys, former)
	if i < 0 {
		return standbys
	}
	return append(slices.Delete(standbys, i, i+1), former)
}

// checkTunnels runs a round of the check through the tunnels once per
// probe interval while this node holds lead l of a location with cands
// candidates, and reports whether it failed during this lead: the
// locations that answered during this lead went silent (tunnelCheck). A
// node alone in its location has nobody to hand the lead to, and checks
// nothing.
func (e *election) checkTunnels(ctx context.Context, l k8s.LocationLease, cands int, now time.Time) bool {
	a := e.a
	p := a.cfg.TunnelProbe
	if p == nil || cands < 2 {
		e.tunnelLead = ""
		return false
	}
	lead := k8s.Leads{Term: l.Term, Location: e.loc}.String()
	if lead != e.tunnelLead {
		e.tunnelLead, e.tunnelCheck, e.tunnelFailed, e.tunnelRound, e.tunnelProbed = lead, tunnelCheck{}, false, 0, nil
		clear(e.tunnelTried)
		e.lastTunnel = time.Time{}
		e.tunnels.reset()
	}
	if now.Sub(e.lastTunnel) < a.cfg.ProbeInterval*9/10 {
		return e.tunnelFailed
	}
	e.lastTunnel = now
	own, others := otherLeaders(a.Topology(), a.cfg.Hostname)
	names := make([]string, len(others))
	for i, t := range others {
		names[i] = t.Location
	}
	answered := e.tunnels.take()
	e.tunnelCheck, e.tunnelFailed = e.tunnelCheck.next(e.tunnelProbed, answered, names, a.cfg.ProbeFailures)
	switch {
	case len(answered) > 0:
		if e.tunnelsBroken {
			e.tunnelsBroken = false
			a.setTunnelErr(nil)
			a.log.Info("tunnels answer again")
		}
	case e.tunnelFailed && !e.tunnelsBroken:
		e.tunnelsBroken = true
		err := fmt.Errorf("no tunnel answers: the leaders of %s, which answered during this lead, stopped answering through %s for %d rounds of %s",
			strings.Join(e.tunnelCheck.Stopped, ", "), a.cfg.Topology.Links.WireGuard, e.tunnelCheck.Silent, a.cfg.ProbeInterval)
		a.setTunnelErr(err)
		a.log.Warn("giving up the lead: its tunnels carry nothing", "err", err)
	}
	targets := chooseTunnelTargets(own, others, e.tunnelCheck.Heard, e.tunnelTried, e.tunnelRound, discoveryCadence(a.cfg.ProbeInterval))
	e.tunnelProbed = e.tunnelProbed[:0]
	for _, t := range targets {
		e.tunnelProbed = append(e.tunnelProbed, t.Location)
		if _, ok := e.tunnelCheck.Heard[t.Location]; !ok {
			if e.tunnelTried == nil {
				e.tunnelTried = map[string]discovery{}
			}
			e.tunnelTried[t.Location] = e.tunnelTried[t.Location].probed(e.tunnelRound)
		}
	}
	e.tunnelRound++
	e.tunnels.launch(ctx, p, targets)
	return e.tunnelFailed
}

// handOver reports whether this node, leading as the last resort (its
// tunnels failed when it last led and nothing answered through them since:
// it took a lead nobody else took), gives the lead up now. Once its
// tunnels had ProbeFailures rounds of this lead to answer, it asks one of
// the best standbys per probe interval, in turn, whether it can forward
// (Config.Probe, over the LAN: a standby whose own tunnels failed answers
// 503 too), and releases the lead when one can; the best-ranked standby
// then takes it. It keeps releasing that lead until the release succeeds,
// and hands over at most once per handoverBackoff, so that a standby that
// answers but cannot take the lead (no API access) costs the location a
// gap of about a second every handoverBackoff, not a lead that changes at
// every step.
func (e *election) handOver(ctx context.Context, nodes []topology.Node, cands []string, now time.Time) bool {
	if e.tunnelLead != "" && e.handingOver == e.tunnelLead {
		return true // a release that failed: again
	}
	p, self := e.a.cfg.Probe, e.a.cfg.Hostname
	if !e.tunnelsBroken || p == nil || e.tunnelRound < e.a.cfg.ProbeFailures || now.Sub(e.handedOver) < handoverBackoff ||
		now.Sub(e.handoverProbe) < e.a.cfg.ProbeInterval*9/10 {
		return false
	}
	standbys := slices.DeleteFunc(slices.Clone(cands), func(n string) bool { return n == self })
	if len(standbys) == 0 {
		return false
	}
	standbys = standbys[:min(len(standbys), probers)]
	name := standbys[e.handoverTurn%len(standbys)]
	e.handoverTurn++
	e.handoverProbe = now
	i := slices.IndexFunc(nodes, func(n topology.Node) bool { return n.Name == name })
	if i < 0 {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, e.a.cfg.ProbeInterval*3/4)
	defer cancel()
	if err := p(pctx, nodes[i]); err != nil {
		return false
	}
	e.handedOver, e.handingOver = now, e.tunnelLead
	e.a.log.Warn("handing the lead over: this node's tunnels still carry nothing and a standby can forward", "to", name)
	return true
}

// withdraw removes the lead this node publishes but no longer holds, once
// its successor's lead is out (a higher term) or a lease duration after it
// left the lead (nobody took it); at once when what it published is not
// known (an earlier run's). Until then the other locations keep it as the
// leader instead of guessing one by rank, which could make them set up the
// successor's tunnels before the successor does, and lose their first
// handshake.
func (e *election) withdraw(ctx context.Context, now time.Time) {
	if e.published == "" {
		return
	}
	if e.left.IsZero() {
		e.left = now
	}
	mine, err := k8s.ParseLeads(e.published)
	if err == nil && mine.Location == e.loc && e.el.LeadTerm(e.loc) <= mine.Term && now.Sub(e.left) < e.a.cfg.LeaseDuration {
		return
	}
	e.publish(ctx, "")
	if e.published == "" {
		e.left = time.Time{}
	}
}

// publish writes this node's LeadsAnnotation when it changed.
func (e *election) publish(ctx context.Context, v string) {
	if v == e.published {
		return
	}
	if err := e.el.PublishLeads(ctx, e.a.cfg.Hostname, v); err != nil {
		e.a.log.Warn("lead not published", "err", err)
		return
	}
	e.published = v
}

// probe checks the holder over the LAN once per probe interval.
func (e *election) probe(ctx context.Context, nodes []topology.Node, l k8s.LocationLease, now time.Time) {
	p := e.a.cfg.Probe
	if p == nil {
		return
	}
	key := l.Holder + "@" + k8s.Leads{Term: l.Term, Location: e.loc}.String()
	if key != e.probed {
		e.probed, e.armed, e.failures = key, false, 0
	}
	gap := e.a.cfg.ProbeInterval * 9 / 10
	if e.failures > 0 {
		gap /= 2 // a failure is retried at once: three take half the time
	}
	if now.Sub(e.lastProbe) < gap {
		return
	}
	e.lastProbe = now
	i := slices.IndexFunc(nodes, func(n topology.Node) bool { return n.Name == l.Holder })
	if i < 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, e.a.cfg.ProbeInterval*3/4)
	defer cancel()
	if err := p(pctx, nodes[i]); err != nil {
		e.failures++
		if e.armed && e.failures == e.a.cfg.ProbeFailures {
			e.a.log.Info("the leader does not answer probes", "leader", l.Holder, "failures", e.failures, "err", err)
		}
		return
	}
	e.armed, e.failures = true, 0
}
