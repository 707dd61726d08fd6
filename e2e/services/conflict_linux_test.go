//go:build linux

package services

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/servicesync"
)

// testHeadless exports a headless Service of dr: prod's import is
// Headless, without IP, its derived Service has none, and the slices hold
// dr's pod IPs with the pods' names as hostnames.
func testHeadless(ctx context.Context, t *testing.T, s *svcs) {
	svc := lab.EchoService("default", "echo-headless", "echo", 8080)
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	if _, err := s.dr.Client().CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ex := export(ctx, t, s.k["dr"], "echo-headless")
	took, err := eventually(ctx, 20*time.Second, func() error {
		var si mcsv1beta1.ServiceImport
		if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo-headless"}, &si); err != nil {
			return err
		}
		if si.Spec.Type != mcsv1beta1.Headless || len(si.Spec.IPs) != 0 {
			return fmt.Errorf("import type %s IPs %v, want Headless without IP", si.Spec.Type, si.Spec.IPs)
		}
		var d corev1.Service
		if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: servicesync.DerivedName("echo-headless")}, &d); err != nil {
			return err
		}
		if d.Spec.ClusterIP != corev1.ClusterIPNone {
			return fmt.Errorf("derived Service clusterIP %q, want None", d.Spec.ClusterIP)
		}
		var list discoveryv1.EndpointSliceList
		if err := s.k["prod"].List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{mcsv1beta1.LabelServiceName: "echo-headless", mcsv1beta1.LabelSourceCluster: "dr"}); err != nil {
			return err
		}
		var got []string
		for _, sl := range list.Items {
			for _, e := range sl.Endpoints {
				h := ""
				if e.Hostname != nil {
					h = *e.Hostname
				}
				got = append(got, h+"="+strings.Join(e.Addresses, ","))
			}
		}
		slices.Sort(got)
		var want []string
		for _, ip := range s.ips["dr"] {
			want = append(want, strings.ReplaceAll(ip, ".", "-")+"="+ip)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return fmt.Errorf("headless slices hold %v, want %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("headless import in prod after %v: %v", took, err)
	}
	t.Logf("headless import in prod after %v", took.Round(time.Millisecond))
	for pod, ip := range s.ips["dr"] {
		got, err := probe(ctx, s.l, s.prod, "echo-prod-par-1", ip, 8080, 2*time.Second)
		if err != nil || got[0] != pod {
			t.Errorf("prod -> headless endpoint %s (%s): %q, %v", ip, pod, got, err)
		}
	}
	if err := s.k["dr"].Delete(ctx, ex); err != nil {
		t.Fatal(err)
	}
}

// testConflict exports echo from dr, then from prod with another port of
// the same name: the oldest (dr's) wins, Conflict=True PortConflict on
// both, and the import's port reaches only dr's pods. When dr's export
// goes, the import stays (same object, never absent) and takes prod's port.
func testConflict(ctx context.Context, t *testing.T, s *svcs) {
	dr := export(ctx, t, s.k["dr"], "echo")
	if _, err := eventually(ctx, 20*time.Second, func() error { return imported(ctx, s.k["prod"], "echo", []string{"dr"}, drIPs(s)) }); err != nil {
		t.Fatalf("dr's export not imported: %v", err)
	}
	svc := lab.EchoService("default", "echo", "echo", 8081)
	if _, err := s.prod.Client().CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	prod := export(ctx, t, s.k["prod"], "echo")
	for _, side := range []struct {
		c  string
		ex *mcsv1beta1.ServiceExport
	}{{"dr", dr}, {"prod", prod}} {
		took, err := eventually(ctx, 20*time.Second, func() error {
			if err := s.k[side.c].Get(ctx, client.ObjectKeyFromObject(side.ex), side.ex); err != nil {
				return err
			}
			if got := condition(side.ex, "Conflict"); got != "True/PortConflict" {
				return fmt.Errorf("Conflict %s, want True/PortConflict", got)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s's export after %v: %v", side.c, took, err)
		} else {
			t.Logf("%s's export: Conflict=True PortConflict after %v", side.c, took.Round(time.Millisecond))
		}
	}
	var si mcsv1beta1.ServiceImport
	took, err := eventually(ctx, 20*time.Second, func() error {
		if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo"}, &si); err != nil {
			return err
		}
		var got []string
		for _, c := range si.Status.Clusters {
			got = append(got, c.Cluster)
		}
		if len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 8080 || !slices.Equal(got, []string{"dr", "prod"}) {
			return fmt.Errorf("import ports %v clusters %v, want dr's port 8080 and both clusters", si.Spec.Ports, got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("import after %v: %v", took, err)
	}
	// prod's endpoints export the port "http" as 8081: the import's 8080
	// reaches only dr's pods.
	ip := si.Spec.IPs[0]
	for i := range 6 {
		got, err := probe(ctx, s.l, s.prod, "echo-prod-par-1", ip, 8080, 2*time.Second)
		if err != nil || got[1] != "dr" {
			t.Errorf("probe %d of the import's port 8080: %q, %v; want dr's pods only", i, got, err)
		}
	}

	// The oldest leaves: the import never disappears and takes prod's port.
	uid := si.UID
	if err := s.k["dr"].Delete(ctx, dr); err != nil {
		t.Fatal(err)
	}
	took, err = eventually(ctx, 20*time.Second, func() error {
		var now mcsv1beta1.ServiceImport
		err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo"}, &now)
		if apierrors.IsNotFound(err) || err == nil && now.UID != uid {
			t.Errorf("the import flapped when the oldest export left: %v, uid %s -> %s", err, uid, now.UID)
			return nil
		}
		if err != nil {
			return err
		}
		if len(now.Spec.Ports) != 1 || now.Spec.Ports[0].Port != 8081 || len(now.Status.Clusters) != 1 {
			return fmt.Errorf("import ports %v clusters %v, want prod's port 8081 alone", now.Spec.Ports, now.Status.Clusters)
		}
		if err := s.k["prod"].Get(ctx, client.ObjectKeyFromObject(prod), prod); err != nil {
			return err
		}
		if got := condition(prod, "Conflict"); got != "False/NoConflicts" {
			return fmt.Errorf("prod's Conflict %s, want False/NoConflicts", got)
		}
		return nil
	})
	if err != nil {
		t.Errorf("after the oldest export left (%v): %v", took, err)
	} else {
		t.Logf("the oldest export left: the same import took prod's port after %v", took.Round(time.Millisecond))
	}
	if err := s.k["prod"].Delete(ctx, prod); err != nil {
		t.Fatal(err)
	}
	_ = s.prod.Client().CoreV1().Services("default").Delete(ctx, "echo", metav1.DeleteOptions{})
	if _, err := eventually(ctx, 20*time.Second, func() error {
		err := s.k["prod"].Get(ctx, types.NamespacedName{Namespace: "default", Name: "echo"}, &mcsv1beta1.ServiceImport{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("import still there: %v", err)
		}
		return nil
	}); err != nil {
		t.Errorf("no export left: %v", err)
	}
}
