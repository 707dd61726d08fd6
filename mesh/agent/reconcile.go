package agent

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Reconcile reads the cluster once, resolves endpoints given as DNS names,
// computes the topology and applies this node's share of it. Every step runs
// even when an earlier one failed; the errors are joined. It is safe to call
// at any time, as often as wanted.
func (a *Agent) Reconcile(ctx context.Context) error {
	var steps stepErrors
	rotated, err := a.rotateKey()
	steps.add(stepKey, "rotate key", err)
	if rotated {
		// Every tunnel needs a new handshake: help them all, as new ones.
		a.nudge.forget()
	}
	nodes, peers, bad := a.cfg.Backend.Snapshot()
	leading, ready := a.leadSnapshot()
	if leading != "" {
		nodes = leadLocation(nodes, leading, a.cfg.Hostname)
	}
	a.resolveEndpoints(ctx, nodes, peers)
	// Published only now: the election step reads them from its own
	// goroutine, and resolving writes into them.
	a.mu.Lock()
	a.nodes = nodes
	a.mu.Unlock()
	topo, err := topology.New(nodes, peers, a.cfg.Topology)
	if err != nil {
		steps.add(stepTopology, "compute topology", err)
		return a.finish(&steps)
	}
	a.observe(topo, bad)
	a.apply(ctx, topo, &steps, func() { a.leadConfigured(ready) })
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if serr := a.reportPeers(actx, topo, bad); serr != nil {
		// Status is informative: the data plane is applied, so this does
		// not fail the reconciliation.
		a.log.Warn("peer status not written", "err", serr)
	}
	a.resync = false
	return a.finish(&steps)
}

// leadLocation returns nodes in which self leads loc, as its election
// decided: the nodes of loc other than self are not Ready, as they are once
// self's kilofed.io/leads annotation comes back through the API (k8s
// marks Ready only the elected node); nodes unchanged when self is not in
// loc.
func leadLocation(nodes []topology.Node, loc, self string) []topology.Node {
	if !slices.ContainsFunc(nodes, func(n topology.Node) bool { return n.Name == self && n.Location == loc }) {
		return nodes
	}
	out := slices.Clone(nodes)
	for i := range out {
		if out[i].Location == loc {
			out[i].Ready = out[i].Name == self
		}
	}
	return out
}

// apply applies this node's share of topo, and calls configured once
// WireGuard took its configuration.
func (a *Agent) apply(ctx context.Context, topo *topology.Topology, steps *stepErrors, configured func()) {
	name := a.cfg.Hostname
	wg := a.cfg.Topology.Links.WireGuard
	step := steps.add

	addrs := topo.Addresses(name)
	// Every node of a segment announces the segment's WireGuard IP, so
	// that a new leader inherits it and the address survives failover.
	var segmentIP netip.Prefix
	if s, ok := topo.Segment(name); ok {
		segmentIP = s.WireGuardIP
	}
	key, rotated := a.privateKey()
	pub := k8s.NodeAnnotations{
		Key:         key.PublicKey(),
		KeyRotated:  rotated,
		Endpoint:    a.cfg.Endpoint,
		InternalIP:  a.cfg.InternalIP,
		InternalIP6: a.cfg.InternalIP6,
		Granularity: topo.Options().Granularity,
		WireGuardIP: segmentIP,
	}
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	step(stepPublish, "publish node", a.cfg.Backend.PublishNode(actx, name, pub))
	cancel()

	// The new key is published before the device takes it, in the same
	// write as the rotation's report.
	conf, err := topo.WireGuardConfig(name, key)
	if err != nil {
		// Not in the mesh yet (no key published until now) or excluded:
		// keep the interface up with no peers; the problem is logged.
		if !errors.Is(err, topology.ErrUnknownNode) && !errors.Is(err, topology.ErrExcluded) {
			step(stepWireGuard, "wireguard config", err)
		}
		conf = wgconf.Config{PrivateKey: key}
	}
	conf.ListenPort = a.cfg.ListenPort
	if err := a.cfg.Device.Set(ctx, conf); err != nil {
		step(stepWireGuard, "configure "+wg, err)
	} else {
		a.mu.Lock()
		a.applied = conf
		a.mu.Unlock()
		a.nudge.track(conf, a.now())
		a.log.Debug("WireGuard configured", "peers", len(conf.Peers))
		configured()
	}
	step(stepAddress, "address "+wg, a.cfg.Links.SetAddresses(wg, addrs))
	step(stepLink, "bring up "+wg, a.cfg.Links.SetUp(wg))

	if a.cfg.Encap != nil {
		step(stepEncapsulation, "encapsulation", a.cfg.Encap.Set(ctx, topo.TunnelRemotes(name)))
	}
	routes, rules := topo.Routes(name)
	step(stepRoutes, "routes", a.cfg.Router.Set(ctx, routes, rules))
	if a.cfg.Firewall != nil {
		// iptables runs a dozen times per Set: rules unchanged since the
		// last Set that worked wait for the resync, which repairs them.
		rules := FirewallRules(topo, name, a.firewallOptions())
		if a.resync || a.firewall == nil || !reflect.DeepEqual(*a.firewall, rules) {
			err := a.cfg.Firewall.Set(ctx, rules)
			step(stepFirewall, "firewall", err)
			a.firewall = nil
			if err == nil {
				a.firewall = &rules
			}
		}
	}
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.peers.Set(float64(len(conf.Peers)))
	}
}

