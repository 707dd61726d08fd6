package servicesync

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/dns/zone"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
	"github.com/kilofed/kilofed/servicesync/merge"
)

// Labels of everything servicesync writes.
const (
	// LabelManagedBy is app.kubernetes.io/managed-by, ManagedBy on every
	// object servicesync writes.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "kilofed-servicesync"
	// EndpointSliceManager is the endpointslice.kubernetes.io/managed-by of
	// the imported EndpointSlices: the Kubernetes endpointslice controller
	// leaves slices of another manager alone.
	EndpointSliceManager = "servicesync.kilofed.io"
	// FieldOwner is the field manager of everything servicesync writes.
	FieldOwner = "kilofed-servicesync"
)

// localExport is one local ServiceExport with the spec it publishes.
type localExport struct {
	export *mcsv1beta1.ServiceExport
	state  merge.ExportState
	spec   *ssv1.ExportedServiceSpec // nil when not valid
}

// readLocal reads every local ServiceExport, its Service and its
// EndpointSlices, and returns what each publishes.
func (s *Syncer) readLocal(ctx context.Context) ([]localExport, error) {
	c := s.cfg.Local
	var exports mcsv1beta1.ServiceExportList
	if err := c.List(ctx, &exports); err != nil {
		return nil, fmt.Errorf("list ServiceExports: %w", err)
	}
	var out []localExport
	for i := range exports.Items {
		ex := &exports.Items[i]
		le := localExport{export: ex}
		var svc corev1.Service
		err := c.Get(ctx, client.ObjectKey{Namespace: ex.Namespace, Name: ex.Name}, &svc)
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("read Service %s/%s: %w", ex.Namespace, ex.Name, err)
		}
		if err == nil {
			le.state.ServiceType = &svc.Spec.Type
		}
		if le.state.Valid() {
			var eps discoveryv1.EndpointSliceList
			if err := c.List(ctx, &eps, client.InNamespace(ex.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: ex.Name}); err != nil {
				return nil, fmt.Errorf("list EndpointSlices of %s/%s: %w", ex.Namespace, ex.Name, err)
			}
			spec := Spec(s.cfg.ClusterID, ex, &svc, eps.Items)
			le.spec = &spec
		}
		out = append(out, le)
	}
	return out, nil
}

