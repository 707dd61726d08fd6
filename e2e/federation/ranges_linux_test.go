package federation

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
)

// testRemoteRangesAreCheckedAfterTheJoin: a range dr adds after the join
// (a ServiceCIDR) is routed by prod's mirrored Peers within seconds; one that
// overlaps a range of prod (a Node's pod CIDR) is never routed, both
// clusters say which in CIDRsDisjoint, and every pair of pods the overlap
// does not involve keeps working; removed, both come back to Disjoint.
func testRemoteRangesAreCheckedAfterTheJoin(ctx context.Context, t *testing.T, f *fed) {
	added := netip.MustParsePrefix("10.31.0.0/24") // clear of the lab and of the user Peer (10.12/16, 10.22/16)
	for _, c := range []netip.Prefix{f.prod.PodCIDR, f.prod.ServiceCIDR, f.prod.WireGuardSubnet, f.dr.PodCIDR, f.dr.ServiceCIDR, f.dr.WireGuardSubnet} {
		if c.Overlaps(added) {
			t.Fatalf("the lab uses %s, which overlaps the range the test adds (%s)", c, added)
		}
	}
	const overlapNode = "prod-par-1"
	overlap := f.prod.Node(overlapNode).PodCIDRs()[0]
	create := func(name string, p netip.Prefix) {
		t.Helper()
		sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{p.String()}}}
		if _, err := f.dr.Client().NetworkingV1().ServiceCIDRs().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cluster dr: create ServiceCIDR %s (%s): %v", name, p, err)
		}
		t.Cleanup(func() {
			_ = f.dr.Client().NetworkingV1().ServiceCIDRs().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
		})
	}
	routed := func(p netip.Prefix) bool { // by one of prod's Peers of dr
		for _, spec := range mirroredPeers(ctx, t, f.prod, "dr") {
			for _, a := range spec.AllowedIPs {
				if q, err := netip.ParsePrefix(a); err == nil && q.Overlaps(p) {
					return true
				}
			}
		}
		return false
	}
	waitFor := func(what string, within time.Duration, ok func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for deadline := start.Add(within); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, within)
			}
		}
		return time.Since(start)
	}

	create("kilofed-e2e-added", added)
	took := waitFor("prod's Peers of dr route dr's new ServiceCIDR "+added.String(), 30*time.Second, func() bool { return routed(added) })
	t.Logf("dr's new range %s routed by prod's Peers %v after it was created", added, took.Round(time.Millisecond))

	create("kilofed-e2e-overlap", overlap)
	disjoint := func(c string, want bool) func() bool {
		return func() bool {
			cl, remote := f.prod, "dr"
			if c == "dr" {
				cl, remote = f.dr, "prod"
			}
			cond := condition(remoteCluster(ctx, t, cl, remote), fedv1.CIDRsDisjoint)
			return cond != nil && (cond.Status == metav1.ConditionTrue) == want
		}
	}
	for _, c := range []string{"prod", "dr"} {
		took := waitFor(c+" reports the overlap in CIDRsDisjoint", 30*time.Second, disjoint(c, false))
		cl, remote := f.prod, "dr"
		if c == "dr" {
			cl, remote = f.dr, "prod"
		}
		cond := condition(remoteCluster(ctx, t, cl, remote), fedv1.CIDRsDisjoint)
		t.Logf("cluster %s, RemoteCluster %s, after %v: CIDRsDisjoint=%s %s: %s", c, remote, took.Round(time.Millisecond), cond.Status, cond.Reason, cond.Message)
		if !strings.Contains(cond.Message, overlap.String()) || !strings.Contains(cond.Message, "prod") || !strings.Contains(cond.Message, "dr") {
			t.Errorf("cluster %s: CIDRsDisjoint does not name the range %s and both clusters: %q", c, overlap, cond.Message)
		}
	}
	for name, spec := range mirroredPeers(ctx, t, f.prod, "dr") {
		for _, a := range spec.AllowedIPs {
			if q, err := netip.ParsePrefix(a); err == nil && q.Overlaps(overlap) {
				t.Errorf("prod's Peer %s routes %s into dr: it overlaps prod-par-1's pod CIDR %s", name, q, overlap)
			}
		}
	}
	// dr no longer routes prod-par-1's pods (its range is now also dr's);
	// every other pair works.
	failed := somePairs(ctx, f, 30*time.Second, func(a, b string) bool {
		return a != "echo-"+overlapNode && b != "echo-"+overlapNode
	})
	for _, s := range failed {
		t.Errorf("with the overlap reported, a pair it does not involve fails: %s", s)
	}

	for _, name := range []string{"kilofed-e2e-overlap", "kilofed-e2e-added"} {
		if err := f.dr.Client().NetworkingV1().ServiceCIDRs().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("cluster dr: delete ServiceCIDR %s: %v", name, err)
		}
	}
	for _, c := range []string{"prod", "dr"} {
		waitFor(c+" back to CIDRsDisjoint=True", 60*time.Second, disjoint(c, true))
	}
	waitFor("prod's Peers of dr stop routing "+added.String(), 60*time.Second, func() bool { return !routed(added) })
	if failed := crossPairs(ctx, f, 60*time.Second); len(failed) > 0 {
		t.Errorf("after the ranges were removed, pairs fail:\n%s", strings.Join(failed, "\n"))
	}
}

