//go:build linux

package services

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/federation/mirror"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/servicesync/merge"
)

// importState returns the clusters that prod's import of echo lists and
// whether prod holds slices from dr.
func importState(ctx context.Context, s *svcs) ([]string, bool, error) {
	var si mcsv1beta1.ServiceImport
	if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo"}, &si); err != nil {
		return nil, false, err
	}
	var cs []string
	for _, c := range si.Status.Clusters {
		cs = append(cs, c.Cluster)
	}
	ips, err := sliceIPs(ctx, s.k["prod"], "echo", "dr")
	return cs, len(ips) > 0, err
}

// answersFrom probes prod's derived Service of echo until a pod of cluster
// answers, within.
func answersFrom(ctx context.Context, s *svcs, ip, cluster string, within time.Duration) error {
	_, err := eventually(ctx, within, func() error {
		got, err := probe(ctx, s.l, s.prod, "echo-prod-par-1", ip, 8080, time.Second)
		if err != nil {
			return err
		}
		if got[1] != cluster {
			return fmt.Errorf("answered by %s of %s, want a pod of %s", got[0], got[1], cluster)
		}
		return nil
	})
	return err
}

// testWithdraw exports echo from both clusters; stops dr's API server: dr's
// endpoints stay and answer; cuts dr's nodes off their LAN too: once the
// latest handshake is older than merge.WithdrawAfter, dr's endpoints are
// withdrawn from prod's import, prod's stay; restores dr: they come back.
func testWithdraw(ctx context.Context, t *testing.T, s *svcs) {
	if _, err := s.prod.Client().CoreV1().Services("default").Create(ctx, lab.EchoService("default", "echo", "echo", 8080), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dr, prod := export(ctx, t, s.k["dr"], "echo"), export(ctx, t, s.k["prod"], "echo")
	defer func() {
		_ = s.k["prod"].Delete(ctx, prod)
		_ = s.prod.Client().CoreV1().Services("default").Delete(ctx, "echo", metav1.DeleteOptions{})
	}()
	if _, err := eventually(ctx, 20*time.Second, func() error {
		cs, fromDR, err := importState(ctx, s)
		if err == nil && (!slices.Equal(cs, []string{"dr", "prod"}) || !fromDR) {
			err = fmt.Errorf("import lists %v, slices from dr %v", cs, fromDR)
		}
		return err
	}); err != nil {
		t.Fatalf("echo exported from both: %v", err)
	}
	var d mcsv1beta1.ServiceImport
	if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo"}, &d); err != nil {
		t.Fatal(err)
	}
	ip := d.Spec.IPs[0]
	for _, c := range []string{"dr", "prod"} {
		if err := answersFrom(ctx, s, ip, c, 20*time.Second); err != nil {
			t.Errorf("exported from both, the import's IP %s: %v", ip, err)
		}
	}
	t.Logf("exported from both: the import lists dr and prod, and both answer at %s", ip)

	t.Logf("stopping dr's API server")
	if err := s.dr.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	apiBack := false
	defer func() {
		if !apiBack {
			_ = s.dr.StartAPIServer(ctx)
		}
	}()
	time.Sleep(10 * time.Second) // servicesync reads dr every second: 10 failed reads
	if cs, fromDR, err := importState(ctx, s); err != nil || !fromDR || !slices.Equal(cs, []string{"dr", "prod"}) {
		t.Errorf("10 s into dr's API outage: import lists %v, slices from dr %v (%v); want dr's kept", cs, fromDR, err)
	}
	if err := answersFrom(ctx, s, ip, "dr", 20*time.Second); err != nil {
		t.Errorf("during dr's API outage: %v", err)
	}
	t.Logf("10 s into dr's API outage: dr's endpoints are kept and answer")

	t.Logf("cutting dr's nodes off their LAN")
	for _, n := range s.dr.Nodes() {
		if err := n.Down(); err != nil {
			t.Fatal(err)
		}
	}
	up := false
	defer func() {
		if !up {
			for _, n := range s.dr.Nodes() {
				_ = n.Up()
			}
		}
	}()
	took, err := eventually(ctx, merge.WithdrawAfter+time.Minute, func() error {
		cs, fromDR, err := importState(ctx, s)
		if err == nil && (fromDR || !slices.Equal(cs, []string{"prod"})) {
			err = fmt.Errorf("import lists %v, slices from dr %v", cs, fromDR)
		}
		return err
	})
	if err != nil {
		t.Fatalf("dr's data plane gone %v: %v", took, err)
	}
	var peers kilov1.PeerList
	if err := s.k["prod"].List(ctx, &peers, client.MatchingLabels{mirror.LabelRemote: "dr"}); err != nil {
		t.Fatal(err)
	}
	var latest time.Time
	for _, p := range peers.Items {
		if hs := p.Status.LatestHandshake; hs != nil && hs.After(latest) {
			latest = hs.Time
		}
	}
	// The poll is 1 s and the status a second or two behind.
	if age := time.Since(latest); age < merge.WithdrawAfter-3*time.Second {
		t.Errorf("dr withdrawn while its latest handshake was %v old, before the bound %v", age.Round(time.Second), merge.WithdrawAfter)
	}
	t.Logf("dr's endpoints withdrawn from prod %v after the cut, its latest handshake %v old (bound %v)", took.Round(time.Second), time.Since(latest).Round(time.Second), merge.WithdrawAfter)
	if err := answersFrom(ctx, s, ip, "prod", 10*time.Second); err != nil {
		t.Errorf("after the withdrawal: %v", err)
	}
	for range 5 {
		if got, err := probe(ctx, s.l, s.prod, "echo-prod-par-1", ip, 8080, time.Second); err != nil || got[1] != "prod" {
			t.Errorf("after the withdrawal, the import's IP answered %q, %v; want prod's pods only", got, err)
		}
	}

	t.Logf("restoring dr")
	for _, n := range s.dr.Nodes() {
		if err := n.Up(); err != nil {
			t.Fatal(err)
		}
	}
	up = true
	if err := s.dr.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	apiBack = true
	took, err = eventually(ctx, time.Minute, func() error {
		cs, fromDR, err := importState(ctx, s)
		if err == nil && (!fromDR || !slices.Equal(cs, []string{"dr", "prod"})) {
			err = fmt.Errorf("import lists %v, slices from dr %v", cs, fromDR)
		}
		return err
	})
	if err != nil {
		t.Fatalf("dr restored, after %v: %v", took, err)
	}
	if err := answersFrom(ctx, s, ip, "dr", 30*time.Second); err != nil {
		t.Errorf("dr restored: %v", err)
	}
	t.Logf("dr restored: its endpoints are back in prod's import %v after its API", took.Round(time.Millisecond))
	_ = s.k["dr"].Delete(ctx, dr)
}
