package kgctl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
)

// Snapshot is what the cluster says about the mesh at one moment: the
// topology's inputs as every agent reads them, and what the agents publish
// about the options they run with.
type Snapshot struct {
	// Nodes are the cluster's nodes, Ready computed from their heartbeats.
	Nodes []topology.Node
	// Peers are the valid Peer objects.
	Peers []topology.Peer
	// Problems are the Nodes' values and the Peers that could not be read.
	Problems []k8s.Problem
	// Granularities is the mesh granularity each node's agent published
	// (kilo.squat.ai/granularity), by node name.
	Granularities map[string]topology.Granularity
	// ServiceCIDRs are the cluster's Service ranges, from its ServiceCIDR
	// objects; used when --service-cidr is not given.
	ServiceCIDRs []netip.Prefix
}

// Source gives snapshots of one cluster's mesh and says when they change.
type Source interface {
	// Snapshot returns the current state.
	Snapshot() Snapshot
	// Changes delivers a signal whenever Snapshot may have changed;
	// signals are coalesced.
	Changes() <-chan struct{}
}

// PeerCreator is a Source that can also create Peer objects (connect --create).
type PeerCreator interface {
	// CreatePeer creates p; the error matches k8s.ErrAlreadyExists when a
	// Peer of that name exists.
	CreatePeer(ctx context.Context, p *v1alpha1.Peer) error
}

// ClusterSource is the Source of a real cluster, over the agents' own
// Kubernetes backend.
type ClusterSource struct {
	// Client is the backend the snapshots come from.
	Client *k8s.Client
	// ServiceCIDRs were read once from the cluster's ServiceCIDR objects.
	ServiceCIDRs []netip.Prefix
}

// NewClusterSource connects to the API server as the agents do (same
// informers, same heartbeat readiness) and returns once the caches are
// synced. The informers stop when ctx ends.
func NewClusterSource(ctx context.Context, cfg k8s.Config) (*ClusterSource, error) {
	c, err := k8s.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cidrs, err := c.ServiceCIDRs(ctx)
	if err != nil && cfg.Logger != nil {
		cfg.Logger.Warn("cannot discover the Service ranges", "err", err)
	}
	return &ClusterSource{Client: c, ServiceCIDRs: cidrs}, nil
}

// Snapshot implements Source.
func (s *ClusterSource) Snapshot() Snapshot {
	nodes, peers, problems := s.Client.Snapshot()
	return Snapshot{Nodes: nodes, Peers: peers, Problems: problems, Granularities: s.Client.Granularities(), ServiceCIDRs: s.ServiceCIDRs}
}

// Changes implements Source.
func (s *ClusterSource) Changes() <-chan struct{} { return s.Client.Changes() }

// CreatePeer implements PeerCreator.
func (s *ClusterSource) CreatePeer(ctx context.Context, p *v1alpha1.Peer) error {
	return s.Client.CreatePeer(ctx, p)
}

// FakeSource is an in-memory Source and PeerCreator for tests: Set replaces
// the snapshot and signals a change.
type FakeSource struct {
	mu      sync.Mutex
	snap    Snapshot
	changes chan struct{}
	// Created lists the Peers created through CreatePeer, in order.
	Created []*v1alpha1.Peer
}

// NewFakeSource returns a FakeSource holding s.
func NewFakeSource(s Snapshot) *FakeSource {
	f := &FakeSource{changes: make(chan struct{}, 1)}
	f.Set(s)
	return f
}

// Set replaces the snapshot and signals a change.
func (f *FakeSource) Set(s Snapshot) {
	f.mu.Lock()
	f.snap = cloneSnapshot(s)
	f.mu.Unlock()
	select {
	case f.changes <- struct{}{}:
	default:
	}
}

// Snapshot implements Source.
func (f *FakeSource) Snapshot() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneSnapshot(f.snap)
}

// Changes implements Source.
func (f *FakeSource) Changes() <-chan struct{} { return f.changes }

// CreatePeer implements PeerCreator: the Peer is read as the backend reads
// it (an invalid one fails) and added to the snapshot.
func (f *FakeSource) CreatePeer(_ context.Context, p *v1alpha1.Peer) error {
	tp, err := k8s.PeerFromObject(p)
	if err != nil {
		return fmt.Errorf("create peer %q: %w", p.Name, err)
	}
	f.mu.Lock()
	if slices.ContainsFunc(f.snap.Peers, func(o topology.Peer) bool { return o.Name == p.Name }) {
		f.mu.Unlock()
		return fmt.Errorf("create peer %q: %w", p.Name, k8s.ErrAlreadyExists)
	}
	s := cloneSnapshot(f.snap)
	s.Peers = append(s.Peers, tp)
	f.Created = append(f.Created, p.DeepCopy())
	f.mu.Unlock()
	f.Set(s)
	return nil
}

func cloneSnapshot(s Snapshot) Snapshot {
	return Snapshot{
		Nodes:         slices.Clone(s.Nodes),
		Peers:         slices.Clone(s.Peers),
		Problems:      slices.Clone(s.Problems),
		Granularities: maps.Clone(s.Granularities),
	}
}

// problemOf returns the backend's problems with the object kind/name, joined,
// or nil.
func (s Snapshot) problemOf(kind, name string) error {
	var errs []error
	for _, p := range s.Problems {
		if p.Kind == kind && p.Name == name {
			errs = append(errs, p)
		}
	}
	return errors.Join(errs...)
}
