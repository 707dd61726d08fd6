package servicesync

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/join"
	"github.com/kilofed/kilofed/federation/ranges"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
	"github.com/kilofed/kilofed/servicesync/merge"
)

// Config configures a Syncer.
// LocalQPS and LocalBurst are the rate limit kilofed-controller gives its
// client of the local API server by default (--kube-api-qps,
// --kube-api-burst). servicesync sends several requests per exported service
// and poll; at client-go's default (5/s, burst 10) 1000 services took 21-25
// min to converge (BenchmarkServicesyncScale, docs/performance.md).
const (
	LocalQPS   = 50
	LocalBurst = 100
)

type Config struct {
	// Local is this cluster's client; its scheme must hold Scheme's types.
	Local client.Client
	// ClusterID is this cluster's ID.
	ClusterID string
	// Ranges override what discovery finds of the local cluster's ranges.
	Ranges discover.Options
	// Poll is how often everything is read and merged; zero means 1 s.
	Poll time.Duration
	// Resync rewrites every object even when unchanged; zero means 30 s.
	Resync time.Duration
	// WithdrawAfter is merge.Keep's bound; zero means merge.WithdrawAfter.
	WithdrawAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Dial returns a client of a remote cluster; nil means a client with
	// Scheme. Tests replace it.
	Dial func(cfg *rest.Config) (client.Client, error)
	// Logger receives the logs; nil discards them.
	Logger *slog.Logger
}

// Syncer publishes this cluster's exports and imports every joined
// cluster's.
type Syncer struct {
	cfg Config
	log *slog.Logger

	remotes   map[string]*remote
	published map[string]published
	written   map[string]written
	// replaced holds the UIDs of the derived Services deleted to be
	// replaced, so that a read still answering one is taken as stale.
	replaced map[types.UID]bool
	ranges   ranges.Cluster
	rangesAt time.Time
	resyncAt time.Time
	warned   string
}

// written is an object as servicesync last wrote it and as the API server
// answered, with the resourceVersion of that answer.
type written struct {
	want, got []byte
	version   string
}

// New returns a Syncer.
func New(cfg Config) (*Syncer, error) {
	if cfg.Local == nil || cfg.ClusterID == "" {
		return nil, errors.New("servicesync: Config.Local and Config.ClusterID are required")
	}
	cfg.Poll = cmp.Or(cfg.Poll, time.Second)
	cfg.Resync = cmp.Or(cfg.Resync, 30*time.Second)
	cfg.WithdrawAfter = cmp.Or(cfg.WithdrawAfter, merge.WithdrawAfter)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dial == nil {
		cfg.Dial = func(c *rest.Config) (client.Client, error) { return client.New(c, client.Options{Scheme: Scheme()}) }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Syncer{cfg: cfg, log: cfg.Logger.With("component", "servicesync"), remotes: map[string]*remote{},
		published: map[string]published{}, written: map[string]written{}, replaced: map[types.UID]bool{}}, nil
}

// Run syncs every Poll until ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		if err := s.Step(ctx); err != nil && ctx.Err() == nil {
			if msg := err.Error(); msg != s.warned {
				s.log.Warn("sync", "err", err)
				s.warned = msg
			}
		} else {
			s.warned = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Step reads, merges and writes everything once.
func (s *Syncer) Step(ctx context.Context) error {
	c := s.cfg.Local
	now := s.cfg.Now()
	if now.After(s.resyncAt) {
		// Objects are compared with the live ones at every poll (apply,
		// publish): the resync only reads the ranges again.
		s.replaced = map[types.UID]bool{} // reads lag by a watch event, not by a resync
		s.resyncAt = now.Add(s.cfg.Resync)
	}
	if s.rangesAt.IsZero() || now.Sub(s.rangesAt) > s.cfg.Resync {
		r, err := discover.Ranges(ctx, c, s.cfg.Ranges)
		if err != nil {
			return fmt.Errorf("local ranges: %w", err)
		}
		r.ID = s.cfg.ClusterID
		s.ranges, s.rangesAt = r, now
	}
	locals, err := s.readLocal(ctx)
	if err != nil {
		return err
	}
	if err := s.publish(ctx, locals); err != nil {
		return err
	}
	var rcs fedv1.RemoteClusterList
	if err := c.List(ctx, &rcs); err != nil {
		return fmt.Errorf("list RemoteClusters: %w", err)
	}
	byService := map[string][]ssv1.ExportedServiceSpec{}
	for _, le := range locals {
		if le.spec != nil {
			byService[le.spec.Namespace+"/"+le.spec.Name] = append(byService[le.spec.Namespace+"/"+le.spec.Name], *le.spec)
		}
	}
	var remotes []ranges.Cluster
	complete := true
	seen := map[string]bool{}
	for i := range rcs.Items {
		rc := &rcs.Items[i]
		seen[rc.Spec.ClusterID] = true
		remotes = append(remotes, join.AnnouncedRanges(*rc))
		exports, known := s.readRemote(ctx, rc, now)
		complete = complete && known
		for _, e := range exports {
			byService[e.Namespace+"/"+e.Name] = append(byService[e.Namespace+"/"+e.Name], e)
		}
	}
	for id := range s.remotes {
		if !seen[id] {
			delete(s.remotes, id) // unjoined: its exports go
		}
	}
	var namespaces corev1.NamespaceList
	if err := c.List(ctx, &namespaces); err != nil {
		return fmt.Errorf("list Namespaces: %w", err)
	}
	hasNS := map[string]bool{}
	for _, ns := range namespaces.Items {
		hasNS[ns.Name] = ns.DeletionTimestamp == nil
	}
	keys := slices.Sorted(mapsKeys(byService))
	results := map[string]merge.Result{}
	imported := map[string]bool{}
	var errs []error
	for _, k := range keys {
		res := merge.Merge(merge.Input{Local: s.ranges, Remotes: remotes, Exports: byService[k]})
		results[k] = res
		if len(res.Refused) > 0 {
			s.logRefused(k, res.Refused)
		}
		if res.Import == nil || !hasNS[res.Import.Namespace] {
			continue
		}
		// An import whose write failed is not swept either.
		imported[k] = true
		if _, err := s.applyImport(ctx, res); err != nil {
			errs = append(errs, err)
		}
	}
	if complete {
		if err := s.sweep(ctx, imported); err != nil {
			errs = append(errs, err)
		}
	}
	for _, le := range locals {
		k := le.export.Namespace + "/" + le.export.Name
		le.state.Published = le.spec != nil
		le.state.Imported = imported[k]
		le.state.Conflict = results[k].Conflicts[s.cfg.ClusterID]
		if err := s.exportStatus(ctx, le); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sweep deletes the ServiceImports (and so their Services and slices) that
// servicesync wrote and no cluster exports any more.
func (s *Syncer) sweep(ctx context.Context, keep map[string]bool) error {
	var have mcsv1beta1.ServiceImportList
	if err := s.cfg.Local.List(ctx, &have, client.MatchingLabels{LabelManagedBy: ManagedBy}); err != nil {
		return fmt.Errorf("list ServiceImports: %w", err)
	}
	for i := range have.Items {
		si := &have.Items[i]
		if keep[si.Namespace+"/"+si.Name] {
			continue
		}
		// The derived Service and the slices are owned by the import; they
		// are deleted with it here too, not left to the garbage collector.
		if err := s.cfg.Local.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace(si.Namespace),
			client.MatchingLabels{mcsv1beta1.LabelServiceName: si.Name, discoveryv1.LabelManagedBy: EndpointSliceManager}); err != nil {
			return fmt.Errorf("delete the EndpointSlices of %s/%s: %w", si.Namespace, si.Name, err)
		}
		if err := client.IgnoreNotFound(s.cfg.Local.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: si.Namespace, Name: DerivedName(si.Name)}})); err != nil {
			return fmt.Errorf("delete Service %s/%s: %w", si.Namespace, DerivedName(si.Name), err)
		}
		if err := client.IgnoreNotFound(s.cfg.Local.Delete(ctx, si, client.PropagationPolicy(metav1.DeletePropagationBackground))); err != nil {
			return fmt.Errorf("delete ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
		}
		s.written = map[string]written{} // what was written is gone: write it again if it comes back
		s.log.Info("import deleted: no cluster exports it", "service", si.Namespace+"/"+si.Name)
	}
	return nil
}

