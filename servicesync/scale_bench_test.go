package servicesync_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/join"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	"github.com/kilofed/kilofed/servicesync"
)

var (
	scaleSizes   = flag.String("servicesync.sizes", "100,1000", "BenchmarkServicesyncScale: numbers of exported services, each size run in turn")
	scaleRuns    = flag.Int("servicesync.runs", 2, "BenchmarkServicesyncScale: runs of each size, alternated, each from a cold start")
	scaleClients = flag.String("servicesync.clients", "informers", "BenchmarkServicesyncScale: the local clients, alternated: informers (kilofed-controller's: servicesync.NewLocalClient, --kube-api-qps's default) and/or direct (the controller before them: every read a request, client-go's default rate limit of 5/s, burst 10); direct's figures carry the suffix -direct")
	scaleWait    = flag.Duration("servicesync.timeout", 40*time.Minute, "BenchmarkServicesyncScale: how long one run may take to converge")
)

// scaleEndpoints is the number of endpoints of each exported service.
const scaleEndpoints = 10

// scaleCluster is one API server of the benchmark, with its ranges.
type scaleCluster struct {
	name     string
	env      *envtest.Environment
	admin    *kube.Cluster
	pods     netip.Prefix
	services netip.Prefix
	requests atomic.Int64 // API requests of its servicesync
	byKind   kindCounts
}

// BenchmarkServicesyncScale measures servicesync at scale on real API
// servers (the lab's etcd and kube-apiserver through envtest): three
// clusters joined pair by pair with kilofed join (scoped tokens), the real
// servicesync controller of each running in this process with a client
// built as kilofed-controller builds it (servicesync.NewLocalClient:
// reads from informers, --kube-api-qps's default;
// -servicesync.clients=informers,direct alternates it with the controller's
// client before, every read a request at client-go's default rate limit),
// N Services of 10 endpoints each spread over the three clusters (service
// i in cluster i mod 3), then N ServiceExports created at once. It reports,
// for each size of -servicesync.sizes (alternated, -servicesync.runs each,
// every run from new API servers): the seconds from the first export
// created to every cluster having every import with its IP, its derived
// Service and its 10 endpoints (s/converge-N, median, min:/max:), the
// objects servicesync wrote per second to get there (objects/s-N), the API
// requests of the three controllers until then (requests-N) and per second
// once converged (steady-requests/s-N), the heap in use after a GC (the three
// controllers in one process; heap-MB-N, growth over the idle start
// heap-growth-MB-N) and the process's resident memory (rss-MB-N).
// hack/bench puts the 100 services' figures beside the 1000's, with their
// ratio: the growth. The requests of one controller by verb and resource
// are logged, until converged and once converged.
func BenchmarkServicesyncScale(b *testing.B) {
	var sizes []int
	for _, f := range strings.Split(*scaleSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("-servicesync.sizes %q: %v", *scaleSizes, f)
		}
		sizes = append(sizes, n)
	}
	if _, err := os.Stat(filepath.Join(k8stest.BinsDir(), "kube-apiserver")); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("no kube-apiserver in %s: %v (make lab-bins)", k8stest.BinsDir(), err)
		}
		b.Skipf("no kube-apiserver in %s (make lab-bins)", k8stest.BinsDir())
	}
	var clients []string
	for _, r := range strings.Split(*scaleClients, ",") {
		if r = strings.TrimSpace(r); r != "informers" && r != "direct" {
			b.Fatalf("-servicesync.clients %q: %q is neither informers nor direct", *scaleClients, r)
		}
		clients = append(clients, r)
	}
	for range b.N {
		samples := map[string]map[int][]scaleSample{}
		for _, cl := range clients {
			samples[cl] = map[int][]scaleSample{}
		}
		for run := range *scaleRuns {
			for _, n := range sizes {
				for _, cl := range clients {
					s := scaleRun(b, n, cl == "direct")
					b.Logf("run %d, %d services, %s client: converged in %.1f s (exports created in %.1f s), %.0f objects/s, %d requests, %.1f steady requests/s, heap %.1f MB (idle %.1f MB), rss %.1f MB",
						run+1, n, cl, s.converge, s.create, s.objectsPerSec, s.requests, s.steadyRPS, s.heapMB, s.idleHeapMB, s.rssMB)
					samples[cl][n] = append(samples[cl][n], s)
				}
			}
		}
		b.StopTimer()
		for _, cl := range clients {
			scaleReport(b, cl, sizes, samples[cl])
		}
	}
}

