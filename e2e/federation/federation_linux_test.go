//go:build linux

package federation

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilofed/kilofed/e2e/lab"
	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/cli"
	"github.com/kilofed/kilofed/federation/join"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/federation/mirror"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// TestFederationOfTwoClusters runs every federation scenario on one lab of
// two clusters (a lab start costs tens of seconds): the subtests run in
// order and each leaves the federation as the next expects it.
func TestFederationOfTwoClusters(t *testing.T) {
	begin := time.Now()
	l := lab.StartT(t, twoClusters())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	f := startFed(ctx, t, l)
	t.Logf("lab, meshes and controllers up in %v", time.Since(begin).Round(time.Millisecond))

	steps := []struct {
		name string
		fn   func(context.Context, *testing.T, *fed)
		// needed: a failure stops the run (what follows needs it).
		needed bool
	}{
		{"JoinRefusedOnOverlapOrIDClashWritesNothing", testRefusedJoinWritesNothing, false},
		{"JoinWithTheCLIPrintsStepsAndWaitsForTheHandshake", testJoin, true},
		{"PodsReachPodsOfTheOtherClusterAndBack", testCrossPods, false},
		{"PodsBehindNATInBothClustersReachEachOther", testCrossNATPods, false},
		{"PodsReachAClusterIPServiceOfTheOtherCluster", testCrossService, false},
		{"OnlyWireGuardCrossesTheWAN", testWANOnlyWireGuard, false},
		{"JoinTwiceChangesNothing", testJoinTwice, false},
		{"StatusShowsBothClustersUp", testStatus, false},
		{"TokenReadsOnlyTheAnnouncement", testTokenScope, false},
		{"UserPeerBesideTheFederationIsLeftAlone", testUserPeer, false},
		{"MirroredPeerFollowsGatewayFailover", testFailover, false},
		{"RemoteAPIOutageKeepsTrafficAndPeers", testAPIOutage, false},
		{"OwnAPIOutageKeepsTrafficAndPeers", testOwnAPIOutage, false},
		{"GatewayKeyRotationIsFollowedByTheOtherCluster", testKeyRotation, false},
		{"RemoteRangesAreCheckedAfterTheJoin", testRemoteRangesAreCheckedAfterTheJoin, false},
		{"ControllersExportTheirMetrics", testControllerMetrics, false},
		{"UnjoinRemovesEverythingButUserPeers", testUnjoin, false},
	}
	for _, s := range steps {
		mark := time.Now()
		ok := t.Run(s.name, func(t *testing.T) { s.fn(ctx, t, f) })
		t.Logf("%s: %v", s.name, time.Since(mark).Round(time.Millisecond))
		if !ok && s.needed {
			t.Fatalf("%s failed: the rest needs it", s.name)
		}
	}
	t.Logf("total %v", time.Since(begin).Round(time.Millisecond))
}

// testRefusedJoinWritesNothing: a join whose ranges overlap (faked with
// the range flags) or whose IDs clash is refused with a message naming
// both ranges and both clusters, and writes nothing in either cluster.
func testRefusedJoinWritesNothing(ctx context.Context, t *testing.T, f *fed) {
	// Discovery reads the Nodes' podCIDRs (dr-gra-1 has the first /24 of
	// dr's 10.11.0.0/16), so the faked range overlaps that one.
	drNodePods := f.dr.Node("dr-gra-1").PodCIDRs()[0].String()
	cases := []struct {
		name  string
		flags []string
		want  []string // in the message
	}{
		{"pod CIDR", []string{"--pod-cidr", "10.11.0.0/17"}, []string{"10.11.0.0/17", drNodePods, "prod", "dr"}},
		{"service CIDR", []string{"--remote-service-cidr", "10.20.0.0/24"}, []string{"10.20.0.0/24", f.prod.ServiceCIDR.String(), "prod", "dr"}},
		{"WireGuard subnet", []string{"--pod-cidr", f.dr.WireGuardSubnet.String()}, []string{f.dr.WireGuardSubnet.String(), "WireGuard", "prod", "dr"}},
		{"cluster ID", []string{"--remote-cluster-id", "prod"}, []string{`"prod"`, "ID"}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			before := map[string][]string{"prod": inventory(ctx, t, f.prod), "dr": inventory(ctx, t, f.dr)}
			out, err := f.kilofed(ctx, "prod", append([]string{"join", "dr", "--wait=0"}, tc.flags...)...)
			t.Logf("kilofed --context prod join dr %s:\n%s", strings.Join(tc.flags, " "), out)
			if err == nil {
				t.Errorf("join with %s overlapping was not refused", tc.name)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the refusal does not name %q", w)
				}
			}
			for _, c := range []*lab.Cluster{f.prod, f.dr} {
				if d := cmp.Diff(before[c.Name], inventory(ctx, t, c)); d != "" {
					t.Errorf("the refused join changed cluster %s (-before +after):\n%s", c.Name, d)
				}
			}
		})
	}
}

