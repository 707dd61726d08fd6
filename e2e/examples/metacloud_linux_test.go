//go:build linux

package examples

import (
	"context"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// metaCloudLab is examples/meta-cloud's cluster: one cluster over three
// providers, each a LAN of two nodes. The lab's region labels are the
// providers' own region names (fr-par, eu-west-3, on-prem); the example's
// annotations give kg the seed's location names instead. The on-premises
// datacenter sits behind NAT.
func metaCloudLab() lab.Spec {
	return lab.Spec{Clusters: []lab.ClusterSpec{{
		Name: "meta",
		Locations: []lab.LocationSpec{
			{Name: "fr-par", Nodes: []lab.NodeSpec{{Name: "scw-1"}, {Name: "scw-2"}}},
			{Name: "eu-west-3", Nodes: []lab.NodeSpec{{Name: "aws-1"}, {Name: "aws-2"}}},
			{Name: "on-prem", NAT: true, Nodes: []lab.NodeSpec{{Name: "dc-1"}, {Name: "dc-2"}}},
		},
	}}}
}

// seedLocations are the locations examples/meta-cloud/annotate-nodes.sh
// gives, by node-name prefix.
var seedLocations = map[string]string{"scw": "scaleway-paris", "aws": "aws-euwest3", "dc": "lyon-dc"}

// TestMetaCloudExamplePodsOfThreeProvidersReachEachOtherOverWireGuard runs
// examples/meta-cloud/README.md: the seed's annotation loops and
// force-endpoint and leader annotation on scw-1, kg on every node, the mesh-check DaemonSet, then from a
// pod of every location `curl` to a pod of every other location (answered
// by that pod), the leaders' handshakes with the two other locations
// (scw-1 reached at its forced endpoint), and `kilofed graph -o svg`
// naming the three locations.
func TestMetaCloudExamplePodsOfThreeProvidersReachEachOtherOverWireGuard(t *testing.T) {
	begin := time.Now()
	l := lab.StartT(t, metaCloudLab())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := l.Cluster("meta")
	kubeconfig := c.Kubeconfig

	// Step 1: annotate the nodes (the seed's loops); scw-1 is Scaleway's
	// gateway, reached at its public address.
	if out, err := shell(ctx, l, kubeconfig, example(t, "meta-cloud", "annotate-nodes.sh")); err != nil {
		t.Fatalf("annotate-nodes.sh: %v\n%s", err, out)
	}
	scw1 := c.Node("scw-1").PublicIP.String()
	forced := scw1 + ":51820"
	for _, cmd := range []string{
		`kubectl annotate node scw-1 kilo.squat.ai/force-endpoint="$SCW_1_PUBLIC_IP:51820"`,
		`kubectl annotate node scw-1 kilo.squat.ai/leader="true"`,
	} {
		if out, err := shell(ctx, l, kubeconfig, cmd, "SCW_1_PUBLIC_IP="+scw1); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}
	for _, n := range c.Nodes() {
		prefix, _, _ := strings.Cut(n.Name, "-")
		got := c.KubectlT(ctx, t, "get", "node", n.Name, "-o", `jsonpath={.metadata.annotations.kilo\.squat\.ai/location}`)
		if got != seedLocations[prefix] {
			t.Fatalf("node %s has kilo.squat.ai/location %q, want %q", n.Name, got, seedLocations[prefix])
		}
	}

	// Step 2: kilofed on every node (the lab runs kg as a process per node).
	as := startMesh(t, c)

	// Step 3: the DaemonSet.
	c.KubectlT(ctx, t, "apply", "-f", example(t, "meta-cloud", "mesh-check.yaml"))
	pods, err := c.WaitPods(ctx, "default", "app=mesh-check", len(c.Nodes()))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get pods -l app=mesh-check -o wide\n%s", c.KubectlT(ctx, t, "get", "pods", "-l", "app=mesh-check", "-o", "wide"))
	byLocation := map[string][]podAt{}
	for _, p := range pods {
		prefix, _, _ := strings.Cut(p.Spec.NodeName, "-")
		loc := seedLocations[prefix]
		byLocation[loc] = append(byLocation[loc], podAt{name: p.Name, ip: p.Status.PodIP, node: p.Spec.NodeName})
	}
	if len(byLocation) != 3 {
		t.Fatalf("mesh-check pods in %d locations, want 3: %v", len(byLocation), byLocation)
	}

	// Step 4: every location's pods reach every other location's pods.
	for from, fromPods := range byLocation {
		for to, toPods := range byLocation {
			if from == to {
				continue
			}
			src, dst := fromPods[0], toPods[len(toPods)-1]
			url := "http://" + dst.ip + ":8080/hostname"
			var got []string
			took, err := eventually(ctx, 60*time.Second, func() error {
				var err error
				got, err = curl(ctx, c, "default", src.name, url)
				if err == nil && got[0] != dst.name {
					err = fmt.Errorf("answered by %q, want %s", got, dst.name)
				}
				return err
			})
			if err != nil {
				t.Errorf("%s (%s) -> %s (%s): %v", src.name, from, dst.name, to, err)
				continue
			}
			t.Logf("kubectl exec %s -- curl -s %s  (%s -> %s): %s after %v", src.name, url, from, to, strings.Join(got, " "), took.Round(time.Millisecond))
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Step 5: one leader per location, with a recent handshake with each
	// of the two other locations; the others reach scw-1 at the forced
	// endpoint.
	leaders := map[string]string{}
	for _, n := range c.Nodes() {
		hs, err := handshakes(ctx, as[n.Name])
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 0 {
			continue
		}
		prefix, _, _ := strings.Cut(n.Name, "-")
		loc := seedLocations[prefix]
		if other, ok := leaders[loc]; ok {
			t.Errorf("location %s has two nodes with WireGuard peers: %s and %s", loc, other, n.Name)
		}
		leaders[loc] = n.Name
		if len(hs) != 2 {
			t.Errorf("leader %s of %s has %d WireGuard peers, want 2 (the other locations)", n.Name, loc, len(hs))
		}
		for key, age := range hs {
			if age < 0 || age > 3*time.Minute {
				t.Errorf("leader %s of %s: peer %s latest handshake %v ago", n.Name, loc, key, age)
			}
		}
		if loc != "scaleway-paris" {
			out, err := as[n.Name].NsEnter(ctx, "wg", "show", lab.AgentLink, "endpoints")
			if err != nil || !strings.Contains(string(out), forced) {
				t.Errorf("wg show kilo0 endpoints on %s = %q, %v; want scw-1's forced endpoint %s", n.Name, out, err, forced)
			}
		}
	}
	if len(leaders) != 3 || leaders["scaleway-paris"] != "scw-1" {
		t.Errorf("leaders %v, want one per location, scw-1 for scaleway-paris", leaders)
	}
	if show, err := as[leaders["aws-euwest3"]].NsEnter(ctx, "wg", "show"); err == nil {
		t.Logf("wg show on %s (leader of aws-euwest3)\n%s", leaders["aws-euwest3"], show)
	}

	// Step 6: the topology as SVG, both ways the README gives.
	dir := t.TempDir()
	for _, cmd := range []string{
		"kilofed graph -o svg > mesh-topology.svg",
		"kgctl graph | dot -Tsvg > mesh-topology-kgctl.svg",
	} {
		if out, err := shell(ctx, l, kubeconfig, "cd "+dir+" && "+cmd); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}
	for _, f := range []string{"mesh-topology.svg", "mesh-topology-kgctl.svg"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		// Graphviz writes "-" in text as "&#45;".
		svg := html.UnescapeString(string(raw))
		if !strings.Contains(svg, "<svg") {
			t.Errorf("%s is not an SVG:\n%.300s", f, svg)
		}
		for _, loc := range []string{"scaleway-paris", "aws-euwest3", "lyon-dc"} {
			if !strings.Contains(svg, loc) {
				t.Errorf("%s does not name location %s", f, loc)
			}
		}
		for _, region := range []string{"fr-par", "eu-west-3", "on-prem"} {
			if strings.Contains(svg, ">"+region+"<") {
				t.Errorf("%s names the region label %s: the annotation should win", f, region)
			}
		}
	}
	t.Logf("total %v", time.Since(begin).Round(time.Millisecond))
}

// podAt is a pod with its IP and node.
type podAt struct{ name, ip, node string }
