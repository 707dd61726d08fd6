package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAggregateTakesMediansSpreadsAndPeers(t *testing.T) {
	const lab, cheap = "e2e/mesh", "mesh/topology"
	results := []Result{
		{Package: cheap, Name: "BenchmarkHostWork/nodes=10", Metrics: map[string]float64{"ns/op": 30, "allocs/op": 5}},
		{Package: cheap, Name: "BenchmarkHostWork/nodes=10", Metrics: map[string]float64{"ns/op": 10, "allocs/op": 5}},
		{Package: cheap, Name: "BenchmarkHostWork/nodes=10", Metrics: map[string]float64{"ns/op": 20, "allocs/op": 5}},
		{Package: lab, Name: "BenchmarkDataPlaneTCP", Metrics: map[string]float64{
			"ns/op": 6e10, "kilofed-1-Mbps": 800, "min:kilofed-1-Mbps": 700, "max:kilofed-1-Mbps": 900,
			"stock-pod-1-Mbps": 400, "min:stock-pod-1-Mbps": 390, "max:stock-pod-1-Mbps": 410}},
		{Package: lab, Name: "BenchmarkLeaderFailover", Metrics: map[string]float64{"ns/op": 2e10, "s/failover": 2.5}},
	}
	got := Aggregate(results, map[string]bool{lab: true})
	want := []Figure{
		{Figure: "HostWork/nodes=10 ns/op", Package: cheap, Benchmark: "BenchmarkHostWork/nodes=10", Unit: "ns/op",
			Kilofed: Stat{Median: 20, Min: 10, Max: 30, Values: []float64{30, 10, 20}}},
		{Figure: "HostWork/nodes=10 allocs/op", Package: cheap, Benchmark: "BenchmarkHostWork/nodes=10", Unit: "allocs/op",
			Kilofed: Stat{Median: 5, Min: 5, Max: 5, Values: []float64{5, 5, 5}}},
		{Figure: "TCP pod -> pod across locations, 1 stream (Mbit/s)", Package: lab, Benchmark: "BenchmarkDataPlaneTCP", Unit: "kilofed-1-Mbps",
			Kilofed: Stat{Median: 800, Min: 700, Max: 900, Values: []float64{800}}, PeerName: "stock wireguard-go, pod -> pod",
			Peer: &Stat{Median: 400, Min: 390, Max: 410, Values: []float64{400}}, Ratio: 2},
		{Figure: "leader killed -> traffic into its location restored (s)", Package: lab, Benchmark: "BenchmarkLeaderFailover", Unit: "s/failover",
			Kilofed: Stat{Median: 2.5, Min: 2.5, Max: 2.5, Values: []float64{2.5}}, PeerName: "Kilo 944dff5", PeerRef: "58-65 (issue 9, not re-measured)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	table := Table(append(got, Figure{Figure: "HostWork/nodes=10 B/op", Unit: "B/op", Kilofed: Stat{Values: []float64{1}}}))
	if strings.Contains(table, "B/op") {
		t.Errorf("the table has a B/op row (only the JSON keeps them):\n%s", table)
	}
	for _, row := range []string{
		"| HostWork/nodes=10 ns/op | 20 |  |  | 10-30, n=3 |",
		"| TCP pod -> pod across locations, 1 stream (Mbit/s) | 800 | 400, 390-410 (stock wireguard-go, pod -> pod) | 2.00x | 700-900, n=1 |",
		"| leader killed -> traffic into its location restored (s) | 2.50 | 58-65 (issue 9, not re-measured) (Kilo 944dff5) |  | 2.50-2.50, n=1 |",
	} {
		if !strings.Contains(table, row+"\n") {
			t.Errorf("table lacks the row\n%s\n%s", row, table)
		}
	}
}

func TestDiscoverFindsTheRepositorysBenchmarks(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Package{}
	for _, p := range pkgs {
		got[p.Path()] = p
	}
	for path, want := range map[string]struct {
		module, name string
		lab          bool
	}{
		"mesh/topology": {"mesh", "BenchmarkHostWork", false},
		"e2e/mesh":      {".", "BenchmarkLeaderFailover", true},
		"hack/bench":    {".", "", false},
	} {
		p, ok := got[path]
		if want.name == "" {
			if ok {
				t.Errorf("%s has no benchmark, Discover lists it: %+v", path, p)
			}
			continue
		}
		if !ok || p.Module != want.module || p.Lab != want.lab || !strings.Contains(strings.Join(p.Names, " "), want.name) {
			t.Errorf("%s: got %+v (listed: %v), want module %s, lab %v, with %s", path, p, ok, want.module, want.lab, want.name)
		}
	}
}

// TestOnceBenchmarksRunOnceAndKeepTheirFigures: the benchmarks of once run
// apart from the cheap ones of their package, and, like a lab benchmark,
// their ns/op (the whole set-up) is left out of the figures, while the
// cheap benchmark of the same package keeps its own.
func TestOnceBenchmarksRunOnceAndKeepTheirFigures(t *testing.T) {
	cheap, slow := splitOnce([]string{"BenchmarkDNSAgainstCoreDNS", "BenchmarkServerQueriesPerSecond"})
	if !cmp.Equal(cheap, []string{"BenchmarkServerQueriesPerSecond"}) || !cmp.Equal(slow, []string{"BenchmarkDNSAgainstCoreDNS"}) {
		t.Errorf("splitOnce = %v, %v", cheap, slow)
	}
	const pkg = "github.com/kilofed/kilofed/dns/server"
	results := []Result{
		{Package: pkg, Name: "BenchmarkServerQueriesPerSecond", Metrics: map[string]float64{"ns/op": 40000, "queries/s": 25000}},
		{Package: pkg, Name: "BenchmarkDNSAgainstCoreDNS", Metrics: map[string]float64{"ns/op": 6e10, "kilofed-qps": 40000, "coredns-qps": 20000}},
	}
	var got []string
	for _, f := range Aggregate(results, map[string]bool{pkg + ".BenchmarkDNSAgainstCoreDNS": true}) {
		got = append(got, fmt.Sprintf("%s %s %g", f.Benchmark, f.Unit, f.Ratio))
	}
	want := []string{
		"BenchmarkServerQueriesPerSecond ns/op 0",
		"BenchmarkServerQueriesPerSecond queries/s 0",
		"BenchmarkDNSAgainstCoreDNS kilofed-qps 2",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("figures (-want +got):\n%s", d)
	}
}
