//go:build linux

package services

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// testManual is the seed's low-level path beside servicesync: in prod, a
// selector-less Service and an Endpoints object naming a pod IP of dr;
// kube-controller-manager mirrors it, kube-proxy programs it, the tunnel
// carries it.
func testManual(ctx context.Context, t *testing.T, s *svcs) {
	pod, ip := "echo-dr-gra-1", s.ips["dr"]["echo-dr-gra-1"]
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu-manual"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}}
	created, err := s.prod.Client().CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu-manual"}, //nolint:staticcheck // the seed's pattern
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: ip}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}}}
	if _, err := s.prod.Client().CoreV1().Endpoints("default").Create(ctx, eps, metav1.CreateOptions{}); err != nil { //nolint:staticcheck // the seed's pattern
		t.Fatal(err)
	}
	var got []string
	took, err := eventually(ctx, 30*time.Second, func() error {
		var err error
		got, err = probe(ctx, s.l, s.prod, "echo-prod-par-1", created.Spec.ClusterIP, 80, 2*time.Second)
		if err == nil && got[0] != pod {
			err = fmt.Errorf("answered %q, want %s", got, pod)
		}
		return err
	})
	if err != nil {
		t.Fatalf("prod -> selector-less Service %s:80 -> %s: %v", created.Spec.ClusterIP, ip, err)
	}
	t.Logf("prod -> selector-less Service %s:80 -> dr's %s: answered by %s after %v", created.Spec.ClusterIP, ip, got[0], took.Round(time.Millisecond))
}