// Spec returns what cluster publishes of the export ex of svc, whose
// EndpointSlices are slices (those of another manager than the Kubernetes
// endpointslice controller's are skipped: servicesync's own imports).
func Spec(cluster string, ex *mcsv1beta1.ServiceExport, svc *corev1.Service, slices []discoveryv1.EndpointSlice) ssv1.ExportedServiceSpec {
	spec := ssv1.ExportedServiceSpec{
		ClusterID: cluster, Namespace: ex.Namespace, Name: ex.Name, ExportCreated: ex.CreationTimestamp,
		Type:                  ssv1.ClusterSetIP,
		SessionAffinity:       svc.Spec.SessionAffinity,
		SessionAffinityConfig: svc.Spec.SessionAffinityConfig,
		InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy,
		TrafficDistribution:   svc.Spec.TrafficDistribution,
		IPFamilies:            svc.Spec.IPFamilies,
		ExportedLabels:        ex.Spec.ExportedLabels,
		ExportedAnnotations:   ex.Spec.ExportedAnnotations,
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		spec.Type = ssv1.Headless
	}
	for _, p := range svc.Spec.Ports {
		spec.Ports = append(spec.Ports, ssv1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	groups := map[string]int{}
	for _, sl := range sortedSlices(slices) {
		if m := sl.Labels[discoveryv1.LabelManagedBy]; m != "" && m != "endpointslice-controller.k8s.io" && m != "endpointslicemirroring-controller.k8s.io" {
			continue
		}
		g := ssv1.EndpointGroup{AddressType: sl.AddressType}
		for _, p := range sl.Ports {
			ep := ssv1.EndpointPort{AppProtocol: p.AppProtocol}
			if p.Name != nil {
				ep.Name = *p.Name
			}
			if p.Protocol != nil {
				ep.Protocol = *p.Protocol
			}
			if p.Port != nil {
				ep.Port = *p.Port
			}
			g.Ports = append(g.Ports, ep)
		}
		key := fmt.Sprint(g.AddressType, g.Ports)
		i, ok := groups[key]
		if !ok {
			i = len(spec.Endpoints)
			groups[key] = i
			spec.Endpoints = append(spec.Endpoints, g)
		}
		for _, e := range sl.Endpoints {
			ep := ssv1.Endpoint{Addresses: e.Addresses, Ready: isTrue(e.Conditions.Ready, true), Serving: isTrue(e.Conditions.Serving, isTrue(e.Conditions.Ready, true)), Terminating: isTrue(e.Conditions.Terminating, false)}
			if e.Hostname != nil {
				ep.Hostname = *e.Hostname
			} else if spec.Type == ssv1.Headless && len(e.Addresses) > 0 {
				// As CoreDNS names a headless endpoint without a hostname
				// in cluster.local, and as the MCS conformance suite
				// expects: its first address, dashed.
				ep.Hostname = zone.AddressLabel(e.Addresses[0])
			}
			spec.Endpoints[i].Endpoints = append(spec.Endpoints[i].Endpoints, ep)
		}
	}
	for i := range spec.Endpoints {
		slicesSortEndpoints(spec.Endpoints[i].Endpoints)
	}
	return spec
}

func isTrue(b *bool, dflt bool) bool {
	if b == nil {
		return dflt
	}
	return *b
}

func sortedSlices(in []discoveryv1.EndpointSlice) []discoveryv1.EndpointSlice {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func slicesSortEndpoints(eps []ssv1.Endpoint) {
	slices.SortStableFunc(eps, func(a, b ssv1.Endpoint) int {
		return cmp.Compare(fmt.Sprint(a.Addresses), fmt.Sprint(b.Addresses))
	})
}

// published is an ExportedService as servicesync last wrote it, with the
// resourceVersion of the API server's answer.
type published struct {
	spec    ssv1.ExportedServiceSpec
	version string
}

// publish makes the ExportedServices of kilofed-system exactly those of
// exports, writing only those that differ from the live ones: changed
// specs, and objects someone else changed or deleted since servicesync
// wrote them (their resourceVersion moved).
func (s *Syncer) publish(ctx context.Context, exports []localExport) error {
	c := s.cfg.Local
	var have ssv1.ExportedServiceList
	if err := c.List(ctx, &have, client.InNamespace(ssv1.Namespace), client.MatchingLabels{LabelManagedBy: ManagedBy}); err != nil {
		return fmt.Errorf("list ExportedServices: %w", err)
	}
	live := map[string]string{}
	for _, e := range have.Items {
		live[e.Name] = e.ResourceVersion
	}
	want := map[string]bool{}
	for _, le := range exports {
		if le.spec == nil {
			continue
		}
		name := ssv1.ObjectName(le.spec.Namespace, le.spec.Name)
		want[name] = true
		if old, ok := s.published[name]; ok && reflect.DeepEqual(old.spec, *le.spec) && live[name] == old.version {
			continue
		}
		obj := &ssv1.ExportedService{
			TypeMeta:   metav1.TypeMeta{APIVersion: ssv1.SchemeGroupVersion.String(), Kind: "ExportedService"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ssv1.Namespace, Labels: map[string]string{LabelManagedBy: ManagedBy}},
			Spec:       *le.spec,
		}
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			delete(s.published, name)
			return fmt.Errorf("publish ExportedService %s: %w", name, err)
		}
		if old, ok := s.published[name]; !ok || !reflect.DeepEqual(old.spec, *le.spec) {
			s.log.Info("export published", "service", le.spec.Namespace+"/"+le.spec.Name, "endpoints", countEndpoints(*le.spec))
		}
		s.published[name] = published{spec: *le.spec, version: obj.ResourceVersion}
	}
	for i := range have.Items {
		e := &have.Items[i]
		if want[e.Name] {
			continue
		}
		if err := client.IgnoreNotFound(c.Delete(ctx, e)); err != nil {
			return fmt.Errorf("withdraw ExportedService %s: %w", e.Name, err)
		}
		delete(s.published, e.Name)
		s.log.Info("export withdrawn", "service", e.Spec.Namespace+"/"+e.Spec.Name)
	}
	return nil
}

func countEndpoints(spec ssv1.ExportedServiceSpec) int {
	n := 0
	for _, g := range spec.Endpoints {
		n += len(g.Endpoints)
	}
	return n
}
