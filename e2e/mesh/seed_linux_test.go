//go:build linux

package mesh

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// TestChineseSeedFlowAcrossLocations runs section 3 of the Chinese seed on
// the lab: two nodes labelled with their regions, kg started with the
// article's DaemonSet args, the two test pods from `kubectl run`, and the
// cross-location ping through `kubectl exec`; then the article's
// troubleshooting checklist: `wg show` on the leader (one tunnel per other
// location) and `ip route get <pod IP>` pointing at kilo0.
func TestChineseSeedFlowAcrossLocations(t *testing.T) {
	l := lab.StartT(t, lab.Spec{Clusters: []lab.ClusterSpec{lab.SeedClusterSpec()}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := l.Clusters()[0]
	kubectl := func(args ...string) string { t.Helper(); return c.KubectlT(ctx, t, args...) }
	// The article labels its nodes (the lab registers them labelled already:
	// --overwrite keeps the command verbatim otherwise).
	kubectl("label", "--overwrite", "node", "node-beijing", "topology.kubernetes.io/region=cn-beijing")
	kubectl("label", "--overwrite", "node", "node-shanghai", "topology.kubernetes.io/region=cn-shanghai")
	installCRD(ctx, t, c)
	as := agents{}
	for _, n := range c.Nodes() {
		// --kubeconfig and --hostname as in the DaemonSet; then the
		// article's three mesh flags.
		p, err := n.StartAgent(lab.AgentOptions{Binary: binDir + "/kg", Granularity: "location", Encapsulate: "never",
			Extra: []string{"--subnet=10.5.0.0/16"}})
		if err != nil {
			t.Fatal(err)
		}
		as[n.Name] = p
	}
	t.Cleanup(func() {
		for name, p := range as {
			if t.Failed() {
				t.Logf("kg on %s:\n%s", name, p.Tail(30))
			}
			_ = p.Stop()
		}
	})

	kubectl("run", "test-pod-beijing", "--image=alpine", "--restart=Never", "--labels=app=test", `--overrides={"spec": {"nodeName": "node-beijing"}}`, "--", "sleep", "3600")
	kubectl("run", "test-pod-shanghai", "--image=alpine", "--restart=Never", "--labels=app=test", `--overrides={"spec": {"nodeName": "node-shanghai"}}`, "--", "sleep", "3600")
	pods, err := c.WaitPods(ctx, "default", "app=test", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get pods -l app=test -o wide\n%s", kubectl("get", "pods", "-l", "app=test", "-o", "wide"))
	var shanghai string
	for _, p := range pods {
		if p.Name == "test-pod-shanghai" {
			shanghai = p.Status.PodIP
		}
	}

	// The agents elect their leaders within a lease duration of starting;
	// wait for one reply, then run the article's command.
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if _, err := c.Kubectl(ctx, "exec", "test-pod-beijing", "--", "ping", "-c", "1", "-W", "1", shanghai); err == nil {
			break
		}
	}
	b, _ := c.Kubectl(ctx, "exec", "test-pod-beijing", "--", "ping", "-c", "4", shanghai)
	out := string(b)
	if !strings.Contains(out, "4 received") {
		t.Fatalf("kubectl exec test-pod-beijing -- ping -c 4 %s:\n%s", shanghai, out)
	}
	t.Logf("kubectl exec test-pod-beijing -- ping -c 4 %s\n%s", shanghai, out)

	// Troubleshooting checklist: the leader has one peer (the other
	// location's leader) with a recent handshake, and the route to the
	// remote pod goes through kilo0.
	leader := leaderOf(ctx, t, c, as, "cn-beijing")
	show, err := wg(ctx, as[leader.Name], "show")
	if err != nil {
		t.Fatal(err)
	}
	if peers := strings.Count(show, "peer: "); peers != 1 || !strings.Contains(show, "latest handshake") {
		t.Errorf("sudo wg show on the cn-beijing leader: want one peer with a handshake, got:\n%s", show)
	}
	t.Logf("wg show (%s, leader of cn-beijing)\n%s", leader.Name, show)
	route, err := as[leader.Name].NsEnter(ctx, "ip", "route", "get", shanghai)
	if err != nil || !regexp.MustCompile(`dev kilo0\b`).Match(route) {
		t.Errorf("ip route get %s on %s = %q, %v; want dev kilo0", shanghai, leader.Name, route, err)
	}
}
