//go:build linux

package services

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/servicesync"
)

// BenchmarkExportToUsableImport measures, per op, the time from a
// ServiceExport created in dr (its Service already there) to the first
// HTTP answer of a dr pod through prod's derived Service, and reports it
// as s/usable.
func BenchmarkExportToUsableImport(b *testing.B) {
	l := lab.StartT(b, twoClusters())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := startJoined(ctx, b, l)
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		name := fmt.Sprintf("bench-%d", i)
		if _, err := s.dr.Client().CoreV1().Services("default").Create(ctx, lab.EchoService("default", name, "echo", 8080), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		export(ctx, b, s.k["dr"], name)
		took, err := eventually(ctx, 30*time.Second, func() error {
			var svc corev1.Service
			if err := s.k["prod"].Get(ctx, client.ObjectKey{Namespace: "default", Name: servicesync.DerivedName(name)}, &svc); err != nil {
				return err
			}
			got, err := probe(ctx, s.l, s.prod, "echo-prod-par-1", svc.Spec.ClusterIP, 8080, 500*time.Millisecond)
			if err == nil && got[1] != "dr" {
				err = fmt.Errorf("answered by %q", got)
			}
			return err
		})
		if err != nil {
			b.Fatalf("%s not usable in prod after %v: %v", name, took, err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/usable")
}
