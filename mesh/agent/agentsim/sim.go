// Package agentsim runs many kg agents in one process against one real API
// server, to measure what the mesh's control plane costs the API server and
// each agent as the cluster grows (docs/scale.md).
//
// Each simulated agent is the real thing above the data plane: agent.Agent's
// reconcile loop and heartbeat over its own k8s.Client (informers on Nodes,
// Peers and heartbeat Leases, its own TCP connection to the API server, the
// client-go defaults kg runs with). Only the seams that touch the kernel are
// faked: the WireGuard device (every configured peer has just completed a
// handshake), addresses, routes, firewall and encapsulation accept every Set
// and keep nothing but the last one.
//
// Nodes beyond the simulated agents can be API objects only (Cluster): their
// annotations are what an agent would have published, and a Writer renews
// their heartbeat Leases as their agents would, and churns their Nodes.
package agentsim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/kilofed/kilofed/mesh/agent"
	"github.com/kilofed/kilofed/mesh/firewall"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// Options are the agents' settings, kg's defaults when zero.
type Options struct {
	// LeaseDuration is kg's --lease-duration (3 s); agents renew their
	// Lease every third of it.
	LeaseDuration time.Duration
	// ResyncPeriod is kg's --resync-period (30 s).
	ResyncPeriod time.Duration
	// Election is kg's --leader-election (node-leases when empty). With
	// location, every agent's LAN probe of its leader answers at once (all
	// the simulated agents are alive), as kg's HTTP probe does on a LAN.
	Election k8s.Election
	// Topology are the mesh options (location granularity by default).
	Topology topology.Options

	// metrics, shared by the agents of a Fleet, count their reconciliations.
	metrics *agent.Metrics
}

func (o Options) withDefaults() Options {
	if o.Election == "" {
		o.Election = k8s.ElectionNodeLeases
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = k8s.DefaultLeaseDuration
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 30 * time.Second
	}
	if len(o.Topology.ServiceCIDRs) == 0 {
		o.Topology.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
	}
	return o
}

// Agent is one simulated node agent.
type Agent struct {
	Name   string
	Agent  *agent.Agent
	Client *k8s.Client
}

// Fleet is a set of simulated agents running in this process.
type Fleet struct {
	Agents []*Agent
	reg    *prometheus.Registry
	// election is the agents' Options.Election.
	election k8s.Election
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// StartAgent connects the agent of node i of l (whose Node must exist, see
// Layout.NodeObject) and runs its reconcile loop and heartbeat until ctx ends
// or Stop. Its client has a connection of its own, as a node's kg has.
func StartAgent(ctx context.Context, cfg *rest.Config, l Layout, i int, o Options) (*Agent, error) {
	o = o.withDefaults()
	name := NodeName(i)
	rc := rest.CopyConfig(cfg)
	// A Dial of its own keeps client-go from sharing one cached transport
	// (and one HTTP/2 connection) between all agents of the process.
	rc.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	rc.UserAgent = "kg-sim/" + name
	client, err := k8s.New(ctx, k8s.Config{RESTConfig: rc, LeaseDuration: o.LeaseDuration, Election: o.Election})
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", name, err)
	}
	ac := agent.Config{
		Hostname:        name,
		Backend:         client,
		Topology:        o.Topology,
		PrivateKey:      PrivateKey(name),
		ListenPort:      int(topology.DefaultPort),
		Endpoint:        Endpoint(i),
		InternalIP:      l.InternalIP(i),
		HeartbeatPeriod: o.LeaseDuration / 3,
		ResyncPeriod:    o.ResyncPeriod,
		Forwarding:      func() error { return nil },
		Device:          &Device{name: topology.DefaultWireGuardLink},
		Links:           Links{},
		Router:          Router{},
		Firewall:        Firewall{},
		Metrics:         o.metrics,
	}
	if o.Election == k8s.ElectionLocation {
		ac.Election = client
		ac.LeaseDuration = o.LeaseDuration
		ac.Probe = func(context.Context, topology.Node) error { return nil }
	}
	a, err := agent.New(ac)
	if err != nil {
		return nil, err
	}
	return &Agent{Name: name, Agent: a, Client: client}, nil
}

// Start starts the agents of nodes idx of l and returns once all are
// connected and running.
func Start(ctx context.Context, cfg *rest.Config, l Layout, idx []int, o Options) (*Fleet, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &Fleet{cancel: cancel, reg: prometheus.NewRegistry(), election: o.withDefaults().Election}
	o.metrics = agent.NewMetrics(f.reg)
	type started struct {
		i   int
		a   *Agent
		err error
	}
	out := make(chan started)
	// Connect many at a time: each k8s.New waits up to a lease duration for
	// the Leases it lists to be renewed.
	sem := make(chan struct{}, 64)
	for k, i := range idx {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			a, err := StartAgent(ctx, cfg, l, i, o)
			out <- started{k, a, err}
		}()
	}
	f.Agents = make([]*Agent, len(idx))
	var errs []error
	for range idx {
		s := <-out
		f.Agents[s.i] = s.a
		errs = append(errs, s.err)
	}
	if err := errors.Join(errs...); err != nil {
		cancel()
		return nil, err
	}
	for _, a := range f.Agents {
		f.wg.Add(2)
		go func() { defer f.wg.Done(); _ = a.Agent.RunLeadership(ctx) }()
		go func() { defer f.wg.Done(); _ = a.Agent.Run(ctx) }()
	}
	return f, nil
}

