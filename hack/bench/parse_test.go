package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseReadsCustomMetricsAndFailures(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/kilofed/kilofed/mesh/topology
cpu: some CPU
BenchmarkHostWork/nodes=10/locations=1/granularity=location/alips=false-2         	   52311	     22870 ns/op	     21446 cpu-ns/op	   13720 B/op	     110 allocs/op
BenchmarkHostWork/nodes=10/locations=1/granularity=location/alips=false-2         	   50000	     23000 ns/op	     21000 cpu-ns/op	   13720 B/op	     110 allocs/op
PASS
ok  	github.com/kilofed/kilofed/mesh/topology	12.3s
pkg: github.com/kilofed/kilofed/e2e/mesh
BenchmarkLeaderFailover-2   	       1	12345678901 ns/op	         2.861 s/failover
    mesh_linux_test.go:260: failover (kill): 2.861s
BenchmarkDataPlaneTCP 	       1	60000000000 ns/op	       812.5 kilofed-1-Mbps	       790.0 min:kilofed-1-Mbps	       840 max:kilofed-1-Mbps
--- FAIL: BenchmarkKeyRotation
    rotate_linux_test.go:140: boom
FAIL
FAIL	github.com/kilofed/kilofed/e2e/mesh	90.1s
`
	results, failures := Parse(strings.NewReader(out), "unknown")
	topo := "github.com/kilofed/kilofed/mesh/topology"
	e2e := "github.com/kilofed/kilofed/e2e/mesh"
	name := "BenchmarkHostWork/nodes=10/locations=1/granularity=location/alips=false"
	want := []Result{
		{Package: topo, Name: name, Iterations: 52311, Metrics: map[string]float64{"ns/op": 22870, "cpu-ns/op": 21446, "B/op": 13720, "allocs/op": 110}},
		{Package: topo, Name: name, Iterations: 50000, Metrics: map[string]float64{"ns/op": 23000, "cpu-ns/op": 21000, "B/op": 13720, "allocs/op": 110}},
		{Package: e2e, Name: "BenchmarkLeaderFailover", Iterations: 1, Metrics: map[string]float64{"ns/op": 12345678901, "s/failover": 2.861}},
		{Package: e2e, Name: "BenchmarkDataPlaneTCP", Iterations: 1, Metrics: map[string]float64{"ns/op": 60000000000, "kilofed-1-Mbps": 812.5, "min:kilofed-1-Mbps": 790, "max:kilofed-1-Mbps": 840}},
	}
	if diff := cmp.Diff(want, results); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	wantFail := []Failure{{Package: e2e, Name: "BenchmarkKeyRotation"}, {Package: e2e}}
	if diff := cmp.Diff(wantFail, failures); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
}
