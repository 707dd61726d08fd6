package topology

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// hostWork is what BenchmarkHostWork computes, as text to compare.
func hostWork(top *Topology) string {
	c, err := top.WireGuardConfig("node-00000", wgconf.SecretKey{})
	routes, rules := top.Routes("node-00000")
	return fmt.Sprint(top.DOT(), c, err, routes, rules, top.Problems)
}

// TestConcurrentCallsShareNoWorkingMemory runs New, WireGuardConfig and
// Routes on clusters of different sizes in parallel goroutines, and checks
// every result against the one computed alone, and the topologies computed
// first against what they gave before the others ran: the pooled working
// memory (scratch.go) must never be shared by two calls nor end up in a
// result.
func TestConcurrentCallsShareNoWorkingMemory(t *testing.T) {
	type input struct {
		nodes []Node
		peers []Peer
		opts  Options
	}
	var inputs []input
	for _, n := range []int{3, 10, 100, 300} {
		for _, g := range []Granularity{LocationGranularity, FullGranularity} {
			nodes, peers := benchCluster(n, min(n, 10), n%2 == 0)
			for j := range peers { // peers of their own, unlike benchCluster's
				peers[j].Name = fmt.Sprintf("%s-%d", peers[j].Name, len(inputs))
				peers[j].PublicKey = wgconf.Key(sha256.Sum256([]byte(peers[j].Name)))
			}
			inputs = append(inputs, input{nodes, peers, Options{Granularity: g}})
		}
	}
	tops := make([]*Topology, len(inputs))
	want := make([]string, len(inputs))
	for i, in := range inputs {
		tops[i] = mustNew(t, in.nodes, in.peers, in.opts)
		want[i] = hostWork(tops[i])
	}
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				top, err := New(in.nodes, in.peers, in.opts)
				if err != nil {
					t.Error(err)
					return
				}
				if got := hostWork(top); got != want[i] {
					t.Errorf("input %d: a concurrent call differs from the one alone:\n%s", i, cmp.Diff(want[i], got))
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, top := range tops {
		if got := hostWork(top); got != want[i] {
			t.Errorf("input %d: the topology computed first changed while others were computed:\n%s", i, cmp.Diff(want[i], got))
		}
	}
}
