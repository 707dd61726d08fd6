//go:build linux

package federation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kilofed/kilofed/e2e/lab"
	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/federation/mirror"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// selfRules returns what the API server says c may do in namespace ns.
func selfRules(ctx context.Context, c *kube.Cluster, ns string) (string, error) {
	r, err := c.Kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	var lines []string
	for _, rule := range r.Status.ResourceRules {
		lines = append(lines, fmt.Sprintf("  %v on %v %v (groups %v)", rule.Verbs, rule.Resources, rule.ResourceNames, rule.APIGroups))
	}
	for _, rule := range r.Status.NonResourceRules {
		lines = append(lines, fmt.Sprintf("  %v on %v", rule.Verbs, rule.NonResourceURLs))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// userPeerName is the seed's DR Peer, applied by hand in prod.
const userPeerName = "cluster-dr-ovhcloud"

// userPeerKey is the public key the user Peer gets in place of the seed's
// placeholder (a valid key of nobody).
const userPeerKey = "kKfOoFVeD0ESbBW+6lFYVo5lsaN2CfGSI1uD8H6rcV0="

// userPeer returns the seed's DR Peer YAML as written there, with a valid
// key, an endpoint of the lab's Internet, and ranges of a third DR site
// (the seed's own ranges are dr's, which the federation now routes).
func userPeer(t testing.TB) string {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "mesh", "apis", "kilo", "v1alpha1", "testdata", "cluster-dr-ovhcloud.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("DrClusterPublicKeyBase64==", userPeerKey, "dr-gateway.example.com", "198.51.100.250",
		"10.11.0.0/16", "10.12.0.0/16", "10.21.0.0/16", "10.22.0.0/16").Replace(string(b))
}

// peerState is a Peer as the user or the controller wrote it: labels,
// owners and spec (not its status, which the agents write).
func peerState(ctx context.Context, c *lab.Cluster, name string) (string, error) {
	var p kilov1.Peer
	cl, err := kube.New(c.Name, c.RESTConfig())
	if err != nil {
		return "", err
	}
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
		return "", err
	}
	var managers []string
	for _, m := range p.ManagedFields {
		if m.Subresource == "" {
			managers = append(managers, m.Manager)
		}
	}
	b, _ := yaml.Marshal(map[string]any{"labels": p.Labels, "owners": p.OwnerReferences, "spec": p.Spec, "generation": p.Generation, "managers": managers})
	return string(b), nil
}

