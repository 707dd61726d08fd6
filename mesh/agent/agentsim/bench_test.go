package agentsim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
)

// Measurement windows; KILOFED_SCALE_WINDOW (a duration) overrides window.
var (
	window = envDuration("KILOFED_SCALE_WINDOW", 20*time.Second)
	// settle is waited after convergence, before the first window, so that
	// the agents' start-up (lists, first publications) is not measured.
	settle = 5 * time.Second
)

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// benchLocations is how many locations the simulated nodes are spread
// over, whatever their number: today's load does not depend on it.
const benchLocations = 5

// BenchmarkAPILoad runs N simulated agents (kg's reconcile loop, heartbeat
// and Kubernetes client, data plane faked) in this process against one
// real kube-apiserver and etcd, lets them converge, and measures over a
// fixed window: the API server's requests and watch events per second
// (deltas of apiserver_request_total and apiserver_watch_events_total),
// the CPU of kube-apiserver and etcd (/proc/PID/stat), and each agent's
// share of this process's CPU (getrusage / N) and live heap (after GC,
// minus the heap before the agents started, / N). See docs/scale.md.
func BenchmarkAPILoad(b *testing.B) {
	for _, n := range []int{10, 50, 100, 200} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchAPILoad(b, n) })
	}
}

// sample is what a window starts and ends with.
type sample struct {
	at                time.Time
	api               Counters
	apiCPU, etcdCPU   float64
	selfCPU           float64
	apiPID, etcdPIDNo int
}

