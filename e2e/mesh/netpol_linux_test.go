//go:build linux

package mesh

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// TestMeshNetworkPolicyDeniesCrossLocationTraffic runs a real
// NetworkPolicy enforcer (kube-router's firewall controller, nothing else
// of it) on every node with kg's default flags, then guards one pod with a
// NetworkPolicy that admits only its own location's pods: pods of the
// other locations are refused through the mesh, its location's pod still
// gets in, and the rest of the mesh is untouched. That is the seed's
// advice: NetworkPolicy on top of the mesh.
func TestMeshNetworkPolicyDeniesCrossLocationTraffic(t *testing.T) {
	ctx, l, c, ips := startMetaCloud(t, metaCloud(), 8*time.Minute)
	startEnforcers(t, l, c)
	startMesh(t, c, meshOptions{granularity: "location", encapsulate: "always"})
	checkAllPairs(ctx, t, l, c, ips, 60*time.Second)
	if t.Failed() {
		return
	}

	guarded := "echo-scw-1"
	c.KubectlT(ctx, t, "label", "pod", guarded, "guarded=true")
	var from []networkingv1.NetworkPolicyPeer
	for _, n := range c.Location("scaleway-paris").Nodes() {
		for _, p := range n.PodCIDRs() {
			from = append(from, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: p.String()}})
		}
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "only-scaleway"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"guarded": "true"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: from}},
		},
	}
	if _, err := c.Client().NetworkingV1().NetworkPolicies("default").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The enforcer needs a moment to apply the policy: wait until the
	// first outsider is refused, then check every pair once.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := probe(ctx, l, c, "echo-aws-1", ips[guarded], time.Second); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo-aws-1 still reaches %s 30 s after a NetworkPolicy admitting only scaleway-paris's pods", guarded)
		}
		time.Sleep(500 * time.Millisecond) // polls the enforcer
	}
	for _, outsider := range []string{"echo-aws-1", "echo-aws-2", "echo-dc-1", "echo-dc-2"} {
		if got, err := probe(ctx, l, c, outsider, ips[guarded], 2*time.Second); err == nil {
			t.Errorf("%s (another location) reached %s (%q) despite the NetworkPolicy", outsider, guarded, got)
		}
	}
	if got, err := get(ctx, l, c, "echo-scw-2", ips[guarded], 10*time.Second); err != nil {
		t.Errorf("echo-scw-2 (same location) -> %s: %v (%q), want admitted", guarded, err, got)
	}
	rest := map[string]string{}
	for name, ip := range ips {
		if name != guarded {
			rest[name] = ip
		}
	}
	checkAllPairs(ctx, t, l, c, rest, 10*time.Second)
}

// startEnforcers runs kube-router's NetworkPolicy controller alone (no
// routing, no service proxy, no CNI, no health or metrics port) in every
// node's namespace, and waits until each has put its FORWARD chain in.
func startEnforcers(t *testing.T, l *lab.Lab, c *lab.Cluster) {
	t.Helper()
	bin := filepath.Join(l.Bins(), "kube-router")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kube-router, the lab's NetworkPolicy enforcer, is missing (run e2e/labbins/build.sh): %v", err)
	}
	var procs []*lab.Process
	for _, n := range c.Nodes() {
		p, err := n.Start("kube-router", bin,
			"--kubeconfig="+c.Kubeconfig, "--hostname-override="+n.Name,
			"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
			"--service-cluster-ip-range="+c.ServiceCIDR.String(),
			"--health-port=0", "--metrics-port=0", "--v=1")
		if err != nil {
			t.Fatalf("start kube-router on %s: %v", n.Name, err)
		}
		procs = append(procs, p)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("kube-router on %s, last lines:\n%s", n.Name, p.Tail(30))
			}
			_ = p.Stop()
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, n := range c.Nodes() {
		for {
			if _, err := n.Exec(context.Background(), "iptables", "-w", "-S", "KUBE-ROUTER-FORWARD"); err == nil {
				break
			}
			select {
			case <-procs[i].Done():
				t.Fatalf("kube-router on %s exited: %v\n%s", n.Name, procs[i].Err(), procs[i].Tail(30))
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("kube-router on %s made no KUBE-ROUTER-FORWARD chain in 60 s:\n%s", n.Name, procs[i].Tail(30))
			}
			time.Sleep(300 * time.Millisecond) // polls iptables
		}
	}
}