// scaleReport reports one client's samples by size: medians, min and
// max, with -direct after the direct client's units.
func scaleReport(b *testing.B, cl string, sizes []int, samples map[int][]scaleSample) {
	suffix := ""
	if cl == "direct" {
		suffix = "-direct"
	}
	// go test keeps 10 lines of a benchmark's log: one a run above,
	// then the requests of the last run of each size, and the growth.
	for _, n := range sizes {
		b.Log(cl, samples[n][len(samples[n])-1].kinds)
	}
	med := map[int]float64{}
	for _, n := range sizes {
		ss := samples[n]
		report := func(unit string, f func(scaleSample) float64) float64 {
			v := make([]float64, len(ss))
			for i, s := range ss {
				v[i] = f(s)
			}
			m := medianOf(v)
			b.ReportMetric(m, fmt.Sprintf("%s-%d%s", unit, n, suffix))
			if len(v) > 1 {
				b.ReportMetric(slices.Min(v), fmt.Sprintf("min:%s-%d%s", unit, n, suffix))
				b.ReportMetric(slices.Max(v), fmt.Sprintf("max:%s-%d%s", unit, n, suffix))
			}
			return m
		}
		med[n] = report("s/converge", func(s scaleSample) float64 { return s.converge })
		report("s/create", func(s scaleSample) float64 { return s.create })
		report("objects/s", func(s scaleSample) float64 { return s.objectsPerSec })
		report("requests", func(s scaleSample) float64 { return float64(s.requests) })
		report("steady-requests/s", func(s scaleSample) float64 { return s.steadyRPS })
		report("heap-MB", func(s scaleSample) float64 { return s.heapMB })
		report("heap-growth-MB", func(s scaleSample) float64 { return s.heapMB - s.idleHeapMB })
		report("rss-MB", func(s scaleSample) float64 { return s.rssMB })
	}
	if lo, hi := slices.Min(sizes), slices.Max(sizes); lo != hi && med[lo] > 0 {
		b.Logf("%s client: converge time, %d services / %d services: %.2f (%d times the services)", cl, hi, lo, med[hi]/med[lo], hi/lo)
	}
}

type scaleSample struct {
	converge, create   float64 // seconds
	objectsPerSec      float64
	requests           int64
	steadyRPS          float64
	heapMB, idleHeapMB float64
	rssMB              float64
	kinds              string // requests by verb and resource
}

