//go:build linux

package examples

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab"
)

// sovereignLab is examples/sovereign-hybrid's cluster: a public cloud
// location and a French datacenter behind NAT, two nodes each, with
// kube-proxy and CoreDNS.
func sovereignLab() lab.Spec {
	return lab.Spec{KubeProxy: true, CoreDNS: true, Clusters: []lab.ClusterSpec{{
		Name: "sov",
		Locations: []lab.LocationSpec{
			{Name: "cloud", Nodes: []lab.NodeSpec{{Name: "cloud-1"}, {Name: "cloud-2"}}},
			{Name: "fr-dc", NAT: true, Nodes: []lab.NodeSpec{{Name: "fr-dc-1"}, {Name: "fr-dc-2"}}},
		},
	}}}
}

// TestSovereignHybridExampleSchedulerKeepsSensitivePodsOnPremisesAndOthersOff
// runs examples/sovereign-hybrid/README.md: nodes labelled, annotated and
// tainted by nodes.sh, kg on every node, then the seed's patient-data
// Deployment (nodeSelector kilo.squat.ai/location=on-premise-fr and the
// sovereignty=fr toleration) placed by the real kube-scheduler only on the
// on-premises nodes, the untolerated frontend only on the cloud nodes, a
// pod pinned there without the toleration left Pending (the scheduler
// saying the two matching nodes have an untolerated taint), and the frontend answered by patient-data over the mesh through
// its Service name.
func TestSovereignHybridExampleSchedulerKeepsSensitivePodsOnPremisesAndOthersOff(t *testing.T) {
	begin := time.Now()
	l := lab.StartT(t, sovereignLab())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := l.Cluster("sov")

	if out, err := shell(ctx, l, c.Kubeconfig, example(t, "sovereign-hybrid", "nodes.sh")); err != nil {
		t.Fatalf("nodes.sh: %v\n%s", err, out)
	}
	startMesh(t, c)
	for _, f := range []string{"patient-data-service.yaml", "frontend.yaml", "untolerated.yaml"} {
		c.KubectlT(ctx, t, "apply", "-f", example(t, "sovereign-hybrid", f))
	}
	if _, err := c.WaitPods(ctx, "default", "app=patient-data-service", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPods(ctx, "default", "app=frontend", 4); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get pods -o wide\n%s", c.KubectlT(ctx, t, "get", "pods", "-o", "wide"))

	onPrem := map[string]bool{"fr-dc-1": true, "fr-dc-2": true}
	checkPlacement := func() {
		t.Helper()
		pods, err := c.Client().CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			switch app := p.Labels["app"]; app {
			case "patient-data-service":
				if !onPrem[p.Spec.NodeName] {
					t.Errorf("pod %s of patient-data-service runs on %q, want an on-premise-fr node", p.Name, p.Spec.NodeName)
				}
			case "frontend":
				if onPrem[p.Spec.NodeName] || p.Spec.NodeName == "" {
					t.Errorf("pod %s of frontend runs on %q, want a public-cloud node", p.Name, p.Spec.NodeName)
				}
			case "patient-data-untolerated":
				if p.Spec.NodeName != "" {
					t.Errorf("pod %s without the toleration was bound to %s", p.Name, p.Spec.NodeName)
				}
			default:
				t.Errorf("unexpected pod %s (app %q)", p.Name, app)
			}
		}
	}
	checkPlacement()

	// The untolerated pod: Unschedulable, the scheduler naming the taint.
	var reason string
	if _, err := eventually(ctx, 30*time.Second, func() error {
		p, err := c.Client().CoreV1().Pods("default").Get(ctx, "patient-data-untolerated", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				reason = cond.Message
				// "0/4 nodes are available: 2 node(s) didn't match Pod's node
				// affinity/selector, 2 node(s) had untolerated taint(s)": the
				// two nodes that match are the tainted ones.
				if strings.Contains(reason, "2 node(s) had untolerated taint") && strings.Contains(reason, "2 node(s) didn't match Pod's node affinity/selector") {
					return nil
				}
			}
		}
		return fmt.Errorf("pod patient-data-untolerated is %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("patient-data-untolerated: Pending, %s", reason)

	// The frontend calls patient-data by its Service name; the answer
	// comes from an on-premises pod through the tunnel.
	var got []string
	took, err := eventually(ctx, 60*time.Second, func() error {
		var err error
		got, err = curl(ctx, c, "default", "deploy/frontend", "http://patient-data:8080/")
		if err == nil && (!strings.HasPrefix(got[0], "patient-data-service-") || len(got) < 3 || !onPrem[got[2]]) {
			err = fmt.Errorf("answered %q, want a patient-data-service pod on premises", got)
		}
		return err
	})
	if err != nil {
		t.Fatalf("kubectl exec deploy/frontend -- curl http://patient-data:8080/: %v", err)
	}
	t.Logf("kubectl exec deploy/frontend -- curl -s http://patient-data:8080/: %s after %v", strings.Join(got, " "), took.Round(time.Millisecond))

	// Still nowhere, once the scheduler has seen every node again.
	checkPlacement()
	t.Logf("total %v", time.Since(begin).Round(time.Millisecond))
}
