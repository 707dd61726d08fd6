package watch

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/kilofed/kilofed/dns/zone"
)

func serviceImport(name string, typ mcsv1beta1.ServiceImportType, ips ...string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
		Spec: mcsv1beta1.ServiceImportSpec{Type: typ, IPs: ips,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

func endpointSlice(name, svc, cluster string, ready *bool, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "prod", Name: name, Labels: map[string]string{}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if svc != "" {
		es.Labels[mcsv1beta1.LabelServiceName] = svc
	}
	if cluster != "" {
		es.Labels[mcsv1beta1.LabelSourceCluster] = cluster
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ready}})
	}
	return es
}

// mcsFake is mcs-api's fake clientset, telling the reflector that it has no
// watch-list semantics (as client-go's own fakes do).
type mcsFake struct{ *mcsfake.Clientset }

func (mcsFake) IsWatchListSemanticsUnSupported() bool { return true }

func TestConvert(t *testing.T) {
	got := Import(&mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.0.0.1", "not-an-ip", "fd00::1"},
			Ports: []mcsv1beta1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}, {Port: 70000}}},
	})
	want := zone.Import{Namespace: "ns", Name: "s", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")},
		Ports: []zone.Port{{Name: "dns", Protocol: "UDP", Port: 53}}}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("Import (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		name string
		es   *discoveryv1.EndpointSlice
		want zone.Slice
		ok   bool
	}{
		{"ready unset counts as ready", endpointSlice("e", "s", "c1", nil, "10.1.0.1"),
			zone.Slice{Namespace: "prod", Name: "e", Service: "s", Cluster: "c1", Endpoints: []zone.Endpoint{{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.1")}, Ready: true}}}, true},
		{"not ready", endpointSlice("e", "s", "c1", ptr.To(false), "10.1.0.1"),
			zone.Slice{Namespace: "prod", Name: "e", Service: "s", Cluster: "c1", Endpoints: []zone.Endpoint{{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.1")}}}}, true},
		{"no source-cluster label", endpointSlice("e", "s", "", nil, "10.1.0.1"), zone.Slice{}, false},
		{"no service-name label", endpointSlice("e", "", "c1", nil, "10.1.0.1"), zone.Slice{}, false},
		{"FQDN slice", func() *discoveryv1.EndpointSlice {
			es := endpointSlice("e", "s", "c1", nil)
			es.AddressType = discoveryv1.AddressTypeFQDN
			return es
		}(), zone.Slice{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Slice(tc.es)
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" || ok != tc.ok {
				t.Errorf("Slice: ok %v, want %v (-want +got):\n%s", ok, tc.ok, d)
			}
		})
	}
}

func TestFeedFollowsTheCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset(endpointSlice("web-a", "web", "a", nil, "10.1.0.5"))
	mcs := mcsFake{mcsfake.NewSimpleClientset(serviceImport("web", mcsv1beta1.ClusterSetIP, "10.96.0.10"))}
	z := zone.New(zone.Config{})
	events := make(chan struct{}, 100)
	f, err := Start(ctx, Config{Kube: kube, MCS: mcs, Zone: z, OnEvent: func() { events <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), f.HasSynced) {
		t.Fatal("informers did not sync")
	}
	// answers waits for events until name answers want (the A records, or
	// the rcode's name).
	answers := func(step, name string, want ...string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			var got []string
			r := z.Lookup(name, dns.TypeA)
			for _, rr := range r.Answer {
				got = append(got, rr.(*dns.A).A.String())
			}
			if r.Rcode != dns.RcodeSuccess {
				got = []string{dns.RcodeToString[r.Rcode]}
			}
			if cmp.Equal(want, got) {
				return
			}
			select {
			case <-events:
			case <-timeout:
				t.Fatalf("%s: %s answers %v, want %v", step, name, got, want)
			}
		}
	}
	const web, db = "web.prod.svc.clusterset.local.", "db.prod.svc.clusterset.local."
	answers("listed before the start", web, "10.96.0.10")
	answers("its slice's cluster", "a."+web)

	mcs.MulticlusterV1beta1().ServiceImports("prod").Create(ctx, serviceImport("db", mcsv1beta1.Headless), metav1.CreateOptions{})
	kube.DiscoveryV1().EndpointSlices("prod").Create(ctx, endpointSlice("db-a", "db", "a", nil, "10.1.0.7", "10.1.0.8"), metav1.CreateOptions{})
	answers("headless import and slice created", db, "10.1.0.7", "10.1.0.8")
	kube.DiscoveryV1().EndpointSlices("prod").Create(ctx, endpointSlice("db-x", "db", "", nil, "10.9.9.9"), metav1.CreateOptions{})
	kube.DiscoveryV1().EndpointSlices("prod").Create(ctx, endpointSlice("db-b", "db", "b", nil, "10.2.0.7"), metav1.CreateOptions{})
	answers("a slice without source-cluster is left out", db, "10.1.0.7", "10.1.0.8", "10.2.0.7")
	kube.DiscoveryV1().EndpointSlices("prod").Update(ctx, endpointSlice("db-a", "db", "a", ptr.To(false), "10.1.0.7", "10.1.0.8"), metav1.UpdateOptions{})
	answers("endpoints not ready", db, "10.2.0.7")
	kube.DiscoveryV1().EndpointSlices("prod").Delete(ctx, "db-b", metav1.DeleteOptions{})
	answers("last ready slice deleted", db, "NXDOMAIN")

	mcs.MulticlusterV1beta1().ServiceImports("prod").Update(ctx, serviceImport("web", mcsv1beta1.ClusterSetIP, "10.96.0.11"), metav1.UpdateOptions{})
	answers("import IP changed", web, "10.96.0.11")
	mcs.MulticlusterV1beta1().ServiceImports("prod").Delete(ctx, "web", metav1.DeleteOptions{})
	answers("import deleted", web, "NXDOMAIN")
}
