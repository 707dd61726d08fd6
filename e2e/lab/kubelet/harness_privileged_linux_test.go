//go:build linux

package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ktHarness is one Run against a real API server, for the privileged tests
// of containers that run their own commands.
type ktHarness struct {
	client kubernetes.Interface
	rest   *rest.Config
	nodeNs string
	ns     string // a fresh namespace for the test's pods
	node   string
	api    *apiClient
	cfg    Config
}

// startHarness starts the API server, a node netns and Run with cfg changed
// by mutate; Run is stopped (and checked to leave no pod netns) at cleanup.
func startHarness(t *testing.T, mutate func(*Config)) *ktHarness {
	t.Helper()
	if os.Geteuid() != 0 {
		failOrSkip(t, "needs root for network namespaces (run as root, or CI=true to make this a failure)")
	}
	for _, tool := range []string{"ip", "socat", "nc"} {
		if _, err := exec.LookPath(tool); err != nil {
			failOrSkip(t, "needs %s: run hack/deps.sh", tool)
		}
	}
	holdLabLock(t)
	rc := startAPIServerConfig(t)
	h := &ktHarness{client: kubernetes.NewForConfigOrDie(rc), rest: rc, nodeNs: newNodeNetns(t), ns: "kt-" + randHex(3), node: "kt-node", api: newAPIClient(t)}
	ctx := context.Background()
	if _, err := h.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What kube-controller-manager makes in every namespace (envtest runs
	// none): the default ServiceAccount and the cluster CA's ConfigMap.
	if _, err := h.client.CoreV1().ServiceAccounts(h.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().ConfigMaps(h.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"},
		Data: map[string]string{"ca.crt": string(rc.CAData)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()
	h.cfg = Config{
		Client: h.client, Cluster: "kt-cluster", NodeName: h.node, NodeNetns: h.nodeNs,
		InternalIP: ktNodeIP, InternalIP6: ktNodeIP6, PodCIDRs: ktPodCIDR,
		WorkloadCommand: []string{"env", workloadEnv + "=1", self},
		Logger:          slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		LogDir:          logDir,
		Serving:         h.api.serving,
	}
	if mutate != nil {
		mutate(&h.cfg)
	}
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- Run(runCtx, h.cfg) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run returned %v, want nil after cancel", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s of cancel")
		}
		if t.Failed() {
			dumpLogs(t, logDir)
		}
		entries, _ := os.ReadDir(netnsRunDir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "kfl-pod-") && isPodOf(h, e.Name()) {
				t.Errorf("pod netns %s left behind", e.Name())
			}
		}
	})
	return h
}

// isPodOf reports whether netns name is a pod netns this harness may have
// created (the names are hashes: it asks the claims table).
func isPodOf(h *ktHarness, name string) bool {
	netnsClaims.Lock()
	defer netnsClaims.Unlock()
	_, ok := netnsClaims.owner[name]
	return ok
}

// create creates pod in the harness namespace, bound to the node.
func (h *ktHarness) create(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	pod.Namespace, pod.Spec.NodeName = h.ns, h.node
	if _, err := h.client.CoreV1().Pods(h.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pod returns the pod name of the harness namespace.
func (h *ktHarness) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := h.client.CoreV1().Pods(h.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// inNode runs argv in the node netns and returns its standard output.
func (h *ktHarness) inNode(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.nodeNs}, argv...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%q in %s: %w: %s", argv, h.nodeNs, err, stderr.String())
	}
	return string(out), nil
}

// logs returns the container log of pod/c.
func (h *ktHarness) logs(name string) string {
	b, _ := os.ReadFile(filepath.Join(h.cfg.LogDir, h.ns+"_"+name+"_c.log"))
	return string(b)
}

// hostPod returns a pod with one container c.
func hostPod(name string, c corev1.Container) *corev1.Pod {
	c.Name = "c"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
	}
}
