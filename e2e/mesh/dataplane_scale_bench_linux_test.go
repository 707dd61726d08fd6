//go:build linux

package mesh

// BenchmarkDataPlaneInLargeCluster measures BenchmarkDataPlaneTCP's kilofed
// path (pod on scaleway-paris's leader -> pod on aws-euwest3's leader,
// through kg's embedded wireguard-go) and kg's resident memory in the
// meta-cloud lab twice, in the same lab: first as it is (nodes=0), then
// once the cluster holds N more Nodes (agentsim, as in
// BenchmarkLeaderFailoverUnderLoad, whose checks of the simulated ranges it
// runs too: checkSimulationFitsLab), every real leader carries them
// (checkInTopology) and every agent has written its firewall
// (waitFirewallsSettled, reported as s/mesh-settled). A larger cluster
// gives each agent a larger heap of its own (the Nodes it watches, its
// topology, routes and firewall); the Go
// memory limit that bounds the embedded device (mesh/wireguard) must leave
// the data plane room above it, or the collector takes the CPU the packets
// need. It reports the medians of each figure (kilofed-S-Mbps, S the
// streams), their spread (min:, max:), the ratio under load over without
// (x-kilofed-S-vs-nodes=0), kg's VmRSS before traffic (idle-kg-a/z-rss-MB,
// and its anonymous and file-backed parts, idle-kg-a/z-anon-MB and -file-MB)
// and the largest during it (kg-a/z-rss-MB), in MB (10^6 bytes).

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

var (
	dataplaneScaleNodes     = flag.Int("dataplanescale.nodes", 1000, "simulated Nodes of BenchmarkDataPlaneInLargeCluster")
	dataplaneScaleLocations = flag.Int("dataplanescale.locations", 10, "simulated locations of BenchmarkDataPlaneInLargeCluster")
	dataplaneScaleDwell     = flag.Duration("dataplanescale.dwell", 0, "how long BenchmarkDataPlaneInLargeCluster leaves the mesh with the simulated Nodes idle before it measures: the queues that wireguard-go keeps for the simulated locations, whose leaders never answer, reach their steady state only minutes into a lead")
	dataplaneScaleProfile   = flag.String("dataplanescale.profile", "", "directory: run kg with --profiling and, after each sub-benchmark's runs, write a 5 s CPU profile of kg on both ends, taken during a 4-stream run, and a heap profile right after it, as kg-{a,z}-{cpu,heap}-<sub-benchmark>.pprof, and before any traffic the heap profile as text with the runtime's memory statistics, as kg-{a,z}-idleheap-<sub-benchmark>.txt")
)

