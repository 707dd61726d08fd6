package k8s

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// heartbeatClient returns a Client over a fake clientset holding Node a and
// a Lease left by a previous run of a's agent, with a clock that only the
// test moves.
func heartbeatClient(t *testing.T) (*Client, *kfake.Clientset, *time.Time) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"}}
	old := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("a"), Namespace: DefaultLeaseNamespace}}
	kube := kfake.NewClientset(node, old)
	nodes := informers.NewSharedInformerFactory(kube, 0).Core().V1().Nodes().Informer()
	if err := nodes.GetStore().Add(node); err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c := &Client{
		cfg:  Config{LeaseNamespace: DefaultLeaseNamespace, LeaseDuration: 3 * time.Second, Logger: slog.New(slog.DiscardHandler)},
		kube: kube, nodes: nodes, hb: map[string]*heartbeat{},
		now: func() time.Time { return clock },
	}
	return c, kube, &clock
}

// leaseVerbs returns the verbs of the Lease requests made since the last call.
func leaseVerbs(kube *kfake.Clientset) []string {
	var out []string
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "leases" {
			out = append(out, a.GetVerb())
		}
	}
	kube.ClearActions()
	return out
}

// TestHeartbeatStartsAnew checks when a heartbeat starts the node's Lease
// again as new (deleted and created, so that the API server gives it a new
// creationTimestamp): at a process's first heartbeat and after a lease
// duration without heartbeats (the node could not forward), never after
// heartbeats that failed because the API server was unreachable, nor after
// one slow call.
func TestHeartbeatStartsAnew(t *testing.T) {
	c, kube, clock := heartbeatClient(t)
	ctx := context.Background()
	apiDown := false
	slow := time.Duration(0)
	kube.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		*clock = clock.Add(slow)
		if apiDown {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	beat := func(after time.Duration) error {
		*clock = clock.Add(after)
		return c.Heartbeat(ctx, "a")
	}
	steps := []struct {
		name    string
		do      func() error
		want    []string
		wantErr bool
	}{
		{name: "first heartbeat of the process: the old run's Lease is replaced", do: func() error { return beat(0) }, want: []string{"delete", "create"}},
		{name: "renewal", do: func() error { return beat(time.Second) }, want: []string{"update"}},
		{name: "renewal just under a lease duration later", do: func() error { return beat(2999 * time.Millisecond) }, want: []string{"update"}},
		{
			name: "API outage of 10 s: every heartbeat fails", wantErr: true,
			do: func() error {
				apiDown = true
				var errs []error
				for range 10 {
					errs = append(errs, beat(time.Second))
				}
				return errors.Join(errs...)
			},
			want: []string{"update", "get", "get", "get", "get", "get", "get", "get", "get", "get"},
		},
		{name: "API back: the Lease is renewed, not replaced", do: func() error { apiDown = false; return beat(time.Second) }, want: []string{"get", "update"}},
		{
			name: "one call slower than a lease duration is no gap",
			do: func() error {
				slow = 5 * time.Second
				err := beat(time.Second)
				slow = 0
				return errors.Join(err, beat(time.Second))
			},
			want: []string{"update", "update"},
		},
		{name: "no heartbeat for a lease duration (not forwarding): a new Lease", do: func() error { return beat(3 * time.Second) }, want: []string{"delete", "create"}},
		{name: "then renewals again", do: func() error { return beat(time.Second) }, want: []string{"update"}},
		{
			name: "new Lease while the API is down: retried until it is created", wantErr: true,
			do: func() error {
				*clock = clock.Add(time.Minute)
				apiDown = true
				return beat(time.Second)
			},
			want: []string{"delete"},
		},
		{name: "API back: the new Lease is created", do: func() error { apiDown = false; return beat(time.Second) }, want: []string{"delete", "create"}},
	}
	for _, s := range steps {
		err := s.do()
		if (err != nil) != s.wantErr {
			t.Errorf("%s: error %v, want error %v", s.name, err, s.wantErr)
		}
		if diff := cmp.Diff(s.want, leaseVerbs(kube)); diff != "" {
			t.Errorf("%s: Lease requests (-want +got):\n%s", s.name, diff)
		}
	}
	l, err := kube.CoordinationV1().Leases(DefaultLeaseNamespace).Get(ctx, LeaseName("a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "a", UID: "uid-a"}}
	if diff := cmp.Diff(want, l.OwnerReferences); diff != "" {
		t.Errorf("owners of the Lease (-want +got):\n%s", diff)
	}
	if h := l.Spec.HolderIdentity; h == nil || *h != "a" || l.Labels[LeaseLabel] != "true" {
		t.Errorf("lease = %+v, want held by a and labelled %s", l, LeaseLabel)
	}
}

// TestHeartbeatNeedsItsNode checks that a Lease is not created without the
// Node that owns it.
func TestHeartbeatNeedsItsNode(t *testing.T) {
	c, _, _ := heartbeatClient(t)
	if err := c.Heartbeat(context.Background(), "nowhere"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Heartbeat for a node that does not exist = %v, want ErrNotFound", err)
	}
}
