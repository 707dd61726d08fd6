package k8s

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
)

// Backend is what the agent and the CLI need from the cluster. Client is
// the real one, Fake the in-memory one.
type Backend interface {
	// Snapshot returns the current nodes and peers as topology inputs,
	// sorted by name, with Ready computed from the heartbeat Leases, plus
	// the problems of the objects or values that could not be read.
	Snapshot() (nodes []topology.Node, peers []topology.Peer, problems []Problem)
	// Changes delivers a signal whenever Snapshot may have changed: a
	// relevant Node or Peer change, a node becoming ready or not. Signals
	// are coalesced and never block the sender.
	Changes() <-chan struct{}
	// PublishNode writes the node's published annotations with a merge
	// patch, only when they differ from what the node carries.
	PublishNode(ctx context.Context, name string, a NodeAnnotations) error
	// RotateKeyRequest returns the node's kilo.squat.ai/rotate-key value,
	// "" when it carries none; a change of it signals Changes.
	RotateKeyRequest(name string) string
	// Heartbeat renews the node's heartbeat Lease once, creating it if
	// needed. The first call of a process, and a call more than a lease
	// duration after the previous one returned (the agent stopped
	// heartbeating: its node could not forward), start the Lease again as
	// new, so that the node ranks after those that kept working
	// (topology.Node.Since). Failed calls count as calls: an API outage
	// resets nothing.
	Heartbeat(ctx context.Context, name string) error
	// ReleaseHeartbeat deletes the node's Lease so that the others stop
	// counting on the node at once (clean shutdown).
	ReleaseHeartbeat(ctx context.Context, name string) error
	// UpdatePeerStatus calls mutate on a copy of the Peer and writes its
	// status subresource if mutate changed the status.
	UpdatePeerStatus(ctx context.Context, name string, mutate func(*v1alpha1.Peer)) error
}

// Config configures New.
type Config struct {
	// RESTConfig reaches the API server; required.
	RESTConfig *rest.Config
	// TopologyLabel is read for the location of nodes without the
	// kilo.squat.ai/location annotation; empty means DefaultTopologyLabel.
	TopologyLabel string
	// LeaseNamespace holds the heartbeat Leases; empty means
	// DefaultLeaseNamespace.
	LeaseNamespace string
	// LeaseDuration is how long a node stays Ready after this process saw
	// its Lease renewed; zero means 3 s. Agents renew every third of it.
	LeaseDuration time.Duration
	// Election is how leaders are chosen: ElectionNodeLeases reads every
	// node's heartbeat Lease for Node.Ready; ElectionLocation starts no
	// Lease watch of its own (FollowLocation watches one election Lease)
	// and marks Ready the node that leads its location by LeadsAnnotation;
	// empty is ElectionAuto (both, for clients that only read the mesh).
	Election Election
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultLeaseDuration is Config.LeaseDuration's default.
const DefaultLeaseDuration = 3 * time.Second

// Client is the Backend over a real API server, built on client-go
// informers for Nodes, Peers and the heartbeat Leases.
type Client struct {
	cfg     Config
	opts    ParseOptions
	kube    kubernetes.Interface
	peerAPI rest.Interface
	nodes   cache.SharedIndexInformer
	peers   cache.SharedIndexInformer
	leases  *leases
	changes chan struct{}
	now     func() time.Time

	readyMu   sync.Mutex
	lastReady map[string]bool

	hbMu sync.Mutex
	hb   map[string]*heartbeat

	// ctx ends the watches; elMu guards follow, the followed location's
	// election Lease (ElectionLocation).
	ctx          context.Context
	elMu         sync.Mutex
	follow       *locationWatch
	leaseChanges chan struct{}
}

var _ Backend = (*Client)(nil)

// New connects to the API server, checks that the Peer CRD is served,
// starts the informers until ctx ends, and returns once their caches are
// synced and every existing Lease was seen renewed (or one lease duration
// passed), so that the first Snapshot's readiness is already right.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.RESTConfig == nil {
		return nil, errors.New("k8s.New: Config.RESTConfig is nil: pass the kubeconfig's or the in-cluster rest.Config")
	}
	cfg.LeaseNamespace = cmp.Or(cfg.LeaseNamespace, DefaultLeaseNamespace)
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, DefaultLeaseDuration)
	election, err := ParseElection(string(cfg.Election))
	if err != nil {
		return nil, err
	}
	cfg.Election = election
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	kube, err := kubernetes.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if err := checkPeerCRD(kube); err != nil {
		return nil, err
	}
	peerAPI, err := newPeerREST(cfg.RESTConfig)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg, opts: ParseOptions{TopologyLabel: cfg.TopologyLabel},
		kube: kube, peerAPI: peerAPI, leases: newLeases(),
		changes: make(chan struct{}, 1), now: time.Now,
		lastReady: map[string]bool{}, hb: map[string]*heartbeat{},
		ctx: ctx, leaseChanges: make(chan struct{}, 1),
	}
	// Patient list-watches: after an API outage the caches are fresh
	// within a second of the server's return, not after the reflectors'
	// backoff (up to a minute).
	c.nodes = cache.NewSharedIndexInformer(
		Patient(cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "nodes", "", fields.Everything())),
		&corev1.Node{}, 0, cache.Indexers{})
	if err := c.nodes.SetTransform(slimNode); err != nil {
		return nil, fmt.Errorf("node cache: %w", err)
	}
	leaseInformer := cache.NewSharedIndexInformer(
		Patient(cache.NewFilteredListWatchFromClient(kube.CoordinationV1().RESTClient(), "leases", cfg.LeaseNamespace,
			func(o *metav1.ListOptions) { o.LabelSelector = LeaseLabel })),
		&coordinationv1.Lease{}, 0, cache.Indexers{})
	c.peers = cache.NewSharedIndexInformer(Patient(cache.NewListWatchFromClient(peerAPI, v1alpha1.PeerPlural, "", fields.Everything())),
		&v1alpha1.Peer{}, 0, cache.Indexers{})
	if cfg.Election == ElectionLocation {
		// No heartbeat Lease is watched: the agent follows its location's
		// election Lease alone (FollowLocation).
		leaseInformer = nil
	}
	if err := c.addHandlers(leaseInformer); err != nil {
		return nil, err
	}
	informers := []cache.SharedIndexInformer{c.nodes, c.peers}
	if leaseInformer != nil {
		informers = append(informers, leaseInformer)
	}
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		go inf.Run(ctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("sync the Node, Peer and Lease caches: %w", context.Cause(ctx))
	}
	if leaseInformer != nil {
		c.warmUp(ctx)
		go c.watchReadiness(ctx)
	}
	return c, nil
}

