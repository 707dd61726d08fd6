package watch

import (
	"net/netip"

	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/dns/zone"
)

// Import converts a ServiceImport; IPs that do not parse and ports out of
// range are left out.
func Import(si *mcsv1beta1.ServiceImport) zone.Import {
	imp := zone.Import{Namespace: si.Namespace, Name: si.Name, Headless: si.Spec.Type == mcsv1beta1.Headless}
	for _, s := range si.Spec.IPs {
		if a, err := netip.ParseAddr(s); err == nil {
			imp.IPs = append(imp.IPs, a.Unmap())
		}
	}
	for _, p := range si.Spec.Ports {
		if p.Port > 0 && p.Port <= 65535 {
			imp.Ports = append(imp.Ports, zone.Port{Name: p.Name, Protocol: string(p.Protocol), Port: uint16(p.Port)})
		}
	}
	return imp
}

// Slice converts an EndpointSlice, and reports false for one that is not an
// MCS slice (without both labels, or of FQDN addresses). An endpoint without
// a ready condition counts as ready, as the EndpointSlice API says.
func Slice(es *discoveryv1.EndpointSlice) (zone.Slice, bool) {
	svc, cluster := es.Labels[mcsv1beta1.LabelServiceName], es.Labels[mcsv1beta1.LabelSourceCluster]
	if svc == "" || cluster == "" || (es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6) {
		return zone.Slice{}, false
	}
	s := zone.Slice{Namespace: es.Namespace, Name: es.Name, Service: svc, Cluster: cluster}
	for _, ep := range es.Endpoints {
		e := zone.Endpoint{Ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
		if ep.Hostname != nil {
			e.Hostname = *ep.Hostname
		}
		for _, s := range ep.Addresses {
			if a, err := netip.ParseAddr(s); err == nil {
				e.Addresses = append(e.Addresses, a.Unmap())
			}
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s, true
}
