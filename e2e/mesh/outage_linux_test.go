//go:build linux

package mesh

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// Timings of the API outage tests: the outage outlasts twice kg's lease
// duration (3 s) and its resync period (shortened to 5 s), and the mesh is
// watched as long again after the API came back.
const (
	outageResync = 5 * time.Second
	outageLength = 25 * time.Second
	outageAfter  = 30 * time.Second
	// probeEvery and probeTimeout pace the cross-location probes: each
	// pair is probed every probeEvery, and a probe not answered within
	// probeTimeout is lost.
	probeEvery   = 500 * time.Millisecond
	probeTimeout = 2 * time.Second
)

// outagePairs are the cross-location probes: every location's both nodes
// send and receive, so that traffic crosses every leader and every
// follower's route to its leader.
var outagePairs = [][2]string{
	{"echo-scw-1", "echo-aws-1"}, {"echo-scw-2", "echo-dc-2"},
	{"echo-aws-2", "echo-dc-1"}, {"echo-aws-1", "echo-scw-2"},
	{"echo-dc-1", "echo-scw-1"}, {"echo-dc-2", "echo-aws-2"},
}

// TestMeshAPIOutageChangesNothing stops the cluster's API server while pods
// of every location talk across locations, for longer than twice the lease
// duration and the resync period, then starts it again: no leader changes,
// no WireGuard peer changes on any node, and no probe is lost, during the
// outage or in the 30 s after it. "freeze" hangs the API server (SIGSTOP)
// instead of stopping it: connections stay open and requests time out.
func TestMeshAPIOutageChangesNothing(t *testing.T) {
	ctx, l, c, ips := startMetaCloud(t, metaCloud(), 10*time.Minute)
	for _, how := range []string{"stop", "freeze"} {
		t.Run(how, func(t *testing.T) {
			as := startMesh(t, c, meshOptions{granularity: "location", encapsulate: "never",
				extra: []string{"--resync-period=" + outageResync.String()}})
			before := waitConverged(ctx, t, l, c, as, ips)
			if t.Failed() {
				return
			}
			logStart := logSizes(as)
			w := watchMesh(ctx, t, l, c, as, ips)
			time.Sleep(3 * time.Second) // a baseline under traffic

			began := time.Now()
			w.mark("API " + how)
			switch how {
			case "stop":
				if err := c.StopAPIServer(); err != nil {
					t.Fatal(err)
				}
			case "freeze":
				if err := c.FreezeAPIServer(); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(outageLength - time.Since(began))
			restart := time.Now()
			w.mark("API back")
			switch how {
			case "stop":
				if err := c.StartAPIServer(ctx); err != nil {
					t.Fatal(err)
				}
			case "freeze":
				if err := c.ThawAPIServer(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ready := time.Now()
			w.mark("API ready")
			t.Logf("API server out (%s) for %v, ready %v after its restart", how, restart.Sub(began).Round(time.Millisecond), ready.Sub(restart).Round(time.Millisecond))
			time.Sleep(outageAfter)
			w.stop()

			w.report(t, before)
			for name, lines := range logLinesSince(as, logStart, "leader changed") {
				t.Errorf("kg on %s changed leaders around the outage:\n%s", name, strings.Join(lines, "\n"))
			}
			if got := leadersOf(ctx, t, c, as); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Errorf("leaders after the outage %v, before %v", got, before)
			}
		})
	}
}

// BenchmarkLeaderDeathDuringAPIOutage kills a location's leader while the
// API server is stopped, and measures what mesh/README.md says of it:
// failover needs the API, so the location's traffic with other locations
// stops until the API server is back, then the other node of the location
// takes over once the agents' watches are back (client-go retries a failed
// watch with a backoff of up to 30 s). It reports the seconds from the API
// server's return to traffic restored from a public location and from
// behind NAT, and fails past 180 s.
func BenchmarkLeaderDeathDuringAPIOutage(b *testing.B) {
	for range b.N {
		leaderDeathDuringAPIOutage(b)
	}
}

func leaderDeathDuringAPIOutage(t *testing.B) {
	ctx, l, c, ips := startMetaCloud(t, metaCloud(), 10*time.Minute)
	as := startMesh(t, c, meshOptions{granularity: "location", encapsulate: "never",
		extra: []string{"--resync-period=" + outageResync.String()}})
	leaders := waitConverged(ctx, t, l, c, as, ips)
	const loc = "aws-euwest3"
	leader := c.Node(leaders[loc])
	survivor := otherNodeOf(c, loc, leader)
	target := ips["echo-"+survivor.Name]
	froms := []string{"echo-scw-1", "echo-dc-1"}
	nss := podNetns(ctx, t, c, ips)

	began := time.Now()
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // the outage has begun: no lease expired for it
	for _, from := range froms {
		if got, err := probeFrom(ctx, l, nss[from], target, probeTimeout); err != nil || got != "echo-"+survivor.Name {
			t.Errorf("%v into the outage, before the leader died: %s -> echo-%s: %q, %v", time.Since(began).Round(time.Millisecond), from, survivor.Name, got, err)
		}
	}
	if err := as[leader.Name].Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	answered := 0
	for time.Since(began) < outageLength {
		if got, err := probeFrom(ctx, l, nss[froms[0]], target, probeTimeout); err == nil && got == "echo-"+survivor.Name {
			answered++
		}
		time.Sleep(probeEvery)
	}
	t.Logf("leader %s of %s killed %v into the outage; during the %v left of it, %d probes into %s answered",
		leader.Name, loc, killed.Sub(began).Round(time.Millisecond), time.Since(killed).Round(time.Second), answered, loc)
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	restored := map[string]time.Duration{}
	const bound = 180 * time.Second
	for len(restored) < len(froms) && time.Since(ready) < bound {
		for _, from := range froms {
			if _, ok := restored[from]; ok {
				continue
			}
			if got, err := probe(ctx, l, c, from, target, 500*time.Millisecond); err == nil && got == "echo-"+survivor.Name {
				restored[from] = time.Since(ready)
			}
		}
	}
	if len(restored) < len(froms) {
		t.Fatalf("traffic into %s not restored %v after the API server was back (restored: %v)", loc, bound, restored)
	}
	t.ReportMetric(restored[froms[0]].Seconds(), "s-public")
	t.ReportMetric(restored[froms[1]].Seconds(), "s-nat")
	t.Logf("API server ready %v after its stop; traffic into %s restored %v after that from scaleway, %v from behind NAT",
		ready.Sub(began).Round(time.Millisecond), loc, restored[froms[0]].Round(time.Millisecond), restored[froms[1]].Round(time.Millisecond))
	if peers, err := wg(ctx, as[survivor.Name], "show", "kilo0", "peers"); err != nil || strings.TrimSpace(peers) == "" {
		t.Errorf("%s, the new leader of %s, has no WireGuard peers: %q, %v", survivor.Name, loc, peers, err)
	}
	for name, lines := range logLinesSince(as, map[string]int64{}, "leader changed") {
		t.Logf("kg on %s:\n%s", name, strings.Join(lines, "\n"))
	}
}

// otherNodeOf returns a node of location loc other than n.
func otherNodeOf(c *lab.Cluster, loc string, n *lab.Node) *lab.Node {
	for _, o := range c.Location(loc).Nodes() {
		if o != n {
			return o
		}
	}
	return nil
}

// podNetns resolves the network namespaces of the echo pods while the API
// server answers, so that probes run without it.
func podNetns(ctx context.Context, t testing.TB, c *lab.Cluster, ips map[string]string) map[string]*lab.Namespace {
	t.Helper()
	out := map[string]*lab.Namespace{}
	for pod := range ips {
		ns, err := c.PodNamespace(ctx, "default", pod)
		if err != nil {
			t.Fatal(err)
		}
		out[pod] = ns
	}
	return out
}

// probeFrom is probe from a namespace resolved beforehand (no API call).
func probeFrom(ctx context.Context, l *lab.Lab, ns *lab.Namespace, ip string, timeout time.Duration) (string, error) {
	url := "http://" + net.JoinHostPort(ip, "8080") + "/"
	out, err := ns.Exec(ctx, l.LabBinary(), "workload", "get", "--timeout", timeout.String(), url)
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "", fmt.Errorf("empty answer from %s", url)
	}
	return f[0], nil
}

// waitConverged waits until every probe pair answers and every location has
// exactly one node with WireGuard peers, and returns the leaders by location.
func waitConverged(ctx context.Context, t testing.TB, l *lab.Lab, c *lab.Cluster, as agents, ips map[string]string) map[string]string {
	t.Helper()
	for _, p := range outagePairs {
		if got, err := get(ctx, l, c, p[0], ips[p[1]], 60*time.Second); err != nil || !strings.HasPrefix(got, p[1]+" ") {
			t.Fatalf("before the outage, %s -> %s: %q, %v", p[0], p[1], got, err)
		}
	}
	var last map[string]string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if last = leadersOf(ctx, t, c, as); len(last) == len(c.Locations()) {
			return last
		}
	}
	t.Fatalf("no single leader per location after 30 s: %v", last)
	return nil
}

