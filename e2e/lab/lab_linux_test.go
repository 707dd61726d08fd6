//go:build linux

package lab

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClusterComesUpAndKubectlListsNodesReady(t *testing.T) {
	l := StartT(t, Spec{Clusters: []ClusterSpec{SeedClusterSpec()}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	out, err := c.Kubectl(ctx, "get", "nodes", "--no-headers", "-o",
		`custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,`+
			`INTERNAL:.status.addresses[?(@.type=="InternalIP")].address,EXTERNAL:.status.addresses[?(@.type=="ExternalIP")].address,`+
			`REGION:.metadata.labels.topology\.kubernetes\.io/region`)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(string(out)), " ")
	want := strings.Join([]string{
		"node-beijing True 10.0.1.10 203.0.113.10 cn-beijing",
		"node-beijing-2 True 10.0.1.11 203.0.113.11 cn-beijing",
		"node-shanghai True 10.0.2.20 198.51.100.20 cn-shanghai",
		"node-shanghai-2 True 10.0.2.10 203.0.113.12 cn-shanghai",
	}, " ")
	if got != want {
		t.Errorf("kubectl get nodes:\n%s\nwant (spaces folded):\n%s", out, want)
	}
	for _, n := range c.Nodes() {
		if cidrs := n.PodCIDRs(); len(cidrs) != 1 || !c.PodCIDR.Contains(cidrs[0].Addr()) {
			t.Errorf("node %s podCIDRs %v, want one inside %s", n.Name, cidrs, c.PodCIDR)
		}
	}
}

func TestPodsOnTwoNodesOfOneLocationTalk(t *testing.T) {
	l := StartT(t, Spec{Clusters: []ClusterSpec{SeedClusterSpec()}, PodRoutes: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	createPods(ctx, t, c, EchoPod("default", "echo-a", "echo", "node-beijing"), EchoPod("default", "echo-b", "echo", "node-beijing-2"))
	pods, err := c.WaitPods(ctx, "default", "app=echo", 2)
	if err != nil {
		t.Fatal(err)
	}
	ip := map[string]string{}
	for _, p := range pods {
		ip[p.Name] = p.Status.PodIP
		if a, err := netip.ParseAddr(p.Status.PodIP); err != nil || !c.PodCIDR.Contains(a) {
			t.Errorf("pod %s IP %q is outside the cluster's pod CIDR %s", p.Name, p.Status.PodIP, c.PodCIDR)
		}
	}
	for _, pair := range [][2]string{{"echo-a", "echo-b"}, {"echo-b", "echo-a"}} {
		url := "http://" + net.JoinHostPort(ip[pair[1]], "8080") + "/"
		got, err := l.PodGet(ctx, c.Name, "default", pair[0], url)
		if err != nil {
			t.Fatalf("GET %s from pod %s: %v", url, pair[0], err)
		}
		if want := pair[1] + " " + c.Name; !strings.HasPrefix(got, want) {
			t.Errorf("GET %s from pod %s = %q, want %q...", url, pair[0], got, want)
		}
	}
}

func TestServiceClusterIPReachesPods(t *testing.T) {
	l := StartT(t, Spec{Clusters: []ClusterSpec{SeedClusterSpec()}, PodRoutes: true, KubeProxy: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	const ns = "default"
	if _, err := c.Client().AppsV1().Deployments(ns).Create(ctx, EchoDeployment(ns, "echo", "node-shanghai", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.Client().CoreV1().Services(ns).Create(ctx, EchoService(ns, "echo", "echo", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !c.ServiceCIDR.Contains(ip) {
		t.Errorf("ClusterIP %q outside the service CIDR %s", svc.Spec.ClusterIP, c.ServiceCIDR)
	}
	createPods(ctx, t, c, SleepPod(ns, "client", "node-shanghai-2"))
	pods, err := c.WaitPods(ctx, ns, "app=echo", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPods(ctx, ns, "app=client", 1); err != nil {
		t.Fatal(err)
	}
	slices, err := c.WaitEndpointSlices(ctx, ns, "echo", 2)
	if err != nil {
		t.Fatal(err)
	}
	var endpoints []string
	for _, s := range slices {
		for _, e := range s.Endpoints {
			endpoints = append(endpoints, e.Addresses...)
		}
	}
	t.Logf("EndpointSlice addresses: %v", endpoints)
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	seen := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		got, err := l.PodGet(ctx, c.Name, ns, "client", url)
		if err != nil {
			t.Logf("GET %s: %v (retrying)", url, err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if !names[firstField(got)] {
			t.Fatalf("GET %s = %q: not one of the Deployment's pods %v", url, got, names)
		}
		seen[firstField(got)] = true
	}
	if len(seen) == 0 {
		t.Fatalf("the ClusterIP %s never answered", url)
	}
	t.Logf("ClusterIP %s answered from %d pods: %v", url, len(seen), seen)
}

func TestTwoClustersSideBySide(t *testing.T) {
	l := StartT(t, Spec{Clusters: []ClusterSpec{
		{Name: "east", Locations: []LocationSpec{{Name: "dc", Nodes: []NodeSpec{{Name: "east-1"}, {Name: "east-2"}}}}},
		{Name: "west", Locations: []LocationSpec{{Name: "dc", NAT: true, Nodes: []NodeSpec{{Name: "west-1"}, {Name: "west-2"}}}}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	east, west := l.Cluster("east"), l.Cluster("west")
	if east.APIServer == west.APIServer || east.PodCIDR.Overlaps(west.PodCIDR) || east.ServiceCIDR.Overlaps(west.ServiceCIDR) {
		t.Fatalf("clusters share an API server or ranges: %s %s %s / %s %s %s", east.APIServer, east.PodCIDR, east.ServiceCIDR,
			west.APIServer, west.PodCIDR, west.ServiceCIDR)
	}
	for _, c := range []*Cluster{east, west} {
		out, err := c.Kubectl(ctx, "get", "nodes", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(string(out))
		want := []string{"node/" + c.Name + "-1", "node/" + c.Name + "-2"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("cluster %s lists nodes %v, want %v", c.Name, got, want)
		}
		pod := "echo-" + c.Name
		createPods(ctx, t, c, EchoPod("default", pod, pod, c.Name+"-2"))
		pods, err := c.WaitPods(ctx, "default", "app="+pod, 1)
		if err != nil {
			t.Fatal(err)
		}
		if a, err := netip.ParseAddr(pods[0].Status.PodIP); err != nil || !c.PodCIDR.Contains(a) {
			t.Errorf("cluster %s: pod IP %q outside its pod CIDR %s", c.Name, pods[0].Status.PodIP, c.PodCIDR)
		}
		got1, err := l.PodGet(ctx, c.Name, "default", pod, "http://127.0.0.1:8080/")
		if err != nil || !strings.HasPrefix(got1, pod+" "+c.Name) {
			t.Errorf("cluster %s: echo answers %q, %v", c.Name, got1, err)
		}
	}
	if _, err := east.Client().CoreV1().Pods("default").Get(ctx, "echo-west", metav1.GetOptions{}); err == nil {
		t.Error("cluster east sees cluster west's pod")
	}
}

func TestTeardownLeavesNothing(t *testing.T) {
	if err := Preflight(); err != nil {
		StartT(t, Spec{}) // skips or fails with the reason
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := Start(ctx, Spec{KubeProxy: true, Clusters: []ClusterSpec{{Locations: []LocationSpec{{Nodes: []NodeSpec{{}, {}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = l.Close()
		}
	})
	c := l.Clusters()[0]
	createPods(ctx, t, c, EchoPod("default", "echo-teardown-"+l.Spec.Name, "echo", c.Nodes()[1].Name))
	if _, err := c.WaitPods(ctx, "default", "app=echo", 1); err != nil {
		t.Fatal(err)
	}
	podNS, err := c.PodNamespace(ctx, "default", "echo-teardown-"+l.Spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes()[0].Start("sleeper", "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	run := Prefix + l.Spec.Name + "-"
	netnsNames, inodes := labNetns(func(name string) bool { return strings.HasPrefix(name, run) || name == podNS.Name })
	if len(netnsNames) != 5 { // WAN, router, 2 nodes, the pod
		t.Errorf("lab namespaces before Close: %v, want 5", netnsNames)
	}
	dir := l.Dir

	closed = true
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), run) || e.Name() == podNS.Name {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
	out, err := execIn(ctx, "", "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), run) {
		t.Errorf("links left behind:\n%s", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s left behind (%v)", dir, err)
	}
	if _, err := os.Stat(filepath.Join("/etc/netns", podNS.Name)); !os.IsNotExist(err) {
		t.Errorf("/etc/netns/%s left behind", podNS.Name)
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		link, _ := os.Readlink("/proc/" + pid + "/ns/net")
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		cwd, _ := os.Readlink("/proc/" + pid + "/cwd")
		var ino uint64
		for i := range inodes {
			if link == "net:["+strconv.FormatUint(i, 10)+"]" {
				ino = i
			}
		}
		if ino != 0 || strings.Contains(string(cmdline), dir) || strings.HasPrefix(cwd, dir) {
			t.Errorf("process %s left behind: %q (cwd %s, %s)", pid, strings.ReplaceAll(string(cmdline), "\x00", " "), cwd, link)
		}
	}
}

func TestSweepRemovesLeftovers(t *testing.T) {
	if err := Preflight(); err != nil {
		StartT(t, Spec{}) // skips or fails with the reason
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A crashed run: a namespace with a process in it, a host link, a temp
	// dir with a process running from it.
	run := Prefix + "swp" + randomRunID()[:3] + "-"
	ns, link := run+"x", run+"m"
	if err := addNetns(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = delNetns(ns); _ = delHostLink(link) })
	if _, err := execIn(ctx, "", "ip", "link", "add", link, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	l := &Lab{Dir: dir, logger: slog.New(slog.DiscardHandler)}
	inNS, err := l.startProcess(procSpec{name: "in-netns", netns: ns, argv: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	fromDir, err := l.startProcess(procSpec{name: "from-dir", argv: []string{"sleep", "601"}})
	if err != nil {
		t.Fatal(err)
	}
	// Sweep refuses while another lab lives (other tests on this machine):
	// wait for a quiet moment.
	sweepCtx, cancelSweep := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelSweep()
	for err = Sweep(sweepCtx); errors.Is(err, ErrLabRunning) && sweepCtx.Err() == nil; err = Sweep(sweepCtx) {
		time.Sleep(time.Second)
	}
	if err != nil {
		_ = inNS.Kill()
		_ = fromDir.Kill()
		if os.Getenv("CI") != "true" && strings.Contains(err.Error(), ErrLabRunning.Error()) {
			t.Skipf("another lab runs on this machine: %v", err)
		}
		t.Fatal(err)
	}
	for _, p := range []*Process{inNS, fromDir} {
		select {
		case <-p.Done():
		case <-time.After(5 * time.Second):
			t.Errorf("process %s survived the sweep", p.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(netnsDir, ns)); !os.IsNotExist(err) {
		t.Errorf("namespace %s survived the sweep", ns)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir %s survived the sweep", dir)
	}
	if out, _ := execIn(ctx, "", "ip", "link", "show", link); len(out) > 0 {
		t.Errorf("link %s survived the sweep: %s", link, out)
	}
}

func BenchmarkLabStartOneClusterFourNodes(b *testing.B) {
	if err := Preflight(); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatal(err)
		}
		b.Skip(err)
	}
	var total time.Duration
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		began := time.Now()
		l, err := Start(ctx, Spec{Clusters: []ClusterSpec{SeedClusterSpec()}, PodRoutes: true, KubeProxy: true})
		total += time.Since(began)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/start")
}

// createPods creates pods in a cluster.
func createPods(ctx context.Context, t *testing.T, c *Cluster, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := c.Client().CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
}

// TestTwoLabsSideBySide runs two labs at once (two test packages, or the
// demo during a test): they take different management slots, and a third
// one that reuses a live lab's run id fails without harming it.
func TestTwoLabsSideBySide(t *testing.T) {
	small := func(name string) Spec {
		return Spec{Name: name, Clusters: []ClusterSpec{{Locations: []LocationSpec{{Nodes: []NodeSpec{{}}}}}}}
	}
	id := randomRunID()
	a := StartT(t, small("a"+id))
	b := StartT(t, small("b"+id))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if a.slot == b.slot || a.Clusters()[0].APIServer == b.Clusters()[0].APIServer {
		t.Errorf("both labs in slot %d / %d, API servers %s and %s", a.slot, b.slot, a.Clusters()[0].APIServer, b.Clusters()[0].APIServer)
	}
	if _, err := Start(ctx, small("a"+id)); err == nil {
		t.Fatal("a second lab with a live lab's run id started")
	}
	for _, l := range []*Lab{a, b} {
		c := l.Clusters()[0]
		if _, err := c.Kubectl(ctx, "get", "nodes"); err != nil {
			t.Errorf("lab %s: %v", l.Spec.Name, err)
		}
		if _, err := c.Nodes()[0].Exec(ctx, "ping", "-c", "1", "-W", "2", WANHostIP.String()); err != nil {
			t.Errorf("lab %s: node cannot reach the WAN: %v", l.Spec.Name, err)
		}
	}
}
