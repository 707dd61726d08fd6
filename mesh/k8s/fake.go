package k8s

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
)

// Fake is an in-memory Backend for tests of the agent and the CLI: the test
// sets the snapshot with Set and reads back what was written.
type Fake struct {
	mu       sync.Mutex
	nodes    []topology.Node
	peers    []topology.Peer
	problems []Problem
	changes  chan struct{}

	// Published holds the last NodeAnnotations published per node.
	Published map[string]NodeAnnotations
	// Heartbeats counts the heartbeats per node; a release resets it.
	Heartbeats map[string]int
	// PeerStatus holds the last status written per Peer.
	PeerStatus map[string]v1alpha1.PeerStatus
	// heartbeatErr is what Heartbeat returns (FailHeartbeats).
	heartbeatErr error
	// RotateKey holds the kilo.squat.ai/rotate-key value per node
	// (SetRotateKeyRequest).
	RotateKey map[string]string
	// NotForwarding holds the nodes marked by SetForwarding(node, false):
	// they are not Ready, as if their Lease had expired.
	NotForwarding map[string]bool
	// el is the location election (Elector), made on first use.
	el *fakeElection
}

var _ Backend = (*Fake)(nil)

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{
		changes:       make(chan struct{}, 1),
		Published:     map[string]NodeAnnotations{},
		Heartbeats:    map[string]int{},
		PeerStatus:    map[string]v1alpha1.PeerStatus{},
		NotForwarding: map[string]bool{},
		RotateKey:     map[string]string{},
	}
}

// Set replaces the snapshot and signals a change.
func (f *Fake) Set(nodes []topology.Node, peers []topology.Peer, problems []Problem) {
	f.mu.Lock()
	f.nodes, f.peers, f.problems = slices.Clone(nodes), slices.Clone(peers), slices.Clone(problems)
	f.mu.Unlock()
	f.signal()
}

func (f *Fake) signal() {
	select {
	case f.changes <- struct{}{}:
	default:
	}
}

// Snapshot implements Backend; nodes marked not forwarding are not Ready.
func (f *Fake) Snapshot() ([]topology.Node, []topology.Peer, []Problem) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nodes := slices.Clone(f.nodes)
	for i := range nodes {
		nodes[i].Ready = nodes[i].Ready && !f.NotForwarding[nodes[i].Name]
	}
	return nodes, slices.Clone(f.peers), slices.Clone(f.problems)
}

// Changes implements Backend.
func (f *Fake) Changes() <-chan struct{} { return f.changes }

// PublishNode implements Backend; it fails like Client on a bad Endpoint.
func (f *Fake) PublishNode(_ context.Context, name string, a NodeAnnotations) error {
	if _, err := a.Values(); err != nil {
		return fmt.Errorf("publish node %q: %w", name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Published[name] = a
	return nil
}

// RotateKeyRequest implements Backend.
func (f *Fake) RotateKeyRequest(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.RotateKey[name]
}

// SetRotateKeyRequest writes node's kilo.squat.ai/rotate-key value, as the
// operator does, and signals a change.
func (f *Fake) SetRotateKeyRequest(node, value string) {
	f.mu.Lock()
	f.RotateKey[node] = value
	f.mu.Unlock()
	f.signal()
}

// Heartbeat implements Backend; it counts the heartbeats that succeed.
func (f *Fake) Heartbeat(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.heartbeatErr != nil {
		return f.heartbeatErr
	}
	f.Heartbeats[name]++
	return nil
}

// FailHeartbeats makes every following Heartbeat return err (as during an
// API outage), or succeed again when err is nil.
func (f *Fake) FailHeartbeats(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeatErr = err
}

// HeartbeatCount returns the heartbeats of node since its last release.
func (f *Fake) HeartbeatCount(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Heartbeats[node]
}

// ReleaseHeartbeat implements Backend.
func (f *Fake) ReleaseHeartbeat(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Heartbeats, name)
	return nil
}

// UpdatePeerStatus implements Backend; the Peer must be in the snapshot,
// as a peer or as an unreadable object among the problems.
func (f *Fake) UpdatePeerStatus(_ context.Context, name string, mutate func(*v1alpha1.Peer)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	known := slices.ContainsFunc(f.peers, func(p topology.Peer) bool { return p.Name == name }) ||
		slices.ContainsFunc(f.problems, func(p Problem) bool { return p.Kind == topology.KindPeer && p.Name == name })
	if !known {
		return fmt.Errorf("update status of peer %q: %w", name, ErrNotFound)
	}
	p := &v1alpha1.Peer{}
	p.Name = name
	if st, ok := f.PeerStatus[name]; ok {
		st.DeepCopyInto(&p.Status)
	}
	mutate(p)
	f.PeerStatus[name] = p.Status
	return nil
}

// SetForwarding marks node as not Ready (forwarding false: as if its Lease
// had expired) or lifts the mark, and signals a change when it changed.
func (f *Fake) SetForwarding(node string, forwarding bool) {
	f.mu.Lock()
	changed := f.NotForwarding[node] == forwarding
	if forwarding {
		delete(f.NotForwarding, node)
	} else {
		f.NotForwarding[node] = true
	}
	f.mu.Unlock()
	if changed {
		f.signal()
	}
}

// FakeLease is a location election Lease held by a Fake.
type FakeLease struct {
	// Holder and Term are the Lease's holder and leaseTransitions.
	Holder string
	Term   int32
	// Age is returned as LocationLease.Age.
	Age time.Duration
}

// fakeElection is the Fake's part of Elector.
type fakeElection struct {
	followed     string
	leases       map[string]*FakeLease
	leads        map[string]string
	holdErr      error
	leaseChanges chan struct{}
}

var _ Elector = (*Fake)(nil)

func (f *Fake) election() *fakeElection {
	if f.el == nil {
		f.el = &fakeElection{leases: map[string]*FakeLease{}, leads: map[string]string{}, leaseChanges: make(chan struct{}, 1)}
	}
	return f.el
}

// FollowLocation implements Elector.
func (f *Fake) FollowLocation(loc string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.election().followed = loc
}

// Followed returns the location last followed.
func (f *Fake) Followed() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.election().followed
}

