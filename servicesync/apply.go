package servicesync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
	"github.com/kilofed/kilofed/servicesync/merge"
)

// DerivedName returns the name of the derived Service of the import
// name: "derived-<name>", shortened with a hash to fit 63 characters.
func DerivedName(name string) string { return shorten("derived-"+name, 63) }

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return s[:n-11] + "-" + hex.EncodeToString(h[:])[:10]
}

// sliceName returns the name of the imported EndpointSlice sl of the
// import name.
func sliceName(name string, sl merge.Slice) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%s/%v/%d", name, sl.Cluster, sl.AddressType, sl.Ports, sl.Index))
	return shorten(name+"-"+sl.Cluster, 240) + "-" + hex.EncodeToString(h[:])[:10]
}

// applyImport writes the ServiceImport, the derived Service and the
// EndpointSlices of res, and removes the slices it no longer has. It
// returns whether the import is ready (its Service has its IP, when it
// needs one).
func (s *Syncer) applyImport(ctx context.Context, res merge.Result) (bool, error) {
	c := s.cfg.Local
	imp := res.Import
	labels := map[string]string{}
	annotations := map[string]string{}
	for k, v := range imp.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy] = ManagedBy
	for k, v := range imp.Annotations {
		annotations[k] = v
	}
	ports := []mcsv1beta1.ServicePort{}
	for _, p := range imp.Ports {
		ports = append(ports, mcsv1beta1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	si := &mcsv1beta1.ServiceImport{
		TypeMeta:   metav1.TypeMeta{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceImport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: imp.Namespace, Name: imp.Name, Labels: labels, Annotations: annotations},
		Spec: mcsv1beta1.ServiceImportSpec{
			Ports: ports, Type: mcsv1beta1.ServiceImportType(imp.Type),
			SessionAffinity: imp.SessionAffinity, SessionAffinityConfig: imp.SessionAffinityConfig,
			IPFamilies: imp.IPFamilies, InternalTrafficPolicy: imp.InternalTrafficPolicy, TrafficDistribution: imp.TrafficDistribution,
		},
	}
	if si.Spec.SessionAffinity == "" {
		si.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	// The derived Service first: the import carries its IPs.
	svc, err := s.applyDerived(ctx, imp)
	if err != nil {
		return false, err
	}
	if imp.Type == ssv1.ClusterSetIP {
		// The IPs and their families are those this cluster gave the
		// derived Service, in its order.
		si.Spec.IPs, si.Spec.IPFamilies = svc.Spec.ClusterIPs, svc.Spec.IPFamilies
	}
	var old mcsv1beta1.ServiceImport
	if err := client.IgnoreNotFound(c.Get(ctx, client.ObjectKeyFromObject(si), &old)); err != nil {
		return false, fmt.Errorf("read ServiceImport %s/%s: %w", imp.Namespace, imp.Name, err)
	}
	// The import's CRD has no status subresource: its status is written
	// with it.
	si.Status = importStatus(res, old.Status.Conditions, si.Spec.IPs, svc.Name)
	if err := s.apply(ctx, si, "ServiceImport"); err != nil {
		return false, fmt.Errorf("write ServiceImport %s/%s: %w", imp.Namespace, imp.Name, err)
	}
	owner := metav1.OwnerReference{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceImport", Name: si.Name, UID: si.UID}
	if !slices.ContainsFunc(svc.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == si.UID }) {
		svc.OwnerReferences = []metav1.OwnerReference{owner}
		if err := s.apply(ctx, derivedService(imp, &owner), "Service"); err != nil {
			return false, fmt.Errorf("own Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	}
	want := map[string]bool{}
	for _, sl := range res.Slices {
		obj := endpointSlice(imp, sl, svc.Name, owner)
		want[obj.Name] = true
		if err := s.apply(ctx, obj, "EndpointSlice"); err != nil {
			return false, fmt.Errorf("write EndpointSlice %s/%s: %w", obj.Namespace, obj.Name, err)
		}
	}
	var have discoveryv1.EndpointSliceList
	if err := c.List(ctx, &have, client.InNamespace(imp.Namespace), client.MatchingLabels{mcsv1beta1.LabelServiceName: imp.Name, discoveryv1.LabelManagedBy: EndpointSliceManager}); err != nil {
		return false, fmt.Errorf("list EndpointSlices of %s/%s: %w", imp.Namespace, imp.Name, err)
	}
	for i := range have.Items {
		if !want[have.Items[i].Name] {
			if err := client.IgnoreNotFound(c.Delete(ctx, &have.Items[i])); err != nil {
				return false, fmt.Errorf("delete EndpointSlice %s: %w", have.Items[i].Name, err)
			}
			delete(s.written, "EndpointSlice/"+imp.Namespace+"/"+have.Items[i].Name)
		}
	}
	return imp.Type == ssv1.Headless || len(si.Spec.IPs) > 0, nil
}

// ConditionEndpointsAccepted is the ServiceImport condition that reports
// the remote endpoint addresses refused by the range checks.
const ConditionEndpointsAccepted = "EndpointsAccepted"

// importStatus returns the status of the import of res, keeping the
// transition times of the conditions old.
func importStatus(res merge.Result, old []metav1.Condition, ips []string, svc string) mcsv1beta1.ServiceImportStatus {
	imp := res.Import
	st := mcsv1beta1.ServiceImportStatus{EndpointSliceObjects: mcsv1beta1.EndpointSliceObjectsAbsent, Conditions: slices.Clone(old)}
	if len(res.Slices) > 0 {
		st.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	}
	for _, cl := range imp.Clusters {
		st.Clusters = append(st.Clusters, mcsv1beta1.ClusterStatus{Cluster: cl})
	}
	ready := metav1.Condition{Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: "the derived Service " + svc + " and the EndpointSlices are written"}
	if imp.Type == ssv1.ClusterSetIP && len(ips) == 0 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, string(mcsv1beta1.ServiceImportReasonPending), "the derived Service "+svc+" has no IP yet"
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	acc := metav1.Condition{Type: ConditionEndpointsAccepted, Status: metav1.ConditionTrue, Reason: "InRange", Message: "every endpoint lies in its cluster's accepted pod ranges"}
	if len(res.Refused) > 0 {
		var msgs []string
		for _, r := range res.Refused {
			msgs = append(msgs, r.Address+" from "+r.Cluster+": "+r.Why)
		}
		acc.Status, acc.Reason, acc.Message = metav1.ConditionFalse, "Refused", fmt.Sprintf("%d endpoint addresses left out: %s", len(res.Refused), strings.Join(msgs, "; "))
	}
	meta.SetStatusCondition(&st.Conditions, acc)
	return st
}

// applyDerived writes the derived Service of imp: no selector, its own
// ClusterIP (None when Headless). A Service of that name that servicesync
// did not write is left alone.
func (s *Syncer) applyDerived(ctx context.Context, imp *merge.Import) (*corev1.Service, error) {
	c := s.cfg.Local
	name := DerivedName(imp.Name)
	var old corev1.Service
	err := c.Get(ctx, client.ObjectKey{Namespace: imp.Namespace, Name: name}, &old)
	switch {
	case err == nil && old.Labels[LabelManagedBy] != ManagedBy:
		return nil, fmt.Errorf("the Service %s/%s exists and is not servicesync's: rename it, the import of %s needs the name", imp.Namespace, name, imp.Name)
	case err == nil && s.replaced[old.UID]:
		// A read that lags the replacement (an informer not yet told):
		// the new Service is written below, the old one is gone.
		err = apierrors.NewNotFound(corev1.Resource("services"), name)
	case err == nil && (old.Spec.ClusterIP == corev1.ClusterIPNone) != (imp.Type == ssv1.Headless):
		// A ClusterIP cannot be added or removed: replace the Service.
		// Only this one (its UID): never a replacement a stale read hid.
		if err := c.Delete(ctx, &old, client.Preconditions{UID: &old.UID}); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("replace Service %s/%s: %w", imp.Namespace, name, err)
		}
		s.replaced[old.UID] = true
		s.written = map[string]written{}
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read Service %s/%s: %w", imp.Namespace, name, err)
	}
	svc := derivedService(imp, nil)
	if len(svc.Spec.Ports) == 0 && imp.Type == ssv1.ClusterSetIP {
		return nil, fmt.Errorf("the import %s/%s has no port: a ClusterSetIP Service needs one", imp.Namespace, imp.Name)
	}
	if err == nil && len(old.OwnerReferences) > 0 {
		svc.OwnerReferences = old.OwnerReferences
	}
	if err := s.apply(ctx, svc, "Service"); err != nil {
		return nil, fmt.Errorf("write Service %s/%s: %w", imp.Namespace, name, err)
	}
	return svc, nil
}

// derivedService returns the derived Service of imp, owned by owner when
// set.
func derivedService(imp *merge.Import, owner *metav1.OwnerReference) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: imp.Namespace, Name: DerivedName(imp.Name),
			Labels:      map[string]string{LabelManagedBy: ManagedBy, mcsv1beta1.LabelServiceName: imp.Name},
			Annotations: map[string]string{"multicluster.kubernetes.io/service-import": imp.Name}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, SessionAffinity: imp.SessionAffinity, SessionAffinityConfig: imp.SessionAffinityConfig,
			InternalTrafficPolicy: imp.InternalTrafficPolicy, TrafficDistribution: imp.TrafficDistribution,
		},
	}
	if owner != nil {
		svc.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if imp.Type == ssv1.Headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if len(imp.IPFamilies) > 1 {
		p := corev1.IPFamilyPolicyPreferDualStack
		svc.Spec.IPFamilyPolicy = &p
		svc.Spec.IPFamilies = imp.IPFamilies
	}
	for _, p := range imp.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port, TargetPort: intstr.FromInt32(p.Port)})
	}
	return svc
}