// testControllerMetrics reads each controller's /metrics: the joined
// cluster Ready and reachable, Peer syncs without errors, the time from a
// remote change to the local Peers observed (failover and rotation made
// some), and a recent handshake with every gateway of the other cluster.
func testControllerMetrics(ctx context.Context, t *testing.T, f *fed) {
	for local, remote := range map[string]string{"prod": "dr", "dr": "prod"} {
		t.Run(local, func(t *testing.T) {
			ms := scrape(ctx, t, f.metrics[local])
			label := fmt.Sprintf(`{remote=%q}`, remote)
			for _, want := range []struct {
				name string
				ok   func(float64) bool
				says string
			}{
				{"kilofed_remote_cluster_ready" + label, func(v float64) bool { return v == 1 }, "1"},
				{"kilofed_remote_cluster_api_reachable" + label, func(v float64) bool { return v == 1 }, "1"},
				{"kilofed_peer_syncs_total" + label, func(v float64) bool { return v > 0 }, "> 0"},
				{"kilofed_remote_change_to_peer_seconds_count" + label, func(v float64) bool { return v > 0 }, "> 0"},
			} {
				v, ok := ms[want.name]
				if !ok || !want.ok(v) {
					t.Errorf("%s's /metrics: %s = %v (present %v), want %s", local, want.name, v, ok, want.says)
				}
			}
			gateways := 0
			for name, v := range ms {
				if !strings.HasPrefix(name, "kilofed_remote_gateway_latest_handshake_seconds{") || !strings.Contains(name, label[1:len(label)-1]) {
					continue
				}
				gateways++
				if age := time.Since(time.Unix(int64(v), 0)); age > 3*time.Minute {
					t.Errorf("%s's /metrics: %s is %v old", local, name, age.Round(time.Second))
				}
			}
			cl := f.prod
			if local == "dr" {
				cl = f.dr
			}
			if want := len(mirroredPeers(ctx, t, cl, remote)); gateways != want || want == 0 {
				t.Errorf("%s's /metrics: latest handshakes of %d gateways of %s, want %d (one per mirrored Peer)", local, gateways, remote, want)
			}
			t.Logf("%s's /metrics: %d series of kilofed_, handshakes with %d gateways of %s", local, countPrefix(ms, "kilofed_"), gateways, remote)
		})
	}
}

// scrape reads a Prometheus text exposition into series name (with labels)
// -> value.
func scrape(ctx context.Context, t testing.TB, addr string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET http://%s/metrics: %v", addr, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func countPrefix(ms map[string]float64, p string) int {
	n := 0
	for k := range ms {
		if strings.HasPrefix(k, p) {
			n++
		}
	}
	return n
}

// freeLoopbackAddr returns a loopback address with a port free now.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