// warmUp waits until no Lease is known only from the initial list, for at
// most one lease duration.
func (c *Client) warmUp(ctx context.Context) {
	deadline := time.NewTimer(c.cfg.LeaseDuration)
	defer deadline.Stop()
	tick := time.NewTicker(c.cfg.LeaseDuration / 30)
	defer tick.Stop()
	for c.leases.unobserved() {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// Changes implements Backend.
func (c *Client) Changes() <-chan struct{} { return c.changes }

func (c *Client) signal() {
	select {
	case c.changes <- struct{}{}:
	default:
	}
}

// watchReadiness signals when a Lease expires, checking ten times per
// lease duration.
func (c *Client) watchReadiness(ctx context.Context) {
	t := time.NewTicker(max(c.cfg.LeaseDuration/10, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.checkReadiness()
		}
	}
}

// checkReadiness signals if the set of ready nodes changed.
func (c *Client) checkReadiness() {
	r := c.leases.ready(c.now(), c.cfg.LeaseDuration)
	c.readyMu.Lock()
	changed := !maps.Equal(r, c.lastReady)
	c.lastReady = r
	c.readyMu.Unlock()
	if changed {
		c.signal()
	}
}

// Snapshot implements Backend.
func (c *Client) Snapshot() ([]topology.Node, []topology.Peer, []Problem) {
	ready := c.leases.ready(c.now(), c.cfg.LeaseDuration)
	since := c.leases.since()
	var (
		nodes    []topology.Node
		peers    []topology.Peer
		problems []Problem
	)
	for _, obj := range c.nodes.GetStore().List() {
		n, errs := NodeFromObject(obj.(*corev1.Node), c.opts)
		nodes = append(nodes, n)
		problems = appendProblems(problems, topology.KindNode, n.Name, errs...)
	}
	// A location whose nodes publish kilofed.io/leads is led as they say
	// (ElectionLocation, and ElectionAuto for readers); the others by the
	// heartbeat Leases (ElectionNodeLeases, ElectionAuto).
	var leaders map[string]string
	if c.cfg.Election != ElectionNodeLeases {
		var bad []Problem
		leaders, bad = electedLeaders(nodes, c.leadsAnnotations())
		markElected(nodes, leaders)
		problems = append(problems, bad...)
	}
	if c.cfg.Election != ElectionLocation {
		for i := range nodes {
			if _, elected := leaders[nodes[i].Location]; !elected {
				nodes[i].Ready = nodes[i].Ready && ready[nodes[i].Name]
				nodes[i].Since = since[nodes[i].Name]
			}
		}
	}
	for _, obj := range c.peers.GetStore().List() {
		p := obj.(*v1alpha1.Peer)
		tp, err := PeerFromObject(p)
		if err != nil {
			problems = appendProblems(problems, topology.KindPeer, p.Name, err)
			continue
		}
		peers = append(peers, tp)
	}
	slices.SortFunc(nodes, func(a, b topology.Node) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(peers, func(a, b topology.Peer) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortStableFunc(problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return nodes, peers, problems
}

// appendProblems appends errs as Problems of the named object.
func appendProblems(ps []Problem, kind, name string, errs ...error) []Problem {
	for _, err := range errs {
		var p Problem
		if !errors.As(err, &p) {
			p = Problem{Kind: kind, Name: name, Err: err}
		}
		ps = append(ps, p)
	}
	return ps
}
