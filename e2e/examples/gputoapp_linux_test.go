//go:build linux

package examples

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// gpuToAppLab is examples/gpu-to-app's pair of clusters, one node each,
// with kube-proxy and CoreDNS. The GPU cluster is the lab's second
// cluster, so its pods come from the seed's 10.11.0.0/16.
func gpuToAppLab() lab.Spec {
	return lab.Spec{KubeProxy: true, CoreDNS: true, Clusters: []lab.ClusterSpec{
		{Name: "app", Locations: []lab.LocationSpec{{Name: "eu-west", Nodes: []lab.NodeSpec{{Name: "app-1"}}}}},
		{Name: "gpu", Locations: []lab.LocationSpec{{Name: "gpu-dc", Nodes: []lab.NodeSpec{{Name: "gpu-1"}}}}},
	}}
}

// installFederationCRDs applies the federation's and servicesync's CRDs
// (kg's start applies the Peer CRD) and waits for them.
func installFederationCRDs(ctx context.Context, t testing.TB, c *lab.Cluster) {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"federation", "servicesync"} {
		c.KubectlT(ctx, t, "apply", "-f", filepath.Join(root, dir, "config", "crd"))
	}
	for _, crd := range []string{"clusterproperties.about.k8s.io", "announcements.federation.kilofed.io",
		"remoteclusters.federation.kilofed.io", "exportedservices.federation.kilofed.io",
		"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io"} {
		c.KubectlT(ctx, t, "wait", "--for=condition=Established", "--timeout=30s", "crd/"+crd)
	}
}

// TestGPUToAppExampleAppCallsTheGPUServiceByItsClustersetNameAndByTheSeedsEndpoints
// runs examples/gpu-to-app/README.md: kilofed in both clusters, `kilofed
// --context app join gpu`, the GPU cluster's ml-inference Deployment,
// Service and ServiceExport, the app cluster's web Deployment, then `curl`
// from web to ml-inference-svc.ml.svc.clusterset.local:8080 answered by the
// GPU cluster's pod; then the seed's manual Service and Endpoints with the
// pod's IP put in by sed, answered by the same pod.
func TestGPUToAppExampleAppCallsTheGPUServiceByItsClustersetNameAndByTheSeedsEndpoints(t *testing.T) {
	begin := time.Now()
	l := lab.StartT(t, gpuToAppLab())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	app, gpu := l.Cluster("app"), l.Cluster("gpu")
	kubeconfig, err := l.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	run := func(script string, env ...string) string {
		t.Helper()
		out, err := shell(ctx, l, kubeconfig, "cd "+example(t, "gpu-to-app")+" && "+script, env...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return out
	}

	// Step 0: kilofed in each cluster (here: kg per node and
	// kilofed-controller as processes, CoreDNS forwarding clusterset.local).
	for _, c := range []*lab.Cluster{app, gpu} {
		installFederationCRDs(ctx, t, c)
		startMesh(t, c)
		startController(t, l, c)
	}

	// Step 1: join.
	join := run("kilofed --context app join gpu")
	t.Logf("kilofed --context app join gpu\n%s", join)
	if !strings.Contains(join, "joined app and gpu") {
		t.Fatalf("kilofed join did not say it joined the clusters:\n%s", join)
	}

	// Step 2: the GPU cluster exports ml-inference-svc; step 3: the app.
	run("kubectl --context gpu apply -f gpu/ml-inference.yaml")
	run("kubectl --context app apply -f app/web.yaml")
	inference, err := gpu.WaitPods(ctx, "ml", "app=ml-inference", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.WaitPods(ctx, "ml", "app=web", 1); err != nil {
		t.Fatal(err)
	}
	pod, ip := inference[0].Name, inference[0].Status.PodIP
	if a, err := netip.ParseAddr(ip); err != nil || !netip.MustParsePrefix("10.11.0.0/16").Contains(a) {
		t.Fatalf("ml-inference pod IP %q, want one of the seed's GPU cluster range 10.11.0.0/16", ip)
	}
	if _, err := eventually(ctx, 30*time.Second, func() error {
		out, err := app.Kubectl(ctx, "-n", "ml", "get", "serviceimports.multicluster.x-k8s.io", "ml-inference-svc", "-o", "jsonpath={.spec.ips[0]}")
		if err != nil || strings.TrimSpace(string(out)) == "" {
			return fmt.Errorf("no ServiceImport ml/ml-inference-svc with an IP in app: %v %s", err, out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if imports := run("kubectl --context app -n ml get serviceimports"); !strings.Contains(imports, "ml-inference-svc") {
		t.Fatalf("kubectl --context app -n ml get serviceimports lists no ml-inference-svc:\n%s", imports)
	}

	// Step 4: the app calls the model by its clusterset name.
	answeredBy := func(url string) {
		t.Helper()
		var got []string
		took, err := eventually(ctx, 60*time.Second, func() error {
			var err error
			got, err = curl(ctx, app, "ml", "deploy/web", url)
			if err == nil && (got[0] != pod || len(got) < 2 || got[1] != "gpu") {
				err = fmt.Errorf("answered %q, want %s of cluster gpu", got, pod)
			}
			return err
		})
		if err != nil {
			t.Fatalf("kubectl --context app -n ml exec deploy/web -- curl -s %s: %v", url, err)
		}
		t.Logf("kubectl --context app -n ml exec deploy/web -- curl -s %s\n%s  (after %v)", url, strings.Join(got, " "), took.Round(time.Millisecond))
	}
	answeredBy("http://ml-inference-svc.ml.svc.clusterset.local:8080/")

	// Step 5: the seed's manual variant, the pod's IP substituted for the
	// seed's 10.11.42.5.
	run(`POD_IP=$(kubectl --context gpu -n ml get pod -l app=ml-inference -o jsonpath='{.items[0].status.podIP}') && ` +
		`sed "s/10.11.42.5/$POD_IP/" manual/ml-inference-svc.yaml | kubectl --context app apply -f -`)
	if got := app.KubectlT(ctx, t, "get", "endpoints", "ml-inference-svc", "-o", "jsonpath={.subsets[0].addresses[0].ip}"); got != ip {
		t.Fatalf("the app cluster's Endpoints ml-inference-svc name %q, want the pod's %s", got, ip)
	}
	answeredBy("http://ml-inference-svc.default.svc.cluster.local:8080/")
	t.Logf("total %v", time.Since(begin).Round(time.Millisecond))
}
