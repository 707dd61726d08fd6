package servicesync

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/mirror"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
	"github.com/kilofed/kilofed/servicesync/merge"
)

// TestRemoteExportsStayWhileTunnelsHandshake drives readRemote with a fake
// clock and a remote API that stops answering: its exports stay while the
// mirrored Peers' latest handshake is within the bound, are withdrawn past
// it, and come back with the API.
func TestRemoteExportsStayWhileTunnelsHandshake(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	handshake := metav1.NewTime(t0)
	rc := &fedv1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr"}, Spec: fedv1.RemoteClusterSpec{ClusterID: "dr", APIServer: "https://dr:6443", CredentialsSecret: "kilofed-remote-dr"}}
	peer := &kilov1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "dr-gra", Labels: map[string]string{mirror.LabelRemote: "dr", mirror.LabelManagedBy: mirror.ManagedBy}},
		Status: kilov1.PeerStatus{LatestHandshake: &handshake}}
	local := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(rc, peer,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: "kilofed-remote-dr"}, Data: map[string][]byte{"token": []byte("t")}}).Build()
	down := false
	exported := &ssv1.ExportedService{ObjectMeta: metav1.ObjectMeta{Namespace: ssv1.Namespace, Name: "default.echo"},
		Spec: ssv1.ExportedServiceSpec{ClusterID: "dr", Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP}}
	remoteAPI := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(exported).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if down {
				return errors.New("connection refused")
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	s, err := New(Config{Local: local, ClusterID: "prod", Now: func() time.Time { return now },
		Dial: func(*rest.Config) (client.Client, error) { return remoteAPI, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name      string
		after     time.Duration
		down      bool
		wantKnown bool
		wantN     int
	}{
		{"API answers", 0, false, true, 1},
		{"API down, handshake 10 s ago", 10 * time.Second, true, true, 1},
		{"API down, handshake just inside the bound", merge.WithdrawAfter - time.Second, true, true, 1},
		{"API down, handshake past the bound: withdrawn", merge.WithdrawAfter + time.Second, true, true, 0},
		{"API back: the exports come back", merge.WithdrawAfter + 2*time.Second, false, true, 1},
	} {
		now, down = t0.Add(step.after), step.down
		got, known := s.readRemote(ctx, rc, now)
		if known != step.wantKnown || len(got) != step.wantN {
			t.Errorf("%s: %d exports (known %v), want %d (known %v)", step.name, len(got), known, step.wantN, step.wantKnown)
		}
	}
}

// TestRemoteNeverReadIsNotSwept: a remote whose API has not answered once
// since the start, while its tunnels handshake, is not known: its imports
// are left as they are.
func TestRemoteNeverReadIsNotSwept(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hs := metav1.NewTime(now.Add(-time.Second))
	rc := &fedv1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr"}, Spec: fedv1.RemoteClusterSpec{ClusterID: "dr", CredentialsSecret: "missing"}}
	local := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(rc,
		&kilov1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "dr-gra", Labels: map[string]string{mirror.LabelRemote: "dr", mirror.LabelManagedBy: mirror.ManagedBy}}, Status: kilov1.PeerStatus{LatestHandshake: &hs}}).Build()
	s, err := New(Config{Local: local, ClusterID: "prod", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if got, known := s.readRemote(ctx, rc, now); known || len(got) != 0 {
		t.Errorf("readRemote = %d exports, known %v; want none, unknown", len(got), known)
	}
}