// exportStatus writes the conditions of a local ServiceExport when they
// changed.
func (s *Syncer) exportStatus(ctx context.Context, le localExport) error {
	ex := le.export
	conds := slices.Clone(ex.Status.Conditions)
	for _, c := range merge.ExportConditions(le.state) {
		c.ObservedGeneration = ex.Generation
		meta.SetStatusCondition(&conds, c)
	}
	// The ServiceExport CRD has no status subresource: writing the
	// conditions bumps the export's generation, so a condition differing
	// only in observedGeneration is not written again (it would be at every
	// poll, bumping it each time).
	if sameConditions(conds, ex.Status.Conditions) {
		return nil
	}
	patch := client.MergeFrom(ex.DeepCopy())
	ex.Status.Conditions = conds
	if err := s.cfg.Local.Patch(ctx, ex, patch); err != nil {
		return fmt.Errorf("write ServiceExport %s/%s conditions: %w", ex.Namespace, ex.Name, err)
	}
	for _, c := range conds {
		if c.Type == "Conflict" && c.Status == metav1.ConditionTrue {
			s.log.Warn("export conflicts", "service", ex.Namespace+"/"+ex.Name, "reasons", c.Reason, "msg", c.Message)
		}
	}
	return nil
}

// sameConditions reports whether a and b hold the same conditions, in the
// same order, but for their observedGeneration.
func sameConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		x.ObservedGeneration, y.ObservedGeneration = 0, 0
		return reflect.DeepEqual(x, y)
	})
}

func (s *Syncer) logRefused(k string, refused []merge.Refusal) {
	var b strings.Builder
	for i, r := range refused {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s from %s: %s", r.Address, r.Cluster, r.Why)
	}
	s.log.Debug("endpoints refused", "service", k, "refused", b.String())
}

// apply server-side applies obj unless it is what was last written and
// the live object is still the one that write made (same resourceVersion:
// nobody changed or deleted it since); obj then holds the API server's
// answer. With NewLocalClient the live object is read from an informer: a
// poll at rest sends no request, and an object changed by someone else is
// written back at the next poll.
func (s *Syncer) apply(ctx context.Context, obj client.Object, kind string) error {
	key := kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
	want, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if w, ok := s.written[key]; ok && string(w.want) == string(want) {
		live, _ := obj.DeepCopyObject().(client.Object)
		if err := s.cfg.Local.Get(ctx, client.ObjectKeyFromObject(obj), live); err == nil && live.GetResourceVersion() == w.version {
			return json.Unmarshal(w.got, obj)
		}
	}
	if err := s.cfg.Local.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		delete(s.written, key)
		return err
	}
	got, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	s.written[key] = written{want: want, got: got, version: obj.GetResourceVersion()}
	return nil
}
