package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"k8s.io/client-go/rest"

	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/federation/ranges"
	"github.com/kilofed/kilofed/mesh/topology"
)

// FieldOwner is the field manager of everything the controller writes.
const FieldOwner = "kilofed-controller"

// Config configures a Controller.
type Config struct {
	// Local is this cluster, reached with the controller's own credentials.
	Local *kube.Cluster
	// Mesh is the local mesh as the agents see it.
	Mesh Mesh
	// Topology are the options the agents compute the mesh with (their
	// flags: subnet, granularity, port...).
	Topology topology.Options
	// Ranges override what discovery finds of the local cluster.
	Ranges discover.Options
	// Poll is how often each remote's Announcement is read; zero means 1 s.
	Poll time.Duration
	// Resync re-announces and re-checks even without changes; zero means 30 s.
	Resync time.Duration
	// Dial returns the client of a remote cluster; nil means kube.New.
	// Tests replace it.
	Dial func(id string, cfg *rest.Config) (*kube.Cluster, error)
	// Metrics receives the controller's metrics; nil disables them.
	Metrics *Metrics
	// Logger receives the logs; nil discards them.
	Logger *slog.Logger
}

// Controller is the federation controller of one cluster.
type Controller struct {
	cfg Config
	log *slog.Logger
	id  string

	mu    sync.Mutex
	links map[string]*link // by RemoteCluster name
	// ranges are this cluster's ranges as last read (haveRanges once read).
	ranges     ranges.Cluster
	haveRanges bool
}

// New checks cfg and reads the cluster's ID, which join sets.
func New(ctx context.Context, cfg Config) (*Controller, error) {
	if cfg.Local == nil || cfg.Mesh == nil {
		return nil, errors.New("controller: Config.Local and Config.Mesh are required")
	}
	cfg.Poll = cmp.Or(cfg.Poll, time.Second)
	cfg.Resync = cmp.Or(cfg.Resync, 30*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Dial == nil {
		cfg.Dial = kube.New
	}
	id, err := discover.ClusterID(ctx, cfg.Local.Client)
	if err != nil {
		return nil, fmt.Errorf("this cluster's ID: %w (kilofed join sets it; or create the ClusterProperty %s)", err, "cluster.clusterset.k8s.io")
	}
	return &Controller{cfg: cfg, log: cfg.Logger.With("cluster", id), id: id, links: map[string]*link{}}, nil
}

// ID returns this cluster's ID.
func (c *Controller) ID() string { return c.id }

// Run announces this cluster and follows every joined cluster until ctx
// ends.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		(&announcer{c: c}).run(ctx)
	}()
	tick := time.NewTicker(c.cfg.Poll * 5)
	defer tick.Stop()
	for {
		if err := c.syncLinks(ctx, &wg); err != nil && ctx.Err() == nil {
			c.log.Warn("list RemoteClusters", "err", err)
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-tick.C:
		}
	}
}

// syncLinks starts a link for every RemoteCluster and stops those whose
// RemoteCluster is gone.
func (c *Controller) syncLinks(ctx context.Context, wg *sync.WaitGroup) error {
	var list fedv1.RemoteClusterList
	if err := c.cfg.Local.Client.List(ctx, &list); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[string]bool{}
	for _, rc := range list.Items {
		want[rc.Name] = true
		if _, ok := c.links[rc.Name]; ok {
			continue
		}
		l := newLink(c, rc.Name)
		c.links[rc.Name] = l
		lctx, cancel := context.WithCancel(ctx)
		l.cancel = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(lctx)
		}()
		c.log.Info("following remote cluster", "remote", rc.Spec.ClusterID)
	}
	for name, l := range c.links {
		if !want[name] {
			l.cancel()
			delete(c.links, name)
			c.cfg.Metrics.forget(name)
			c.log.Info("remote cluster unjoined", "remote", name)
		}
	}
	return nil
}
