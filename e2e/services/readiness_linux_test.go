//go:build linux

package services

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/servicesync"
)

// readyPod is an HTTP echo pod of app "ready" whose readiness probe reads
// /healthz every second (the lab's echo answers 503 there after a request
// to /healthz/fail, until one to /healthz/pass).
func readyPod(name, node string) *corev1.Pod {
	p := lab.EchoPod("default", name, "ready", node)
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(lab.EchoPort))}},
		PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1,
	}
	return p
}

// readiness returns, for dr's endpoints of the import name in prod's
// EndpointSlices, each address's ready condition.
func readiness(ctx context.Context, k client.Client, name string) (map[string]bool, error) {
	var list discoveryv1.EndpointSliceList
	if err := k.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: "dr"}); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, sl := range list.Items {
		for _, e := range sl.Endpoints {
			for _, a := range e.Addresses {
				out[a] = e.Conditions.Ready == nil || *e.Conditions.Ready
			}
		}
	}
	return out, nil
}

// testReadiness exports dr's Service "ready" of two pods with readiness
// probes, makes one pod's probe fail and proves that prod's EndpointSlices
// mark it not ready within seconds and that prod's clients reach only the
// ready pod through the derived Service; once the probe passes again, the
// pod is ready in prod again.
func testReadiness(ctx context.Context, t *testing.T, s *svcs) {
	a, b := readyPod("ready-a", "dr-gra-1"), readyPod("ready-b", "dr-gra-2")
	for _, p := range []*corev1.Pod{a, b} {
		if _, err := s.dr.Client().CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := lab.EchoService("default", "ready", "ready", lab.EchoPort)
	if _, err := s.dr.Client().CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ex := export(ctx, t, s.k["dr"], "ready")
	defer func() {
		_ = s.k["dr"].Delete(context.WithoutCancel(ctx), ex)
		_ = s.dr.Client().CoreV1().Services("default").Delete(context.WithoutCancel(ctx), svc.Name, metav1.DeleteOptions{})
		for _, p := range []*corev1.Pod{a, b} {
			_ = s.dr.Client().CoreV1().Pods("default").Delete(context.WithoutCancel(ctx), p.Name, metav1.DeleteOptions{})
		}
	}()
	pods, err := s.dr.WaitPods(ctx, "default", "app=ready", 2)
	if err != nil {
		t.Fatal(err)
	}
	ip := map[string]string{}
	for _, p := range pods {
		ip[p.Name] = p.Status.PodIP
	}
	want := func(readyA, readyB bool) func() error {
		return func() error {
			got, err := readiness(ctx, s.k["prod"], "ready")
			if err != nil {
				return err
			}
			ra, okA := got[ip["ready-a"]]
			rb, okB := got[ip["ready-b"]]
			if !okA || !okB || ra != readyA || rb != readyB {
				return fmt.Errorf("prod's slices of dr's endpoints: %v, want %s ready=%v and %s ready=%v", got, ip["ready-a"], readyA, ip["ready-b"], readyB)
			}
			return nil
		}
	}
	if took, err := eventually(ctx, 30*time.Second, want(true, true)); err != nil {
		t.Fatalf("both ready pods in prod after %v: %v", took, err)
	}
	flip := func(path string) {
		t.Helper()
		url := "http://" + net.JoinHostPort(ip["ready-a"], fmt.Sprint(lab.EchoPort)) + path
		if out, err := s.l.PodExec(ctx, "dr", "default", "echo-dr-gra-2", s.l.LabBinary(), "workload", "get", "--timeout", "2s", url); err != nil {
			t.Fatalf("GET %s: %v\n%s", url, err, out)
		}
	}
	flip("/healthz/fail")
	took, err := eventually(ctx, 20*time.Second, want(false, true))
	if err != nil {
		t.Fatalf("ready-a's probe failing: %v after %v", err, took)
	}
	t.Logf("ready-a's readiness probe failed: not ready in prod's EndpointSlices after %v", took.Round(time.Millisecond))
	// kube-proxy in prod sends the derived Service's traffic to ready-b only.
	var derived corev1.Service
	if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: servicesync.DerivedName("ready")}, &derived); err != nil {
		t.Fatal(err)
	}
	// Give kube-proxy the slice change, then every answer must be ready-b's.
	if _, err := eventually(ctx, 20*time.Second, func() error {
		for i := range 10 {
			got, err := probe(ctx, s.l, s.prod, "echo-prod-par-1", derived.Spec.ClusterIP, lab.EchoPort, 2*time.Second)
			if err != nil || len(got) == 0 || got[0] != "ready-b" {
				return fmt.Errorf("request %d through %s: %v %v, want ready-b", i, derived.Spec.ClusterIP, got, err)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	flip("/healthz/pass")
	took, err = eventually(ctx, 20*time.Second, want(true, true))
	if err != nil {
		t.Fatalf("ready-a's probe passing again: %v after %v", err, took)
	}
	t.Logf("ready-a's probe passed again: ready in prod after %v", took.Round(time.Millisecond))
	answered := map[string]bool{}
	for range 20 {
		if got, err := probe(ctx, s.l, s.prod, "echo-prod-par-1", derived.Spec.ClusterIP, lab.EchoPort, 2*time.Second); err == nil && len(got) > 0 {
			answered[got[0]] = true
		}
	}
	names := make([]string, 0, len(answered))
	for n := range answered {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "ready-a,ready-b" {
		t.Errorf("after ready-a is ready again, 20 requests were answered by %v, want both", names)
	}
}