// Stop stops every agent (each releases its Lease) and waits for them.
func (f *Fleet) Stop() {
	f.cancel()
	f.wg.Wait()
}

// Counts returns the reconciliations the agents made so far, and the
// leader changes they saw, summed over the agents.
func (f *Fleet) Counts() (reconciles, leaderChanges float64) {
	mfs, err := f.reg.Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "kilo_reconciles_total":
				reconciles += m.GetCounter().GetValue()
			case "kilo_leader_changes_total":
				leaderChanges += m.GetCounter().GetValue()
			}
		}
	}
	return reconciles, leaderChanges
}

// Converged reports whether every agent's last reconciliation succeeded
// with every one of the n nodes in its topology, and all agents agree on
// the leader of each of the locations; it returns why not otherwise.
func (f *Fleet) Converged(n int, locations []string) error {
	var first map[string]string
	for _, a := range f.Agents {
		if err := a.Agent.Ready(); err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		topo := a.Agent.Topology()
		if topo == nil {
			return fmt.Errorf("%s: no topology yet", a.Name)
		}
		leaders := map[string]string{}
		for _, loc := range locations {
			l, ok := topo.Leader(loc)
			if !ok || !l.Ready {
				return fmt.Errorf("%s: no ready leader in %s", a.Name, loc)
			}
			leaders[loc] = l.Name
		}
		nodes, _, _ := a.Client.Snapshot()
		ready := 0
		for _, nd := range nodes {
			// With the location election only the leaders are Ready (the
			// others are standbys): every node must have its key.
			if (nd.Ready || f.election == k8s.ElectionLocation) && !nd.Key.IsZero() {
				ready++
			}
		}
		if ready != n {
			return fmt.Errorf("%s: %d of %d nodes ready with a key", a.Name, ready, n)
		}
		if f.election == k8s.ElectionLocation {
			// Elected: exactly one node of each location is Ready, the one
			// whose kilofed.io/leads wins (before any, all are).
			per := map[string]int{}
			for _, nd := range nodes {
				if nd.Ready {
					per[nd.Location]++
				}
			}
			for _, loc := range locations {
				if per[loc] != 1 {
					return fmt.Errorf("%s: %d ready nodes in %s, want the elected leader alone", a.Name, per[loc], loc)
				}
			}
		}
		if first == nil {
			first = leaders
			continue
		}
		for loc, l := range leaders {
			if first[loc] != l {
				return fmt.Errorf("%s: leader of %s is %s, %s sees %s", a.Name, loc, l, f.Agents[0].Name, first[loc])
			}
		}
	}
	return nil
}

// WaitConverged polls Converged until it holds or ctx ends.
func (f *Fleet) WaitConverged(ctx context.Context, n int, locations []string) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		err := f.Converged(n, locations)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not converged: %w", err)
		case <-t.C:
		}
	}
}

// PrivateKey is the WireGuard key of the node named name, derived from its
// name so that runs are reproducible.
func PrivateKey(name string) wgconf.SecretKey {
	return wgconf.SecretKey(sha256.Sum256([]byte("agentsim/" + name)))
}

// Device is a WireGuard device that keeps only its last configuration and
// reports every configured peer as having just completed a handshake, as a
// working mesh does: the agent's first-handshake help finds nothing to do.
type Device struct {
	name string
	mu   sync.Mutex
	conf wgconf.Config
}

var _ wireguard.Device = (*Device)(nil)

// Set implements wireguard.Device.
func (d *Device) Set(_ context.Context, cfg wgconf.Config) error {
	d.mu.Lock()
	d.conf = cfg
	d.mu.Unlock()
	return nil
}

// Show implements wireguard.Device.
func (d *Device) Show(context.Context) (wireguard.State, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	st := wireguard.State{Name: d.name, Type: "simulated", PublicKey: d.conf.PrivateKey.PublicKey(), ListenPort: d.conf.ListenPort}
	for _, p := range d.conf.Peers {
		st.Peers = append(st.Peers, wireguard.PeerState{PublicKey: p.PublicKey, LastHandshake: now, AllowedIPs: p.AllowedIPs})
	}
	return st, nil
}

// Close implements wireguard.Device.
func (d *Device) Close() error { return nil }

// Links accepts every address and link state.
type Links struct{}

// SetAddresses implements agent.Links.
func (Links) SetAddresses(string, []netip.Prefix) error { return nil }

// SetUp implements agent.Links.
func (Links) SetUp(string) error { return nil }

// Router accepts every set of routes and rules.
type Router struct{}

// Set implements route.Router.
func (Router) Set(context.Context, []topology.Route, []topology.Rule) error { return nil }

// Close implements route.Router.
func (Router) Close(context.Context) error { return nil }

// Firewall accepts every set of rules.
type Firewall struct{}

// Set implements firewall.Firewall.
func (Firewall) Set(context.Context, firewall.Rules) error { return nil }

// Close implements firewall.Firewall.
func (Firewall) Close(context.Context) error { return nil }