// endpointSlice returns the EndpointSlice of sl, for the derived Service
// svc (kube-proxy programs it) and owned by the import.
func endpointSlice(imp *merge.Import, sl merge.Slice, svc string, owner metav1.OwnerReference) *discoveryv1.EndpointSlice {
	obj := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Namespace: imp.Namespace, Name: sliceName(imp.Name, sl),
			Labels: map[string]string{
				discoveryv1.LabelServiceName:  svc,
				mcsv1beta1.LabelServiceName:   imp.Name,
				mcsv1beta1.LabelSourceCluster: sl.Cluster,
				discoveryv1.LabelManagedBy:    EndpointSliceManager,
				LabelManagedBy:                ManagedBy,
			},
			OwnerReferences: []metav1.OwnerReference{owner}},
		AddressType: sl.AddressType,
		Endpoints:   []discoveryv1.Endpoint{},
		Ports:       []discoveryv1.EndpointPort{},
	}
	for _, p := range sl.Ports {
		obj.Ports = append(obj.Ports, discoveryv1.EndpointPort{Name: ptrTo(p.Name), Protocol: ptrTo(p.Protocol), AppProtocol: p.AppProtocol, Port: ptrTo(p.Port)})
	}
	for _, e := range sl.Endpoints {
		ep := discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: discoveryv1.EndpointConditions{
			Ready: ptrTo(e.Ready), Serving: ptrTo(e.Serving), Terminating: ptrTo(e.Terminating)}}
		if e.Hostname != "" {
			ep.Hostname = ptrTo(e.Hostname)
		}
		obj.Endpoints = append(obj.Endpoints, ep)
	}
	return obj
}

func ptrTo[T any](v T) *T { return &v }
