package main

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestScaleBenchmarksRunOnceUnderTheLabLock: the simulated-agent benchmarks
// of mesh/agent/agentsim (docs/scale.md) are found, and run once each like
// the lab ones (they take their own rounds, minutes each), never with the
// cheap benchmarks' -count nor in --quick.
func TestScaleBenchmarksRunOnceUnderTheLabLock(t *testing.T) {
	pkgs, err := Discover(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range pkgs {
		if p.Path() == filepath.Join("mesh", "agent", "agentsim") {
			found = p.Names
		}
	}
	want := []string{"BenchmarkAPILoad", "BenchmarkAgentIn1000NodeCluster"}
	for _, n := range want {
		if !slices.Contains(found, n) {
			t.Errorf("Discover: mesh/agent/agentsim has %v, want %s", found, n)
		}
	}
	cheap, slow := splitOnce(found)
	if len(cheap) != 0 || !slices.Equal(slow, want) {
		t.Errorf("splitOnce(%v) = cheap %v, once %v; want every one once", found, cheap, slow)
	}
}