// LeaseChanges implements Elector.
func (f *Fake) LeaseChanges() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.election().leaseChanges
}

// LocationLease implements Elector: the Lease set by SetLocationLease or
// written by HoldLocation.
func (f *Fake) LocationLease(loc string) LocationLease {
	f.mu.Lock()
	defer f.mu.Unlock()
	el := f.election()
	if el.followed != loc {
		return LocationLease{}
	}
	l := el.leases[loc]
	if l == nil {
		return LocationLease{Known: true}
	}
	return LocationLease{Known: true, Exists: true, Holder: l.Holder, Term: l.Term, Age: l.Age}
}

// SetLocationLease sets loc's Lease (nil: none), as another node's write
// would, and signals LeaseChanges.
func (f *Fake) SetLocationLease(loc string, l *FakeLease) {
	f.mu.Lock()
	el := f.election()
	if l == nil {
		delete(el.leases, loc)
	} else {
		c := *l
		el.leases[loc] = &c
	}
	ch := el.leaseChanges
	f.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// FailHolds makes HoldLocation and ReleaseLocation return err (nil:
// succeed again), as an API outage does.
func (f *Fake) FailHolds(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.election().holdErr = err
}

// HoldLocation implements Elector: node holds loc's Lease, renewed (Age 0).
func (f *Fake) HoldLocation(_ context.Context, loc, node string, seen LocationLease, minTerm int32) (LocationLease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	el := f.election()
	if el.holdErr != nil {
		return LocationLease{}, el.holdErr
	}
	l := el.leases[loc]
	if l == nil && seen.Exists || l != nil && (!seen.Exists || l.Holder != seen.Holder || l.Term != seen.Term) {
		cur := LocationLease{Known: true}
		if l != nil {
			cur = LocationLease{Known: true, Exists: true, Holder: l.Holder, Term: l.Term, Age: l.Age}
		}
		return cur, ErrLeaseTaken
	}
	switch {
	case l == nil:
		l = &FakeLease{Holder: node, Term: minTerm}
		el.leases[loc] = l
	case l.Holder != node:
		l.Holder, l.Term = node, max(l.Term+1, minTerm)
	}
	l.Age = 0
	return LocationLease{Known: true, Exists: true, Holder: l.Holder, Term: l.Term}, nil
}

// ReleaseLocation implements Elector.
func (f *Fake) ReleaseLocation(_ context.Context, loc, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.election().holdErr; err != nil {
		return err
	}
	if l := f.election().leases[loc]; l != nil && l.Holder == node {
		l.Holder = ""
	}
	return nil
}

// PublishLeads implements Elector.
func (f *Fake) PublishLeads(_ context.Context, node, v string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v == "" {
		delete(f.election().leads, node)
	} else {
		f.election().leads[node] = v
	}
	return nil
}

// PublishedLeads returns node's LeadsAnnotation as last published.
func (f *Fake) PublishedLeads(node string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.election().leads[node]
}

// LeadTerm implements Elector.
func (f *Fake) LeadTerm(loc string) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := int32(-1)
	for _, v := range f.election().leads {
		if l, err := ParseLeads(v); err == nil && l.Location == loc {
			t = max(t, l.Term)
		}
	}
	return t
}
