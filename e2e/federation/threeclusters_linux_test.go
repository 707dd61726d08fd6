//go:build linux

package federation

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/federation/cli"
)

// threeClusters are three clusters of one public location of one node
// each, with the lab's disjoint default ranges (pods 10.10, 10.11, 10.12/16).
func threeClusters() lab.Spec {
	one := func(cluster, loc string) lab.ClusterSpec {
		return lab.ClusterSpec{Name: cluster, Locations: []lab.LocationSpec{{Name: loc, Nodes: []lab.NodeSpec{{Name: cluster + "-1"}}}}}
	}
	return lab.Spec{Clusters: []lab.ClusterSpec{one("paris", "scaleway-par"), one("gra", "ovh-gra"), one("sgp", "aws-sgp")}}
}

// TestFederationOfThreeClustersIsAFullMesh joins each pair of three
// clusters with the CLI; then every cluster's pods reach every other
// cluster's, and each cluster's status shows the two others up.
func TestFederationOfThreeClustersIsAFullMesh(t *testing.T) {
	l := lab.StartT(t, threeClusters())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	kubeconfig, err := l.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	f := &fed{l: l, kubeconfig: kubeconfig, agents: map[string]agents{}, ctls: map[string]*lab.Process{}, ips: map[string]map[string]string{}}
	names := []string{"paris", "gra", "sgp"}
	for _, name := range names {
		c := l.Cluster(name)
		installCRDs(ctx, t, c)
		f.ips[name] = lab.EchoPodsT(ctx, t, c)
		f.agents[name] = startMesh(t, c)
		f.ctls[name] = startController(t, l, c, "127.0.0.1:0")
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, p := range f.ctls {
				t.Logf("kilofed-controller of %s, last lines:\n%s", name, p.Tail(40))
			}
		}
	})
	for _, pair := range [][2]string{{"paris", "gra"}, {"paris", "sgp"}, {"gra", "sgp"}} {
		out, err := f.kilofed(ctx, pair[0], "join", pair[1], "--wait=2m")
		t.Logf("kilofed --context %s join %s:\n%s", pair[0], pair[1], out)
		if err != nil {
			t.Fatalf("join %s %s: %v", pair[0], pair[1], err)
		}
	}
	for _, from := range names {
		for _, to := range names {
			if from == to {
				continue
			}
			src, dst := "echo-"+from+"-1", "echo-"+to+"-1"
			if got, err := answer(ctx, l, l.Cluster(from), src, f.ips[to][dst], dst, to, 60*time.Second); err != nil {
				t.Errorf("%s/%s -> %s/%s: %v (%q)", from, src, to, dst, err, got)
			}
		}
	}
	for _, here := range names {
		var st cli.Status
		var js string
		up := 0
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && up != 2; time.Sleep(time.Second) {
			out, err := f.kilofed(ctx, here, "status", "-o", "json")
			if err != nil {
				t.Fatalf("kilofed --context %s status -o json: %v\n%s", here, err, out)
			}
			js, st, up = out, cli.Status{}, 0
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("status does not decode: %v\n%s", err, out)
			}
			for _, c := range st.Clusters {
				if !c.Local && c.State == "up" {
					up++
				}
			}
		}
		if len(st.Clusters) != 3 || up != 2 {
			t.Errorf("kilofed --context %s status shows %d clusters, %d remote ones up; want 3 and 2:\n%s", here, len(st.Clusters), up, js)
		}
	}
}