// finish records the outcome of a reconciliation and returns its error.
func (a *Agent) finish(steps *stepErrors) error {
	err := steps.err()
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErr, a.lastDone = err, now
	if err == nil {
		a.lastOK = now
	}
	if m := a.cfg.Metrics; m != nil {
		m.reconciles.Inc()
		if err != nil {
			m.reconcileErrors.Inc()
		} else {
			m.lastReconcileSec.Set(float64(now.Unix()))
		}
		for _, s := range reconcileSteps {
			v := 0.0
			if steps.failed[s] {
				v = 1
			}
			m.stepErrors.WithLabelValues(s).Set(v)
		}
	}
	return err
}

// observe records the topology, logs problems and leader changes once each,
// and updates the gauges.
func (a *Agent) observe(topo *topology.Topology, bad []k8s.Problem) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.topo = topo

	var lines []string
	for _, p := range topo.Problems {
		lines = append(lines, p.String())
	}
	for _, err := range bad {
		lines = append(lines, err.Error())
	}
	slices.Sort(lines)
	if joined := strings.Join(lines, "\n"); joined != a.problems {
		a.problems = joined
		for _, p := range topo.Problems {
			a.log.Warn("mesh problem", "kind", p.Kind, "name", p.Name, "severity", p.Severity.String(), "code", p.Code, "reason", p.Reason)
		}
		for _, err := range bad {
			a.log.Warn("object ignored", "err", err)
		}
	}

	leaders := map[string]string{}
	nodes := 0
	for i := range topo.Segments {
		s := &topo.Segments[i]
		nodes += len(s.Nodes)
		leader := s.LeaderNode().Name
		leaders[s.Name] = leader
		if old, ok := a.leaders[s.Name]; ok && old != leader {
			a.log.Info("leader changed", "segment", s.Name, "from", old, "to", leader)
			if a.cfg.Metrics != nil {
				a.cfg.Metrics.leaderChanges.Inc()
			}
		}
	}
	a.leaders = leaders

	m := a.cfg.Metrics
	if m == nil {
		return
	}
	m.nodes.Set(float64(nodes))
	m.leader.Reset()
	if s, ok := topo.Segment(a.cfg.Hostname); ok {
		v := 0.0
		if topo.IsLeader(a.cfg.Hostname) {
			v = 1
		}
		m.leader.WithLabelValues(s.Location).Set(v)
	}
	m.problems.Reset()
	for _, p := range topo.Problems {
		m.problems.WithLabelValues(p.Kind, p.Severity.String()).Inc()
	}
	if len(bad) > 0 {
		m.problems.WithLabelValues("object", "excluded").Add(float64(len(bad)))
	}
}