func testUserPeer(ctx context.Context, t *testing.T, f *fed) {
	path := filepath.Join(t.TempDir(), "peer.yaml")
	if err := os.WriteFile(path, []byte(userPeer(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	f.prod.KubectlT(ctx, t, "apply", "-f", path)
	before, err := peerState(ctx, f.prod, userPeerName)
	if err != nil {
		t.Fatal(err)
	}
	// The agents install it beside the mirrored Peers.
	for _, loc := range f.prod.Locations() {
		leader := leaderOf(ctx, t, f.prod, f.agents["prod"], loc.Name, 30*time.Second)
		var out string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			out, _ = wg(ctx, f.agents["prod"][leader.Name], "show", "kilo0", "allowed-ips")
			if strings.Contains(out, userPeerKey+"\t10.12.0.0/16 10.22.0.0/16") {
				break
			}
		}
		if !strings.Contains(out, userPeerKey+"\t10.12.0.0/16 10.22.0.0/16") {
			t.Errorf("prod's leader %s of %s has no WireGuard peer for the user Peer:\n%s", leader.Name, loc.Name, out)
		}
	}
	// Two resync periods of the controllers, while the federation carries
	// traffic.
	time.Sleep(11 * time.Second)
	if _, err := answer(ctx, f.l, f.prod, "echo-prod-par-1", f.ips["dr"]["echo-dr-gra-1"], "echo-dr-gra-1", "dr", 10*time.Second); err != nil {
		t.Errorf("with the user Peer beside it, the federation stopped: %v", err)
	}
	after, err := peerState(ctx, f.prod, userPeerName)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the user Peer changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	t.Logf("user Peer %s, untouched:\n%s", userPeerName, after)
}

// publicKey returns the public key of agent's WireGuard interface.
func publicKey(ctx context.Context, t testing.TB, agent *lab.Process) string {
	t.Helper()
	out, err := wg(ctx, agent, "show", "kilo0", "public-key")
	if err != nil {
		t.Fatalf("wg show kilo0 public-key: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// mirroredPeer returns the spec of prod's Peer mirroring location loc of dr.
func mirroredPeer(ctx context.Context, t testing.TB, c *lab.Cluster, remote, loc string) kilov1.PeerSpec {
	t.Helper()
	cl, err := kube.New(c.Name, c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var p kilov1.Peer
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: mirror.PeerName(remote, loc)}, &p); err != nil {
		t.Fatalf("cluster %s: Peer %s: %v", c.Name, mirror.PeerName(remote, loc), err)
	}
	return p.Spec
}

func testFailover(ctx context.Context, t *testing.T, f *fed) {
	const loc = "gra"
	for _, how := range []string{"kill", "cut"} {
		t.Run(how, func(t *testing.T) {
			as := f.agents["dr"]
			leader := leaderOf(ctx, t, f.dr, as, loc, 60*time.Second)
			var survivor *lab.Node
			for _, n := range f.dr.Location(loc).Nodes() {
				if n != leader {
					survivor = n
				}
			}
			target, pod := f.ips["dr"]["echo-"+survivor.Name], "echo-"+survivor.Name
			froms := []string{"echo-prod-par-1", "echo-prod-dc-1"}
			for _, from := range froms {
				if _, err := answer(ctx, f.l, f.prod, from, target, pod, "dr", 60*time.Second); err != nil {
					t.Fatalf("before the %s, prod/%s -> dr/%s: %v", how, from, pod, err)
				}
			}
			old := mirroredPeer(ctx, t, f.prod, "dr", loc)
			start := time.Now()
			switch how {
			case "kill":
				if err := as[leader.Name].Kill(); err != nil {
					t.Fatalf("kill kg on %s: %v", leader.Name, err)
				}
			case "cut":
				if err := leader.Down(); err != nil {
					t.Fatalf("cut %s off its LAN: %v", leader.Name, err)
				}
			}
			restored := map[string]time.Duration{}
			var followed time.Duration
			for deadline := start.Add(20 * time.Second); (len(restored) < len(froms) || followed == 0) && time.Now().Before(deadline); {
				if followed == 0 && mirroredPeer(ctx, t, f.prod, "dr", loc).PublicKey != old.PublicKey {
					followed = time.Since(start)
				}
				for _, from := range froms {
					if _, ok := restored[from]; ok {
						continue
					}
					if got, err := probe(ctx, f.l, f.prod, from, target, 500*time.Millisecond); err == nil && got[0] == pod {
						restored[from] = time.Since(start)
					}
				}
			}
			now := mirroredPeer(ctx, t, f.prod, "dr", loc)
			wantKey := publicKey(ctx, t, as[survivor.Name])
			wantEndpoint := survivor.PublicIP.String() + ":51820"
			t.Logf("%s of dr's gateway %s (%s): prod's Peer followed after %v, traffic restored after %v (public location) and %v (behind NAT); Peer now key %s… endpoint %v",
				how, leader.Name, loc, followed.Round(time.Millisecond), restored[froms[0]].Round(time.Millisecond), restored[froms[1]].Round(time.Millisecond), now.PublicKey[:8], now.Endpoint)
			if now.PublicKey != wantKey || now.Endpoint == nil || now.Endpoint.String() != wantEndpoint {
				t.Errorf("prod's Peer %s has key %s endpoint %v, want the new gateway %s's %s and %s", mirror.PeerName("dr", loc), now.PublicKey, now.Endpoint, survivor.Name, wantKey, wantEndpoint)
			}
			if len(restored) < len(froms) {
				t.Errorf("traffic prod -> dr/%s not restored within 20 s of the %s (restored: %v)", pod, how, restored)
			}
			// Bring the old gateway back as a standby for what follows.
			switch how {
			case "kill":
				as[leader.Name] = startAgent(t, leader)
			case "cut":
				if err := leader.Up(); err != nil {
					t.Fatalf("reconnect %s: %v", leader.Name, err)
				}
			}
			leaderOf(ctx, t, f.dr, as, loc, 60*time.Second)
			if failed := crossPairs(ctx, f, 60*time.Second); len(failed) > 0 {
				t.Errorf("after the %s and the old gateway's return, pairs fail:\n%s", how, strings.Join(failed, "\n"))
			}
		})
	}
}

// mirroredPeers returns the specs of c's Peers mirrored from remote.
func mirroredPeers(ctx context.Context, t testing.TB, c *lab.Cluster, remote string) map[string]kilov1.PeerSpec {
	t.Helper()
	cl, err := kube.New(c.Name, c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var list kilov1.PeerList
	if err := cl.Client.List(ctx, &list, client.MatchingLabels{mirror.LabelRemote: remote}); err != nil {
		t.Fatal(err)
	}
	out := map[string]kilov1.PeerSpec{}
	for _, p := range list.Items {
		out[p.Name] = p.Spec
	}
	return out
}

// remoteCluster returns c's RemoteCluster name.
func remoteCluster(ctx context.Context, t testing.TB, c *lab.Cluster, name string) fedv1.RemoteCluster {
	t.Helper()
	cl, err := kube.New(c.Name, c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var rc fedv1.RemoteCluster
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: name}, &rc); err != nil {
		t.Fatalf("cluster %s: RemoteCluster %s: %v", c.Name, name, err)
	}
	return rc
}

func condition(rc fedv1.RemoteCluster, typ string) *metav1.Condition {
	for i := range rc.Status.Conditions {
		if rc.Status.Conditions[i].Type == typ {
			return &rc.Status.Conditions[i]
		}
	}
	return nil
}

// countLines counts the lines of a process's log that contain s.
func countLines(p *lab.Process, s string) int {
	b, _ := os.ReadFile(p.LogPath)
	return strings.Count(string(b), s)
}

func testAPIOutage(ctx context.Context, t *testing.T, f *fed) {
	apiOutage(ctx, t, f, f.dr, f.prod, [][2]string{{"echo-prod-par-1", "echo-dr-gra-1"}, {"echo-prod-par-2", "echo-dr-dc-1"}, {"echo-prod-dc-1", "echo-dr-gra-2"}})
}

// testOwnAPIOutage stops prod's own API server: dr keeps reaching prod.
func testOwnAPIOutage(ctx context.Context, t *testing.T, f *fed) {
	apiOutage(ctx, t, f, f.prod, f.dr, [][2]string{{"echo-dr-gra-1", "echo-prod-par-1"}, {"echo-dr-gra-2", "echo-prod-dc-1"}, {"echo-dr-dc-1", "echo-prod-par-2"}})
}

// apiOutage stops down's API server for 15 s while pods of up probe pods
// of down (pairs from, to), and checks that up keeps down's Peers, says
// APIReachable=False since when, and converges without a flap once down's
// API server is back.
func apiOutage(ctx context.Context, t *testing.T, f *fed, down, up *lab.Cluster, pairs [][2]string) {
	t.Logf("stopping %s's API server while pods of %s probe pods of %s", down.Name, up.Name, down.Name)
	peers := mirroredPeers(ctx, t, up, down.Name)
	writes := countLines(f.ctls[up.Name], "Peer written") + countLines(f.ctls[up.Name], "stale Peer deleted")
	type target struct{ from, to string }
	var targets []target
	for _, p := range pairs {
		targets = append(targets, target{p[0], p[1]})
	}
	for _, tg := range targets {
		if _, err := answer(ctx, f.l, up, tg.from, f.ips[down.Name][tg.to], tg.to, down.Name, 30*time.Second); err != nil {
			t.Fatalf("before the outage, %s -> %s: %v", tg.from, tg.to, err)
		}
	}
	var sent, lost atomic.Int64
	var lossMu sync.Mutex
	losses := map[string][]string{} // target -> when, since the outage began
	var outageStart atomic.Int64
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				sent.Add(1)
				if got, err := probe(pctx, f.l, up, tg.from, f.ips[down.Name][tg.to], time.Second); (err != nil || got[0] != tg.to) && pctx.Err() == nil {
					lost.Add(1)
					lossMu.Lock()
					losses[tg.from+" -> "+tg.to] = append(losses[tg.from+" -> "+tg.to], fmt.Sprintf("%.1fs", time.Since(time.Unix(0, outageStart.Load())).Seconds()))
					lossMu.Unlock()
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	stopProbes := func() (int64, int64) {
		stop()
		wg.Wait()
		return sent.Load(), lost.Load()
	}
	defer stopProbes()

	drAnn := announcement(ctx, t, down)
	start := time.Now()
	outageStart.Store(start.UnixNano())
	defer func() {
		lossMu.Lock()
		defer lossMu.Unlock()
		for tg, at := range losses {
			t.Logf("probes %s lost at %v after the outage began", tg, at)
		}
		for name, p := range f.agents[down.Name] {
			for _, line := range logSince(p, start, "leader", "segment", "not forwarding", "API") {
				t.Logf("  "+down.Name+"/%s kg: %s", name, line)
			}
		}
		for _, line := range logSince(f.ctls[up.Name], start, "Peer written", "stale Peer", "remote API") {
			t.Logf("  "+up.Name+"'s controller: %s", line)
		}
		for _, line := range logSince(f.ctls[down.Name], start, "announced", "Peer written", "remote API") {
			t.Logf("  "+down.Name+"'s controller: %s", line)
		}
	}()
	if err := down.StopAPIServer(); err != nil {
		t.Fatalf("stop the stopped API server: %v", err)
	}
	var rc fedv1.RemoteCluster
	var seen time.Duration
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		rc = remoteCluster(ctx, t, up, down.Name)
		if c := condition(rc, fedv1.APIReachable); c != nil && c.Status == metav1.ConditionFalse {
			seen = time.Since(start)
			break
		}
	}
	c := condition(rc, fedv1.APIReachable)
	if seen == 0 || c == nil {
		t.Errorf("20 s after the stopped API server stopped, the other cluster's RemoteCluster of it does not say APIReachable=False: %+v", rc.Status.Conditions)
	} else {
		t.Logf("the other cluster saw the API down after %v: APIReachable=%s (%s) since %s: %s; status.apiReachable=%s", seen.Round(time.Millisecond), c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Message, rc.Status.APIReachable)
		if !strings.Contains(c.Message, "since") || rc.Status.APIReachable != "False" {
			t.Errorf("APIReachable says no since when, or the printer column disagrees: %q, %q", c.Message, rc.Status.APIReachable)
		}
	}
	// The outage lasts 15 s in all.
	time.Sleep(time.Until(start.Add(15 * time.Second)))
	if now := mirroredPeers(ctx, t, up, down.Name); !reflect.DeepEqual(now, peers) {
		t.Errorf("the other cluster's Peers of it changed during the API outage:\nbefore %+v\nnow    %+v", peers, now)
	}
	s, lo := sent.Load(), lost.Load()
	t.Logf("during the API outage (15 s): %d probes, %d lost", s, lo)
	if err := down.StartAPIServer(ctx); err != nil {
		t.Fatalf("start the stopped API server again: %v", err)
	}
	back := time.Now()
	var reach time.Duration
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		rc = remoteCluster(ctx, t, up, down.Name)
		if c := condition(rc, fedv1.APIReachable); c != nil && c.Status == metav1.ConditionTrue {
			reach = time.Since(back)
			break
		}
	}
	if reach == 0 {
		t.Errorf("30 s after the stopped API server returned, the other cluster's RemoteCluster of it does not say APIReachable=True: %+v", rc.Status.Conditions)
	}
	// Two resync periods more: nothing flaps.
	time.Sleep(11 * time.Second)
	total, totalLost := stopProbes()
	if now := announcement(ctx, t, down); !reflect.DeepEqual(now.Gateways, drAnn.Gateways) {
		t.Errorf("the stopped cluster's own mesh changed its gateways across its API outage (its agents, not the federation):\nbefore %+v\nnow    %+v", drAnn.Gateways, now.Gateways)
	}
	if now := mirroredPeers(ctx, t, up, down.Name); !reflect.DeepEqual(now, peers) {
		t.Errorf("the other cluster's Peers of it changed after the API returned:\nbefore %+v\nnow    %+v", peers, now)
	}
	if w := countLines(f.ctls[up.Name], "Peer written") + countLines(f.ctls[up.Name], "stale Peer deleted"); w != writes {
		t.Errorf("the other cluster's controller wrote or deleted Peers %d times during and after the outage, want none", w-writes)
	}
	rc = remoteCluster(ctx, t, up, down.Name)
	if r := condition(rc, fedv1.Ready); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("the other cluster's RemoteCluster of it not Ready after the outage: %+v", rc.Status.Conditions)
	}
	t.Logf("API back: the other cluster saw it after %v; over the whole run %d probes, %d lost (%d during the outage)", reach.Round(time.Millisecond), total, totalLost, lo)
	if totalLost > 0 {
		t.Errorf("%d of %d probes to the stopped cluster were lost around the API outage", totalLost, total)
	}
}

func testUnjoin(ctx context.Context, t *testing.T, f *fed) {
	userBefore, err := peerState(ctx, f.prod, userPeerName)
	if err != nil {
		t.Logf("no user Peer to check (its subtest did not run): %v", err)
	}
	out, err := f.kilofed(ctx, "prod", "unjoin", "dr")
	t.Logf("kilofed --context prod unjoin dr:\n%s", out)
	if err != nil {
		t.Fatalf("unjoin: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != "unjoined prod and dr" {
		t.Errorf("unjoin's last line is %q", lines[len(lines)-1])
	}
	left := func(c *lab.Cluster) []string {
		var l []string
		for _, line := range inventory(ctx, t, c) {
			f := strings.Fields(line)
			if len(f) >= 2 && (f[0] == "RemoteCluster" || strings.Contains(f[1], "kilofed-remote-")) {
				l = append(l, line)
			}
		}
		peers := c.KubectlT(ctx, t, "get", "peers", "-l", mirror.LabelRemote, "-o", "name")
		if s := strings.TrimSpace(peers); s != "" {
			l = append(l, strings.Split(s, "\n")...)
		}
		return l
	}
	// Nothing is left, and nothing comes back (a controller's link in
	// flight, the garbage collector) over two resync periods.
	time.Sleep(11 * time.Second)
	for _, c := range []*lab.Cluster{f.prod, f.dr} {
		if l := left(c); len(l) > 0 {
			t.Errorf("after unjoin, cluster %s still holds:\n%s", c.Name, strings.Join(l, "\n"))
		}
		t.Logf("cluster %s after unjoin: kubectl get peers,remoteclusters -A:\n%s", c.Name, c.KubectlT(ctx, t, "get", "peers,remoteclusters", "-A"))
	}
	if userBefore != "" {
		if after, err := peerState(ctx, f.prod, userPeerName); err != nil || after != userBefore {
			t.Errorf("unjoin touched the user Peer %s: %v\nbefore:\n%s\nafter:\n%s", userPeerName, err, userBefore, after)
		}
	}
	if got, err := probe(ctx, f.l, f.prod, "echo-prod-par-1", f.ips["dr"]["echo-dr-gra-1"], 2*time.Second); err == nil {
		t.Errorf("after unjoin, prod still reaches dr (%q)", got)
	}
}

// announcement returns c's own Announcement.
func announcement(ctx context.Context, t testing.TB, c *lab.Cluster) fedv1.AnnouncementSpec {
	t.Helper()
	cl, err := kube.New(c.Name, c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var a fedv1.Announcement
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: fedv1.Namespace, Name: fedv1.AnnouncementName}, &a); err != nil {
		t.Fatalf("cluster %s: Announcement: %v", c.Name, err)
	}
	return a.Spec
}

// logSince returns the lines of p's log (slog text: time=RFC3339...) at or
// after since that contain one of words.
func logSince(p *lab.Process, since time.Time, words ...string) []string {
	b, _ := os.ReadFile(p.LogPath)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "time=") {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time="))
		if err != nil || at.Before(since) {
			continue
		}
		for _, w := range words {
			if strings.Contains(line, w) {
				if len(line) > 300 {
					line = line[:300]
				}
				out = append(out, line)
				break
			}
		}
	}
	return out
}
