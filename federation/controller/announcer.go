package controller

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/mirror"
	"github.com/kilofed/kilofed/federation/ranges"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
)

// Mesh is what the controller reads of the local mesh: the nodes and Peers
// as the agents see them (k8s.Client), and a signal when they change.
type Mesh interface {
	// Snapshot returns the nodes and peers, as k8s.Backend does.
	Snapshot() ([]topology.Node, []topology.Peer, []k8s.Problem)
	// Changes signals that Snapshot may have changed.
	Changes() <-chan struct{}
}

// announcer keeps this cluster's Announcement equal to its topology.
type announcer struct {
	c    *Controller
	last fedv1.AnnouncementSpec
}

// local returns this cluster's ranges as it announces them, read from the
// API (every Node and ServiceCIDR) and kept for localRanges.
func (c *Controller) local(ctx context.Context) (ranges.Cluster, error) {
	r, err := discover.Ranges(ctx, c.cfg.Local.Client, c.cfg.Ranges)
	if err != nil {
		return r, err
	}
	r.ID = c.id
	if !r.WireGuard.IsValid() {
		r.WireGuard = c.cfg.Topology.Subnet
	}
	c.mu.Lock()
	c.ranges, c.haveRanges = r, true
	c.mu.Unlock()
	return r, nil
}

// localRanges returns the ranges the announcer read last (it reads them
// again on every mesh change and resync), reading them only when it has
// not yet: the links check each remote against them every poll, and must
// not list every Node each time.
func (c *Controller) localRanges(ctx context.Context) (ranges.Cluster, error) {
	c.mu.Lock()
	r, ok := c.ranges, c.haveRanges
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	return c.local(ctx)
}

// announce computes the topology and writes the Announcement if it changed.
func (a *announcer) announce(ctx context.Context) error {
	c := a.c
	nodes, peers, _ := c.cfg.Mesh.Snapshot()
	topo, err := topology.New(nodes, peers, c.cfg.Topology)
	if err != nil {
		return fmt.Errorf("compute the mesh topology: %w", err)
	}
	r, err := c.local(ctx)
	if err != nil {
		return err
	}
	spec := mirror.Announce(c.id, topo, r.Pods, r.Services, r.WireGuard)
	if reflect.DeepEqual(spec, a.last) {
		return nil
	}
	obj := &fedv1.Announcement{
		TypeMeta:   metav1.TypeMeta{APIVersion: fedv1.SchemeGroupVersion.String(), Kind: "Announcement"},
		ObjectMeta: metav1.ObjectMeta{Name: fedv1.AnnouncementName, Namespace: fedv1.Namespace},
		Spec:       spec,
	}
	if err := c.cfg.Local.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("write Announcement: namespace %s missing (kilofed join creates it, as does the chart): %w", fedv1.Namespace, err)
		}
		return fmt.Errorf("write Announcement %s/%s: %w", fedv1.Namespace, fedv1.AnnouncementName, err)
	}
	c.log.Info("announced", "gateways", len(spec.Gateways), "pods", spec.PodCIDRs, "services", spec.ServiceCIDRs)
	a.last = spec
	return nil
}

// run announces on every mesh change and every resync period until ctx ends.
func (a *announcer) run(ctx context.Context) {
	tick := time.NewTicker(a.c.cfg.Resync)
	defer tick.Stop()
	for {
		if err := a.announce(ctx); err != nil && ctx.Err() == nil {
			a.c.log.Warn("announcement not written", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-a.c.cfg.Mesh.Changes():
		case <-tick.C:
		}
	}
}
