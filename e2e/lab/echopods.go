package lab

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EchoPodsT creates one HTTP echo pod per node of c in namespace default,
// named echo-<node> and labelled app=echo, waits until they run, and
// returns their IPs by pod name. A failure fails t.
func EchoPodsT(ctx context.Context, t testing.TB, c *Cluster) map[string]string {
	t.Helper()
	for _, n := range c.Nodes() {
		pod := EchoPod("default", "echo-"+n.Name, "echo", n.Name)
		if _, err := c.Client().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cluster %s: create pod %s: %v", c.Name, pod.Name, err)
		}
	}
	pods, err := c.WaitPods(ctx, "default", "app=echo", len(c.Nodes()))
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	for _, p := range pods {
		ips[p.Name] = p.Status.PodIP
	}
	return ips
}
