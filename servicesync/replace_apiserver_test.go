package servicesync_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	"github.com/kilofed/kilofed/servicesync"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// staleServices is a client whose reads of one Service answer a copy kept
// from before, as an informer does until the watch event of a write
// arrives; it counts the deletes of Services.
type staleServices struct {
	client.Client
	mu      sync.Mutex
	stale   *corev1.Service
	deletes []string
}

func (c *staleServices) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	st := c.stale
	c.mu.Unlock()
	if svc, ok := obj.(*corev1.Service); ok && st != nil && key == client.ObjectKeyFromObject(st) {
		st.DeepCopyInto(svc)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *staleServices) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if svc, ok := obj.(*corev1.Service); ok {
		c.mu.Lock()
		c.deletes = append(c.deletes, string(svc.UID))
		c.mu.Unlock()
	}
	return c.Client.Delete(ctx, obj, opts...)
}

// TestReplacedDerivedServiceIsNotDeletedAgainOnAStaleRead proves that when
// an export turns headless, servicesync replaces the derived Service once,
// and that a later read still answering the old Service (an informer not yet
// told of the replacement) does not make it delete the new one.
func TestReplacedDerivedServiceIsNotDeletedAgainOnAStaleRead(t *testing.T) {
	if _, err := os.Stat(filepath.Join(k8stest.BinsDir(), "kube-apiserver")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no kube-apiserver in %s: %v (make lab-bins)", k8stest.BinsDir(), err)
		}
		t.Skipf("no kube-apiserver in %s (make lab-bins)", k8stest.BinsDir())
	}
	ctx := t.Context()
	c := startScaleCluster(t, "prod", netip.MustParsePrefix("10.10.0.0/16"), netip.MustParsePrefix("10.96.0.0/16"), "10.4.0.1/16")
	t.Cleanup(func() { _ = c.env.Stop() })
	admin := c.admin.Client
	web := func(headless bool) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
		if headless {
			svc.Spec.ClusterIP = corev1.ClusterIPNone
		}
		return svc
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ssv1.Namespace}},
		web(false),
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-x1", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.10.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(80))}}},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	local := &staleServices{Client: admin}
	s, err := servicesync.New(servicesync.Config{Local: local, ClusterID: "prod", Ranges: discover.Options{ServiceCIDRs: []netip.Prefix{c.services}}})
	if err != nil {
		t.Fatal(err)
	}
	derived := client.ObjectKey{Namespace: "app", Name: servicesync.DerivedName("web")}
	var old corev1.Service
	for poll := 0; ; poll++ {
		if err := s.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if err := admin.Get(ctx, derived, &old); err == nil && old.Spec.ClusterIP != "" {
			break
		}
		if poll == 20 {
			t.Fatal("no derived Service with a ClusterIP after 20 polls")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The exported Service turns headless: the derived one is replaced.
	if err := admin.Delete(ctx, web(false)); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, web(true)); err != nil {
		t.Fatal(err)
	}
	var now corev1.Service
	for poll := 0; ; poll++ {
		if err := s.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if err := admin.Get(ctx, derived, &now); err == nil && now.Spec.ClusterIP == corev1.ClusterIPNone {
			break
		}
		if poll == 20 {
			t.Fatal("the derived Service is not headless after 20 polls")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Reads now answer the replaced Service, as a lagging informer would.
	local.mu.Lock()
	local.stale, local.deletes = old.DeepCopy(), nil
	local.mu.Unlock()
	for range 3 {
		if err := s.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	local.mu.Lock()
	defer local.mu.Unlock()
	if len(local.deletes) != 0 {
		t.Errorf("servicesync deleted Services %v on a stale read of the one it replaced (%s)", local.deletes, old.UID)
	}
	var after corev1.Service
	if err := admin.Get(ctx, derived, &after); err != nil || after.UID != now.UID {
		t.Errorf("the derived Service is %v (err %v), want the replacement %s kept", after.UID, err, now.UID)
	}
}
