//go:build linux

package mesh

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// drLab is the French seed's active/passive disaster recovery: a
// production cluster and a DR cluster ("cluster-dr-ovhcloud"), each one
// public location of two nodes, with kube-proxy. The lab gives the second
// cluster exactly the seed's DR ranges: pods 10.11.0.0/16, services
// 10.21.0.0/16 (and WireGuard subnet 10.6.0.0/16); production has
// 10.10.0.0/16, 10.20.0.0/16 and 10.5.0.0/16, so nothing overlaps.
func drLab() lab.Spec {
	return lab.Spec{KubeProxy: true, Clusters: []lab.ClusterSpec{
		{Name: "prod", Locations: []lab.LocationSpec{{Name: "scaleway-paris", Nodes: []lab.NodeSpec{{Name: "prod-1"}, {Name: "prod-2"}}}}},
		{Name: "dr", Locations: []lab.LocationSpec{{Name: "ovh-gra", Nodes: []lab.NodeSpec{{Name: "dr-1"}, {Name: "dr-2"}}}}},
	}}
}

// TestDRClustersJoinedByPeers joins two clusters with Peers as a DR
// runbook does without federation, and checks the seed's promises: pods of
// each cluster reach pods and Services of the other through an always-up
// tunnel, the seed's Peer YAML (string endpoint) works as written, and the
// seed's GPU -> app example (a selector-less Service whose Endpoints name a
// pod IP of the other cluster) answers.
//
// What breaks without federation (not tested here): the Peers below are a
// snapshot of the other cluster's gateway. When dr's leader changes (the
// node dies, or loses its lease), dr elects another node, which wears the
// same WireGuard IP but has its own key and public endpoint; prod's Peer
// cluster-dr-ovhcloud still names the old key and endpoint, so prod's
// WireGuard drops the new leader's packets until someone re-runs the
// kgctl showconf | kubectl apply step. The federation controller keeps
// these Peers mirrored (key, endpoint, allowed IPs) on both sides.
//
// Not expected to work either: host-network traffic of a node that does
// not lead its location (its source is its LAN address, which the other
// cluster does not route); pods on that node are fine.
func TestDRClustersJoinedByPeers(t *testing.T) {
	begin := time.Now()
	l := lab.StartT(t, drLab())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prod, dr := l.Cluster("prod"), l.Cluster("dr")
	if dr.PodCIDR.String() != "10.11.0.0/16" || dr.ServiceCIDR.String() != "10.21.0.0/16" {
		t.Fatalf("dr cluster has pods %s and services %s, want the seed's 10.11.0.0/16 and 10.21.0.0/16", dr.PodCIDR, dr.ServiceCIDR)
	}
	t.Logf("lab of two clusters up in %v", time.Since(begin).Round(time.Millisecond))
	mark := time.Now()
	phase := func(what string) {
		t.Logf("%s: %v", what, time.Since(mark).Round(time.Millisecond))
		mark = time.Now()
	}

	for _, c := range []*lab.Cluster{prod, dr} {
		installCRD(ctx, t, c)
	}
	prodIPs, drIPs := lab.EchoPodsT(ctx, t, prod), lab.EchoPodsT(ctx, t, dr)
	if _, err := dr.Client().CoreV1().Services("default").Create(ctx, lab.EchoService("default", "echo", "echo", 8080), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := meshOptions{granularity: "location", encapsulate: "never"}
	prodAgents, drAgents := startMesh(t, prod, opts), startMesh(t, dr, opts)
	prodLeader, drLeader := waitLeader(ctx, t, prod), waitLeader(ctx, t, dr)
	t.Logf("leaders: prod %s (%s), dr %s (%s)", prodLeader.Name, prodLeader.PublicIP, drLeader.Name, drLeader.PublicIP)
	// Each cluster's mesh works, and no pod reaches the other cluster yet:
	// what follows is the Peers' doing.
	checkAllPairs(ctx, t, l, prod, prodIPs, 60*time.Second)
	checkAllPairs(ctx, t, l, dr, drIPs, 60*time.Second)
	if got, err := probe(ctx, l, prod, "echo-prod-1", drIPs["echo-dr-1"], 2*time.Second); err == nil {
		t.Fatalf("echo-prod-1 reached echo-dr-1 (%q) before any Peer existed: the lab leaks", got)
	}
	if t.Failed() {
		return
	}
	phase("agents up, each cluster's mesh checked")

	// dr declares prod, from kgctl run against prod (the runbook's step).
	prodPeer := showconfPeer(ctx, t, prod, prodLeader.Name, "cluster-prod", peerRanges(prod))
	checkShowconf(ctx, t, prodPeer, prodAgents[prodLeader.Name], prodLeader, peerRanges(prod))
	if out, err := applyYAML(ctx, l, dr, prodPeer); err != nil {
		t.Fatalf("apply Peer cluster-prod in dr: %v\n%s", err, out)
	}

	// 1. prod declares dr with the seed's YAML as written: string
	// endpoint (dr's leader stands for dr-gateway.example.com), keepalive
	// 25, the seed's two ranges; only the key is dr's real one.
	drKey := publicKeyOf(ctx, t, drAgents[drLeader.Name])
	seedPeer := strings.NewReplacer("DrClusterPublicKeyBase64==", drKey, "dr-gateway.example.com", drLeader.PublicIP.String()).Replace(seedDRPeer(t))
	if out, err := applyYAML(ctx, l, prod, seedPeer); err != nil {
		t.Fatalf("apply the seed's Peer in prod: %v\n%s", err, out)
	}
	checkSpecEndpoint(ctx, t, prod, "cluster-dr-ovhcloud", drLeader.PublicIP.String()+":51820")
	checkCrossPods(ctx, t, l, prod, dr, prodIPs, drIPs, 60*time.Second)
	checkPeerReady(ctx, t, prod, "cluster-dr-ovhcloud", drLeader.PublicIP.String()+":51820")
	// The seed's two ranges carry pods' traffic, not what dr's leader
	// sends itself (from its WireGuard IP, outside them): prod's WireGuard
	// drops it. Hence the third range in kgctl's Peer below.
	url := "http://" + net.JoinHostPort(prodIPs["echo-prod-2"], "8080") + "/"
	if out, err := drLeader.Exec(ctx, l.LabBinary(), "workload", "get", "--timeout", "2s", url); err == nil {
		t.Errorf("dr's leader %s reached %s through the seed's Peer (%q), which does not allow dr's WireGuard subnet", drLeader.Name, url, out)
	}
	if t.Failed() {
		return
	}
	phase("seed's Peer YAML: pods of both clusters reach each other")

	// 2. The runbook's way: kgctl showconf against dr, applied in prod,
	// replaces the seed's Peer. It adds dr's WireGuard subnet, the source
	// of dr's leader's own (and masqueraded) traffic.
	drPeer := showconfPeer(ctx, t, dr, drLeader.Name, "cluster-dr-ovhcloud", peerRanges(dr))
	checkShowconf(ctx, t, drPeer, drAgents[drLeader.Name], drLeader, peerRanges(dr))
	// The runbook need not know dr's leader: any node of its location
	// shows the location's gateway.
	if other := showconfPeer(ctx, t, dr, otherNode(dr, drLeader).Name, "cluster-dr-ovhcloud", peerRanges(dr)); other != drPeer {
		t.Errorf("kgctl showconf node %s differs from showconf node %s:\n%s", otherNode(dr, drLeader).Name, drLeader.Name, other)
	}
	if out, err := applyYAML(ctx, l, prod, drPeer); err != nil {
		t.Fatalf("apply kgctl's Peer cluster-dr-ovhcloud in prod: %v\n%s", err, out)
	}
	waitPeerAllowedIPs(ctx, t, prodAgents[prodLeader.Name], drKey, dr.WireGuardSubnet.String())
	checkCrossPods(ctx, t, l, prod, dr, prodIPs, drIPs, 30*time.Second)
	// The leaders' own traffic (host network) crosses too: its source is
	// the leader's WireGuard IP, which the other side's Peer allows.
	nodeGet(ctx, t, prodLeader, drIPs["echo-dr-2"], "echo-dr-2", 30*time.Second)
	nodeGet(ctx, t, drLeader, prodIPs["echo-prod-2"], "echo-prod-2", 30*time.Second)
	phase("kgctl's Peers: pods and leaders of both clusters reach each other")

	// 3. A dr Service's ClusterIP from prod: the tunnel carries
	// 10.21.0.0/16 to dr's leader, whose kube-proxy picks an echo pod.
	svc, err := dr.Client().CoreV1().Services("default").Get(ctx, "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !dr.ServiceCIDR.Contains(netip.MustParseAddr(svc.Spec.ClusterIP)) {
		t.Fatalf("dr Service echo has ClusterIP %s outside %s", svc.Spec.ClusterIP, dr.ServiceCIDR)
	}
	for from := range prodIPs {
		checkAnswer(ctx, t, l, prod, from, svc.Spec.ClusterIP, "echo-dr-", "dr", 30*time.Second)
	}
	phase("prod pods reach dr's Service ClusterIP")

	// 4. The seed's GPU -> app example: in prod (the app cluster), the
	// selector-less Service and its Endpoints naming a pod of dr (the GPU
	// cluster; the seed's 10.11.42.5 is that pod's real IP here).
	gpuPod := "echo-" + otherNode(dr, drLeader).Name
	app := strings.ReplaceAll(seedMLInference, "10.11.42.5", drIPs[gpuPod])
	if out, err := applyYAML(ctx, l, prod, app); err != nil {
		t.Fatalf("apply the seed's ml-inference-svc in prod: %v\n%s", err, out)
	}
	ml, err := prod.Client().CoreV1().Services("default").Get(ctx, "ml-inference-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for from := range prodIPs {
		checkAnswer(ctx, t, l, prod, from, ml.Spec.ClusterIP, gpuPod, "dr", 60*time.Second)
	}
	phase("seed's ml-inference-svc in prod answered by a dr pod")

	// 5. Both Peers report a recent handshake.
	checkPeerReady(ctx, t, prod, "cluster-dr-ovhcloud", drLeader.PublicIP.String()+":51820")
	checkPeerReady(ctx, t, dr, "cluster-prod", "")
	for _, c := range []*lab.Cluster{prod, dr} {
		out, _ := c.Kubectl(ctx, "get", "peers", "-o", "wide")
		t.Logf("cluster %s: kubectl get peers -o wide:\n%s", c.Name, out)
	}
	phase("Peers Ready on both sides")
	t.Logf("total %v", time.Since(begin).Round(time.Millisecond))
}

// seedDRPeer returns the French seed's DR Peer as written there (kept
// verbatim in the Peer API's testdata).
func seedDRPeer(t testing.TB) string {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "mesh", "apis", "kilo", "v1alpha1", "testdata", "cluster-dr-ovhcloud.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seedMLInference is the French seed's GPU -> app Service, as written
// there.
const seedMLInference = `# Sur le cluster APP — créer un service pointant vers le cluster GPU
apiVersion: v1
kind: Service
metadata:
  name: ml-inference-svc
spec:
  ports:
    - port: 8080
---
apiVersion: v1
kind: Endpoints
metadata:
  name: ml-inference-svc
subsets:
  - addresses:
      - ip: 10.11.42.5   # Pod IP sur cluster GPU
    ports:
      - port: 8080
`

// peerRanges are the ranges another cluster routes to c: c's pods and
// services (the seed's two CIDRs for dr) and its WireGuard subnet, the
// source of what c's leader sends itself or masquerades.
func peerRanges(c *lab.Cluster) []string {
	return []string{c.PodCIDR.String(), c.ServiceCIDR.String(), c.WireGuardSubnet.String()}
}

// showconfPeer runs `kgctl showconf node NODE -o yaml` against cluster c
// and returns the Peer object it prints for another cluster.
func showconfPeer(ctx context.Context, t *testing.T, c *lab.Cluster, node, name string, ranges []string) string {
	t.Helper()
	args := []string{"--kubeconfig", c.Kubeconfig, "showconf", "node", node, "-o", "yaml",
		"--allowed-ips", strings.Join(ranges, ","), "--peer-name", name, "--persistent-keepalive", "25s"}
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "kgctl"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kgctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("kgctl %s:\n%s", strings.Join(args[2:], " "), out)
	return string(out)
}

// checkShowconf checks that the Peer kgctl printed names leader's key,
// public endpoint, the given ranges and the keepalive.
func checkShowconf(ctx context.Context, t *testing.T, doc string, agent *lab.Process, leader *lab.Node, ranges []string) {
	t.Helper()
	var p v1alpha1.Peer
	if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatalf("kgctl's Peer does not decode: %v", err)
	}
	want := publicKeyOf(ctx, t, agent)
	if p.Spec.PublicKey != want {
		t.Errorf("kgctl's Peer has publicKey %s, want leader %s's %s", p.Spec.PublicKey, leader.Name, want)
	}
	if e := p.Spec.Endpoint; e == nil || e.IP != leader.PublicIP.String() || e.Port != 51820 {
		t.Errorf("kgctl's Peer has endpoint %+v, want leader %s's public %s:51820", e, leader.Name, leader.PublicIP)
	}
	if !slices.Equal(p.Spec.AllowedIPs, ranges) || p.Spec.PersistentKeepalive != 25 {
		t.Errorf("kgctl's Peer has allowedIPs %v keepalive %d, want %v and 25", p.Spec.AllowedIPs, p.Spec.PersistentKeepalive, ranges)
	}
}

// publicKeyOf returns the public key of agent's WireGuard interface.
func publicKeyOf(ctx context.Context, t *testing.T, agent *lab.Process) string {
	t.Helper()
	out, err := wg(ctx, agent, "show", "kilo0", "public-key")
	if err != nil {
		t.Fatalf("wg show kilo0 public-key: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// waitLeader returns the node of c's single location that wears the
// segment's WireGuard IP on kilo0: its leader.
func waitLeader(ctx context.Context, t *testing.T, c *lab.Cluster) *lab.Node {
	t.Helper()
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		var leaders []*lab.Node
		last = ""
		for _, n := range c.Nodes() {
			out, _ := n.Exec(ctx, "ip", "-4", "-o", "addr", "show", "dev", "kilo0")
			last += n.Name + ": " + string(out)
			for _, f := range strings.Fields(string(out)) {
				if p, err := netip.ParsePrefix(f); err == nil && c.WireGuardSubnet.Contains(p.Addr()) {
					leaders = append(leaders, n)
				}
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
	}
	t.Fatalf("cluster %s: no single node wears a WireGuard IP of %s:\n%s", c.Name, c.WireGuardSubnet, last)
	return nil
}

// otherNode returns a node of c other than n.
func otherNode(c *lab.Cluster, n *lab.Node) *lab.Node {
	for _, o := range c.Nodes() {
		if o != n {
			return o
		}
	}
	return nil
}

// waitPeerAllowedIPs waits until agent's WireGuard peer key lists prefix
// among its allowed IPs (the agent applied an updated Peer).
func waitPeerAllowedIPs(ctx context.Context, t *testing.T, agent *lab.Process, key, prefix string) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		out, _ = wg(ctx, agent, "show", "kilo0", "allowed-ips")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == key && slices.Contains(f[1:], prefix) {
				return
			}
		}
	}
	t.Fatalf("WireGuard peer %s never got %s:\n%s", key, prefix, out)
}

// checkCrossPods checks that every pod of a reaches every pod of b and
// back: from the leader's and the other node's pods of each cluster.
func checkCrossPods(ctx context.Context, t *testing.T, l *lab.Lab, a, b *lab.Cluster, aIPs, bIPs map[string]string, within time.Duration) {
	t.Helper()
	for _, dir := range []struct {
		from, to     *lab.Cluster
		froms, dests map[string]string
	}{{a, b, aIPs, bIPs}, {b, a, bIPs, aIPs}} {
		for from := range dir.froms {
			for to, ip := range dir.dests {
				checkAnswer(ctx, t, l, dir.from, from, ip, to, dir.to.Name, within)
			}
		}
	}
}

// checkAnswer checks that pod from of cluster c gets, from ip:8080, the
// answer of a pod whose name starts with pod, in cluster cluster.
func checkAnswer(ctx context.Context, t *testing.T, l *lab.Lab, c *lab.Cluster, from, ip, pod, cluster string, within time.Duration) {
	t.Helper()
	got, err := get(ctx, l, c, from, ip, within)
	f := strings.Fields(got)
	if err != nil || len(f) < 2 || !strings.HasPrefix(f[0], pod) || f[1] != cluster {
		t.Errorf("%s/%s -> %s: %q, %v; want the answer of %s* in cluster %s", c.Name, from, ip, got, err, pod, cluster)
	}
}

// nodeGet checks that node n itself (host network, not a pod) gets pod's
// answer from ip:8080.
func nodeGet(ctx context.Context, t *testing.T, n *lab.Node, ip, pod string, within time.Duration) {
	t.Helper()
	url := "http://" + net.JoinHostPort(ip, "8080") + "/"
	var (
		got string
		err error
	)
	for deadline := time.Now().Add(within); ; time.Sleep(300 * time.Millisecond) {
		if got, err = n.Namespace().Get(ctx, url); (err == nil && strings.HasPrefix(got, pod+" ")) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !strings.HasPrefix(got, pod+" ") {
		route, _ := n.Exec(ctx, "ip", "route", "get", ip)
		t.Errorf("node %s/%s -> %s (%s): %q, %v; route: %s", n.Cluster, n.Name, pod, url, got, err, route)
	}
}

// checkSpecEndpoint checks that `kubectl get peer name -o yaml` shows
// spec.endpoint as the string want, the form it was applied in.
func checkSpecEndpoint(ctx context.Context, t *testing.T, c *lab.Cluster, name, want string) {
	t.Helper()
	out, err := c.Kubectl(ctx, "get", "peer", name, "-o", "yaml")
	if err != nil {
		t.Fatalf("kubectl get peer %s -o yaml: %v", name, err)
	}
	var obj struct {
		Spec struct {
			Endpoint any `json:"endpoint"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &obj); err != nil {
		t.Fatalf("kubectl get peer %s -o yaml does not decode: %v\n%s", name, err, out)
	}
	if got, ok := obj.Spec.Endpoint.(string); !ok || got != want {
		t.Errorf("kubectl get peer %s -o yaml: spec.endpoint is %#v, want the string %q as applied:\n%s", name, obj.Spec.Endpoint, want, out)
	}
}

// checkPeerReady waits until Peer name of c reports Ready=RecentHandshake
// (and, when endpoint is set, that status endpoint).
func checkPeerReady(ctx context.Context, t *testing.T, c *lab.Cluster, name, endpoint string) {
	t.Helper()
	const path = `jsonpath={.status.conditions[?(@.type=="Ready")].reason} {.status.endpoint}`
	var got string
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		out, _ := c.Kubectl(ctx, "get", "peer", name, "-o", path)
		got = strings.TrimSpace(string(out))
		f := strings.Fields(got)
		if len(f) >= 1 && f[0] == "RecentHandshake" && (endpoint == "" || (len(f) == 2 && f[1] == endpoint)) {
			return
		}
	}
	out, _ := c.Kubectl(ctx, "get", "peer", name, "-o", "yaml")
	t.Errorf("cluster %s: Peer %s: Ready reason and endpoint %q, want RecentHandshake %s\n%s", c.Name, name, got, endpoint, out)
}
