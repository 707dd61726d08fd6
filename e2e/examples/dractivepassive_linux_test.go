//go:build linux

package examples

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/federation/controller"
	"github.com/kilofed/kilofed/servicesync"
)

// The controller-runtime client of the DR test logs nothing.
func init() { ctrllog.SetLogger(logr.Discard()) }

// drLab is examples/dr-active-passive's pair of clusters, with kube-proxy
// and CoreDNS: production, one location of two nodes, and DR, two
// locations of one node each (so that DR has tunnels of its own, between
// its locations, besides those to production).
func drLab() lab.Spec {
	return lab.Spec{KubeProxy: true, CoreDNS: true, Clusters: []lab.ClusterSpec{
		{Name: "prod", Locations: []lab.LocationSpec{{Name: "paris", Nodes: []lab.NodeSpec{{Name: "prod-par-1"}, {Name: "prod-par-2"}}}}},
		{Name: "dr", Locations: []lab.LocationSpec{
			{Name: "gra", Nodes: []lab.NodeSpec{{Name: "dr-gra-1"}}},
			{Name: "rbx", Nodes: []lab.NodeSpec{{Name: "dr-rbx-1"}}},
		}},
	}}
}

// wireGuardRejectAfter is WireGuard's REJECT_AFTER_TIME, 3 minutes: a
// session whose handshake is older is no longer used. With traffic (the
// keepalives) a new handshake comes every REKEY_AFTER_TIME, 2 minutes; the
// federation counts a tunnel as up below the same bound.
const wireGuardRejectAfter = controller.TunnelFresh

// usersAnswer is one try of the users' client.
type usersAnswer struct {
	at      time.Time // when the try began
	done    time.Time // when it ended
	cluster string    // who answered; "" on failure
	err     error
}