// leadersOf returns, by location, the one node whose WireGuard device has
// peers; locations with none or several are left out.
func leadersOf(ctx context.Context, t testing.TB, c *lab.Cluster, as agents) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, loc := range c.Locations() {
		var with []string
		for _, n := range loc.Nodes() {
			if peers, err := wg(ctx, as[n.Name], "show", "kilo0", "peers"); err == nil && strings.TrimSpace(peers) != "" {
				with = append(with, n.Name)
			}
		}
		if len(with) == 1 {
			out[loc.Name] = with[0]
		}
	}
	return out
}

// meshWatch probes the outage pairs and samples every node's WireGuard
// peers until stop.
type meshWatch struct {
	start  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	events  []watchEvent
	probes  int
	lost    int
	samples int
}

// watchEvent is something seen at a time: a lost probe, a peer change, a
// phase mark.
type watchEvent struct {
	at   time.Duration
	what string
}

// watchMesh starts probing and sampling.
func watchMesh(ctx context.Context, t testing.TB, l *lab.Lab, c *lab.Cluster, as agents, ips map[string]string) *meshWatch {
	nss := podNetns(ctx, t, c, ips)
	ctx, cancel := context.WithCancel(ctx)
	w := &meshWatch{start: time.Now(), cancel: cancel}
	for i, p := range outagePairs {
		w.wg.Go(func() {
			// Spread the pairs over the period.
			next := time.Now().Add(probeEvery * time.Duration(i) / time.Duration(len(outagePairs)))
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				next = next.Add(probeEvery)
				sent := time.Now()
				got, err := probeFrom(ctx, l, nss[p[0]], ips[p[1]], probeTimeout)
				if ctx.Err() != nil {
					return
				}
				w.mu.Lock()
				w.probes++
				if err != nil || got != p[1] {
					w.lost++
					w.events = append(w.events, watchEvent{sent.Sub(w.start), fmt.Sprintf("probe %s -> %s lost after %v: %q %v",
						p[0], p[1], time.Since(sent).Round(time.Millisecond), got, firstLine(err))})
				}
				w.mu.Unlock()
			}
		})
	}
	w.wg.Go(func() {
		last := map[string]string{}
		for {
			now := time.Since(w.start)
			for _, n := range c.Nodes() {
				out, err := wg(ctx, as[n.Name], "show", "kilo0", "peers")
				if ctx.Err() != nil {
					return
				}
				keys := strings.Fields(out)
				sort.Strings(keys) // wg lists peers in no fixed order
				peers := strings.Join(keys, ",")
				if err != nil {
					peers = "error: " + firstLine(err)
				}
				w.mu.Lock()
				if old, ok := last[n.Name]; ok && old != peers {
					w.events = append(w.events, watchEvent{now, fmt.Sprintf("WireGuard peers of %s changed from [%s] to [%s]", n.Name, old, peers)})
				}
				last[n.Name] = peers
				w.samples++
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	return w
}

// mark records a phase.
func (w *meshWatch) mark(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, watchEvent{time.Since(w.start), "--- " + what})
}

// stop ends the probes and the sampling.
func (w *meshWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// report logs the timeline and fails t if a probe was lost or a peer
// changed.
func (w *meshWatch) report(t testing.TB, leaders map[string]string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	sort.SliceStable(w.events, func(i, j int) bool { return w.events[i].at < w.events[j].at })
	var b strings.Builder
	bad := 0
	for _, e := range w.events {
		fmt.Fprintf(&b, "  %7.3fs %s\n", e.at.Seconds(), e.what)
		if !strings.HasPrefix(e.what, "---") {
			bad++
		}
	}
	t.Logf("leaders %v; %d probes, %d lost; %d WireGuard samples; timeline:\n%s", leaders, w.probes, w.lost, w.samples, b.String())
	if w.probes == 0 {
		t.Errorf("no probe ran")
	}
	if bad > 0 {
		t.Errorf("%d of %d probes lost and %d WireGuard peer changes around the API outage (timeline above)", w.lost, w.probes, bad-w.lost)
	}
}

// logSizes returns the current size of every agent's log.
func logSizes(as agents) map[string]int64 {
	out := map[string]int64{}
	for name, p := range as {
		if fi, err := os.Stat(p.LogPath); err == nil {
			out[name] = fi.Size()
		}
	}
	return out
}

// logLinesSince returns, by agent, the lines containing substr written
// after the offsets of logSizes.
func logLinesSince(as agents, from map[string]int64, substr string) map[string][]string {
	out := map[string][]string{}
	for name, p := range as {
		b, err := os.ReadFile(p.LogPath)
		if err != nil || int64(len(b)) < from[name] {
			continue
		}
		for _, line := range strings.Split(string(b[from[name]:]), "\n") {
			if strings.Contains(line, substr) {
				out[name] = append(out[name], line)
			}
		}
	}
	return out
}

// firstLine returns the first line of err's message ("" for nil).
func firstLine(err error) string {
	if err == nil {
		return ""
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