func BenchmarkDataPlaneInLargeCluster(b *testing.B) {
	n, locs := *dataplaneScaleNodes, *dataplaneScaleLocations
	if locs < 1 || locs > 16 || n < locs {
		b.Fatalf("-dataplanescale.locations %d, -dataplanescale.nodes %d: want 1-16 locations and a node in each", locs, n)
	}
	ctx, l, c, ips := startMetaCloud(b, metaCloud(), 25*time.Minute+*dataplaneScaleDwell)
	checkSimulationFitsLab(ctx, b, l, c)
	var extra []string
	if *dataplaneScaleProfile != "" {
		extra = append(extra, "--profiling")
	}
	as, a, z, podA, podZ := startDataPlaneMesh(ctx, b, l, c, ips, extra...)
	srv, err := podZ.Start("iperf3", "iperf3", "-s", "-p", iperfPort)
	if err != nil {
		b.Fatalf("start iperf3 server in %s: %v", podZ.Name, err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	p := dpPath{name: "kilofed", from: podA, ip: ips["echo-"+z.Name]}
	pids := []int{as[a.Name].Pid(), as[z.Name].Pid()}
	measure := func(b *testing.B) map[string][]float64 {
		got := map[string][]float64{}
		for i, pid := range pids {
			for field, u := range map[string]string{"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file"} {
				if mb, err := procStatusMB(pid, field); err == nil {
					got["idle-kg-"+"az"[i:i+1]+"-"+u+"-MB"] = []float64{mb}
				}
			}
		}
		if *dataplaneScaleProfile != "" {
			idleHeaps(ctx, b, l.LabBinary(), []*lab.Node{a, z}, *dataplaneScaleProfile)
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			if _, err := iperf(ctx, p, 1, 1); err == nil {
				break
			} else if time.Now().After(deadline) {
				b.Fatalf("warm-up: %v", err)
			}
		}
		for range *dataplaneRuns {
			for _, streams := range []int{1, 4} {
				sample := sampleRSS(pids)
				v, err := iperf(ctx, p, streams, *dataplaneSeconds)
				peak := sample()
				if err != nil {
					b.Fatalf("%d streams: %v", streams, err)
				}
				key := fmt.Sprintf("kilofed-%d-Mbps", streams)
				got[key] = append(got[key], v)
				if len(peak) == 2 {
					got["kg-a-rss-MB"] = append(got["kg-a-rss-MB"], peak[0])
					got["kg-z-rss-MB"] = append(got["kg-z-rss-MB"], peak[1])
				}
			}
		}
		for _, u := range slices.Sorted(maps.Keys(got)) {
			s := got[u]
			if len(s) == 1 || u == "kg-a-rss-MB" || u == "kg-z-rss-MB" {
				b.ReportMetric(slices.Max(s), u) // memory: the largest sample
				continue
			}
			b.ReportMetric(median(s), u)
			b.ReportMetric(slices.Min(s), "min:"+u)
			b.ReportMetric(slices.Max(s), "max:"+u)
		}
		if *dataplaneScaleProfile != "" {
			profileAgents(ctx, b, l.LabBinary(), []*lab.Node{a, z}, p, *dataplaneScaleProfile)
		}
		b.Logf("%s -> %s: kilofed 1 stream %.0f Mbit/s (%.0f-%.0f), 4 streams %.0f (%.0f-%.0f); kg VmRSS idle %.1f / %.1f MB, at full throughput %.1f / %.1f MB",
			a.Name, z.Name, median(got["kilofed-1-Mbps"]), slices.Min(got["kilofed-1-Mbps"]), slices.Max(got["kilofed-1-Mbps"]),
			median(got["kilofed-4-Mbps"]), slices.Min(got["kilofed-4-Mbps"]), slices.Max(got["kilofed-4-Mbps"]),
			first(got["idle-kg-a-rss-MB"]), first(got["idle-kg-z-rss-MB"]), maxOf(got["kg-a-rss-MB"]), maxOf(got["kg-z-rss-MB"]))
		return got
	}
	var base map[string][]float64
	b.Run("nodes=0", func(b *testing.B) { base = measure(b) })
	if base == nil {
		b.Fatal("nodes=0 measured nothing")
	}
	b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
		sim := startSimulatedNodes(ctx, b, c, n, locs, 0)
		sim.checkInTopology(ctx, b, c, as)
		b.ReportMetric(waitFirewallsSettled(ctx, b, as, sim.started, 3*time.Minute).Seconds(), "s/mesh-settled")
		if d := *dataplaneScaleDwell; d > 0 {
			b.Logf("the mesh with %d simulated nodes left idle for %s (-dataplanescale.dwell)", n, d)
			select {
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			case <-time.After(d):
			}
		}
		got := measure(b)
		sim.report(b)
		for _, s := range []string{"1", "4"} {
			u := "kilofed-" + s + "-Mbps"
			b.ReportMetric(median(got[u])/median(base[u]), "x-kilofed-"+s+"-vs-nodes=0")
		}
	})
}

// idleHeaps writes the heap profile of kg on each of nodes (a, then z) as
// text, with the runtime's memory statistics at its end (debug=1), before
// any traffic, to dir as kg-{a,z}-idleheap-<sub-benchmark>.txt.
func idleHeaps(ctx context.Context, b *testing.B, bin string, nodes []*lab.Node, dir string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	tag := strings.NewReplacer("/", "_", "=", "").Replace(b.Name())
	for i, n := range nodes {
		out, err := n.Exec(ctx, bin, "workload", "get", "--timeout", "30s", fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", lab.AgentHTTPPort))
		if err != nil {
			b.Fatalf("idle heap profile of kg on %s: %v", n.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("kg-%s-idleheap-%s.txt", "az"[i:i+1], tag)), out, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// profileAgents takes a 5 s CPU profile of kg on each of nodes (a, then z)
// during a 4-stream iperf3 run on p, then a heap profile, and writes them
// to dir as kg-{a,z}-{cpu,heap}-<sub-benchmark>.pprof.
func profileAgents(ctx context.Context, b *testing.B, bin string, nodes []*lab.Node, p dpPath, dir string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	tag := strings.NewReplacer("/", "_", "=", "").Replace(b.Name())
	get := func(n *lab.Node, path string) ([]byte, error) {
		return n.Exec(ctx, bin, "workload", "get", "--timeout", "30s", fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", lab.AgentHTTPPort, path))
	}
	type profile struct {
		out []byte
		err error
	}
	cpu := make([]chan profile, len(nodes))
	for i, n := range nodes {
		cpu[i] = make(chan profile, 1)
		go func() {
			out, err := get(n, "profile?seconds=5")
			cpu[i] <- profile{out, err}
		}()
	}
	if _, err := iperf(ctx, p, 4, 7); err != nil {
		b.Fatalf("profiled 4-stream run: %v", err)
	}
	for i, n := range nodes {
		got := <-cpu[i]
		heap, err := get(n, "heap")
		if got.err != nil || err != nil {
			b.Fatalf("profiles of kg on %s: %v, %v", n.Name, got.err, err)
		}
		for kind, data := range map[string][]byte{"cpu": got.out, "heap": heap} {
			f := filepath.Join(dir, fmt.Sprintf("kg-%s-%s-%s.pprof", "az"[i:i+1], kind, tag))
			if err := os.WriteFile(f, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("profiles of kg on %s and %s in %s", nodes[0].Name, nodes[1].Name, dir)
}

func first(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

func maxOf(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}
