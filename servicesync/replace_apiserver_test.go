package servicesync_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/servicesync"
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
	ctx := t.Context()
	c := startExportedWeb(t)
	admin := c.admin.Client
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
	if err := admin.Delete(ctx, webService(false)); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, webService(true)); err != nil {
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
