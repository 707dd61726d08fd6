package watch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/kilofed/kilofed/dns/zone"
)

// Config configures Start.
type Config struct {
	Kube kubernetes.Interface
	MCS  mcsclient.Interface
	Zone *zone.Zone
	// Resync re-delivers every object this often; zero means never.
	Resync time.Duration
	// OnEvent, if set, is called after each event is applied to the zone.
	OnEvent func()
	Logger  *slog.Logger
}

// Feed is a running watch.
type Feed struct {
	synced []cache.InformerSynced
}

// sliceSelector lists only the EndpointSlices that carry both MCS labels.
var sliceSelector = mcsv1beta1.LabelServiceName + "," + mcsv1beta1.LabelSourceCluster

// Start starts the informers; they run until ctx is done.
func Start(ctx context.Context, cfg Config) (*Feed, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	done := func() {
		if cfg.OnEvent != nil {
			cfg.OnEvent()
		}
	}
	kf := informers.NewSharedInformerFactoryWithOptions(cfg.Kube, cfg.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sliceSelector }))
	imports := importInformer(ctx, cfg.MCS, cfg.Resync)
	slices := kf.Discovery().V1().EndpointSlices().Informer()
	setImport := func(obj any) {
		if si, ok := obj.(*mcsv1beta1.ServiceImport); ok {
			cfg.Zone.SetImport(Import(si))
		}
		done()
	}
	setSlice := func(obj any) {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			done()
			return
		}
		if s, ok := Slice(es); ok {
			cfg.Zone.SetSlice(s)
		} else {
			cfg.Zone.DeleteSlice(es.Namespace, es.Name)
		}
		done()
	}
	if _, err := imports.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    setImport,
		UpdateFunc: func(_, obj any) { setImport(obj) },
		DeleteFunc: func(obj any) {
			if ns, name, ok := key(obj); ok {
				cfg.Zone.DeleteImport(ns, name)
			}
			done()
		},
	}); err != nil {
		return nil, fmt.Errorf("watch ServiceImports: %w", err)
	}
	if _, err := slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    setSlice,
		UpdateFunc: func(_, obj any) { setSlice(obj) },
		DeleteFunc: func(obj any) {
			if ns, name, ok := key(obj); ok {
				cfg.Zone.DeleteSlice(ns, name)
			}
			done()
		},
	}); err != nil {
		return nil, fmt.Errorf("watch EndpointSlices: %w", err)
	}
	kf.Start(ctx.Done())
	go imports.RunWithContext(ctx)
	log.Info("dns: watching ServiceImports and MCS EndpointSlices", "selector", sliceSelector)
	return &Feed{synced: []cache.InformerSynced{imports.HasSynced, slices.HasSynced}}, nil
}

// HasSynced reports whether both informers have delivered their first full
// list.
func (f *Feed) HasSynced() bool {
	for _, s := range f.synced {
		if !s() {
			return false
		}
	}
	return true
}

// key returns the namespace and name of a deleted object or its tombstone.
func key(obj any) (string, string, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", "", false
	}
	return m.GetNamespace(), m.GetName(), true
}

// importInformer watches ServiceImports in every namespace. It is built here
// rather than taken from mcs-api's generated factory so that the reflector
// learns, from the client, whether it may use watch-list semantics (the
// generated fakes of mcs-api v0.5.2 predate that check).
func importInformer(ctx context.Context, c mcsclient.Interface, resync time.Duration) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.MulticlusterV1beta1().ServiceImports(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			return c.MulticlusterV1beta1().ServiceImports(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, c), &mcsv1beta1.ServiceImport{}, resync, cache.Indexers{})
}
