package agentsim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
)

func TestParseMetricsSumsRequestsByVerbAndResourceAndWatchEventsByResource(t *testing.T) {
	text := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 120
apiserver_request_total{code="409",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="openapi/v3",verb="GET",version=""} 7
apiserver_watch_events_total{group="coordination.k8s.io",resource="leases",version="v1"} 4.5e+03
apiserver_watch_events_total{group="",kind="Node",version="v1"} 10
apiserver_request_duration_seconds_bucket{verb="PUT",le="0.1"} 99
`
	c, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"PUT leases": 123, "PATCH nodes/status": 2, "GET -/openapi/v3": 7}
	for k, v := range want {
		if c.Requests[k] != v {
			t.Errorf("Requests[%q] = %v, want %v (all: %v)", k, c.Requests[k], v, c.Requests)
		}
	}
	if len(c.Requests) != len(want) {
		t.Errorf("Requests = %v, want only %v", c.Requests, want)
	}
	if c.WatchEvents["leases"] != 4500 || c.WatchEvents["node"] != 10 || len(c.WatchEvents) != 2 {
		t.Errorf("WatchEvents = %v, want leases 4500 and node 10", c.WatchEvents)
	}
	prev := Counters{Requests: map[string]float64{"PUT leases": 100}, WatchEvents: map[string]float64{"leases": 500}}
	d := c.Sub(prev)
	if d.Requests["PUT leases"] != 23 || d.WatchEvents["leases"] != 4000 || d.TotalWatchEvents() != 4010 {
		t.Errorf("Sub = %+v, want PUT leases 23, leases events 4000, 4010 in all", d)
	}
}

func TestProcCPUAndRSSOfThisProcess(t *testing.T) {
	cpu, err := ProcCPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if cpu < 0 || cpu > SelfCPUSeconds()+1 {
		t.Errorf("ProcCPUSeconds(self) = %v, rusage says %v", cpu, SelfCPUSeconds())
	}
	rss, err := RSSBytes(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("RSSBytes(self) = %d, %v; want at least 1 MiB", rss, err)
	}
	anon, err := RSSAnonBytes(os.Getpid())
	if err != nil || anon < 1<<20 || anon > rss+rss/2 { // read at another instant
		t.Errorf("RSSAnonBytes(self) = %d, %v; want at least 1 MiB and about VmRSS (%d) at most", anon, err, rss)
	}
}

// TestSimulatedAgentsConvergeBesideObjectOnlyNodes runs three agents and
// three Nodes that are API objects only (their Leases renewed by a Writer)
// in two locations against a real API server: every agent sees all six
// nodes ready, they agree on the leaders, the API server counts the
// agents' Lease renewals and the watch events, and envtest's API server and
// etcd are found as children of this process.
func TestSimulatedAgentsConvergeBesideObjectOnlyNodes(t *testing.T) {
	env := k8stest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{Locations: 2, Kubelet: true}
	agents, objects := []int{0, 1, 2}, []int{3, 4, 5}
	w := createMixedCluster(ctx, t, env.Config, kube, l, agents, objects, 0)
	if err := w.CreateLeases(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := kube.CoreV1().Nodes().Get(ctx, NodeName(4), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(n.Status); len(n.Status.Images) != 40 || len(b) < 8<<10 || len(b) > 14<<10 {
		t.Fatalf("node 4's kubelet status: %d images, %d bytes of JSON; want 40 and about 10 KB", len(n.Status.Images), len(b))
	}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	go w.RenewLeases(wctx, time.Second)

	before, err := Scrape(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Start(ctx, env.Config, l, agents, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if err := f.WaitConverged(ctx, 6, l.LocationNames()); err != nil {
		t.Fatal(err)
	}
	for {
		after, err := Scrape(ctx, env.Config)
		if err != nil {
			t.Fatal(err)
		}
		d := after.Sub(before)
		if d.Requests["PUT leases"] >= 6 && d.WatchEvents["leases"] >= 6 && w.Renewals.Load() >= 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lease renewals or watch events not counted: %+v, writer renewals %d", d, w.Renewals.Load())
		case <-time.After(500 * time.Millisecond):
		}
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		pid, err := ChildPID(os.Getpid(), name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ProcCPUSeconds(pid); err != nil {
			t.Errorf("%s (%d): %v", name, pid, err)
		}
	}
}

// TestSimulatedAgentsElectOneLeaderPerLocationWithLocationLeases runs
// agents with --leader-election=location: they converge on one leader per
// location, each the holder of its location's election Lease, and no agent
// writes a heartbeat Lease.
func TestSimulatedAgentsElectOneLeaderPerLocationWithLocationLeases(t *testing.T) {
	env := k8stest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{Locations: 3}
	idx := []int{0, 1, 2, 3, 4, 5}
	if err := l.CreateNodes(ctx, kube, idx, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Start(ctx, env.Config, l, idx, Options{Election: k8s.ElectionLocation})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if err := f.WaitConverged(ctx, len(idx), l.LocationNames()); err != nil {
		t.Fatal(err)
	}
	topo := f.Agents[0].Agent.Topology()
	leases, err := kube.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	for _, le := range leases.Items {
		if !strings.HasPrefix(le.Name, k8s.LocationLeasePrefix) {
			t.Errorf("Lease %s written: want only location election Leases", le.Name)
			continue
		}
		holders[le.Name] = *le.Spec.HolderIdentity
	}
	for _, loc := range l.LocationNames() {
		leader, _ := topo.Leader(loc)
		if got := holders[k8s.LocationLeaseName(loc)]; got != leader.Name {
			t.Errorf("location %s: leader %s, its election Lease held by %q", loc, leader.Name, got)
		}
	}
}

// TestWriterInLocationModeWritesWhatALocationModeClusterHas: a Writer for
// Nodes that are API objects only, in location mode (CreateLocationLeases),
// writes exactly what a cluster running --leader-election=location has: one
// election Lease per location, held by one of that location's nodes, whose
// Node carries kilofed.io/leads with the Lease's term, and no heartbeat
// Lease; it renews them; and an agent running the location election
// converges with them: one leader per location, the Writer's, the lead of
// its own location left to the Writer's leader (sticky), and no Lease of
// its own written.
func TestWriterInLocationModeWritesWhatALocationModeClusterHas(t *testing.T) {
	env := k8stest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const n = 9
	l := Layout{Locations: 3}
	agents, objects := []int{0}, []int{1, 2, 3, 4, 5, 6, 7, 8}
	w := createMixedCluster(ctx, t, env.Config, kube, l, agents, objects, 0)
	leaders, err := w.CreateLocationLeases(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	// The first object-only node of each location leads it: node 0, the
	// agent, is in loc-00, so node 3 leads there.
	want := map[string]string{"loc-00": NodeName(3), "loc-01": NodeName(1), "loc-02": NodeName(2)}
	if !maps.Equal(leaders, want) {
		t.Fatalf("CreateLocationLeases: leaders %v, want %v", leaders, want)
	}

	// checkCluster checks the Leases and annotations of a location-mode
	// cluster led by want, and returns the Leases' renew times.
	checkCluster := func() map[string]time.Time {
		t.Helper()
		leases, err := kube.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		terms, renewed := map[string]int32{}, map[string]time.Time{}
		for _, le := range leases.Items {
			loc := ""
			for _, c := range l.LocationNames() {
				if le.Name == k8s.LocationLeaseName(c) {
					loc = c
				}
			}
			if loc == "" {
				t.Errorf("Lease %s written: want only the locations' election Leases (no heartbeat Lease)", le.Name)
				continue
			}
			if le.Labels[k8s.LeaseLabel] != "" || le.Labels[k8s.ElectionLabel] != loc {
				t.Errorf("Lease %s: labels %v, want %s=%s alone", le.Name, le.Labels, k8s.ElectionLabel, loc)
			}
			if h := le.Spec.HolderIdentity; h == nil || *h != want[loc] {
				t.Errorf("Lease %s: holder %v, want %s", le.Name, h, want[loc])
			}
			if d := le.Spec.LeaseDurationSeconds; d == nil || *d != int32(k8s.DefaultLeaseDuration/time.Second) {
				t.Errorf("Lease %s: duration %v s, want %v", le.Name, d, k8s.DefaultLeaseDuration)
			}
			if le.Spec.LeaseTransitions == nil || le.Spec.RenewTime == nil || le.Spec.AcquireTime == nil {
				t.Errorf("Lease %s: spec %+v, want a term, an acquire and a renew time", le.Name, le.Spec)
				continue
			}
			terms[loc], renewed[loc] = *le.Spec.LeaseTransitions, le.Spec.RenewTime.Time
		}
		if len(terms) != len(want) {
			t.Errorf("election Leases of %v, want one for each of %v", terms, l.LocationNames())
		}
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		leading := map[string]string{}
		for _, nd := range nodes.Items {
			v, ok := nd.Annotations[k8s.LeadsAnnotation]
			if !ok {
				continue
			}
			ld, err := k8s.ParseLeads(v)
			if err != nil {
				t.Errorf("node %s: %v", nd.Name, err)
				continue
			}
			if loc := nd.Labels[k8s.DefaultTopologyLabel]; ld.Location != loc || ld.Term != terms[loc] {
				t.Errorf("node %s in %s: %s=%q, want %d:%s (its location's Lease term)", nd.Name, loc, k8s.LeadsAnnotation, v, terms[loc], loc)
			}
			leading[ld.Location] = nd.Name
		}
		if !maps.Equal(leading, want) {
			t.Errorf("nodes carrying %s: %v, want the leaders %v alone", k8s.LeadsAnnotation, leading, want)
		}
		return renewed
	}
	first := checkCluster()

	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	go w.RenewLeases(wctx, k8s.DefaultLeaseDuration/3)
	f, err := Start(ctx, env.Config, l, agents, Options{Election: k8s.ElectionLocation})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if err := f.WaitConverged(ctx, n, l.LocationNames()); err != nil {
		t.Fatal(err)
	}
	a := f.Agents[0]
	topo := a.Agent.Topology()
	for loc, leader := range want {
		if got, _ := topo.Leader(loc); got.Name != leader {
			t.Errorf("agent's leader of %s: %s, want the Writer's %s", loc, got.Name, leader)
		}
	}
	nodes, _, _ := a.Client.Snapshot()
	for _, nd := range nodes {
		if nd.Ready != (want[nd.Location] == nd.Name) {
			t.Errorf("agent's snapshot: %s in %s ready %v, want only the Writer's leader %s ready", nd.Name, nd.Location, nd.Ready, want[nd.Location])
		}
	}
	// Two renewal periods later every Lease was renewed at least once more,
	// and the cluster is as it was: the agent took no lead, wrote no Lease.
	renewals := w.Renewals.Load()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for w.Renewals.Load() < renewals+2*int64(len(want)) {
		select {
		case <-ctx.Done():
			t.Fatalf("the Writer renewed %d Leases, want %d more (errors %d)", w.Renewals.Load(), 2*len(want), w.Errors.Load())
		case <-tick.C:
		}
	}
	later := checkCluster()
	for loc, at := range first {
		if !later[loc].After(at) {
			t.Errorf("Lease of %s renewed at %v, then %v: want renewed", loc, at, later[loc])
		}
	}
	if err := f.Converged(n, l.LocationNames()); err != nil {
		t.Errorf("after the renewals: %v", err)
	}
	if _, changes := f.Counts(); changes != 0 {
		t.Errorf("the agent saw %v leader changes, want none", changes)
	}
}

// createMixedCluster creates the Nodes of agents and objects in l (together
// nodes 0 to n-1), each carrying what its agent would publish, and returns
// a Writer standing in for the agents of objects, whose Leases last lease
// (kg's default when 0).
func createMixedCluster(ctx context.Context, tb testing.TB, cfg *rest.Config, kube kubernetes.Interface, l Layout, agents, objects []int, lease time.Duration) *Writer {
	tb.Helper()
	all := slices.Concat(agents, objects)
	pub, err := l.Published(slices.Max(all)+1, Options{}.withDefaults().Topology)
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.CreateNodes(ctx, kube, all, pub); err != nil {
		tb.Fatal(err)
	}
	w, err := NewWriter(cfg, objects, lease)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

func TestNewestChildSkipsZombiesOtherParentsAndOlderRounds(t *testing.T) {
	stat := func(pid int, comm, state string, ppid int, start uint64) string {
		return fmt.Sprintf("%d (%s) %s %d 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 1 1\n", pid, comm, state, ppid, start)
	}
	stats := []string{
		stat(10, "kube-apiserver", "S", 1, 100),  // the previous round's, still exiting
		stat(11, "kube-apiserver", "S", 2, 900),  // another process's child
		stat(12, "kube-apiserver", "Z", 1, 800),  // a failed start's, exited
		stat(13, "kube-apiserver", "S", 1, 500),  // this round's
		stat(14, "etcd", "S", 1, 950),            // another name
		stat(15, "kube-controller", "S", 1, 990), // comm cut to 15 bytes: kube-controller-manager
		stat(16, "kube-controller", "S", 1, 10),  // the same, older
	}
	if pid, ok := newestChild(stats, 1, "kube-apiserver"); !ok || pid != 13 {
		t.Errorf("newestChild(kube-apiserver) = %d, %v; want 13, true", pid, ok)
	}
	if pid, ok := newestChild(stats, 1, "kube-controller-manager"); !ok || pid != 15 {
		t.Errorf("newestChild(kube-controller-manager) = %d, %v; want 15, true", pid, ok)
	}
	if _, ok := newestChild(stats, 3, "etcd"); ok {
		t.Error("newestChild found a child of a process without children")
	}
}
