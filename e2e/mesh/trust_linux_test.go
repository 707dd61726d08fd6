//go:build linux

package mesh

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
)

// trustLab is one location of three nodes: enough for an agent, a victim
// and a node to delete.
func trustLab() lab.Spec {
	return lab.Spec{Clusters: []lab.ClusterSpec{{
		Name:      "trust",
		Locations: []lab.LocationSpec{{Name: "paris", Nodes: []lab.NodeSpec{{Name: "par-1"}, {Name: "par-2"}, {Name: "par-3"}}}},
	}}}
}

// TestMeshAgentWritesOnlyItsOwnNode runs kg as the lab runs it (the mesh's
// RBAC and admission policy installed, a ServiceAccount token bound to its
// node) and checks that: every agent publishes its node and, with
// node-leases, heartbeats in the kilo-leases namespace, each Lease owned
// by its Node, which the garbage collector deletes with its Node (with the
// location election, paris's election Lease is held by the node that
// publishes the lead); with par-1's agent token, no write to another
// node's annotations, to any label or taint, to another node's Lease or
// lead, or to a location election Lease but as its holder gets through,
// while par-1's own annotations, lead and Lease do.
func TestMeshAgentWritesOnlyItsOwnNode(t *testing.T) {
	l := lab.StartT(t, trustLab())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	c := l.Cluster("trust")
	admin := c.Client()
	as := startMesh(t, c, meshOptions{})

	// Every agent works under the policy: its key published and, with
	// --leader-election=node-leases, its Lease renewed in kilo-leases and
	// owned by its Node; with location (kg's default), paris's election
	// Lease held by the node that publishes its lead, and no node Lease.
	for _, n := range c.Nodes() {
		waitFor(ctx, t, 60*time.Second, n.Name+" publishes its key", func() bool {
			node, err := admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err == nil && node.Annotations[k8s.KeyAnnotation] != ""
		})
	}
	nodeLeases := false
	waitFor(ctx, t, 60*time.Second, "paris elects its leader (a location election Lease, or every node's heartbeat Lease)", func() bool {
		loc, err := admin.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).Get(ctx, k8s.LocationLeaseName("paris"), metav1.GetOptions{})
		if err == nil && loc.Spec.HolderIdentity != nil {
			node, err := admin.CoreV1().Nodes().Get(ctx, *loc.Spec.HolderIdentity, metav1.GetOptions{})
			return err == nil && strings.HasSuffix(node.Annotations[k8s.LeadsAnnotation], ":paris")
		}
		for _, n := range c.Nodes() {
			node, err := admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			lease, err := admin.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).Get(ctx, k8s.LeaseName(n.Name), metav1.GetOptions{})
			if err != nil {
				return false
			}
			owners := lease.OwnerReferences
			if len(owners) != 1 || owners[0].Kind != "Node" || owners[0].Name != n.Name || owners[0].UID != node.UID {
				return false
			}
		}
		nodeLeases = true
		return true
	})
	if leases, err := admin.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: k8s.LeaseLabel}); err != nil || len(leases.Items) != 0 {
		t.Errorf("heartbeat Leases in kube-system: %v, %v; want none", leases, err)
	}
	if !nodeLeases {
		if leases, err := admin.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: k8s.LeaseLabel}); err != nil || len(leases.Items) != 0 {
			t.Errorf("heartbeat Leases with the location election: %v, %v; want none", leases, err)
		}
	}

	if nodeLeases {
		t.Run("a Lease goes with its Node", func(t *testing.T) {
			if err := as["par-3"].Kill(); err != nil { // no release: the Lease stays
				t.Fatal(err)
			}
			if err := admin.CoreV1().Nodes().Delete(ctx, "par-3", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(ctx, t, 60*time.Second, "the garbage collector deletes kilo-par-3", func() bool {
				_, err := admin.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).Get(ctx, k8s.LeaseName("par-3"), metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			})
		})
	}

	// The attacks, with the token kg runs with on par-1, its agents stopped
	// so that they do not rewrite what the cases write.
	for _, name := range []string{"par-1", "par-2"} {
		if err := as[name].Stop(); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig, err := c.Node("par-1").AgentKubeconfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.BearerToken, "ey") {
		t.Fatalf("the agent's kubeconfig %s has no ServiceAccount token", kubeconfig)
	}
	k8stest.CheckTrust(t, ctx, admin, kubernetes.NewForConfigOrDie(cfg), "par-1", "par-2")
}

// waitFor polls cond every 200 ms until it holds, failing t after within.
func waitFor(ctx context.Context, t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}