// scaleRun runs the benchmark once with n services, from new API servers,
// with the local clients of the controller before informers if direct,
// and stops everything it started.
func scaleRun(b *testing.B, n int, direct bool) scaleSample {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	var clusters []*scaleCluster
	defer func() {
		cancel()
		for _, c := range clusters {
			if err := c.env.Stop(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				b.Logf("stop the API server of %s: %v", c.name, err)
			}
		}
	}()
	for i, name := range []string{"paris", "gra", "sgp"} {
		c := startScaleCluster(b, name, netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", 10+i)), netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", 96+i)), fmt.Sprintf("10.%d.0.1/16", 4+i))
		clusters = append(clusters, c)
	}
	// Joined pair by pair, as an operator does, with scoped tokens.
	for i := range clusters {
		for j := i + 1; j < len(clusters); j++ {
			a, z := clusters[i], clusters[j]
			side := func(c *scaleCluster) join.Side {
				return join.Side{Cluster: c.admin, ID: c.name, Ranges: discover.Options{ServiceCIDRs: []netip.Prefix{c.services}}}
			}
			if err := join.Join(ctx, join.Options{Local: side(a), Remote: side(z)}); err != nil {
				b.Fatalf("join %s and %s: %v", a.name, z.name, err)
			}
		}
	}
	// What the federation controller writes from each remote's
	// Announcement: the ranges servicesync checks remote endpoints against.
	byName := map[string]*scaleCluster{}
	for _, c := range clusters {
		byName[c.name] = c
	}
	for _, c := range clusters {
		var rcs fedv1.RemoteClusterList
		if err := c.admin.Client.List(ctx, &rcs); err != nil {
			b.Fatal(err)
		}
		for i := range rcs.Items {
			rc := &rcs.Items[i]
			o := byName[rc.Spec.ClusterID]
			rc.Status.Announced = &fedv1.AnnouncedRanges{PodCIDRs: []string{o.pods.String()}, ServiceCIDRs: []string{o.services.String()}}
			if err := c.admin.Client.Status().Update(ctx, rc); err != nil {
				b.Fatalf("announce %s in %s: %v", rc.Name, c.name, err)
			}
		}
	}
	// The workload, before the clock starts: a namespace in every cluster,
	// each Service and its EndpointSlice in its cluster.
	for _, c := range clusters {
		if err := c.admin.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
			b.Fatal(err)
		}
	}
	parallel(b, n, func(i int) error {
		c := clusters[i%len(clusters)]
		name := fmt.Sprintf("svc-%04d", i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
		if err := c.admin.Client.Create(ctx, svc); err != nil {
			return err
		}
		base := c.pods.Addr().As4()
		off := uint32(i/len(clusters))*scaleEndpoints + 1
		eps := make([]discoveryv1.Endpoint, scaleEndpoints)
		for j := range eps {
			a := base
			v := uint32(a[2])<<8 | uint32(a[3]) + off + uint32(j)
			a[2], a[3] = byte(v>>8), byte(v)
			eps[j] = discoveryv1.Endpoint{Addresses: []string{netip.AddrFrom4(a).String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}
		}
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name + "-x1", Labels: map[string]string{
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
			Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(80))}},
		}
		return c.admin.Client.Create(ctx, sl)
	})
	// One servicesync per cluster, as kilofed-controller starts it.
	for _, c := range clusters {
		cfg := rest.CopyConfig(c.admin.Config)
		cfg.QPS, cfg.Burst = servicesync.LocalQPS, servicesync.LocalBurst // kilofed-controller's defaults
		counter, kinds := &c.requests, &c.byKind
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, counter, kinds} }
		var local client.Client
		var err error
		if direct {
			cfg.QPS, cfg.Burst = 0, 0 // client-go's default, 5/s and burst 10
			local, err = client.New(cfg, client.Options{Scheme: servicesync.Scheme()})
		} else {
			local, err = servicesync.NewLocalClient(ctx, cfg)
		}
		if err != nil {
			b.Fatal(err)
		}
		s, err := servicesync.New(servicesync.Config{Local: local, ClusterID: c.name, Ranges: discover.Options{ServiceCIDRs: []netip.Prefix{c.services}}})
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = s.Run(ctx) }()
	}
	// The idle heap: the controllers have read once, nothing is exported.
	time.Sleep(3 * time.Second)
	idleHeap, _ := memory()

	before := totalRequests(clusters)
	_, kinds0 := clusters[0].byKind.since(nil)
	start := time.Now()
	parallel(b, n, func(i int) error {
		c := clusters[i%len(clusters)]
		return c.admin.Client.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("svc-%04d", i)}})
	})
	created := time.Since(start)
	converged := make([]time.Duration, len(clusters))
	var wg sync.WaitGroup
	for k, c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			converged[k] = waitConverged(ctx, b, c, n, start)
		}()
	}
	wg.Wait()
	converge := slices.Max(converged)
	reqs := totalRequests(clusters) - before
	untilConverged, kinds1 := clusters[0].byKind.since(kinds0)
	heap, rss := memory()
	// The steady load once converged: what every poll costs.
	r0, t0 := totalRequests(clusters), time.Now()
	time.Sleep(10 * time.Second)
	steady := float64(totalRequests(clusters)-r0) / time.Since(t0).Seconds()
	onceConverged, _ := clusters[0].byKind.since(kinds1)
	kinds := fmt.Sprintf("%d services, requests of %s's servicesync until converged: %s; in %.0f s once converged: %s",
		n, clusters[0].name, untilConverged, time.Since(t0).Seconds(), onceConverged)
	// Written by the controllers: in each cluster an import, a derived
	// Service and a slice per service; an ExportedService per export.
	objects := float64(len(clusters)*3*n + n)
	return scaleSample{converge: converge.Seconds(), create: created.Seconds(), objectsPerSec: objects / converge.Seconds(),
		requests: reqs, steadyRPS: steady, heapMB: heap, idleHeapMB: idleHeap, rssMB: rss, kinds: kinds}
}

