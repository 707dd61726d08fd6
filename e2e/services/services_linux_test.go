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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/servicesync"
)

// twoClusters is the lab of the services tests: prod and dr, one public
// location of two nodes each, with kube-proxy; the lab gives them disjoint
// ranges (prod pods 10.10.0.0/16, dr 10.11.0.0/16).
func twoClusters() lab.Spec {
	return lab.Spec{KubeProxy: true, CoreDNS: true, Clusters: []lab.ClusterSpec{
		{Name: "prod", Locations: []lab.LocationSpec{{Name: "paris", Nodes: []lab.NodeSpec{{Name: "prod-par-1"}, {Name: "prod-par-2"}}}}},
		{Name: "dr", Locations: []lab.LocationSpec{{Name: "gra", Nodes: []lab.NodeSpec{{Name: "dr-gra-1"}, {Name: "dr-gra-2"}}}}},
	}}
}

// svcs is the running lab: two joined clusters, their clients and pods.
type svcs struct {
	l        *lab.Lab
	prod, dr *lab.Cluster
	k        map[string]client.Client
	ips      map[string]map[string]string
	ctls     map[string]*lab.Process
}

// startJoined installs the CRDs in both clusters of l, starts echo pods,
// agents and controllers, creates dr's Service echo and joins the two
// clusters with the CLI.
func startJoined(ctx context.Context, t testing.TB, l *lab.Lab) *svcs {
	t.Helper()
	s := &svcs{l: l, prod: l.Cluster("prod"), dr: l.Cluster("dr"), k: map[string]client.Client{}, ips: map[string]map[string]string{}, ctls: map[string]*lab.Process{}}
	kubeconfig, err := l.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*lab.Cluster{s.prod, s.dr} {
		installCRDs(ctx, t, c)
		s.k[c.Name] = kclient(t, c)
		s.ips[c.Name] = lab.EchoPodsT(ctx, t, c)
		startMesh(t, c)
		s.ctls[c.Name] = startController(t, l, c)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, p := range s.ctls {
				t.Logf("kilofed-controller of %s, last lines:\n%s", name, p.Tail(80))
			}
		}
	})
	if _, err := s.dr.Client().CoreV1().Services("default").Create(ctx, lab.EchoService("default", "echo", "echo", 8080), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := kilofed(ctx, kubeconfig, "prod", "join", "dr", "--wait=2m"); err != nil {
		t.Fatalf("kilofed join: %v\n%s", err, out)
	}
	return s
}

// TestServicesOfTwoClusters runs servicesync's scenarios on one lab of two
// joined clusters; the subtests run in order.
func TestServicesOfTwoClusters(t *testing.T) {
	begin := time.Now()
	l := lab.StartT(t, twoClusters())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := startJoined(ctx, t, l)
	t.Logf("lab up and joined in %v", time.Since(begin).Round(time.Millisecond))

	steps := []struct {
		name   string
		fn     func(context.Context, *testing.T, *svcs)
		needed bool
	}{
		{"ExportInDRIsImportedInBothClustersWithinSeconds", testImported, true},
		{"PodInProdReachesDRThroughTheDerivedService", testReach, false},
		{"PodInProdResolvesTheClustersetNameThroughCoreDNS", testClustersetDNS, false},
		{"LaptopPeerResolvesClusterAndClustersetNamesAndGetsAnswersOverTheTunnel", testLaptopResolvesAndReachesThroughTheTunnel, false},
		{"EndpointsFollowPodsCreatedAndDeleted", testFollow, false},
		{"EndpointsFollowReadinessProbes", testReadiness, false},
		{"ExportWithoutServiceIsInvalid", testNoService, false},
		{"UnexportRemovesTheImportEverywhere", testUnexport, false},
		{"HeadlessExportImportsPodIPsAndNames", testHeadless, false},
		{"HeadlessExportResolvesThroughCoreDNSToPodsPerPodNamesAndSRV", testHeadlessThroughCoreDNS, false},
		{"PortConflictOldestWinsConflictOnBothNoFlap", testConflict, false},
		{"SeedSelectorlessServiceToARemotePodStillWorks", testManual, false},
		{"APIOutageKeepsEndpointsDataPlaneLossWithdrawsThem", testWithdraw, false},
	}
	for _, st := range steps {
		mark := time.Now()
		ok := t.Run(st.name, func(t *testing.T) { st.fn(ctx, t, s) })
		t.Logf("%s: %v", st.name, time.Since(mark).Round(time.Millisecond))
		if !ok && st.needed {
			t.Fatalf("%s failed: the rest needs it", st.name)
		}
	}
	t.Logf("total %v", time.Since(begin).Round(time.Millisecond))
}

