package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/kilofed/kilofed/mesh/firewall"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/route"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// Encapsulator keeps the tunnel inside a location pointed at its remotes.
type Encapsulator interface {
	// Set makes the tunnel reach exactly remotes.
	Set(ctx context.Context, remotes []netip.Addr) error
}

// Links gives the WireGuard link its addresses and brings it up.
type Links interface {
	// SetAddresses makes name carry exactly addrs.
	SetAddresses(name string, addrs []netip.Prefix) error
	// SetUp brings name up.
	SetUp(name string) error
}

// Config configures an Agent.
type Config struct {
	// Hostname is this node's name.
	Hostname string
	// Backend reads the cluster and publishes this node (k8s.Client in
	// production, k8s.Fake in tests).
	Backend k8s.Backend
	// Topology are the options every agent computes the mesh with.
	Topology topology.Options
	// PrivateKey is this node's WireGuard private key.
	PrivateKey wgconf.SecretKey
	// KeyFile is the file PrivateKey was read from: a rotation request
	// (kilo.squat.ai/rotate-key) writes the new key there, and records the
	// request in KeyFile.rotated so that a restart does not rotate again.
	// Empty refuses rotation requests.
	KeyFile string
	// ListenPort is the WireGuard UDP port.
	ListenPort int
	// Endpoint, when set, is published as this node's endpoint (host:port).
	Endpoint string
	// InternalIP and InternalIP6 are the node's underlay addresses with
	// their prefix length, published so that others know its subnet.
	InternalIP, InternalIP6 netip.Prefix
	// HeartbeatPeriod is how often the lease is renewed; zero means 1 s.
	HeartbeatPeriod time.Duration
	// Forwarding, when set, is checked before each heartbeat: a node that
	// cannot forward (underlay link down) stops renewing its lease, so
	// that another node of its location takes over within the lease
	// duration.
	Forwarding func() error
	// Election, when set, elects the location's leader with one election
	// Lease per location (k8s.ElectionLocation: run RunElection, not
	// RunHeartbeat); nil keeps the heartbeat Leases.
	Election k8s.Elector
	// LeaseDuration is how long a holder's renewal of the election Lease
	// counts when probes cannot tell; zero means k8s.DefaultLeaseDuration.
	LeaseDuration time.Duration
	// Probe checks over the LAN that the leader's agent answers and can
	// forward (nil error); the best standbys call it every ProbeInterval
	// and take the lead after ProbeFailures failures in a row. Nil: no
	// probes, a dead leader is replaced once its Lease expires.
	Probe func(ctx context.Context, leader topology.Node) error
	// TunnelProbe checks through this node's WireGuard link that the agent
	// of another location's leader, at to (its segment's WireGuard IP),
	// answers a probe sent from this node's segment's WireGuard IP, from
	// (nil error). While this node leads its location it probes up
	// to three other locations every ProbeInterval; when none answered for
	// ProbeFailures rounds in a row (and one did during this lead), it gives
	// the lead up. Nil: no check through the tunnels.
	TunnelProbe func(ctx context.Context, from, to netip.Addr) error
	// ProbeInterval is DefaultProbeInterval when zero.
	ProbeInterval time.Duration
	// ProbeFailures is DefaultProbeFailures when zero.
	ProbeFailures int
	// Device is the WireGuard interface named Topology.Links.WireGuard.
	Device wireguard.Device
	// Links sets the WireGuard link's addresses and state.
	Links Links
	// Router applies routes and rules.
	Router route.Router
	// Firewall applies forward and NAT rules; nil leaves the firewall alone.
	Firewall firewall.Firewall
	// IPTablesForwardRules, when set, makes the firewall accept forwarded
	// traffic of the mesh's ranges and WireGuard link ahead of every other
	// FORWARD rule (Kilo's --iptables-forward-rules); off, forwarding is
	// left to the node's FORWARD policy and NetworkPolicy enforcer.
	IPTablesForwardRules bool
	// Encap keeps the in-location tunnel; nil when encapsulation is off.
	Encap Encapsulator
	// ResyncPeriod re-applies everything even without changes (repairs
	// routes or rules deleted by hand); zero means 30 s.
	ResyncPeriod time.Duration
	// Resolver resolves endpoints given as DNS names; nil means
	// net.DefaultResolver.
	Resolver Resolver
	// ServeGraph makes Handler serve /graph: the whole topology (every
	// node's addresses, keys and endpoints) in DOT. Off by default, as the
	// HTTP endpoint has no authentication.
	ServeGraph bool
	// Metrics receives the agent's metrics; nil disables them.
	Metrics *Metrics
	// Logger receives the agent's logs; nil discards.
	Logger *slog.Logger
}

