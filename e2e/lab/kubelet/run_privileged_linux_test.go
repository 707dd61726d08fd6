//go:build linux

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// testPod returns a pod bound to node.
func testPod(ns, name, node, image string, ports []corev1.ContainerPort, args []string, policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "kt"}},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: policy,
			Containers:    []corev1.Container{{Name: "c", Image: image, Ports: ports, Args: args}},
		},
	}
}

// waitPodReady waits for the pod to be Running and Ready and returns it.
func waitPodReady(t *testing.T, c kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, 60*time.Second, "pod "+name+" Running and Ready", func() error {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || conditionOf(p.Status, corev1.PodReady).Status != corev1.ConditionTrue {
			return fmt.Errorf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
		}
		pod = p
		return nil
	})
	return pod
}

func TestPrivilegedKubeletRunsPodInNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		failOrSkip(t, "needs root for network namespaces (run as root, or CI=true to make this a failure)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		failOrSkip(t, "needs iproute2's ip: apt-get install iproute2")
	}
	holdLabLock(t)
	client := startAPIServer(t)
	nodeNs := newNodeNetns(t)
	ctx := context.Background()
	ns := "kt-" + randHex(3)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podNames := []string{"web-1", "udp-1", "done-1"}
	t.Cleanup(func() { // last resort if Run did not tear down
		for _, p := range podNames {
			if n := PodNetns(nodeNs, ns, p); netnsExists(n) {
				t.Errorf("pod netns %s left behind", n)
				_ = exec.Command("ip", "netns", "del", n).Run()
				_ = os.RemoveAll(filepath.Join(netnsEtcDir, n))
			}
		}
	})

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()
	const node = "kt-node"
	api := newAPIClient(t)
	cfg := Config{
		Client: client, Cluster: "kt-cluster", NodeName: node, NodeNetns: nodeNs,
		InternalIP: ktNodeIP, InternalIP6: ktNodeIP6, ExternalIP: netip.MustParseAddr("198.51.100.99"),
		Labels:          map[string]string{"topology.kubernetes.io/region": "cn-beijing"},
		Annotations:     map[string]string{"kilo.squat.ai/location": "beijing"},
		PodCIDRs:        ktPodCIDR,
		WorkloadCommand: []string{"env", workloadEnv + "=1", self},
		ClusterDNS:      netip.MustParseAddr("10.96.0.10"),
		Logger:          slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		LogDir:          logDir,
		Serving:         api.serving,
	}
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- Run(runCtx, cfg) }()
	stopped := false
	stopRun := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run returned %v, want nil after cancel", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s of cancel")
		}
	}
	t.Cleanup(func() {
		stopRun()
		if t.Failed() {
			dumpLogs(t, logDir)
		}
	})

	// The Node is registered, Ready, with its addresses and podCIDRs, and
	// its Lease is renewed.
	eventually(t, 30*time.Second, "node Ready", func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var ready bool
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready || len(n.Status.Addresses) != 5 || len(n.Spec.PodCIDRs) != 2 || n.Labels["topology.kubernetes.io/region"] != "cn-beijing" {
			return fmt.Errorf("ready %v, addresses %v, podCIDRs %v, labels %v", ready, n.Status.Addresses, n.Spec.PodCIDRs, n.Labels)
		}
		_, err = client.CoordinationV1().Leases(leaseNamespace).Get(ctx, node, metav1.GetOptions{})
		return err
	})

	// An HTTP echo pod gets the first pod IPs, a netns, and answers from the node.
	web := testPod(ns, "web-1", node, "kilofed/http-echo", []corev1.ContainerPort{{ContainerPort: 8080}}, nil, corev1.RestartPolicyAlways)
	if _, err := client.CoreV1().Pods(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web = waitPodReady(t, client, ns, "web-1")
	if got, want := fmt.Sprint(web.Status.PodIPs), "[{10.232.0.2} {fd10:232::2}]"; got != want {
		t.Errorf("web-1 podIPs = %s, want %s", got, want)
	}
	if web.Status.HostIP != ktNodeIP.String() {
		t.Errorf("web-1 hostIP = %s, want %s", web.Status.HostIP, ktNodeIP)
	}
	webNs := PodNetns(nodeNs, ns, "web-1")
	if !netnsExists(webNs) {
		t.Fatalf("netns %s of web-1 does not exist", webNs)
	}
	resolv, err := os.ReadFile(filepath.Join(netnsEtcDir, webNs, "resolv.conf"))
	if want := "nameserver 10.96.0.10\nsearch " + ns + ".svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"; err != nil || string(resolv) != want {
		t.Errorf("resolv.conf of web-1 = %q (%v), want %q", resolv, err, want)
	}
	wantBody := "web-1 kt-cluster kt-node\n"
	for _, url := range []string{"http://10.232.0.2:8080/", "http://[fd10:232::2]:8080/any/path"} {
		if out, err := workloadIn(nodeNs, "get", url); err != nil || out != wantBody {
			t.Errorf("GET %s from the node = %q, %v; want %q", url, out, err, wantBody)
		}
	}

	// The kubelet API execs in the pod's netns and serves its logs.
	api.check(t, ns, "web-1", func(ex apiExec) {
		if out, code := ex("ip", "-o", "addr", "show", "dev", "eth0"); code != 0 || !strings.Contains(out, " 10.232.0.2/32 ") {
			t.Errorf("exec ip addr in web-1 = %d %q, want eth0 with 10.232.0.2/32", code, out)
		}
		if _, code := ex("sh", "-c", "exit 7"); code != 7 {
			t.Errorf("exec exit 7 in web-1 gave exit code %d", code)
		}
	}, "http echo serving")

	// A UDP echo pod gets the next IP; the two pods reach each other through
	// the node (169.254.1.1 / fe80::1 next hops).
	udp := testPod(ns, "udp-1", node, "kilofed/udp-echo", []corev1.ContainerPort{{ContainerPort: 9090, Protocol: corev1.ProtocolUDP}}, nil, corev1.RestartPolicyAlways)
	if _, err := client.CoreV1().Pods(ns).Create(ctx, udp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	udp = waitPodReady(t, client, ns, "udp-1")
	if got, want := udp.Status.PodIP, "10.232.0.3"; got != want {
		t.Errorf("udp-1 podIP = %s, want %s", got, want)
	}
	udpNs := PodNetns(nodeNs, ns, "udp-1")
	if out, err := workloadIn(webNs, "udp-send", "10.232.0.3:9090", "ping-from-web"); err != nil || out != "ping-from-web\n" {
		t.Errorf("udp-send from web-1 to udp-1 = %q, %v", out, err)
	}
	if out, err := workloadIn(udpNs, "get", "http://[fd10:232::2]:8080/"); err != nil || out != wantBody {
		t.Errorf("GET web-1 from udp-1 over IPv6 = %q, %v; want %q", out, err, wantBody)
	}

	// A pod whose workload ends (restartPolicy Never) Succeeds and loses its netns.
	done := testPod(ns, "done-1", node, "alpine", nil, []string{"sleep", "1"}, corev1.RestartPolicyNever)
	if _, err := client.CoreV1().Pods(ns).Create(ctx, done, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "done-1 Succeeded without netns", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "done-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodSucceeded || netnsExists(PodNetns(nodeNs, ns, "done-1")) {
			return fmt.Errorf("phase %s, netns exists %v", p.Status.Phase, netnsExists(PodNetns(nodeNs, ns, "done-1")))
		}
		return nil
	})

	api.check(t, ns, "done-1", func(ex apiExec) {
		if out, code := ex("true"); code != -1 || !strings.Contains(out, "is not running") {
			t.Errorf("exec into the finished done-1 = %d %q, want refused: not running", code, out)
		}
	}, "sleep done")

	// Deleting web-1 (graceful, as kubectl does) removes the API object,
	// its netns, its veth and its /etc/netns folder.
	if err := client.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "web-1 gone", func() error {
		_, err := client.CoreV1().Pods(ns).Get(ctx, "web-1", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod still there (err %v)", err)
		}
		if netnsExists(webNs) {
			return errors.New("netns still there")
		}
		if links := run(t, "ip", "-n", nodeNs, "-o", "link", "show"); strings.Contains(links, hostVethName(ns, "web-1")) {
			return fmt.Errorf("host veth still there: %s", links)
		}
		if _, err := os.Stat(filepath.Join(netnsEtcDir, webNs)); err == nil {
			return errors.New("/etc/netns folder still there")
		}
		return nil
	})
	if out, err := workloadIn(udpNs, "get", "http://10.232.0.2:8080/", "--timeout", "1s"); err == nil {
		t.Errorf("web-1 still answers after deletion: %q", out)
	}

	// Stopping Run tears down the remaining pod; no kfl link is left on the node.
	stopRun()
	if netnsExists(udpNs) {
		t.Errorf("netns %s of udp-1 left after Run returned", udpNs)
	}
	if links := run(t, "ip", "-n", nodeNs, "-o", "link", "show"); strings.Contains(links, "kflp") {
		t.Errorf("pod veths left in the node netns after Run returned:\n%s", links)
	}
	if routes := run(t, "ip", "-n", nodeNs, "route", "show"); strings.Contains(routes, "10.232.") {
		t.Errorf("pod routes left in the node netns after Run returned:\n%s", routes)
	}
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// dumpLogs prints the workload logs of a failed test.
func dumpLogs(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		t.Logf("--- %s:\n%s", filepath.Base(f), b)
	}
}