func export(ctx context.Context, t testing.TB, k client.Client, name string) *mcsv1beta1.ServiceExport {
	t.Helper()
	ex := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if err := k.Create(ctx, ex); err != nil {
		t.Fatalf("create ServiceExport %s: %v", name, err)
	}
	return ex
}

// imported checks the import of default/name in k: type ClusterSetIP with
// the derived Service's IP, clusters, and the endpoints of dr equal to
// want (sorted IPs).
func imported(ctx context.Context, k client.Client, name string, clusters []string, want []string) error {
	var si mcsv1beta1.ServiceImport
	if err := k.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &si); err != nil {
		return err
	}
	var got []string
	for _, c := range si.Status.Clusters {
		got = append(got, c.Cluster)
	}
	if !slices.Equal(got, clusters) {
		return fmt.Errorf("import lists clusters %v, want %v", got, clusters)
	}
	var svc corev1.Service
	if err := k.Get(ctx, client.ObjectKey{Namespace: "default", Name: servicesync.DerivedName(name)}, &svc); err != nil {
		return fmt.Errorf("derived Service: %w", err)
	}
	if si.Spec.Type != mcsv1beta1.ClusterSetIP || len(si.Spec.IPs) == 0 || si.Spec.IPs[0] != svc.Spec.ClusterIP {
		return fmt.Errorf("import type %s IPs %v, derived Service IP %s", si.Spec.Type, si.Spec.IPs, svc.Spec.ClusterIP)
	}
	if si.Status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsPresent {
		return fmt.Errorf("import endpointSliceObjects %q", si.Status.EndpointSliceObjects)
	}
	ips, err := sliceIPs(ctx, k, name, "dr")
	if err != nil {
		return err
	}
	if !slices.Equal(ips, want) {
		return fmt.Errorf("EndpointSlices from dr hold %v, want %v", ips, want)
	}
	return nil
}

// sliceIPs returns the ready addresses of the imported slices of name from
// cluster, sorted, after checking their labels.
func sliceIPs(ctx context.Context, k client.Client, name, cluster string) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := k.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: cluster}); err != nil {
		return nil, err
	}
	var ips []string
	for _, sl := range list.Items {
		if m := sl.Labels[discoveryv1.LabelManagedBy]; m != servicesync.EndpointSliceManager {
			return nil, fmt.Errorf("slice %s managed by %q", sl.Name, m)
		}
		if sl.Labels[discoveryv1.LabelServiceName] != servicesync.DerivedName(name) {
			return nil, fmt.Errorf("slice %s is for Service %q", sl.Name, sl.Labels[discoveryv1.LabelServiceName])
		}
		if len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].Kind != "ServiceImport" {
			return nil, fmt.Errorf("slice %s owned by %v, want the ServiceImport", sl.Name, sl.OwnerReferences)
		}
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				ips = append(ips, e.Addresses...)
			}
		}
	}
	slices.Sort(ips)
	return ips, nil
}

func drIPs(s *svcs) []string {
	var ips []string
	for _, ip := range s.ips["dr"] {
		ips = append(ips, ip)
	}
	slices.Sort(ips)
	return ips
}

func condition(ex *mcsv1beta1.ServiceExport, typ string) string {
	if c := meta.FindStatusCondition(ex.Status.Conditions, typ); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "absent"
}