// startScaleCluster starts an API server with the mesh's, the federation's
// and servicesync's CRDs, the Service range services, and one Node
// holding the pod range pods.
func startScaleCluster(b testing.TB, name string, pods, services netip.Prefix, wgIP string) *scaleCluster {
	env := &envtest.Environment{
		BinaryAssetsDirectory: k8stest.BinsDir(),
		CRDDirectoryPaths:     []string{k8stest.CRDDir(), filepath.Join("..", "federation", "config", "crd"), filepath.Join("config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", services.String())
	cfg, err := env.Start()
	if err != nil {
		b.Fatalf("start the API server of %s: %v", name, err)
	}
	c := &scaleCluster{name: name, env: env, pods: pods, services: services}
	if c.admin, err = kube.New(name, cfg); err != nil {
		b.Fatal(err)
	}
	// The same cluster with servicesync's types too (a superset of join's).
	if c.admin.Client, err = client.New(cfg, client.Options{Scheme: servicesync.Scheme()}); err != nil {
		b.Fatal(err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Annotations: map[string]string{k8s.WireGuardIPAnnotation: wgIP}},
		Spec:       corev1.NodeSpec{PodCIDR: pods.String(), PodCIDRs: []string{pods.String()}},
	}
	if err := c.admin.Client.Create(context.Background(), node); err != nil {
		b.Fatal(err)
	}
	return c
}

// waitConverged returns how long after start c had every import of the n
// services with its IP, its derived Service and all its endpoints.
func waitConverged(ctx context.Context, b *testing.B, c *scaleCluster, n int, start time.Time) time.Duration {
	deadline := start.Add(*scaleWait)
	for {
		done, state, err := converged(ctx, c, n)
		now := time.Now()
		if err == nil && done {
			return now.Sub(start)
		}
		if err != nil {
			state = err.Error()
		}
		if now.After(deadline) {
			b.Fatalf("%s did not converge in %s: %s", c.name, *scaleWait, state)
		}
		select {
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// converged reports whether c has what servicesync imports of the n
// services, and what it has so far.
func converged(ctx context.Context, c *scaleCluster, n int) (bool, string, error) {
	var sis mcsv1beta1.ServiceImportList
	if err := c.admin.Client.List(ctx, &sis, client.InNamespace("bench")); err != nil {
		return false, "", err
	}
	withIP := 0
	for _, si := range sis.Items {
		if len(si.Spec.IPs) > 0 && len(si.Status.Clusters) == 1 {
			withIP++
		}
	}
	state := fmt.Sprintf("%d/%d imports with an IP", withIP, n)
	if withIP < n {
		return false, state, nil
	}
	var svcs corev1.ServiceList
	if err := c.admin.Client.List(ctx, &svcs, client.InNamespace("bench"), client.MatchingLabels{servicesync.LabelManagedBy: servicesync.ManagedBy}); err != nil {
		return false, state, err
	}
	state += fmt.Sprintf(", %d/%d derived Services", len(svcs.Items), n)
	var sls discoveryv1.EndpointSliceList
	if err := c.admin.Client.List(ctx, &sls, client.InNamespace("bench"), client.MatchingLabels{discoveryv1.LabelManagedBy: servicesync.EndpointSliceManager}); err != nil {
		return false, state, err
	}
	ready := map[string]int{}
	for _, sl := range sls.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready[sl.Labels[mcsv1beta1.LabelServiceName]]++
			}
		}
	}
	full := 0
	for _, k := range ready {
		if k == scaleEndpoints {
			full++
		}
	}
	state += fmt.Sprintf(", %d/%d services with their %d endpoints", full, n, scaleEndpoints)
	return len(svcs.Items) >= n && full == n, state, nil
}

// parallel runs f(0..n-1) on 8 workers and fails b on the first error.
func parallel(b *testing.B, n int, f func(int) error) {
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					errs <- nil
					return
				}
				if err := f(i); err != nil {
					next.Store(int64(n))
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range 8 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		b.Fatal(first)
	}
}

// countingTransport counts the requests of a controller, in all and by
// verb and resource.
type countingTransport struct {
	rt     http.RoundTripper
	n      *atomic.Int64
	byKind *kindCounts
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	t.byKind.add(requestKind(r))
	return t.rt.RoundTrip(r)
}

// kindCounts counts requests by "verb resource".
type kindCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (k *kindCounts) add(kind string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n == nil {
		k.n = map[string]int{}
	}
	k.n[kind]++
}

// since returns the counts minus those of before, as "verb resource n",
// the largest first.
func (k *kindCounts) since(before map[string]int) (string, map[string]int) {
	k.mu.Lock()
	now := maps.Clone(k.n)
	k.mu.Unlock()
	type kv struct {
		k string
		n int
	}
	var out []kv
	for kind, n := range now {
		if d := n - before[kind]; d > 0 {
			out = append(out, kv{kind, d})
		}
	}
	slices.SortFunc(out, func(a, b kv) int { return b.n - a.n })
	var parts []string
	for _, x := range out {
		parts = append(parts, fmt.Sprintf("%s %d", x.k, x.n))
	}
	return strings.Join(parts, ", "), now
}

// requestKind returns "verb resource" of an API request: get, list, patch...
func requestKind(r *http.Request) string {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	i := 2 // /api/v1/...
	if len(segs) > 0 && segs[0] == "apis" {
		i = 3 // /apis/group/version/...
	}
	if len(segs) <= i {
		return strings.ToLower(r.Method) + " " + r.URL.Path
	}
	rest := segs[i:]
	if len(rest) > 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	verb := strings.ToLower(r.Method)
	switch {
	case r.Method == http.MethodGet && len(rest) == 1:
		verb = "list"
	case r.Method == http.MethodDelete && len(rest) == 1:
		verb = "deletecollection"
	}
	return verb + " " + rest[0]
}

func totalRequests(cs []*scaleCluster) int64 {
	var n int64
	for _, c := range cs {
		n += c.requests.Load()
	}
	return n
}

// memory returns the heap in use after a collection and the resident
// memory of this process, in MB (10^6 bytes).
func memory() (heapMB, rssMB float64) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	heapMB = float64(m.HeapInuse) / 1e6
	if src, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(src), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rssMB = kb * 1024 / 1e6
			}
		}
	}
	return heapMB, rssMB
}

func medianOf(v []float64) float64 {
	c := slices.Clone(v)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func ptr[T any](v T) *T { return &v }
