package agentsim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
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

	"github.com/kilofed/kilofed/mesh/k8s"
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

// rounds is how many times each benchmark sets everything up again and
// measures (KILOFED_SCALE_ROUNDS overrides it): it reports the median of
// the rounds, and their smallest and largest value as min: and max: (the
// spread hack/bench shows).
var rounds = envInt("KILOFED_SCALE_ROUNDS", 2)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// figures are one round's results by unit.
type figures map[string]float64

// reportRounds reports, for every unit of the rounds, the median of its
// values and their min and max.
func reportRounds(b *testing.B, rs []figures) {
	units := map[string][]float64{}
	for _, r := range rs {
		for u, v := range r { // a round not measured is nil
			units[u] = append(units[u], v)
		}
	}
	for u, vs := range units {
		slices.Sort(vs)
		med := vs[len(vs)/2]
		if len(vs)%2 == 0 {
			med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
		}
		b.ReportMetric(med, u)
		if len(vs) > 1 {
			b.ReportMetric(vs[0], "min:"+u)
			b.ReportMetric(vs[len(vs)-1], "max:"+u)
		}
	}
	b.Logf("%d rounds: %v", len(rs), units)
}

// startAPIServer starts a real API server for one round; stop stops it
// (the test's cleanup would stop it only after the last round).
func startAPIServer(b *testing.B) (env *k8stest.Env, stop func()) {
	env = k8stest.Start(b)
	return env, func() { _ = env.Environment.Stop() }
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
//
// lease=3s is kg's default (--lease-duration 3s: a renewal every second).
// From 100 agents its N x N watch events (10000/s and more) are more than
// one process and the API server can decode and encode on this machine's
// two shared cores: heartbeats come late, leases expire and the agents
// never converge (the simulation, packed in one process, falls behind; see
// docs/scale.md), so the sizes are run at lease=30s (a renewal every 10 s, the kubelet's node lease
// cadence), where every heartbeat rate is 10 times smaller and the growth
// the same; the sizes measured at both show the factor.
//
// election=location/... is kg's --leader-election=location (one election
// Lease per location, renewed by its leader, watched by that location's
// nodes only), at kg's default cadence and every size: the "after" of
// docs/scale.md, measured in the same run as the "before".
func BenchmarkAPILoad(b *testing.B) {
	for _, c := range []struct {
		election k8s.Election
		lease    time.Duration
		nodes    []int
	}{
		{k8s.ElectionNodeLeases, 3 * time.Second, []int{10, 50}},
		{k8s.ElectionLocation, 3 * time.Second, []int{10, 50, 100, 200}},
		{k8s.ElectionNodeLeases, 30 * time.Second, []int{10, 50, 100, 200}},
	} {
		for _, n := range c.nodes {
			name := fmt.Sprintf("lease=%s/nodes=%d", c.lease, n)
			if c.election != k8s.ElectionNodeLeases {
				name = "election=" + string(c.election) + "/" + name
			}
			b.Run(name, func(b *testing.B) { benchAPILoad(b, n, c.lease, c.election) })
		}
	}
}

// sample is what a window starts and ends with.
type sample struct {
	at              time.Time
	api             Counters
	apiCPU, etcdCPU float64
	selfCPU         float64
}

func takeSample(ctx context.Context, b *testing.B, cfg *rest.Config, apiPID, etcdPID int) (sample, error) {
	var c Counters
	var err error
	for try := 0; try < 5; try++ { // a loaded API server may time a scrape out
		if c, err = Scrape(ctx, cfg); err == nil {
			break
		}
		b.Logf("scrape: %v", err)
	}
	if err != nil {
		return sample{}, err
	}
	s := sample{at: time.Now(), api: c, selfCPU: SelfCPUSeconds()}
	if s.apiCPU, err = ProcCPUSeconds(apiPID); err != nil {
		return s, err
	}
	s.etcdCPU, err = ProcCPUSeconds(etcdPID)
	return s, err
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
func reportAPI(b *testing.B, m figures, prefix string, from, to sample) Counters {
	secs := to.at.Sub(from.at).Seconds()
	d := to.api.Sub(from.api)
	m[prefix+"req/s"] = d.TotalRequests(false) / secs
	m[prefix+"watch-events/s"] = d.TotalWatchEvents() / secs
	if prefix == "" {
		m["lease-updates/s"] = d.Requests["PUT leases"] / secs
		m["lease-watch-events/s"] = d.WatchEvents["leases"] / secs
	}
	m[prefix+"apiserver-cpu-%"] = 100 * (to.apiCPU - from.apiCPU) / secs
	m[prefix+"etcd-cpu-%"] = 100 * (to.etcdCPU - from.etcdCPU) / secs
	var lines []string
	for k, v := range d.Requests {
		lines = append(lines, fmt.Sprintf("%s %.2f/s", k, v/secs))
	}
	for k, v := range d.WatchEvents {
		lines = append(lines, fmt.Sprintf("watch events %s %.2f/s", k, v/secs))
	}
	sort.Strings(lines)
	b.Logf("%swindow %.1f s: %s", prefix, secs, strings.Join(lines, "; "))
	return d
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func benchAPILoad(b *testing.B, n int, lease time.Duration, election k8s.Election) {
	var rs []figures
	for range rounds {
		rs = append(rs, apiLoadRound(b, n, lease, election))
	}
	reportRounds(b, rs)
}

func apiLoadRound(b *testing.B, n int, lease time.Duration, election k8s.Election) figures {
	m := figures{}
	env, stopAPI := startAPIServer(b)
	defer stopAPI()
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
	// The previous round's informers and connections end asynchronously:
	// let them go before the baseline is taken.
	time.Sleep(2 * time.Second)
	heap0 := liveHeap()
	start := time.Now()
	f, err := Start(ctx, env.Config, l, idx, Options{LeaseDuration: lease, Election: election})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Stop()
	// A benchmark never fails for being slow: if the agents have not
	// converged in 3 minutes, the window is measured anyway and says so.
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Minute)
	defer ccancel()
	unconverged := 0.0
	if err := f.WaitConverged(cctx, n, l.LocationNames()); err != nil {
		b.Logf("measured without convergence: %v", err)
		unconverged = 1
	}
	converged := time.Since(start)
	time.Sleep(settle)

	from, err := takeSample(ctx, b, env.Config, apiPID, etcdPID)
	if err != nil {
		b.Logf("round not measured: %v", err)
		return nil
	}
	rec0, lc0 := f.Counts()
	time.Sleep(window)
	to, err := takeSample(ctx, b, env.Config, apiPID, etcdPID)
	if err != nil {
		b.Logf("round not measured: %v", err)
		return nil
	}
	rec1, lc1 := f.Counts()
	heap1 := liveHeap()
	if err := f.Converged(n, l.LocationNames()); err != nil {
		b.Logf("not converged at the end of the window: %v", err)
		unconverged = 1
	}

	secs := to.at.Sub(from.at).Seconds()
	reportAPI(b, m, "", from, to)
	m["agent-cpu-%"] = 100 * (to.selfCPU - from.selfCPU) / secs / float64(n)
	m["agent-heap-KiB"] = float64(int64(heap1)-int64(heap0)) / float64(n) / 1024
	if unconverged == 0 {
		m["s/converge"] = converged.Seconds()
	}
	if unconverged != 0 {
		m["unconverged"] = unconverged
	}
	m["reconciles/s/agent"] = (rec1 - rec0) / secs / float64(n)
	m["leader-changes"] = lc1 - lc0
	if rss, err := RSSBytes(os.Getpid()); err == nil {
		b.Logf("process RSS %.1f MB", float64(rss)/(1<<20))
	}
	return m
}

// The agent of BenchmarkAgentIn1000NodeCluster runs in a child process (this
// test binary again, TestHelperAgentProcess) so that its resident memory is
// its own.
const (
	childEnvKubeconfig = "AGENTSIM_CHILD_KUBECONFIG"
	childEnvNodes      = "AGENTSIM_CHILD_NODES"
	childEnvLocations  = "AGENTSIM_CHILD_LOCATIONS"
	childEnvLease      = "AGENTSIM_CHILD_LEASE_DURATION"
	childEnvElection   = "AGENTSIM_CHILD_ELECTION"
)

// lease1000 is the lease duration (kg's --lease-duration) of the 1000-node
// cluster with --leader-election=node-leases: every heartbeat Lease is
// renewed every third of it. At kg's default (3 s: 1000 renewals a second)
// this machine's API server fell behind (about 575 a second, two cores
// shared) and leases expired at random, so the agent was never at rest; at
// 10 s it keeps up. The agent's CPU at rest grows with the renewals it
// receives: docs/scale.md scales it to the default. With
// --leader-election=location the cluster runs kg's default (3 s): its 10
// election Leases are renewed 10 times a second in all.
const lease1000 = 10 * time.Second

// clusterLease is the lease duration of the 1000-node cluster by election.
func clusterLease(e k8s.Election) time.Duration {
	if e == k8s.ElectionLocation {
		return k8s.DefaultLeaseDuration
	}
	return lease1000
}

// BenchmarkAgentIn1000NodeCluster measures one agent (in a process of its
// own) in a 1000-node cluster in 10 locations whose 999 other Nodes are API
// objects only, with the annotations their agents would publish, run with
// each leader election side by side (sub-benchmarks election=node-leases
// and election=location):
//   - node-leases: a Writer renews the 999 nodes' heartbeat Leases as their
//     agents do (every third of lease1000); the agent watches them all;
//   - location: no heartbeat Lease; the Writer holds each location's
//     election Lease for its first object-only node, renewed every second
//     (a third of kg's default 3 s) as its leader's agent does, and that
//     Node carries kilofed.io/leads with the Lease's term; the agent
//     (node 0, in loc-00) is a standby of loc-00, as all but 10 of the 1000
//     agents are, following loc-00's Lease and probing its leader (the
//     simulated probe answers at once).
//
// With KILOFED_SCALE_KUBELET_STATUS=1 the Nodes also carry a kubelet's
// status (Layout.Kubelet), as in a real cluster.
//
// It reports the agent's resident memory (VmRSS, median and max over 1 s
// samples, and the median of its anonymous part, RssAnon: the heap and
// stacks without the executable's pages) and CPU (% of one core) at rest,
// then during a churn of 10 Node updates per second
// (kilo.squat.ai/persistent-keepalive flipped, which every agent
// reconciles), and the API server's load in each window
// (requests/s but WATCH, the Writer's included; watch events/s; CPU).
func BenchmarkAgentIn1000NodeCluster(b *testing.B) {
	n := envInt("KILOFED_SCALE_CLUSTER_NODES", 1000) // another size, for a comparison by hand
	for _, e := range []k8s.Election{k8s.ElectionNodeLeases, k8s.ElectionLocation} {
		b.Run("election="+string(e), func(b *testing.B) {
			var rs []figures
			for range rounds {
				rs = append(rs, agentInClusterRound(b, n, e))
			}
			reportRounds(b, rs)
		})
	}
}

func agentInClusterRound(b *testing.B, n int, election k8s.Election) figures {
	const locations, churn = 10, 10.0
	lease := clusterLease(election)
	m := figures{}
	env, stopAPI := startAPIServer(b)
	defer stopAPI()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	l := Layout{Locations: locations, Kubelet: os.Getenv("KILOFED_SCALE_KUBELET_STATUS") == "1"}
	objects := make([]int, 0, n-1)
	for i := 1; i < n; i++ {
		objects = append(objects, i)
	}
	w := createMixedCluster(ctx, b, env.Config, kube, l, []int{0}, objects, lease)
	var leaders map[string]string
	if election == k8s.ElectionLocation {
		leaders, err = w.CreateLocationLeases(ctx, l)
	} else {
		err = w.CreateLeases(ctx)
	}
	if err != nil {
		b.Fatal(err)
	}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	go w.RenewLeases(wctx, lease/3)
	apiPID, etcdPID := controlPlanePIDs(b)

	child, stdin, stdout, stopChild := startChild(b, env.Config, n, locations, lease, election)
	defer stopChild()
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
	line, err := stdout.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "converged") {
		b.Fatalf("agent process: %q, %v", line, err)
	}
	m["s/converge"] = time.Since(start).Seconds()
	if leaders != nil {
		// The agent's leaders are the Writer's.
		seen := map[string]string{}
		for _, kv := range strings.Fields(strings.TrimPrefix(line, "converged")) {
			loc, leader, _ := strings.Cut(kv, "=")
			seen[loc] = leader
		}
		if !maps.Equal(seen, leaders) {
			b.Fatalf("the agent converged on the leaders %v, the Writer's are %v", seen, leaders)
		}
	}
	time.Sleep(settle)

	measure := func(name string) {
		from, err := takeSample(ctx, b, env.Config, apiPID, etcdPID)
		if err != nil {
			b.Fatal(err)
		}
		cpu0, err := ProcCPUSeconds(child.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		renewals0, late0 := w.Renewals.Load(), w.Late.Load()
		rec0, lc0 := stats()
		var rss, anon []float64
		deadline := time.Now().Add(window)
		for time.Now().Before(deadline) {
			time.Sleep(time.Second)
			if r, err := RSSBytes(child.Process.Pid); err == nil {
				rss = append(rss, float64(r)/(1<<20))
			}
			if r, err := RSSAnonBytes(child.Process.Pid); err == nil {
				anon = append(anon, float64(r)/(1<<20))
			}
		}
		cpu1, err := ProcCPUSeconds(child.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		to, err := takeSample(ctx, b, env.Config, apiPID, etcdPID)
		if err != nil {
			b.Fatal(err)
		}
		rec1, lc1 := stats()
		secs := to.at.Sub(from.at).Seconds()
		slices.Sort(rss)
		m[name+"-reconciles/s"] = (rec1 - rec0) / secs
		m[name+"-leader-changes"] = lc1 - lc0
		if late := float64(w.Late.Load()-late0) / secs; late > 0 {
			m[name+"-writer-late/s"] = late // the API server fell behind the renewals
		}
		m[name+"-agent-cpu-%"] = 100 * (cpu1 - cpu0) / secs
		m[name+"-agent-rss-MB"] = rss[len(rss)/2]
		m[name+"-agent-rss-max-MB"] = rss[len(rss)-1]
		if len(anon) > 0 { // the heap and stacks; the rest of VmRSS is the executable's pages
			slices.Sort(anon)
			m[name+"-agent-rss-anon-MB"] = anon[len(anon)/2]
		}
		m[name+"-writer-renewals/s"] = float64(w.Renewals.Load()-renewals0) / secs
		reportAPI(b, m, name+"-", from, to)
		b.Logf("%s: %.1f s, agent CPU %.2f s, RSS samples %v", name, secs, cpu1-cpu0, rss)
	}
	measure("rest")
	churned0 := w.Churned.Load()
	cctx, stopChurn := context.WithCancel(ctx)
	go w.Churn(cctx, churn)
	time.Sleep(time.Second) // the first reconciliations of the churn start
	measure("churn")
	stopChurn()
	b.Logf("churned %d Node updates, writer errors %d", w.Churned.Load()-churned0, w.Errors.Load())
	if e := w.Errors.Load(); e > 0 {
		m["writer-errors"] = float64(e) // a figure: go test keeps only 10 lines of a benchmark's log
	}
	return m
}

// startChild runs TestHelperAgentProcess in a child process for node 0 of
// an n-node layout; it prints "converged LOCATION=LEADER..." once its agent
// has converged,
// answers each "stats" line on its stdin with "stats RECONCILES
// LEADER_CHANGES" (so far), and runs until its stdin closes (at the end of
// the benchmark).
func startChild(b *testing.B, cfg *rest.Config, n, locations int, lease time.Duration, election k8s.Election) (cmd *exec.Cmd, stdin io.WriteCloser, stdout *bufio.Reader, stop func()) {
	kubeconfig := writeKubeconfig(b, cfg)
	cmd = exec.Command(os.Args[0], "-test.run=^TestHelperAgentProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnvKubeconfig+"="+kubeconfig, childEnvNodes+"="+strconv.Itoa(n), childEnvLocations+"="+strconv.Itoa(locations), childEnvLease+"="+lease.String(), childEnvElection+"="+string(election))
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
	stop = func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	return cmd, stdin, bufio.NewReader(out), stop
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
	election := k8s.Election(os.Getenv(childEnvElection))
	f, err := Start(ctx, cfg, l, []int{0}, Options{LeaseDuration: lease, Election: election})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Minute)
	defer ccancel()
	if err := f.WaitConverged(cctx, n, l.LocationNames()); err != nil {
		t.Fatal(err)
	}
	topo := f.Agents[0].Agent.Topology()
	line := "converged"
	for _, loc := range l.LocationNames() {
		leader, _ := topo.Leader(loc)
		line += " " + loc + "=" + leader.Name
	}
	fmt.Println(line)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() { // until the benchmark ends
		if in.Text() == "stats" {
			r, lc := f.Counts()
			fmt.Printf("stats %g %g\n", r, lc)
		}
	}
}