func testImported(ctx context.Context, t *testing.T, s *svcs) {
	export(ctx, t, s.k["dr"], "echo")
	for _, c := range []string{"prod", "dr"} {
		took, err := eventually(ctx, 20*time.Second, func() error { return imported(ctx, s.k[c], "echo", []string{"dr"}, drIPs(s)) })
		if err != nil {
			t.Fatalf("%s: no import of dr's echo after %v: %v", c, took.Round(time.Millisecond), err)
		}
		t.Logf("%s: import, derived Service and EndpointSlices %v after %v", c, drIPs(s), took.Round(time.Millisecond))
		if took > 10*time.Second {
			t.Errorf("%s: import took %v, want seconds", c, took)
		}
	}
	took, err := eventually(ctx, 10*time.Second, func() error {
		var ex mcsv1beta1.ServiceExport
		if err := s.k["dr"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo"}, &ex); err != nil {
			return err
		}
		got := []string{condition(&ex, "Valid"), condition(&ex, "Ready"), condition(&ex, "Conflict")}
		if want := []string{"True/Valid", "True/Ready", "False/NoConflicts"}; !slices.Equal(got, want) {
			return fmt.Errorf("conditions %v, want %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Errorf("dr's ServiceExport after %v: %v", took, err)
	}
	t.Logf("prod: kubectl get serviceimports,svc,endpointslices:\n%s", s.prod.KubectlT(ctx, t, "get", "serviceimports,svc,endpointslices", "-n", "default", "-o", "wide"))
}

func testReach(ctx context.Context, t *testing.T, s *svcs) {
	var svc corev1.Service
	if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: servicesync.DerivedName("echo")}, &svc); err != nil {
		t.Fatal(err)
	}
	for from := range s.ips["prod"] {
		var got []string
		took, err := eventually(ctx, 30*time.Second, func() error {
			var err error
			got, err = probe(ctx, s.l, s.prod, from, svc.Spec.ClusterIP, 8080, 2*time.Second)
			if err == nil && (!strings.HasPrefix(got[0], "echo-dr-") || got[1] != "dr") {
				err = fmt.Errorf("answered %q, want a pod of dr", got)
			}
			return err
		})
		if err != nil {
			t.Errorf("prod/%s -> derived Service %s: %v", from, svc.Spec.ClusterIP, err)
			continue
		}
		t.Logf("prod/%s -> derived Service %s:8080: answered by %s of %s after %v", from, svc.Spec.ClusterIP, got[0], got[1], took.Round(time.Millisecond))
	}
}

func testFollow(ctx context.Context, t *testing.T, s *svcs) {
	pod := lab.EchoPod("default", "echo-dr-extra", "echo", "dr-gra-2")
	if _, err := s.dr.Client().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := s.dr.WaitPods(ctx, "default", "app=echo", 3)
	if err != nil {
		t.Fatal(err)
	}
	var three []string
	for _, p := range pods {
		three = append(three, p.Status.PodIP)
	}
	slices.Sort(three)
	took, err := eventually(ctx, 20*time.Second, func() error { return imported(ctx, s.k["prod"], "echo", []string{"dr"}, three) })
	if err != nil {
		t.Fatalf("a pod added in dr: %v after %v", err, took)
	}
	t.Logf("a pod added in dr is in prod's EndpointSlices after %v", took.Round(time.Millisecond))
	if err := s.dr.Client().CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took, err = eventually(ctx, 20*time.Second, func() error { return imported(ctx, s.k["prod"], "echo", []string{"dr"}, drIPs(s)) })
	if err != nil {
		t.Fatalf("a pod deleted in dr: %v after %v", err, took)
	}
	t.Logf("a pod deleted in dr is out of prod's EndpointSlices after %v", took.Round(time.Millisecond))
}

func testNoService(ctx context.Context, t *testing.T, s *svcs) {
	ex := export(ctx, t, s.k["dr"], "nothing")
	defer func() { _ = s.k["dr"].Delete(ctx, ex) }()
	took, err := eventually(ctx, 10*time.Second, func() error {
		if err := s.k["dr"].Get(ctx, client.ObjectKeyFromObject(ex), ex); err != nil {
			return err
		}
		if got := condition(ex, "Valid"); got != "False/NoService" {
			return fmt.Errorf("Valid %s, want False/NoService", got)
		}
		return nil
	})
	if err != nil {
		t.Errorf("export without Service after %v: %v", took, err)
	}
	var si mcsv1beta1.ServiceImport
	if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "nothing"}, &si); !apierrors.IsNotFound(err) {
		t.Errorf("an invalid export is imported in prod: %v", err)
	}
}

func testUnexport(ctx context.Context, t *testing.T, s *svcs) {
	if err := s.k["dr"].Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"prod", "dr"} {
		took, err := eventually(ctx, 20*time.Second, func() error {
			if err := s.k[c].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo"}, &mcsv1beta1.ServiceImport{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("import still there (%v)", err)
			}
			if err := s.k[c].Get(ctx, client.ObjectKey{Namespace: "default", Name: servicesync.DerivedName("echo")}, &corev1.Service{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("derived Service still there (%v)", err)
			}
			ips, err := sliceIPs(ctx, s.k[c], "echo", "dr")
			if err != nil || len(ips) > 0 {
				return fmt.Errorf("imported slices still hold %v (%v)", ips, err)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s after unexport (%v): %v", c, took, err)
		} else {
			t.Logf("%s: import, derived Service and slices gone %v after the unexport", c, took.Round(time.Millisecond))
		}
	}
}
