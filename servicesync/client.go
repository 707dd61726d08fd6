package servicesync

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	aboutv1 "github.com/kilofed/kilofed/federation/apis/about/v1alpha1"
	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	kilov1alpha1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// NewLocalClient returns the client of the local API server that
// servicesync reads and writes through: its reads come from informers
// (started on first use and synced before they answer), so that a poll costs
// no request and only changes are written. ExportedServices and Secrets
// (the joined clusters' credentials) are watched in kilofed-system only.
// Peers, ServiceCIDRs and the ClusterProperty are read directly: they are
// read rarely, and caching them would need wider rights. The informers run
// until ctx ends.
//
// Reads from the informers may lag servicesync's own writes by a watch
// event: every write is a server-side apply or an idempotent delete, so a
// stale read costs at most one write again, never a wrong object.
// syncTimeout bounds the first list of each informer of NewLocalClient.
var syncTimeout = 30 * time.Second

func NewLocalClient(ctx context.Context, cfg *rest.Config) (_ client.Client, err error) {
	// The informers of a failed attempt stop with it.
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	scheme := Scheme()
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&ssv1.ExportedService{}: {Namespaces: map[string]cache.Config{ssv1.Namespace: {}}},
		&corev1.Secret{}:        {Namespaces: map[string]cache.Config{fedv1.Namespace: {}}},
	}})
	if err != nil {
		return nil, fmt.Errorf("servicesync informers: %w", err)
	}
	// Every informer is registered, started and synced here, so that
	// missing rights fail the start with the kinds named, not a later read.
	var kinds []string
	var informers []cache.Informer
	for _, obj := range []client.Object{&mcsv1beta1.ServiceExport{}, &mcsv1beta1.ServiceImport{}, &corev1.Service{},
		&discoveryv1.EndpointSlice{}, &corev1.Namespace{}, &corev1.Node{}, &ssv1.ExportedService{}, &fedv1.RemoteCluster{}, &corev1.Secret{}} {
		inf, err := ca.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("servicesync informers: %w", err)
		}
		gvk, _ := apiutil.GVKForObject(obj, scheme)
		kinds, informers = append(kinds, gvk.Kind), append(informers, inf)
	}
	go func() { _ = ca.Start(ctx) }()
	wctx, cancel := context.WithTimeout(ctx, syncTimeout)
	synced := ca.WaitForCacheSync(wctx)
	cancel()
	if !synced {
		var missing []string
		for i, inf := range informers {
			if !inf.HasSynced() {
				missing = append(missing, kinds[i])
			}
		}
		return nil, fmt.Errorf("servicesync cannot list and watch %s within %v: check kilofed-controller's RBAC (the chart's ClusterRole kilofed-controller) and that the CRDs are installed", strings.Join(missing, ", "), syncTimeout)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{
		Reader: ca,
		DisableFor: []client.Object{&kilov1alpha1.Peer{}, &networkingv1.ServiceCIDR{},
			&aboutv1.ClusterProperty{}},
	}})
	if err != nil {
		return nil, fmt.Errorf("servicesync client: %w", err)
	}
	return c, nil
}