// Agent is the kg reconcile loop of one node.
type Agent struct {
	cfg Config
	log *slog.Logger

	// now and newTicker are the clock; tests replace them.
	now       func() time.Time
	newTicker func(time.Duration) ticker

	mu       sync.Mutex
	topo     *topology.Topology
	started  time.Time // when New ran
	lastDone time.Time // when the last reconciliation finished, even failed
	lastErr  error     // the last reconciliation's error
	lastOK   time.Time
	leaders  map[string]string
	problems string
	nodes    []topology.Node // the nodes of the last reconciliation

	applied wgconf.Config    // the last configuration the device took
	key     wgconf.SecretKey // the private key, Config.PrivateKey until a rotation
	rotated string           // the last rotation request honoured

	// leading is the location this node's election holds the lead of
	// (RunElection), "" when none: Reconcile leads it at once, before the
	// lead comes back through the API; kick asks Run to reconcile.
	leading string
	kick    chan struct{}
	// leadApplied is closed once WireGuard took a configuration computed
	// with leading; nil when no such wait is pending.
	leadApplied chan struct{}
	// tunnelErr says that this node's tunnels did not answer when it last
	// led, and have not since (Forwarding).
	tunnelErr error

	// Touched by the Run goroutine only (Reconcile and restartHandshakes).
	resync     bool            // the next Reconcile sets everything again
	firewall   *firewall.Rules // the rules of the last Set that worked
	nudge      *nudger
	peerWrites map[string]statusWrite
	resolved   map[string]netip.Addr
	lookupErr  map[string]string
}

// New checks cfg, reads the last key rotation honoured (beside KeyFile)
// and returns an Agent.
func New(cfg Config) (*Agent, error) {
	var missing []string
	if cfg.Hostname == "" {
		missing = append(missing, "Hostname")
	}
	if cfg.Backend == nil {
		missing = append(missing, "Backend")
	}
	if cfg.Device == nil {
		missing = append(missing, "Device")
	}
	if cfg.Links == nil {
		missing = append(missing, "Links")
	}
	if cfg.Router == nil {
		missing = append(missing, "Router")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("agent: missing %v", missing)
	}
	if cfg.Topology.Links.WireGuard == "" {
		cfg.Topology.Links.WireGuard = topology.DefaultWireGuardLink
	}
	if cfg.HeartbeatPeriod <= 0 {
		cfg.HeartbeatPeriod = time.Second
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = k8s.DefaultLeaseDuration
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.ProbeFailures <= 0 {
		cfg.ProbeFailures = DefaultProbeFailures
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	rotated, err := readRotated(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	return &Agent{
		cfg: cfg, log: log, leaders: map[string]string{}, key: cfg.PrivateKey, rotated: rotated,
		now: time.Now, newTicker: newTimeTicker, started: time.Now(),
		peerWrites: map[string]statusWrite{}, resolved: map[string]netip.Addr{}, lookupErr: map[string]string{},
		nudge: newNudger(), kick: make(chan struct{}, 1),
	}, nil
}

// setLeading records the location this node's election leads ("" for
// none) and, when it takes a lead, asks Run to reconcile at once; it then
// returns a channel closed once WireGuard took the configuration of the
// new lead (nil otherwise, and for an Agent that New did not make, which
// has no loop).
func (a *Agent) setLeading(loc string) <-chan struct{} {
	a.mu.Lock()
	changed := loc != a.leading
	a.leading = loc
	if !changed || loc == "" || a.kick == nil {
		if changed {
			a.leadApplied = nil
		}
		a.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	a.leadApplied = ready
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
	return ready
}

// leadSnapshot returns the lead a reconciliation starts with and the
// channel to close once WireGuard took its configuration.
func (a *Agent) leadSnapshot() (string, chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.leading, a.leadApplied
}

// leadConfigured closes ready, if it is still the pending wait.
func (a *Agent) leadConfigured(ready chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ready != nil && a.leadApplied == ready {
		close(ready)
		a.leadApplied = nil
	}
}

// setTunnelErr records why this node's tunnels count as failed, nil once
// they answer.
func (a *Agent) setTunnelErr(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tunnelErr = err
}

// lastNodes returns the nodes of the last reconciliation.
func (a *Agent) lastNodes() []topology.Node {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodes
}

// Topology returns the topology of the last reconciliation, nil before it.
func (a *Agent) Topology() *topology.Topology {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.topo
}