// testJoin joins prod and dr with the real CLI, as an operator would.
func testJoin(ctx context.Context, t *testing.T, f *fed) {
	start := time.Now()
	out, err := f.kilofed(ctx, "prod", "join", "dr", "--wait=2m")
	t.Logf("kilofed --context prod join dr --wait=2m (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	for _, step := range []string{"==> discovering prod", "==> discovering dr", "==> checking ranges and IDs",
		"==> creating credentials in prod for dr", "==> creating credentials in dr for prod", "==> waiting for the first handshake"} {
		if !strings.Contains(out, step) {
			t.Errorf("join printed no step %q", step)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; last != "joined prod and dr" {
		t.Errorf("join's last line is %q, want the verdict %q", last, "joined prod and dr")
	}
	if strings.Contains(out, "eyJ") {
		t.Errorf("join printed something that looks like a token")
	}
	for _, c := range []*lab.Cluster{f.prod, f.dr} {
		t.Logf("cluster %s: kubectl get remoteclusters,peers:\n%s", c.Name, c.KubectlT(ctx, t, "get", "remoteclusters,peers", "-o", "wide"))
	}
}

// natPod reports whether pod runs in a location behind NAT.
func natPod(pod string) bool { return strings.Contains(pod, "-dc-") }

// crossPairs checks, in parallel, that every pod of prod reaches every pod
// of dr and back, and returns the pairs that failed.
func crossPairs(ctx context.Context, f *fed, within time.Duration) []string {
	return somePairs(ctx, f, within, func(string, string) bool { return true })
}

// somePairs checks the pairs of pods (from, to) of prod and dr, both ways,
// that keep selects.
func somePairs(ctx context.Context, f *fed, within time.Duration, keep func(from, to string) bool) []string {
	var (
		mu     sync.Mutex
		failed []string
		wg     sync.WaitGroup
	)
	for _, dir := range [][2]*lab.Cluster{{f.prod, f.dr}, {f.dr, f.prod}} {
		for from := range f.ips[dir[0].Name] {
			for to, ip := range f.ips[dir[1].Name] {
				if !keep(from, to) {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if got, err := answer(ctx, f.l, dir[0], from, ip, to, dir[1].Name, within); err != nil {
						mu.Lock()
						failed = append(failed, dir[0].Name+"/"+from+" -> "+dir[1].Name+"/"+to+": "+err.Error()+" "+strings.Join(got, " "))
						mu.Unlock()
					}
				}()
			}
		}
	}
	wg.Wait()
	return failed
}

func testCrossPods(ctx context.Context, t *testing.T, f *fed) {
	start := time.Now()
	failed := crossPairs(ctx, f, 60*time.Second)
	for _, s := range failed {
		t.Error(s)
	}
	t.Logf("%d pairs checked in %v, %d failed", 2*len(f.ips["prod"])*len(f.ips["dr"]), time.Since(start).Round(time.Millisecond), len(failed))
}

// testCrossNATPods checks the pairs of pods that are both behind NAT
// (neither gateway has an endpoint the other can reach): each cluster
// announces its NAT'd location as reached through its public gateway, and
// reaches the other's through that gateway, so these pairs go NAT'd
// location -> own gateway -> remote gateway -> remote NAT'd location.
func testCrossNATPods(ctx context.Context, t *testing.T, f *fed) {
	start := time.Now()
	failed := somePairs(ctx, f, 30*time.Second, func(a, b string) bool { return natPod(a) && natPod(b) })
	for _, s := range failed {
		t.Error(s)
	}
	t.Logf("pairs behind NAT on both sides checked in %v, %d failed", time.Since(start).Round(time.Millisecond), len(failed))
}

func testCrossService(ctx context.Context, t *testing.T, f *fed) {
	svc, err := f.dr.Client().CoreV1().Services("default").Get(ctx, "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for from := range f.ips["prod"] {
		got, err := answer(ctx, f.l, f.prod, from, svc.Spec.ClusterIP, "echo-dr-", "dr", 30*time.Second)
		if err != nil {
			t.Errorf("prod/%s -> dr Service echo (%s): %v", from, svc.Spec.ClusterIP, err)
		} else {
			t.Logf("prod/%s -> dr Service echo (%s): answered by %s", from, svc.Spec.ClusterIP, got[0])
		}
	}
}

// testWANOnlyWireGuard captures on the WAN while pods of both clusters
// talk, and checks that only WireGuard's UDP port crossed.
func testWANOnlyWireGuard(ctx context.Context, t *testing.T, f *fed) {
	pcap := t.TempDir() + "/wan.pcap"
	capture, err := f.l.WAN().Start("tcpdump-federation", "tcpdump", "-Z", "root", "--immediate-mode", "-i", "any", "-n", "-U", "-w", pcap, "ip or ip6")
	if err != nil {
		t.Fatalf("start tcpdump in the WAN: %v", err)
	}
	time.Sleep(time.Second) // tcpdump opens its socket
	for _, p := range []struct {
		c        *lab.Cluster
		from, to string
		other    string
	}{
		{f.prod, "echo-prod-par-1", "echo-dr-gra-2", "dr"}, {f.prod, "echo-prod-dc-2", "echo-dr-gra-1", "dr"},
		{f.dr, "echo-dr-dc-1", "echo-prod-par-2", "prod"}, {f.dr, "echo-dr-gra-1", "echo-prod-par-1", "prod"},
	} {
		if _, err := answer(ctx, f.l, p.c, p.from, f.ips[p.other][p.to], p.to, p.other, 10*time.Second); err != nil {
			t.Errorf("%s -> %s during capture: %v", p.from, p.to, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	_ = capture.Stop()
	count := func(filter string) (int, string) {
		out, err := exec.CommandContext(ctx, "tcpdump", "-r", pcap, "-n", filter).Output()
		if err != nil {
			t.Fatalf("read capture with filter %q: %v", filter, err)
		}
		s := strings.TrimSpace(string(out))
		if s == "" {
			return 0, ""
		}
		return len(strings.Split(s, "\n")), s
	}
	wire, _ := count("udp port 51820")
	clear, what := count("not (udp port 51820)")
	pods, _ := count("net " + f.prod.PodCIDR.String() + " or net " + f.dr.PodCIDR.String() + " or net " + f.dr.ServiceCIDR.String())
	t.Logf("WAN capture: %d WireGuard packets, %d other packets, %d with pod or service addresses", wire, clear, pods)
	if wire == 0 {
		t.Errorf("no WireGuard packet crossed the WAN while pods of both clusters talked")
	}
	if clear != 0 || pods != 0 {
		t.Errorf("traffic other than WireGuard crossed the WAN:\n%s", what)
	}
}

// joinState is what a second join must leave as it is: the generation and
// spec of the RemoteClusters, the ClusterProperties, and the
// resourceVersions of the Secrets, ServiceAccounts, Roles and
// RoleBindings join wrote.
func joinState(ctx context.Context, t *testing.T, c *lab.Cluster) []string {
	t.Helper()
	rc := c.KubectlT(ctx, t, "get", "remoteclusters", "-o", `jsonpath={range .items[*]}RemoteCluster {.metadata.name} generation={.metadata.generation} {.spec.clusterID} {.spec.apiServer} {.spec.credentialsSecret}{"\n"}{end}`)
	objs := c.KubectlT(ctx, t, "get", "clusterproperties,namespaces,secrets,serviceaccounts,roles,rolebindings", "-n", fedv1.Namespace, "-o",
		`jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}`)
	var out []string
	for _, s := range strings.Split(strings.TrimSpace(rc+objs), "\n") {
		if s != "" && !strings.HasPrefix(s, "Namespace ") || strings.Contains(s, fedv1.Namespace) {
			out = append(out, s)
		}
	}
	return out
}

func testJoinTwice(ctx context.Context, t *testing.T, f *fed) {
	before := map[string][]string{"prod": joinState(ctx, t, f.prod), "dr": joinState(ctx, t, f.dr)}
	out, err := f.kilofed(ctx, "prod", "join", "dr")
	t.Logf("second kilofed --context prod join dr:\n%s", out)
	if err != nil {
		t.Fatalf("second join: %v", err)
	}
	for _, c := range []*lab.Cluster{f.prod, f.dr} {
		after := joinState(ctx, t, c)
		if d := cmp.Diff(before[c.Name], after); d != "" {
			t.Errorf("the second join changed cluster %s (-before +after):\n%s", c.Name, d)
		}
		t.Logf("cluster %s, unchanged by the second join:\n%s", c.Name, strings.Join(after, "\n"))
	}
}

func testStatus(ctx context.Context, t *testing.T, f *fed) {
	for _, pair := range [][2]string{{"prod", "dr"}, {"dr", "prod"}} {
		here, there := pair[0], pair[1]
		var st cli.Status
		var out string
		up := false
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !up; time.Sleep(time.Second) {
			js, err := f.kilofed(ctx, here, "status", "-o", "json")
			if err != nil {
				t.Fatalf("kilofed --context %s status -o json: %v\n%s", here, err, js)
			}
			out = js
			st = cli.Status{}
			if err := json.Unmarshal([]byte(js), &st); err != nil {
				t.Fatalf("kilofed status -o json does not decode: %v\n%s", err, js)
			}
			up = len(st.Clusters) == 2 && st.Clusters[0].ID == here && st.Clusters[0].Local && st.Clusters[0].State == "announced" &&
				st.Clusters[1].ID == there && st.Clusters[1].State == "up" && len(st.Clusters[1].Gateways) == 2 && len(st.Clusters[0].Gateways) == 2
		}
		if !up {
			t.Errorf("kilofed --context %s status -o json does not show %s announced and %s up with two gateways each:\n%s", here, here, there, out)
		}
		table, err := f.kilofed(ctx, here, "status")
		t.Logf("kilofed --context %s status:\n%s", here, table)
		if err != nil {
			t.Errorf("kilofed status: %v", err)
		}
		for _, g := range st.Clusters[len(st.Clusters)-1].Gateways {
			if !strings.HasPrefix(g.Node, there+"-") || f.l.Cluster(there).Node(g.Node) == nil {
				t.Errorf("kilofed --context %s status names gateway %q for %s/%s, want the node leading it", here, g.Node, there, g.Location)
			}
		}
		if !strings.Contains(table, here+" (here)") || !strings.Contains(table, " up") {
			t.Errorf("kilofed --context %s status: no %q row or no cluster up", here, here+" (here)")
		}
	}
}

// testTokenScope takes the token dr keeps for reading prod and tries, in
// prod, what it must not do.
func testTokenScope(ctx context.Context, t *testing.T, f *fed) {
	sec, err := f.dr.Client().CoreV1().Secrets(fedv1.Namespace).Get(ctx, "kilofed-remote-prod", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("dr's Secret holding prod's token: %v", err)
	}
	cfg := f.prod.RESTConfig()
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
	cfg.BearerToken = string(sec.Data["token"])
	asDR, err := kube.New("prod-as-dr", cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := asDR.Client
	ns := fedv1.Namespace
	// What it may do.
	var ann fedv1.Announcement
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fedv1.AnnouncementName}, &ann); err != nil {
		t.Errorf("the token cannot read prod's Announcement: %v", err)
	} else {
		t.Logf("the token reads prod's Announcement: %d gateways", len(ann.Spec.Gateways))
	}
	if _, err := join.IssueToken(ctx, asDR, "kilofed-remote-dr", 10*time.Minute); err != nil {
		t.Errorf("the token cannot renew itself (TokenRequest for its own ServiceAccount): %v", err)
	}
	// What it must not do.
	forbidden := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("the token could %s", what)
		} else if !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("the token tried to %s: %v (want forbidden)", what, err)
		}
	}
	kc := asDR.Kube
	_, err = kc.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	forbidden("list Secrets in "+ns, err)
	_, err = kc.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	forbidden("list Secrets in default", err)
	_, err = kc.CoreV1().Secrets(ns).Get(ctx, "kilofed-remote-dr", metav1.GetOptions{})
	forbidden("get the Secret holding dr's token in prod", err)
	_, err = kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	forbidden("list Nodes", err)
	_, err = kc.CoreV1().Nodes().Get(ctx, "prod-par-1", metav1.GetOptions{})
	forbidden("get a Node", err)
	_, err = join.IssueToken(ctx, asDR, "default", 10*time.Minute)
	forbidden("issue a token for another ServiceAccount", err)

	peer := &kilov1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: kilov1.PeerSpec{AllowedIPs: []string{"10.99.0.0/16"}, PublicKey: "kKfOoFVeD0ESbBW+6lFYVo5lsaN2CfGSI1uD8H6rcV0="}}
	forbidden("create a Peer", c.Create(ctx, peer))
	mirrored := &kilov1.Peer{ObjectMeta: metav1.ObjectMeta{Name: mirror.PeerName("dr", "gra")}}
	forbidden("patch a Peer", c.Patch(ctx, mirrored, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`))))
	forbidden("delete a Peer", c.Delete(ctx, mirrored))
	_, err = kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, StringData: map[string]string{"a": "b"}}, metav1.CreateOptions{})
	forbidden("create a Secret", err)
	_, err = kc.CoreV1().Secrets(ns).Patch(ctx, "kilofed-remote-dr", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	forbidden("patch a Secret", err)
	forbidden("delete a Secret", kc.CoreV1().Secrets(ns).Delete(ctx, "kilofed-remote-dr", metav1.DeleteOptions{}))
	rc := &fedv1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: fedv1.RemoteClusterSpec{ClusterID: "intruder", APIServer: "https://203.0.113.99:6443", CredentialsSecret: "x", ServiceAccount: "kilofed-system/x"}}
	forbidden("create a RemoteCluster", c.Create(ctx, rc))
	existing := &fedv1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr"}}
	forbidden("patch a RemoteCluster", c.Patch(ctx, existing, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"apiServer":"https://203.0.113.99:6443"}}`))))
	forbidden("delete a RemoteCluster", c.Delete(ctx, existing))
	_, err = kc.RbacV1().Roles(ns).Patch(ctx, "kilofed-remote-dr", "application/json-patch+json",
		[]byte(`[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]}}]`), metav1.PatchOptions{})
	forbidden("widen its own Role", err)
	forbidden("delete its own Role", kc.RbacV1().Roles(ns).Delete(ctx, "kilofed-remote-dr", metav1.DeleteOptions{}))
	annPatch := &fedv1.Announcement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fedv1.AnnouncementName}}
	forbidden("patch the Announcement", c.Patch(ctx, annPatch, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"clusterID":"evil"}}`))))
	forbidden("delete the Announcement", c.Delete(ctx, annPatch))

	// What it can do, as the API server says.
	rules, err := selfRules(ctx, asDR, ns)
	if err != nil {
		t.Errorf("SelfSubjectRulesReview: %v", err)
	}
	t.Logf("what prod lets dr's token do in %s:\n%s", ns, rules)
}

// startFed installs the CRDs, echo pods, agents and controllers on the
// two clusters of l (twoClusters), waits for each mesh, and checks that no
// pod reaches the other cluster before a join.
func startFed(ctx context.Context, t testing.TB, l *lab.Lab) *fed {
	t.Helper()
	f := &fed{l: l, prod: l.Cluster("prod"), dr: l.Cluster("dr"), agents: map[string]agents{}, ctls: map[string]*lab.Process{}, ips: map[string]map[string]string{}, metrics: map[string]string{}}
	for _, c := range []*lab.Cluster{f.prod, f.dr} {
		t.Logf("cluster %s: pods %s, services %s, WireGuard %s, API %s", c.Name, c.PodCIDR, c.ServiceCIDR, c.WireGuardSubnet, c.APIServer)
	}
	if f.prod.PodCIDR.Overlaps(f.dr.PodCIDR) || f.prod.ServiceCIDR.Overlaps(f.dr.ServiceCIDR) || f.prod.WireGuardSubnet.Overlaps(f.dr.WireGuardSubnet) {
		t.Fatalf("the lab gave prod and dr overlapping ranges")
	}
	var err error
	if f.kubeconfig, err = l.Kubeconfig(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*lab.Cluster{f.prod, f.dr} {
		installCRDs(ctx, t, c)
		f.ips[c.Name] = lab.EchoPodsT(ctx, t, c)
		f.agents[c.Name] = startMesh(t, c)
		f.metrics[c.Name] = freeLoopbackAddr(t)
		f.ctls[c.Name] = startController(t, l, c, f.metrics[c.Name])
	}
	if _, err := f.dr.Client().CoreV1().Services("default").Create(ctx, lab.EchoService("default", "echo", "echo", 8080), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, p := range f.ctls {
				t.Logf("kilofed-controller of %s, last lines:\n%s", name, p.Tail(60))
			}
		}
	})
	// Each cluster's mesh is up (one leader per location) before the join.
	for _, c := range []*lab.Cluster{f.prod, f.dr} {
		for _, loc := range c.Locations() {
			leaderOf(ctx, t, c, f.agents[c.Name], loc.Name, 60*time.Second)
		}
	}
	if got, err := probe(ctx, l, f.prod, "echo-prod-par-1", f.ips["dr"]["echo-dr-gra-1"], 2*time.Second); err == nil {
		t.Fatalf("echo-prod-par-1 reached echo-dr-gra-1 (%q) before the join: the lab leaks", got)
	}
	return f
}