func takeSample(ctx context.Context, b *testing.B, cfg *rest.Config, apiPID, etcdPID int) sample {
	c, err := Scrape(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	s := sample{at: time.Now(), api: c, selfCPU: SelfCPUSeconds()}
	if s.apiCPU, err = ProcCPUSeconds(apiPID); err != nil {
		b.Fatal(err)
	}
	if s.etcdCPU, err = ProcCPUSeconds(etcdPID); err != nil {
		b.Fatal(err)
	}
	return s
}

func controlPlanePIDs(b *testing.B) (api, etcd int) {
	api, err := ChildPID(os.Getpid(), "kube-apiserver")
	if err != nil {
		b.Fatal(err)
	}
	if etcd, err = ChildPID(os.Getpid(), "etcd"); err != nil {
		b.Fatal(err)
	}
	return api, etcd
}

// reportAPI reports the requests and watch events of a window, and the
// API server's and etcd's CPU in % of one core.
func reportAPI(b *testing.B, from, to sample) Counters {
	secs := to.at.Sub(from.at).Seconds()
	d := to.api.Sub(from.api)
	delete(d.Requests, "GET -//metrics")
	b.ReportMetric(d.TotalRequests(false)/secs, "req/s")
	b.ReportMetric(d.Requests["PUT leases"]/secs, "lease-updates/s")
	b.ReportMetric(d.TotalWatchEvents()/secs, "watch-events/s")
	b.ReportMetric(d.WatchEvents["leases"]/secs, "lease-watch-events/s")
	b.ReportMetric(d.WatchEvents["nodes"]/secs, "node-watch-events/s")
	b.ReportMetric(100*(to.apiCPU-from.apiCPU)/secs, "apiserver-cpu-%")
	b.ReportMetric(100*(to.etcdCPU-from.etcdCPU)/secs, "etcd-cpu-%")
	var lines []string
	for k, v := range d.Requests {
		lines = append(lines, fmt.Sprintf("%s %.2f/s", k, v/secs))
	}
	for k, v := range d.WatchEvents {
		lines = append(lines, fmt.Sprintf("watch events %s %.2f/s", k, v/secs))
	}
	sort.Strings(lines)
	b.Logf("window %.1f s: %s", secs, strings.Join(lines, "; "))
	return d
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func benchAPILoad(b *testing.B, n int) {
	env := k8stest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	l := Layout{Locations: benchLocations}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if err := l.CreateNodes(ctx, kube, idx, nil); err != nil {
		b.Fatal(err)
	}
	apiPID, etcdPID := controlPlanePIDs(b)
	heap0 := liveHeap()
	start := time.Now()
	f, err := Start(ctx, env.Config, l, idx, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Stop()
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Minute)
	defer ccancel()
	if err := f.WaitConverged(cctx, n, l.LocationNames()); err != nil {
		b.Fatal(err)
	}
	converged := time.Since(start)
	time.Sleep(settle)

	from := takeSample(ctx, b, env.Config, apiPID, etcdPID)
	rec0, lc0 := f.Counts()
	time.Sleep(window)
	to := takeSample(ctx, b, env.Config, apiPID, etcdPID)
	rec1, lc1 := f.Counts()
	heap1 := liveHeap()
	if err := f.Converged(n, l.LocationNames()); err != nil {
		b.Logf("not converged at the end of the window: %v", err)
	}

	secs := to.at.Sub(from.at).Seconds()
	reportAPI(b, from, to)
	b.ReportMetric(100*(to.selfCPU-from.selfCPU)/secs/float64(n), "agent-cpu-%")
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(n)/1024, "agent-heap-KiB")
	b.ReportMetric(converged.Seconds(), "s/converge")
	b.ReportMetric((rec1-rec0)/secs/float64(n), "reconciles/s/agent")
	b.ReportMetric(lc1-lc0, "leader-changes")
	if rss, err := RSSBytes(os.Getpid()); err == nil {
		b.ReportMetric(float64(rss)/(1<<20), "process-rss-MB")
	}
}

// The agent of BenchmarkAgentIn1000NodeCluster runs in a child process (this
// test binary again, TestHelperAgentProcess) so that its resident memory is
// its own.
const (
	childEnvKubeconfig = "AGENTSIM_CHILD_KUBECONFIG"
	childEnvNodes      = "AGENTSIM_CHILD_NODES"
	childEnvLocations  = "AGENTSIM_CHILD_LOCATIONS"
	childEnvLease      = "AGENTSIM_CHILD_LEASE_DURATION"
)

// lease1000 is the lease duration (kg's --lease-duration) of the 1000-node
// cluster: every Lease is renewed every third of it. At kg's default (3 s:
// 1000 renewals a second) this machine's API server fell behind (about 575
// a second, two cores shared) and leases expired at random, so the agent
// was never at rest; at 10 s it keeps up. The agent's CPU at rest grows
// with the renewals it receives: docs/scale.md scales it to the default.
const lease1000 = 10 * time.Second

// BenchmarkAgentIn1000NodeCluster measures one agent (in a process of its
// own) in a 1000-node cluster in 10 locations whose 999 other Nodes are API
// objects only, with the annotations their agents would publish and their
// heartbeat Leases renewed by a Writer as today's agents do (every third of
// lease1000):
// its resident memory (VmRSS, median and max over 1 s samples) and CPU (%
// of one core) at rest, then during a churn of 10 Node updates per second
// (kilo.squat.ai/persistent-keepalive flipped, which every agent
// reconciles), and the API server's load in each window.
func BenchmarkAgentIn1000NodeCluster(b *testing.B) {
	const n, locations, churn = 1000, 10, 10.0
	env := k8stest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	l := Layout{Locations: locations}
	pub, err := l.Published(n, Options{}.withDefaults().Topology)
	if err != nil {
		b.Fatal(err)
	}
	objects := make([]int, 0, n-1)
	for i := 1; i < n; i++ {
		objects = append(objects, i)
	}
	if err := l.CreateNodes(ctx, kube, append([]int{0}, objects...), pub); err != nil {
		b.Fatal(err)
	}
	w, err := NewWriter(env.Config, objects, lease1000)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.CreateLeases(ctx); err != nil {
		b.Fatal(err)
	}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	go w.RenewLeases(wctx, lease1000/3)
	apiPID, etcdPID := controlPlanePIDs(b)

	child, stdin, stdout := startChild(b, env.Config, n, locations, lease1000)
	stats := func() (reconciles, leaderChanges float64) {
		if _, err := io.WriteString(stdin, "stats\n"); err != nil {
			b.Fatal(err)
		}
		line, err := stdout.ReadString('\n')
		if _, err2 := fmt.Sscanf(line, "stats %g %g", &reconciles, &leaderChanges); err != nil || err2 != nil {
			b.Fatalf("agent process stats: %q, %v %v", line, err, err2)
		}
		return reconciles, leaderChanges
	}
	start := time.Now()
	if line, err := stdout.ReadString('\n'); err != nil || !strings.HasPrefix(line, "converged") {
		b.Fatalf("agent process: %q, %v", line, err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "s/converge")
	time.Sleep(settle)

	measure := func(name string) {
		from := takeSample(ctx, b, env.Config, apiPID, etcdPID)
		cpu0, err := ProcCPUSeconds(child.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		renewals0, late0 := w.Renewals.Load(), w.Late.Load()
		rec0, lc0 := stats()
		var rss []float64
		deadline := time.Now().Add(window)
		for time.Now().Before(deadline) {
			time.Sleep(time.Second)
			if r, err := RSSBytes(child.Process.Pid); err == nil {
				rss = append(rss, float64(r)/(1<<20))
			}
		}
		cpu1, err := ProcCPUSeconds(child.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		to := takeSample(ctx, b, env.Config, apiPID, etcdPID)
		rec1, lc1 := stats()
		secs := to.at.Sub(from.at).Seconds()
		slices.Sort(rss)
		b.ReportMetric((rec1-rec0)/secs, name+"-reconciles/s")
		b.ReportMetric(lc1-lc0, name+"-leader-changes")
		b.ReportMetric(float64(w.Late.Load()-late0)/secs, name+"-writer-late/s")
		b.ReportMetric(100*(cpu1-cpu0)/secs, name+"-agent-cpu-%")
		b.ReportMetric(rss[len(rss)/2], name+"-agent-rss-MB")
		b.ReportMetric(rss[len(rss)-1], name+"-agent-rss-max-MB")
		b.ReportMetric(float64(w.Renewals.Load()-renewals0)/secs, name+"-writer-renewals/s")
		d := to.api.Sub(from.api)
		b.ReportMetric(d.TotalWatchEvents()/secs, name+"-watch-events/s")
		b.ReportMetric(100*(to.apiCPU-from.apiCPU)/secs, name+"-apiserver-cpu-%")
		b.ReportMetric(100*(to.etcdCPU-from.etcdCPU)/secs, name+"-etcd-cpu-%")
		b.Logf("%s: %.1f s, agent CPU %.2f s, RSS samples %v, API %+v", name, secs, cpu1-cpu0, rss, d)
	}
	measure("rest")
	churned0 := w.Churned.Load()
	cctx, stopChurn := context.WithCancel(ctx)
	go w.Churn(cctx, churn)
	time.Sleep(time.Second) // the first reconciliations of the churn start
	measure("churn")
	stopChurn()
	b.Logf("churned %d Node updates, writer errors %d", w.Churned.Load()-churned0, w.Errors.Load())
}

// startChild runs TestHelperAgentProcess in a child process for node 0 of
// an n-node layout; it prints "converged" once its agent has converged,
// answers each "stats" line on its stdin with "stats RECONCILES
// LEADER_CHANGES" (so far), and runs until its stdin closes (at the end of
// the benchmark).
func startChild(b *testing.B, cfg *rest.Config, n, locations int, lease time.Duration) (*exec.Cmd, io.Writer, *bufio.Reader) {
	kubeconfig := writeKubeconfig(b, cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgentProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnvKubeconfig+"="+kubeconfig, childEnvNodes+"="+strconv.Itoa(n), childEnvLocations+"="+strconv.Itoa(locations), childEnvLease+"="+lease.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd, stdin, bufio.NewReader(out)
}

func writeKubeconfig(b *testing.B, cfg *rest.Config) string {
	c := clientcmdapi.NewConfig()
	c.Clusters["sim"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["sim"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	c.Contexts["sim"] = &clientcmdapi.Context{Cluster: "sim", AuthInfo: "sim"}
	c.CurrentContext = "sim"
	path := b.TempDir() + "/kubeconfig"
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// TestHelperAgentProcess is the agent process of
// BenchmarkAgentIn1000NodeCluster; it does nothing in a normal test run.
func TestHelperAgentProcess(t *testing.T) {
	kubeconfig := os.Getenv(childEnvKubeconfig)
	if kubeconfig == "" {
		t.Skip("the agent process of BenchmarkAgentIn1000NodeCluster")
	}
	n, _ := strconv.Atoi(os.Getenv(childEnvNodes))
	locations, _ := strconv.Atoi(os.Getenv(childEnvLocations))
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := Layout{Locations: locations}
	lease, _ := time.ParseDuration(os.Getenv(childEnvLease))
	f, err := Start(ctx, cfg, l, []int{0}, Options{LeaseDuration: lease})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Minute)
	defer ccancel()
	if err := f.WaitConverged(cctx, n, l.LocationNames()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("converged")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() { // until the benchmark ends
		if in.Text() == "stats" {
			r, lc := f.Counts()
			fmt.Printf("stats %g %g\n", r, lc)
		}
	}
}
