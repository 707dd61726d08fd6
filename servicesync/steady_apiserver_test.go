package servicesync_test

import (
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	"github.com/kilofed/kilofed/servicesync"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// TestSteadyStateWritesNothing runs servicesync on a real API server (the
// lab's, through envtest, with servicesync's CRDs) with one exported
// Service, through the client kilofed-controller gives it
// (servicesync.NewLocalClient): once the export is imported and its
// conditions are written, a further poll writes nothing and sends no
// request at all (its reads come from informers; before, every poll read
// every export, its Service and slices, and every import, one request
// each), also across resyncs: an object is written again only when it
// differs from the live one (TestDriftIsRepaired). The ServiceExport CRD has no status
// subresource, so writing its conditions bumps its generation: conditions
// stamped with the new generation differ from those written, and, before,
// every poll patched every export again (BenchmarkServicesyncScale counted
// one patch per export per poll).
func TestSteadyStateWritesNothing(t *testing.T) {
	ctx := t.Context()
	c := startExportedWeb(t)
	admin := c.admin.Client
	var writes, requests atomic.Int64
	cfg := rest.CopyConfig(c.admin.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return writeCounter{rt, &writes, &requests} }
	local, err := servicesync.NewLocalClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := servicesync.New(servicesync.Config{Local: local, ClusterID: "prod", Ranges: discover.Options{ServiceCIDRs: []netip.Prefix{c.services}},
		Resync: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Published, imported, then the export Ready: polls until one is Ready
	// and writes nothing, each after the informers saw the last one's writes.
	var ex mcsv1beta1.ServiceExport
	for poll := 0; ; poll++ {
		if poll == 50 {
			t.Fatalf("the export is not Ready and settled after 50 polls: %+v", ex.Status.Conditions)
		}
		w := writes.Load()
		if err := s.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "app", Name: "web"}, &ex); err != nil {
			t.Fatal(err)
		}
		ready := false
		for _, cond := range ex.Status.Conditions {
			ready = ready || (cond.Type == "Ready" && cond.Status == metav1.ConditionTrue)
		}
		if ready && writes.Load() == w {
			break
		}
		time.Sleep(100 * time.Millisecond) // the informers' watch events
	}
	before, reqs := writes.Load(), requests.Load()
	for range 3 {
		if err := s.Step(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // polls across resyncs (300 ms)
	}
	if n := writes.Load() - before; n != 0 {
		var now mcsv1beta1.ServiceExport
		_ = admin.Get(ctx, client.ObjectKey{Namespace: "app", Name: "web"}, &now)
		t.Errorf("3 polls with nothing changed wrote %d times (the export's generation went from %d to %d)", n, ex.Generation, now.Generation)
	}
	if n := requests.Load() - reqs; n != 0 {
		t.Errorf("3 polls with nothing changed sent %d requests: the reads do not come from informers", n)
	}
}

// webService is the Service web of namespace app, headless or not.
func webService(headless bool) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}

// startExportedWeb starts one real API server (the lab's, through envtest,
// with servicesync's CRDs; the test skips without the lab binaries, fails
// without them in CI) holding the Service app/web, its EndpointSlice of one
// ready endpoint and its ServiceExport. It is stopped with the test.
func startExportedWeb(t *testing.T) *scaleCluster {
	t.Helper()
	if _, err := os.Stat(filepath.Join(k8stest.BinsDir(), "kube-apiserver")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no kube-apiserver in %s: %v (make lab-bins)", k8stest.BinsDir(), err)
		}
		t.Skipf("no kube-apiserver in %s (make lab-bins)", k8stest.BinsDir())
	}
	c := startScaleCluster(t, "prod", netip.MustParsePrefix("10.10.0.0/16"), netip.MustParsePrefix("10.96.0.0/16"), "10.4.0.1/16")
	t.Cleanup(func() { _ = c.env.Stop() })
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ssv1.Namespace}},
		webService(false),
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-x1", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.10.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(80))}}},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}},
	} {
		if err := c.admin.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// writeCounter counts the requests that are not reads (n) and all requests
// but watches (all).
type writeCounter struct {
	rt     http.RoundTripper
	n, all *atomic.Int64
}

func (w writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		w.n.Add(1)
	}
	if r.URL.Query().Get("watch") != "true" {
		w.all.Add(1)
	}
	return w.rt.RoundTrip(r)
}

// TestDriftIsRepaired proves that what servicesync wrote is written again
// when someone else changes or deletes it: a derived Service's label edited
// by hand, an imported EndpointSlice deleted, an ExportedService deleted.
func TestDriftIsRepaired(t *testing.T) {
	ctx := t.Context()
	c := startExportedWeb(t)
	admin := c.admin.Client
	local, err := servicesync.NewLocalClient(ctx, c.admin.Config)
	if err != nil {
		t.Fatal(err)
	}
	s, err := servicesync.New(servicesync.Config{Local: local, ClusterID: "prod", Ranges: discover.Options{ServiceCIDRs: []netip.Prefix{c.services}}})
	if err != nil {
		t.Fatal(err)
	}
	derived := client.ObjectKey{Namespace: "app", Name: servicesync.DerivedName("web")}
	// until polls until ok holds, at most 50 polls 100 ms apart.
	until := func(what string, ok func() bool) {
		t.Helper()
		for poll := 0; ; poll++ {
			if err := s.Step(ctx); err != nil {
				t.Fatal(err)
			}
			if ok() {
				return
			}
			if poll == 50 {
				t.Fatalf("after 50 polls: %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	slices := func() []discoveryv1.EndpointSlice {
		var l discoveryv1.EndpointSliceList
		if err := admin.List(ctx, &l, client.InNamespace("app"), client.MatchingLabels{discoveryv1.LabelManagedBy: servicesync.EndpointSliceManager}); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	exported := func() bool {
		var l ssv1.ExportedServiceList
		if err := admin.List(ctx, &l, client.InNamespace(ssv1.Namespace)); err != nil {
			t.Fatal(err)
		}
		return len(l.Items) == 1
	}
	labelled := func() bool {
		var svc corev1.Service
		return admin.Get(ctx, derived, &svc) == nil && svc.Labels[mcsv1beta1.LabelServiceName] == "web"
	}
	until("imported", func() bool { return labelled() && len(slices()) == 1 && exported() })

	var svc corev1.Service
	if err := admin.Get(ctx, derived, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Labels[mcsv1beta1.LabelServiceName] = "edited-by-hand"
	if err := admin.Update(ctx, &svc); err != nil {
		t.Fatal(err)
	}
	until("the derived Service's label edited by hand is not written back", labelled)

	sl := slices()[0]
	if err := admin.Delete(ctx, &sl); err != nil {
		t.Fatal(err)
	}
	until("the imported EndpointSlice deleted by hand is not written back", func() bool { return len(slices()) == 1 })

	if err := admin.DeleteAllOf(ctx, &ssv1.ExportedService{}, client.InNamespace(ssv1.Namespace)); err != nil {
		t.Fatal(err)
	}
	until("the ExportedService deleted by hand is not published again", exported)
}