// TestDRActivePassiveExampleDRTakesOverWhenProductionIsLostAndLosesNothing
// runs examples/dr-active-passive/README.md: kilofed in both clusters,
// `kilofed --context prod join dr`, shop.yaml in both, dr-replica.yaml in
// DR; production ships to DR's orders-replica by its clusterset name; the
// users (a host on the Internet) reach shop.example.com, pointed at
// production. failover.sh refuses while production's API answers. Then
// production is lost (its nodes cut off, its control plane, kg and
// controller killed) and failover.sh runs at once; the test measures
// the time from the loss to the users' first answer from DR. Throughout,
// every handshake sample of DR's gateways is younger than WireGuard's
// bound (production's until the loss, DR's own always), DR's shop answers
// at its entry and DR resolves and reaches its export; after the
// takeover, DR's pods, Services, exports, imports, EndpointSlices and its
// own tunnels are what they were before the loss.
func TestDRActivePassiveExampleDRTakesOverWhenProductionIsLostAndLosesNothing(t *testing.T) {
	begin := time.Now()
	l := lab.StartT(t, drLab())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	prod, dr := l.Cluster("prod"), l.Cluster("dr")
	dir := example(t, "dr-active-passive")
	kubeconfig, err := l.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	run := func(script string, env ...string) (string, error) {
		return shell(ctx, l, kubeconfig, "cd "+dir+" && "+script, env...)
	}
	must := func(script string, env ...string) string {
		t.Helper()
		out, err := run(script, env...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return out
	}

	// Before you start: kilofed in each cluster.
	agents := map[string]map[string]*lab.Process{}
	ctls := map[string]*lab.Process{}
	for _, c := range []*lab.Cluster{prod, dr} {
		installFederationCRDs(ctx, t, c)
		agents[c.Name] = startMesh(t, c)
		ctls[c.Name] = startController(t, l, c)
	}
	// At the end, production comes back, so that the lab closes as usual.
	t.Cleanup(func() {
		for _, n := range prod.Nodes() {
			_ = n.Up()
		}
		_ = prod.StartControlPlane(context.Background())
	})

	// 1. Join; the application in both clusters, the replica in DR.
	join := must("kilofed --context prod join dr")
	if !strings.Contains(join, "joined prod and dr") {
		t.Fatalf("kilofed join did not say it joined the clusters:\n%s", join)
	}
	drKeys := map[string]string{}
	for _, n := range dr.Nodes() {
		drKeys[dr.KubectlT(ctx, t, "get", "node", n.Name, "-o", `jsonpath={.metadata.annotations.kilo\.squat\.ai/key}`)] = n.Name
	}

	// From the join to the end, every 2 s: the handshakes of DR's
	// gateways, with production's gateways (until the loss) and with each
	// other (DR's own tunnel).
	var (
		mu       sync.Mutex
		lost     time.Time // when production was lost; zero before
		problems []string
		samples  = map[string]int{}           // "prod" or "dr" tunnels: samples
		oldest   = map[string]time.Duration{} // their oldest handshake seen
		drPeers  = map[string][]string{}      // DR's gateways' DR peers, first sample
		drOK     int
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
	sctx, stop := context.WithCancel(ctx)
	sampled := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		for sctx.Err() == nil {
			for name, p := range agents["dr"] {
				hs, err := handshakes(sctx, p)
				if err != nil {
					if sctx.Err() == nil {
						report("%s: %v", name, err)
					}
					continue
				}
				mu.Lock()
				wasLost := !lost.IsZero()
				var own []string
				for key, age := range hs {
					class := "prod"
					if _, ok := drKeys[key]; ok {
						class = "dr"
						own = append(own, drKeys[key])
					}
					if class == "prod" && wasLost {
						continue
					}
					samples[class]++
					oldest[class] = max(oldest[class], age)
					if age < 0 || age >= wireGuardRejectAfter {
						problems = append(problems, fmt.Sprintf("%s: %s tunnel to %s: latest handshake %v old (-1: never), bound %v", name, class, key[:8], age, wireGuardRejectAfter))
					}
				}
				sort.Strings(own)
				if first, ok := drPeers[name]; !ok {
					drPeers[name] = own
				} else if !slices.Equal(first, own) {
					problems = append(problems, fmt.Sprintf("%s: DR peers %v, were %v", name, own, first))
				}
				mu.Unlock()
			}
			select {
			case <-sctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	})
	defer func() { stop(); wg.Wait() }()

	must("kubectl --context prod apply -f shop.yaml")
	must("kubectl --context dr apply -f shop.yaml")
	must("kubectl --context dr apply -f dr-replica.yaml")
	podsOf := func(c *lab.Cluster, app string, n int) map[string]bool {
		t.Helper()
		pods, err := c.WaitPods(ctx, "shop", "app="+app, n)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, p := range pods {
			names[p.Name] = true
		}
		return names
	}
	prodShop, drShop, drReplica := podsOf(prod, "shop", 2), podsOf(dr, "shop", 2), podsOf(dr, "orders-replica", 1)
	answeredBy := func(words []string, pods map[string]bool, cluster string) error {
		if len(words) < 2 || !pods[words[0]] || words[1] != cluster {
			return fmt.Errorf("answered %q, want a pod of %v in %s", words, pods, cluster)
		}
		return nil
	}

	// 2. Production ships to DR's replica over the tunnel, by its
	// clusterset name; DR reaches its own export by the same name.
	const replicaURL = "http://orders-replica.shop.svc.clusterset.local:8080/"
	for _, c := range []*lab.Cluster{prod, dr} {
		var got []string
		took, err := eventually(ctx, 60*time.Second, func() error {
			var err error
			if got, err = curl(ctx, c, "shop", "deploy/shop", replicaURL); err == nil {
				err = answeredBy(got, drReplica, "dr")
			}
			return err
		})
		if err != nil {
			t.Fatalf("kubectl --context %s -n shop exec deploy/shop -- curl -s %s: %v", c.Name, replicaURL, err)
		}
		t.Logf("kubectl --context %s -n shop exec deploy/shop -- curl -s %s\n%s  (after %v)", c.Name, replicaURL, strings.Join(got, " "), took.Round(time.Millisecond))
	}

	// 3. The users: a host on the Internet resolving shop.example.com with
	// a hosts file (ip netns exec binds it over /etc/hosts) that
	// dns-hosts.sh, the stand-in for the DNS provider, writes.
	users, err := l.AddHost(ctx, "users", lab.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join("/etc/netns", users.Netns)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(etc) })
	hostsFile := filepath.Join(etc, "hosts")
	if err := os.WriteFile(hostsFile, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prodEntry, drEntry := prod.Node("prod-par-1").PublicIP.String(), dr.Node("dr-gra-1").PublicIP.String()
	dnsUpdate := []string{"DNS_UPDATE=" + filepath.Join(dir, "dns-hosts.sh"), "HOSTS_FILE=" + hostsFile}
	must(`$DNS_UPDATE shop.example.com "$PROD_ENTRY"`, append(dnsUpdate, "PROD_ENTRY="+prodEntry)...)
	get := func(ctx context.Context, url string, timeout time.Duration) ([]string, error) {
		out, err := users.Exec(ctx, "curl", "-s", "--max-time", fmt.Sprint(timeout.Seconds()), url)
		if err != nil {
			return nil, err
		}
		return strings.Fields(string(out)), nil
	}
	const shopURL = "http://shop.example.com:30080/"
	drURL := "http://" + drEntry + ":30080/"
	for _, g := range []struct {
		url     string
		pods    map[string]bool
		cluster string
	}{{shopURL, prodShop, "prod"}, {drURL, drShop, "dr"}} {
		var got []string
		if _, err := eventually(ctx, 30*time.Second, func() error {
			var err error
			if got, err = get(ctx, g.url, 2*time.Second); err == nil {
				err = answeredBy(got, g.pods, g.cluster)
			}
			return err
		}); err != nil {
			t.Fatalf("users: curl %s: %v", g.url, err)
		}
		t.Logf("users: curl -s %s\n%s", g.url, strings.Join(got, " "))
	}

	// The tunnels, as kilofed status shows them from DR.
	status := must("kilofed --context dr status")
	t.Logf("kilofed --context dr status\n%s", status)
	if !strings.Contains(status, "prod") {
		t.Fatalf("kilofed --context dr status does not name prod:\n%s", status)
	}

	// The runbook refuses while production's API server answers.
	drEnv := append(dnsUpdate, "DR_ENTRY="+drEntry)
	if out, err := run("./failover.sh", drEnv...); err == nil || !strings.Contains(out, "not failing over") {
		t.Fatalf("failover.sh while production is up: %v, want a refusal:\n%s", err, out)
	}
	if got, err := get(ctx, shopURL, 2*time.Second); err != nil || answeredBy(got, prodShop, "prod") != nil {
		t.Fatalf("after the refused failover.sh, shop.example.com answered %q (%v), want production", got, err)
	}

	// What DR holds before the loss, and DR's gateways' peers.
	k, err := client.New(dr.RESTConfig(), client.Options{Scheme: servicesync.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	before, err := drState(ctx, dr, k)
	if err != nil {
		t.Fatal(err)
	}

	// Every second from here to the end: DR's shop at its entry (the
	// users) and DR's export by its clusterset name (from DR's shop).
	wg.Go(func() {
		for sctx.Err() == nil {
			tick := time.After(time.Second)
			got, err := get(sctx, drURL, 3*time.Second)
			if err == nil {
				err = answeredBy(got, drShop, "dr")
			}
			if err == nil {
				got, err = curl(sctx, dr, "shop", "deploy/shop", replicaURL)
				if err == nil {
					err = answeredBy(got, drReplica, "dr")
				}
			}
			if sctx.Err() != nil {
				return
			}
			if err != nil {
				report("DR's service: %v", err)
			} else {
				mu.Lock()
				drOK++
				mu.Unlock()
			}
			select {
			case <-sctx.Done():
			case <-tick:
			}
		}
	})
	// The users' client: shop.example.com every 200 ms.
	var answers []usersAnswer
	wg.Go(func() {
		for sctx.Err() == nil {
			tick := time.After(200 * time.Millisecond)
			a := usersAnswer{at: time.Now()}
			got, err := get(sctx, shopURL, time.Second)
			switch {
			case err != nil:
				a.err = err
			case answeredBy(got, prodShop, "prod") == nil:
				a.cluster = "prod"
			case answeredBy(got, drShop, "dr") == nil:
				a.cluster = "dr"
			default:
				a.err = fmt.Errorf("answered %q", got)
			}
			a.done = time.Now()
			if sctx.Err() != nil {
				return
			}
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
			select {
			case <-sctx.Done():
			case <-tick:
			}
		}
	})
	time.Sleep(5 * time.Second) // a few samples before the loss

	// 4. Production is lost: its API server, control plane and nodes.
	t.Logf("production lost: nodes cut off, control plane killed, kg and kilofed-controller killed")
	mu.Lock()
	lost = time.Now()
	mu.Unlock()
	if err := prod.LoseSite(); err != nil {
		t.Fatal(err)
	}
	for _, p := range agents["prod"] {
		_ = p.Kill()
	}
	_ = ctls["prod"].Kill()
	stopped := time.Since(lost)
	dark := time.Now() // from here, surely nothing of production answers

	// 5. The runbook, at once.
	mark := time.Now()
	out, err := run("./failover.sh", drEnv...)
	if err != nil {
		t.Fatalf("./failover.sh: %v\n%s", err, out)
	}
	runbook := time.Since(mark)
	t.Logf("DR_ENTRY=%s DNS_UPDATE=./dns-hosts.sh ./failover.sh  (%v)\n%s", drEntry, runbook.Round(time.Millisecond), out)

	// 6. The users' first answer from DR.
	var first usersAnswer
	if _, err := eventually(ctx, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range answers {
			if a.at.After(lost) && a.cluster == "dr" {
				first = a
				return nil
			}
		}
		return fmt.Errorf("no answer from DR yet")
	}); err != nil {
		t.Fatalf("users: shop.example.com after the failover: %v", err)
	}
	recovery := first.done.Sub(lost)
	// DR serves on: 10 s more of samples.
	time.Sleep(10 * time.Second)
	stop()
	wg.Wait()

	var failed, fromDR, fromProdAfter int
	var lastProd time.Time
	for _, a := range answers {
		switch {
		case a.cluster == "prod":
			lastProd = a.at
			if a.at.After(dark) {
				fromProdAfter++
			}
		case a.cluster == "dr" && !a.at.Before(first.at):
			fromDR++
		case a.done.Before(lost): // a try still pending at the loss may fail
			t.Errorf("users: shop.example.com at %s, before the loss: answered by %q, %v; want production", a.at.Format("15:04:05.000"), a.cluster, a.err)
		case a.at.Before(first.at):
			failed++
		default:
			t.Errorf("users: shop.example.com failed at %s, after DR's first answer at %s: %v", a.at.Format("15:04:05.000"), first.at.Format("15:04:05.000"), a.err)
		}
	}
	t.Logf("time to recovery: %v (production lost at %s: nodes cut off and its control plane killed in %v; failover.sh from %s, %v; users' first answer from DR at %s, %d failed tries pending at or made after the loss before it; last answer from production at %s; %d answers from DR after)",
		recovery.Round(10*time.Millisecond), lost.Format("15:04:05.000"), stopped.Round(10*time.Millisecond), mark.Format("15:04:05.000"), runbook.Round(10*time.Millisecond),
		first.done.Format("15:04:05.000"), failed, lastProd.Format("15:04:05.000"), fromDR)
	if fromProdAfter > 0 {
		t.Errorf("users: %d answers from production after its loss", fromProdAfter)
	}
	if _, err := get(ctx, "http://"+prodEntry+":30080/", 2*time.Second); err == nil {
		t.Errorf("users: production's entry %s still answers after the loss", prodEntry)
	}

	// kilofed unjoin cannot drop production while its API server is down
	// (it reads both clusters first); it fails and changes nothing.
	if out, err := run("kilofed --context dr unjoin prod"); err == nil {
		t.Errorf("kilofed --context dr unjoin prod succeeded with production lost:\n%s", out)
	} else {
		t.Logf("kilofed --context dr unjoin prod: %v\n%s", err, out)
		if !strings.Contains(out, "--local-only") {
			t.Errorf("the failed unjoin does not point at --local-only:\n%s", out)
		}
	}

	// DR lost nothing.
	mu.Lock()
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("handshake samples of DR's gateways: %d of tunnels to production (the %v until the loss), oldest %v; %d of DR's own tunnels (the %v until the end), oldest %v; bound %v",
		samples["prod"], lost.Sub(sampled).Round(time.Second), oldest["prod"].Round(time.Second), samples["dr"], time.Since(sampled).Round(time.Second), oldest["dr"].Round(time.Second), wireGuardRejectAfter)
	if samples["prod"] == 0 || samples["dr"] == 0 {
		t.Errorf("no handshake samples: %v", samples)
	}
	t.Logf("DR's shop at %s and DR's export by its clusterset name answered %d times in a row, before, during and after the loss", drURL, drOK)
	mu.Unlock()
	after, err := drState(ctx, dr, k)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("DR changed:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	t.Logf("DR before and after the loss (%d objects, the same):\n%s", len(after), strings.Join(after, "\n"))

	// DR drops its side of the link alone, without reading production, and
	// serves on unchanged.
	if out, err := run("kilofed --context dr unjoin prod --local-only"); err != nil {
		t.Errorf("kilofed --context dr unjoin prod --local-only: %v\n%s", err, out)
	} else {
		t.Logf("kilofed --context dr unjoin prod --local-only:\n%s", out)
	}
	if out, err := run("kubectl --context dr get remoteclusters.federation.kilofed.io -o name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("DR's RemoteClusters after unjoin --local-only: %q, %v; want none", out, err)
	}
	if got, err := get(ctx, drURL, 3*time.Second); err != nil || answeredBy(got, drShop, "dr") != nil {
		t.Errorf("DR's shop after unjoin --local-only: %q, %v", got, err)
	}
	if got, err := curl(ctx, dr, "shop", "deploy/shop", replicaURL); err != nil || answeredBy(got, drReplica, "dr") != nil {
		t.Errorf("DR's export by its clusterset name after unjoin --local-only: %q, %v", got, err)
	}
	if unjoined, err := drState(ctx, dr, k); err != nil {
		t.Error(err)
	} else if !slices.Equal(after, unjoined) {
		t.Errorf("DR changed with unjoin --local-only:\nbefore:\n%s\nafter:\n%s", strings.Join(after, "\n"), strings.Join(unjoined, "\n"))
	}
	t.Logf("total %v", time.Since(begin).Round(time.Millisecond))
}

// drState describes what DR holds in namespace shop, one sorted line per
// object: pods (UID, IP, node, ready, restarts), Services (cluster IP),
// ServiceExports (Valid), ServiceImports (IPs, clusters), EndpointSlices
// (addresses, ready).
func drState(ctx context.Context, c *lab.Cluster, k client.Client) ([]string, error) {
	var lines []string
	pods, err := c.Client().CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		ready, restarts := false, int32(0)
		for _, s := range p.Status.ContainerStatuses {
			ready, restarts = s.Ready, restarts+s.RestartCount
		}
		lines = append(lines, fmt.Sprintf("pod %s uid=%s ip=%s node=%s ready=%v restarts=%d", p.Name, p.UID, p.Status.PodIP, p.Spec.NodeName, ready, restarts))
	}
	svcs, err := c.Client().CoreV1().Services("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, s := range svcs.Items {
		lines = append(lines, fmt.Sprintf("service %s uid=%s clusterIP=%s", s.Name, s.UID, s.Spec.ClusterIP))
	}
	var exports mcsv1beta1.ServiceExportList
	if err := k.List(ctx, &exports, client.InNamespace("shop")); err != nil {
		return nil, err
	}
	for _, e := range exports.Items {
		valid := "?"
		for _, cond := range e.Status.Conditions {
			if cond.Type == string(mcsv1beta1.ServiceExportConditionValid) {
				valid = string(cond.Status)
			}
		}
		lines = append(lines, fmt.Sprintf("serviceexport %s uid=%s valid=%s", e.Name, e.UID, valid))
	}
	var imports mcsv1beta1.ServiceImportList
	if err := k.List(ctx, &imports, client.InNamespace("shop")); err != nil {
		return nil, err
	}
	for _, i := range imports.Items {
		var cs []string
		for _, cl := range i.Status.Clusters {
			cs = append(cs, cl.Cluster)
		}
		lines = append(lines, fmt.Sprintf("serviceimport %s uid=%s ips=%v clusters=%v", i.Name, i.UID, i.Spec.IPs, cs))
	}
	slices2, err := c.Client().DiscoveryV1().EndpointSlices("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, s := range slices2.Items {
		var eps []string
		for _, e := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%v/ready=%v", e.Addresses, e.Conditions.Ready != nil && *e.Conditions.Ready))
		}
		sort.Strings(eps)
		lines = append(lines, fmt.Sprintf("endpointslice of %s: %v", s.Labels["kubernetes.io/service-name"], eps))
	}
	sort.Strings(lines)
	return lines, nil
}
