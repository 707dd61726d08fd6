package servicesync

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

func TestSpecPublishesTheServiceAndItsEndpoints(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ex := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", CreationTimestamp: created},
		Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"team": "a"}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"not": "exported"}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, SessionAffinity: corev1.ServiceAffinityNone, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	portName, proto, port := "http", corev1.ProtocolTCP, int32(8080)
	yes, no := true, false
	slice := func(name, manager string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelManagedBy: manager}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}}, Endpoints: eps}
	}
	web0 := "web-0"
	got := Spec("dr", ex, svc, []discoveryv1.EndpointSlice{
		slice("web-b", "endpointslice-controller.k8s.io", discoveryv1.Endpoint{Addresses: []string{"10.11.1.6"}, Conditions: discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-1"}}),
		slice("web-a", "endpointslice-controller.k8s.io", discoveryv1.Endpoint{Addresses: []string{"10.11.1.5"}, Hostname: &web0, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}),
		slice("imported", EndpointSliceManager, discoveryv1.Endpoint{Addresses: []string{"10.10.1.5"}}),
	})
	// Both slices have the same ports: one group, sorted by address; the
	// imported slice is not published again.
	want := ssv1.ExportedServiceSpec{
		ClusterID: "dr", Namespace: "default", Name: "web", ExportCreated: created, Type: ssv1.Headless,
		Ports:           []ssv1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		SessionAffinity: corev1.ServiceAffinityNone, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		ExportedLabels: map[string]string{"team": "a"},
		Endpoints: []ssv1.EndpointGroup{
			{AddressType: discoveryv1.AddressTypeIPv4, Ports: []ssv1.EndpointPort{{Name: "http", Protocol: proto, Port: port}},
				Endpoints: []ssv1.Endpoint{
					{Addresses: []string{"10.11.1.5"}, Hostname: "web-0", Ready: true, Serving: true},
					{Addresses: []string{"10.11.1.6"}, Hostname: "10-11-1-6", Serving: true, Terminating: true},
				}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Spec (-want +got):\n%s", d)
	}
}
