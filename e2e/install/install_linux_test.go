//go:build linux

package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// binDir holds kg, kgctl, kilofed and kilofed-controller (KILOFED_BIN, or
// built once by TestMain); the kubelet stand-ins run them for kilofed's
// images.
var binDir string

func TestMain(m *testing.M) {
	dir, cleanup, err := lab.Commands("kg", "kgctl", "kilofed", "kilofed-controller")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/install:", err)
		if os.Getenv("CI") == "true" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	binDir = dir
	os.Setenv("KILOFED_BIN", dir) // the stand-ins' image binaries
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// newHelm returns the lab's helm CLI for c, its folders in a test folder.
func newHelm(t *testing.T, c *lab.Cluster) *lab.Helm {
	h, err := c.Helm(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func chartDir(t *testing.T) string {
	dir, err := lab.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHelmInstallRunsTheMeshAndUninstallCleansTheNodes installs the chart
// with helm into the seed's two-location cluster (the release in
// kube-system, as seed 000 has it), with the seed's mesh flags, and checks:
// the kilo DaemonSet's pods run kg on both nodes and kilofed-controller's
// replicas elect a leader; the seeds' commands answer as they say
// (`get pods -l app.kubernetes.io/name=kilo -o wide`, `exec ds/kilo -- wg
// show`, `logs -l app.kubernetes.io/name=kilo --tail 50`); the seed's test
// pods ping each other across the locations through the tunnel; an agent pod
// is refused when it writes another node's key; and helm uninstall removes
// the pods while the agents remove their interface, routes and NAT rules
// from the nodes. Then the same chart goes into the namespace kilo, as seed
// 001 has it, and its `get pods -n kilo -o wide` and `logs -n kilo` answer.
func TestHelmInstallRunsTheMeshAndUninstallCleansTheNodes(t *testing.T) {
	l := lab.StartT(t, lab.Spec{KubeProxy: true, Clusters: []lab.ClusterSpec{lab.SeedClusterSpec()}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	kubectl := func(args ...string) string { t.Helper(); return c.KubectlT(ctx, t, args...) }
	h := newHelm(t, c)
	const ns = "kube-system"
	began := time.Now()
	out, err := h.Run(ctx, "install", "kilofed", chartDir(t), "--namespace", ns, "--wait", "--timeout", "4m",
		"--set", "mesh.subnet=10.5.0.0/16", "--set", "agent.encapsulate=never")
	if err != nil {
		t.Fatalf("helm install: %v\n%s\n%s", err, out, c.DescribeRelease(ctx, ns))
	}
	t.Logf("helm install --wait returned after %v:\n%s", time.Since(began).Round(time.Millisecond), out)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", c.DescribeRelease(context.Background(), ns))
		}
	})

	// Seed 000: every node runs a kilo pod.
	wide := kubectl("-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=kilo", "-o", "wide")
	t.Logf("kubectl -n %s get pods -l app.kubernetes.io/name=kilo -o wide\n%s", ns, wide)
	for _, n := range c.Nodes() {
		if !lineHas(wide, "Running", n.Name) {
			t.Errorf("no Running kilo pod on %s", n.Name)
		}
	}
	// Seed 001: the agents' logs.
	logs := kubectl("logs", "-n", ns, "-l", "app.kubernetes.io/name=kilo", "--tail", "50")
	if !strings.Contains(logs, "level=") {
		t.Errorf("kubectl logs -n %s -l app.kubernetes.io/name=kilo --tail 50 shows no kg log line:\n%s", ns, logs)
	}

	// The seed's cross-location ping, through the chart's agents.
	kubectl("run", "test-pod-beijing", "--image=alpine", "--restart=Never", "--labels=app=test", `--overrides={"spec": {"nodeName": "node-beijing"}}`, "--", "sleep", "3600")
	kubectl("run", "test-pod-shanghai", "--image=alpine", "--restart=Never", "--labels=app=test", `--overrides={"spec": {"nodeName": "node-shanghai"}}`, "--", "sleep", "3600")
	pods, err := c.WaitPods(ctx, "default", "app=test", 2)
	if err != nil {
		t.Fatal(err)
	}
	var shanghai string
	for _, p := range pods {
		if p.Name == "test-pod-shanghai" {
			shanghai = p.Status.PodIP
		}
	}
	var ping string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		b, err := c.Kubectl(ctx, "exec", "test-pod-beijing", "--", "ping", "-c", "4", "-W", "1", shanghai)
		if ping = string(b); err == nil && strings.Contains(ping, "4 received") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl exec test-pod-beijing -- ping -c 4 %s: %v\n%s", shanghai, err, ping)
		}
	}
	t.Logf("kubectl exec test-pod-beijing -- ping -c 4 %s\n%s", shanghai, ping)

	// Seed 000: wg show in the DaemonSet's pod sees the agent's device;
	// each location's leader (one pod per location) has its tunnel up.
	wg := kubectl("-n", ns, "exec", "ds/kilo", "--", "wg", "show")
	if !strings.Contains(wg, "interface: kilo0") || !strings.Contains(wg, "public key:") {
		t.Errorf("kubectl -n %s exec ds/kilo -- wg show: want kilo0 and its key:\n%s", ns, wg)
	}
	t.Logf("kubectl -n %s exec ds/kilo -- wg show\n%s", ns, wg)
	list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=kilo"})
	if err != nil {
		t.Fatal(err)
	}
	withHandshake := 0
	for _, p := range list.Items {
		if out := kubectl("-n", ns, "exec", p.Name, "--", "wg", "show", "kilo0"); strings.Contains(out, "latest handshake") {
			withHandshake++
			t.Logf("kubectl -n %s exec %s -- wg show kilo0 (on %s)\n%s", ns, p.Name, p.Spec.NodeName, out)
		}
	}
	if withHandshake != 2 {
		t.Errorf("%d kilo pods show a handshake, want 2 (the leader of each location)", withHandshake)
	}

	// kilofed-controller: two replicas, one leader.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		lease, err := c.Client().CoordinationV1().Leases("kilofed-system").Get(ctx, "kilofed-controller", metav1.GetOptions{})
		if err == nil && lease.Spec.HolderIdentity != nil && strings.HasPrefix(*lease.Spec.HolderIdentity, "kilofed-controller-") {
			t.Logf("kilofed-controller's leader: %s", *lease.Spec.HolderIdentity)
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the kilofed-controller Lease after 60 s: %v, want held by a controller pod", err)
			break
		}
	}

	// The node-scoped admission policy, crossed from inside an agent pod
	// with that pod's own token (in-cluster config).
	agent := podOn(ctx, t, c, ns, "app.kubernetes.io/name=kilo", "node-beijing")
	kubectlBin := filepath.Join(filepath.Dir(h.Bin), "kubectl")
	b, err := c.Kubectl(ctx, "-n", ns, "exec", agent, "--", kubectlBin, "annotate", "--overwrite", "node", "node-shanghai",
		"kilo.squat.ai/key=Lw+uB7XCFqhSLtDC+0q6Y+L6XRUkypc7OWZ8+RU6yQ0=")
	if err == nil || !strings.Contains(err.Error(), "may not change node node-shanghai") {
		t.Errorf("the agent of node-beijing writing node-shanghai's key: %v, want refused by the node-scoped policy\n%s", err, b)
	} else {
		t.Log("refused, as it must be")
	}
	if b, err := c.Kubectl(ctx, "-n", ns, "exec", agent, "--", kubectlBin, "get", "node", "node-beijing", "-o", "name"); err != nil {
		t.Errorf("the agent's own token reads its Node: %v\n%s", err, b)
	}

	// helm uninstall: the pods go, the agents clean up their nodes.
	if out, err := h.Run(ctx, "uninstall", "kilofed", "--namespace", ns, "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		left := kubectl("-n", ns, "get", "pods", "-l", "app.kubernetes.io/name in (kilo,kilofed-controller)", "-o", "name")
		if strings.TrimSpace(left) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods left 60 s after helm uninstall:\n%s", left)
		}
	}
	for _, n := range c.Nodes() {
		if b, err := n.Exec(ctx, "ip", "link", "show", "kilo0"); err == nil {
			t.Errorf("%s still has kilo0 after helm uninstall:\n%s", n.Name, b)
		}
		if b, _ := n.Exec(ctx, "ip", "route", "show", "root", "10.5.0.0/16"); strings.TrimSpace(string(b)) != "" {
			t.Errorf("%s still routes into the mesh subnet after helm uninstall:\n%s", n.Name, b)
		}
		if b, _ := n.Exec(ctx, "iptables", "-w", "-t", "nat", "-S"); strings.Contains(string(b), "KILOFED") {
			t.Errorf("%s still has kilofed's NAT rules after helm uninstall:\n%s", n.Name, b)
		}
	}

	// The chart keeps kilofed-system (helm.sh/resource-policy: keep): the
	// federation's credentials outlive a release; the Leases' namespace goes.
	if _, err := c.Client().CoreV1().Namespaces().Get(ctx, "kilofed-system", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace kilofed-system after helm uninstall: %v, want kept", err)
	}

	// Seed 001 installs in its own namespace, kilo: the same chart, its
	// commands with -n kilo. Moving a release to another namespace means
	// deleting the kept namespace first, as a user does.
	kubectl("delete", "namespace", "kilofed-system", "--wait", "--timeout=90s")
	kubectl("wait", "--for=delete", "namespace/kilo-leases", "--timeout=90s")
	if out, err := h.Run(ctx, "install", "kilofed", chartDir(t), "--namespace", "kilo", "--create-namespace", "--wait", "--timeout", "4m",
		"--set", "mesh.subnet=10.5.0.0/16", "--set", "agent.encapsulate=never"); err != nil {
		t.Fatalf("helm install -n kilo: %v\n%s\n%s", err, out, c.DescribeRelease(ctx, "kilo"))
	}
	wide = kubectl("get", "pods", "-n", "kilo", "-o", "wide")
	t.Logf("kubectl get pods -n kilo -o wide\n%s", wide)
	for _, n := range c.Nodes() {
		if !lineHas(wide, "kilo-", "Running", n.Name) {
			t.Errorf("no Running kilo pod on %s in namespace kilo", n.Name)
		}
	}
	if logs := kubectl("logs", "-n", "kilo", "-l", "app.kubernetes.io/name=kilo", "--tail", "50"); !strings.Contains(logs, "level=") {
		t.Errorf("kubectl logs -n kilo -l app.kubernetes.io/name=kilo --tail 50 shows no kg log line:\n%s", logs)
	}
	if out, err := h.Run(ctx, "uninstall", "kilofed", "--namespace", "kilo", "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("helm uninstall -n kilo: %v\n%s", err, out)
	}
}

// podOn returns the name of the pod of selector on node.
func podOn(ctx context.Context, t *testing.T, c *lab.Cluster, ns, selector, node string) string {
	t.Helper()
	list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("no pod %s on %s: %v", selector, node, err)
	}
	return list.Items[0].Name
}

// lineHas reports whether one line of out holds every word.
func lineHas(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}
