//go:build linux

package services

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// TestServicesOfThreeClusters joins three clusters pair by pair and
// exports echo from two of them: the third's import lists both and both
// answer; when one unexports only the other remains; when both have, the
// import is gone from all three.
func TestServicesOfThreeClusters(t *testing.T) {
	one := func(cluster, loc string) lab.ClusterSpec {
		return lab.ClusterSpec{Name: cluster, Locations: []lab.LocationSpec{{Name: loc, Nodes: []lab.NodeSpec{{Name: cluster + "-1"}}}}}
	}
	l := lab.StartT(t, lab.Spec{KubeProxy: true, Clusters: []lab.ClusterSpec{one("paris", "scaleway-par"), one("gra", "ovh-gra"), one("sgp", "aws-sgp")}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	kubeconfig, err := l.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"paris", "gra", "sgp"}
	k := map[string]client.Client{}
	ctls := map[string]*lab.Process{}
	for _, name := range names {
		c := l.Cluster(name)
		installCRDs(ctx, t, c)
		k[name] = kclient(t, c)
		lab.EchoPodsT(ctx, t, c)
		startMesh(t, c)
		ctls[name] = startController(t, l, c)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, p := range ctls {
				t.Logf("kilofed-controller of %s, last lines:\n%s", name, p.Tail(60))
			}
		}
	})
	for _, pair := range [][2]string{{"paris", "gra"}, {"paris", "sgp"}, {"gra", "sgp"}} {
		if out, err := kilofed(ctx, kubeconfig, pair[0], "join", pair[1], "--wait=2m"); err != nil {
			t.Fatalf("join %s %s: %v\n%s", pair[0], pair[1], err, out)
		}
	}
	exports := map[string]*mcsv1beta1.ServiceExport{}
	for _, name := range []string{"gra", "sgp"} {
		if _, err := l.Cluster(name).Client().CoreV1().Services("default").Create(ctx, lab.EchoService("default", "echo", "echo", 8080), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		exports[name] = export(ctx, t, k[name], "echo")
	}
	paris := l.Cluster("paris")
	// clusters waits until paris's import lists want, and returns its IP.
	clusters := func(want []string) string {
		t.Helper()
		var si mcsv1beta1.ServiceImport
		took, err := eventually(ctx, 20*time.Second, func() error {
			if err := k["paris"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo"}, &si); err != nil {
				return err
			}
			var got []string
			for _, c := range si.Status.Clusters {
				got = append(got, c.Cluster)
			}
			if !slices.Equal(got, want) || len(si.Spec.IPs) == 0 {
				return fmt.Errorf("import lists %v with IPs %v, want %v", got, si.Spec.IPs, want)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("paris after %v: %v", took, err)
		}
		return si.Spec.IPs[0]
	}
	// answering returns the clusters whose pods answer 20 probes of ip.
	answering := func(ip string) []string {
		seen := map[string]bool{}
		for range 20 {
			if got, err := probe(ctx, l, paris, "echo-paris-1", ip, 8080, time.Second); err == nil {
				seen[got[1]] = true
			}
		}
		var out []string
		for c := range seen {
			out = append(out, c)
		}
		slices.Sort(out)
		return out
	}

	// answeredBy waits until 20 probes of ip are answered by exactly want
	// (the import's slices reach kube-proxy on paris's node a moment after
	// its status lists them).
	answeredBy := func(t *testing.T, ip string, want []string) {
		t.Helper()
		var got []string
		took, err := eventually(ctx, 20*time.Second, func() error {
			if got = answering(ip); !slices.Equal(got, want) {
				return fmt.Errorf("answered by %v", got)
			}
			return nil
		})
		if err != nil {
			t.Errorf("paris -> import %s after %v: %v, want %v", ip, took, err, want)
		}
	}

	t.Run("ImportListsBothExportersAndBothAnswer", func(t *testing.T) {
		ip := clusters([]string{"gra", "sgp"})
		answeredBy(t, ip, []string{"gra", "sgp"})
	})
	t.Run("OneUnexportsOnlyTheOtherRemains", func(t *testing.T) {
		if err := k["gra"].Delete(ctx, exports["gra"]); err != nil {
			t.Fatal(err)
		}
		ip := clusters([]string{"sgp"})
		answeredBy(t, ip, []string{"sgp"})
	})
	t.Run("AllUnexportedTheImportIsGoneEverywhere", func(t *testing.T) {
		if err := k["sgp"].Delete(ctx, exports["sgp"]); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if took, err := eventually(ctx, 20*time.Second, func() error {
				if err := k[name].Get(ctx, client.ObjectKey{Namespace: "default", Name: "echo"}, &mcsv1beta1.ServiceImport{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("import still there: %v", err)
				}
				return nil
			}); err != nil {
				t.Errorf("%s after %v: %v", name, took, err)
			}
		}
	})
}
