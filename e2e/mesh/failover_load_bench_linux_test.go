//go:build linux

package mesh

// BenchmarkLeaderFailoverUnderLoad measures BenchmarkLeaderFailover's
// failover (and the LAN cut of TestMeshLeaderFailover) in the meta-cloud
// lab while its cluster is a 200-node one, as its API server and its real
// agents see it: N Nodes that are API objects only (agentsim) are added to
// the lab's cluster, spread over simulated locations, with the annotations
// their agents would publish (keys, endpoints, internal IPs, pod CIDRs),
// each location's election Lease held by one of them and renewed every
// second, their leaders' kilofed.io/leads, and a churn of Node updates
// during the whole measurement. The six real kg agents put them in their
// topology: every real leader gets a WireGuard peer per simulated location
// and the simulated pod CIDRs in its allowed IPs (checked in every round,
// the benchmark fails when they are missing: the load is proven, not
// assumed).
//
// What was checked before adding the simulated nodes to the lab (and is
// checked again at run time by checkSimulationFitsLab, which fails the
// benchmark otherwise):
//   - no overlap: the simulated pod CIDRs (10.32.0.0/11), internal IPs
//     (172.16.0.0/12: 172.(16+j).x.x/16 for location j) and endpoints
//     (198.18.0.0/15, the benchmarking range) do not overlap the lab
//     cluster's pod CIDR (10.10.0.0/16), service CIDR (10.20.0.0/16),
//     WireGuard subnet (10.5.0.0/16), LANs (10.0.n.0/24), public ranges
//     (203.0.113.0/24, 198.51.100.0/24) or management network
//     (100.64.0.0/16); the lab's NAT hosts' 172.16.n.0/24 would, but the
//     meta-cloud lab has none. The simulated nodes publish no WireGuard
//     IP: kg allocates their segments' addresses in the same subnet by
//     hash, after the addresses the real nodes announce, so none can take
//     a real segment's address.
//   - no traffic leaves the machine: WireGuard handshakes (and the tunnel
//     check's probes) toward the simulated endpoints leave a real leader
//     through its LAN link (a node's only other link, mgmt0, routes the
//     management network only), its router sends them to the WAN
//     namespace, which routes only the lab's public /32s, to the routers'
//     veths: `ip route get 198.18.0.1` fails there, and they die in it.
//
// The simulated locations' leaders never answer (nothing listens at their
// endpoints), which a real 200-node cluster's do. A real leader's tunnel
// check (every 200 ms, up to three other locations a round) judges only
// the locations that answered during its lead, so these never count
// against it; the default, 10 simulated locations of 20 nodes, is the
// case where the check before commit 66c643b (three locations taken in
// turn, any three silent rounds in a row) made healthy leaders give their
// leads up even at rest.
//
// The same rounds without simulated nodes run first in the same lab
// (nodes=0), so that the ratio under load / without is of one run. Each
// round starts a fresh mesh (as BenchmarkLeaderFailover), waits until it
// is at rest (every agent has written its firewall: waitFirewallsSettled,
// reported as s/mesh-settled), kills (kill) or
// cuts off its LAN (lan-cut) aws-euwest3's leader, the two alternating,
// and takes the worse of the public (scaleway) and NAT (lyon) sources. It
// reports the medians (s/failover-kill, s/failover-lan-cut), their spread
// (min:, max:), and the API server's request and watch-event rates and
// CPU over the rounds.

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
	"github.com/kilofed/kilofed/mesh/agent/agentsim"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
)

var (
	failoverLoadNodes     = flag.Int("failoverload.nodes", 200, "simulated Nodes of BenchmarkLeaderFailoverUnderLoad")
	failoverLoadLocations = flag.Int("failoverload.locations", 10, "simulated locations of BenchmarkLeaderFailoverUnderLoad")
	failoverLoadRounds    = flag.Int("failoverload.rounds", 3, "rounds of each failover of BenchmarkLeaderFailoverUnderLoad")
	failoverLoadChurn     = flag.Float64("failoverload.churn", 10, "simulated Node updates per second during BenchmarkLeaderFailoverUnderLoad")
)

// The simulated ranges (agentsim.Layout, agentsim.PodCIDR,
// agentsim.ExternalIP).
var (
	simPodRange      = netip.MustParsePrefix("10.32.0.0/11")
	simInternalRange = netip.MustParsePrefix("172.16.0.0/12")
	simEndpointRange = netip.MustParsePrefix("198.18.0.0/15")
)

// failoverModes are the failovers measured, by figure name and failover's
// how.
var failoverModes = []struct{ name, how string }{{"kill", "kill"}, {"lan-cut", "cut"}}

func BenchmarkLeaderFailoverUnderLoad(b *testing.B) {
	n, locs := *failoverLoadNodes, *failoverLoadLocations
	if locs < 1 || locs > 16 || n < locs {
		b.Fatalf("-failoverload.locations %d, -failoverload.nodes %d: want 1-16 locations and a node in each", locs, n)
	}
	ctx, l, c, ips := startMetaCloud(b, metaCloud(), 28*time.Minute)
	checkSimulationFitsLab(ctx, b, l, c)
	var base map[string]float64
	b.Run("nodes=0", func(b *testing.B) {
		base = failoverRounds(ctx, b, l, c, ips, nil)
	})
	if base == nil {
		b.Fatal("nodes=0 measured nothing")
	}
	b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
		sim := startSimulatedNodes(ctx, b, c, n, locs, *failoverLoadChurn)
		got := failoverRounds(ctx, b, l, c, ips, sim)
		for _, m := range failoverModes {
			u := "s/failover-" + m.name
			if base[u] > 0 {
				b.ReportMetric(got[u]/base[u], "x-failover-"+m.name+"-vs-nodes=0")
			}
		}
		sim.report(b)
	})
}

// checkSimulationFitsLab fails b unless the simulated ranges overlap none
// of the lab's and the WAN namespace has no route to the simulated
// endpoints (nor any node or router a route there but through the WAN).
func checkSimulationFitsLab(ctx context.Context, b *testing.B, l *lab.Lab, c *lab.Cluster) {
	b.Helper()
	labRanges := map[string]netip.Prefix{
		"pod CIDR": c.PodCIDR, "service CIDR": c.ServiceCIDR, "WireGuard subnet": c.WireGuardSubnet,
		"public range A": lab.PublicRangeA, "public range B": lab.PublicRangeB,
		"API server": netip.PrefixFrom(c.APIServerIP, 16),
	}
	for _, loc := range c.Locations() {
		labRanges["LAN of "+loc.Name] = loc.LAN
		labRanges["public IP of "+loc.Name] = netip.PrefixFrom(loc.PublicIP, 32)
	}
	for _, nd := range c.Nodes() {
		labRanges["management IP of "+nd.Name] = netip.PrefixFrom(nd.MgmtIP, 32)
	}
	for what, p := range labRanges {
		for _, sim := range []netip.Prefix{simPodRange, simInternalRange, simEndpointRange} {
			if p.IsValid() && p.Overlaps(sim) {
				b.Fatalf("the lab's %s %s overlaps the simulated range %s", what, p, sim)
			}
		}
	}
	if len(l.Hosts()) > 0 {
		b.Fatalf("the lab has hosts, whose LANs (172.16.n.0/24) overlap the simulated internal IPs %s", simInternalRange)
	}
	probe := simEndpointRange.Addr().Next().String()
	if out, err := l.WAN().Exec(ctx, "ip", "-4", "route", "get", probe); err == nil {
		b.Fatalf("the WAN namespace routes %s (the simulated endpoints would be reached off the lab): %s", probe, out)
	}
	for _, loc := range c.Locations() {
		out, err := loc.Router.Exec(ctx, "ip", "-4", "route", "get", probe)
		if err != nil || !strings.Contains(string(out), "dev "+lab.RouterWANLink) {
			b.Fatalf("router of %s: %s goes %q (%v), want through %s to the WAN", loc.Name, probe, out, err, lab.RouterWANLink)
		}
	}
	for _, nd := range c.Nodes() {
		out, err := nd.Exec(ctx, "ip", "-4", "route", "get", probe)
		if err != nil || !strings.Contains(string(out), "dev "+lab.NodeLANLink) {
			b.Fatalf("node %s: %s goes %q (%v), want through its LAN link %s", nd.Name, probe, out, err, lab.NodeLANLink)
		}
	}
}

// simulatedNodes are the simulated Nodes of a round set and their Writer.
type simulatedNodes struct {
	layout  agentsim.Layout
	n       int
	writer  *agentsim.Writer
	leaders map[string]string // by location
	started time.Time
	stop    context.CancelFunc
}

// startSimulatedNodes creates n Nodes in locs simulated locations in c, as
// their agents would have published them (WireGuard IPs left to kg),
// leads each location with one of them, and renews their Leases every
// second and churns rate Node updates a second (none when rate is 0) until
// b ends.
func startSimulatedNodes(ctx context.Context, b *testing.B, c *lab.Cluster, n, locs int, rate float64) *simulatedNodes {
	b.Helper()
	s := &simulatedNodes{layout: agentsim.Layout{Locations: locs}, n: n}
	published, err := s.layout.Published(n, topology.Options{Granularity: topology.LocationGranularity, Subnet: c.WireGuardSubnet})
	if err != nil {
		b.Fatalf("simulated annotations: %v", err)
	}
	for _, a := range published {
		delete(a, k8s.WireGuardIPAnnotation)
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if err := s.layout.CreateNodes(ctx, c.Client(), idx, published); err != nil {
		b.Fatalf("create %d simulated Nodes: %v", n, err)
	}
	if s.writer, err = agentsim.NewWriter(c.RESTConfig(), idx, 0); err != nil {
		b.Fatal(err)
	}
	if s.leaders, err = s.writer.CreateLocationLeases(ctx, s.layout); err != nil {
		b.Fatalf("simulated location Leases: %v", err)
	}
	wctx, stop := context.WithCancel(ctx)
	s.stop = stop
	b.Cleanup(stop)
	go s.writer.RenewLeases(wctx, time.Second)
	if rate > 0 {
		go s.writer.Churn(wctx, rate)
	}
	s.started = time.Now()
	b.Logf("%d simulated Nodes in %d locations, led by %v; Leases renewed every second, %.0f Node updates/s", n, locs, s.leaders, rate)
	return s
}

// report reports the Writer's rates since the start, and its errors.
func (s *simulatedNodes) report(b *testing.B) {
	secs := time.Since(s.started).Seconds()
	b.ReportMetric(float64(s.writer.Renewals.Load())/secs, "sim-lease-renewals/s")
	b.ReportMetric(float64(s.writer.Churned.Load())/secs, "sim-node-updates/s")
	if e := s.writer.Errors.Load(); e > 0 {
		b.ReportMetric(float64(e), "sim-writer-errors")
	}
	b.Logf("simulated load over %.0f s: %d Lease renewals, %d Node updates, %d errors, %d late", secs,
		s.writer.Renewals.Load(), s.writer.Churned.Load(), s.writer.Errors.Load(), s.writer.Late.Load())
}

// checkInTopology waits until the leader of every real location holds a
// WireGuard peer at each simulated location's endpoint and every simulated
// pod CIDR in its peers' allowed IPs, and fails b otherwise: the real
// agents carry the simulated cluster.
func (s *simulatedNodes) checkInTopology(ctx context.Context, b *testing.B, c *lab.Cluster, as agents) {
	b.Helper()
	for _, loc := range c.Locations() {
		leader := waitLeaderOf(ctx, b, c, as, loc.Name, 60*time.Second)
		var endpoints, cidrs int
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			endpoints, cidrs = s.seenBy(ctx, as[leader.Name])
			if endpoints == len(s.leaders) && cidrs == s.n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("leader %s of %s: %d peers at simulated endpoints (want %d), %d simulated pod CIDRs (want %d): the real agents do not carry the simulated nodes",
					leader.Name, loc.Name, endpoints, len(s.leaders), cidrs, s.n)
			}
		}
	}
}

// seenBy counts the WireGuard peers of p at simulated endpoints and the
// simulated pod CIDRs in its peers' allowed IPs.
func (s *simulatedNodes) seenBy(ctx context.Context, p *lab.Process) (endpoints, cidrs int) {
	if out, err := wg(ctx, p, "show", "kilo0", "endpoints"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				if ap, err := netip.ParseAddrPort(f[1]); err == nil && simEndpointRange.Contains(ap.Addr()) {
					endpoints++
				}
			}
		}
	}
	if out, err := wg(ctx, p, "show", "kilo0", "allowed-ips"); err == nil {
		for _, f := range strings.Fields(out) {
			if pr, err := netip.ParsePrefix(f); err == nil && pr.Bits() == 24 && simPodRange.Contains(pr.Addr()) {
				cidrs++
			}
		}
	}
	return endpoints, cidrs
}

// failoverRounds runs the rounds of each failover mode, alternating, each
// on a fresh mesh (with sim's nodes in the topology, checked, when sim is
// not nil), reports their medians and spread and the API server's load
// over them, and returns the medians by unit.
func failoverRounds(ctx context.Context, b *testing.B, l *lab.Lab, c *lab.Cluster, ips map[string]string, sim *simulatedNodes) map[string]float64 {
	b.Helper()
	from, fromOK := scrapeAPI(ctx, b, c)
	rounds := map[string][]float64{}
	var settled []float64
	for r := range *failoverLoadRounds {
		for _, m := range failoverModes {
			start := time.Now()
			as := startMesh(b, c, meshOptions{granularity: "location", encapsulate: "never"})
			if sim != nil {
				sim.checkInTopology(ctx, b, c, as)
			}
			settled = append(settled, waitFirewallsSettled(ctx, b, as, start, 3*time.Minute).Seconds())
			d := failover(ctx, b, l, c, as, ips, "aws-euwest3", m.how, 90*time.Second)
			b.Logf("round %d, %s: %v", r+1, m.name, d.Round(time.Millisecond))
			rounds[m.name] = append(rounds[m.name], d.Seconds())
			for _, p := range as {
				_ = p.Stop()
			}
		}
	}
	medians := map[string]float64{}
	for _, m := range failoverModes {
		vs := rounds[m.name]
		slices.Sort(vs)
		u := "s/failover-" + m.name
		medians[u] = vs[len(vs)/2]
		b.ReportMetric(medians[u], u)
		b.ReportMetric(vs[0], "min:"+u)
		b.ReportMetric(vs[len(vs)-1], "max:"+u)
		b.Logf("%s: %v", m.name, vs)
	}
	slices.Sort(settled)
	b.ReportMetric(settled[len(settled)/2], "s/mesh-settled")
	b.ReportMetric(settled[0], "min:s/mesh-settled")
	b.ReportMetric(settled[len(settled)-1], "max:s/mesh-settled")
	if to, ok := scrapeAPI(ctx, b, c); ok && fromOK {
		secs := to.at.Sub(from.at).Seconds()
		d := to.counters.Sub(from.counters)
		b.ReportMetric(d.TotalRequests(false)/secs, "apiserver-req/s")
		b.ReportMetric(d.TotalWatchEvents()/secs, "apiserver-watch-events/s")
		if from.cpu >= 0 && to.cpu >= 0 {
			b.ReportMetric(100*(to.cpu-from.cpu)/secs, "apiserver-cpu-%")
		}
		var lines []string
		for k, v := range d.Requests {
			if v/secs >= 0.5 {
				lines = append(lines, fmt.Sprintf("%s %.1f/s", k, v/secs))
			}
		}
		slices.Sort(lines)
		b.Logf("API server over %.0f s: %s", secs, strings.Join(lines, "; "))
	}
	return medians
}

// apiSample is the API server's counters and CPU (seconds; -1 when not
// known) at one moment.
type apiSample struct {
	at       time.Time
	counters agentsim.Counters
	cpu      float64
}

// scrapeAPI samples c's API server; a failed scrape is logged, not fatal:
// the failover is the figure.
func scrapeAPI(ctx context.Context, b *testing.B, c *lab.Cluster) (apiSample, bool) {
	s := apiSample{at: time.Now(), cpu: -1}
	var err error
	if s.counters, err = agentsim.Scrape(ctx, c.RESTConfig()); err != nil {
		b.Logf("API server metrics not read: %v", err)
		return s, false
	}
	if p := c.APIServerProcess(); p != nil {
		if cpu, err := agentsim.ProcCPUSeconds(p.Pid()); err == nil {
			s.cpu = cpu
		}
	}
	return s, true
}

// waitFirewallsSettled waits until every agent of as has finished the
// reconciliation that wrote its firewall (a reconciled line of its log
// comes after its last firewall change) and returns how long after
// start the last one did. kg's firewall inserts its rules one iptables
// command at a time, two or so per mesh range: with 200 nodes, over 400
// commands per agent, which keep each agent's reconcile loop busy for
// seconds after a mesh starts; a failover in that time waits for them (see
// docs/performance.md). The rounds measure a mesh at rest.
func waitFirewallsSettled(ctx context.Context, b *testing.B, as agents, start time.Time, within time.Duration) time.Duration {
	b.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		var last time.Time
		busy := ""
		changes := map[string]int{}
		for name, p := range as {
			at, n, ok := firewallSettledAt(p.LogPath, start)
			if !ok {
				busy = name
				break
			}
			changes[name] = n
			if at.After(last) {
				last = at
			}
		}
		if busy == "" {
			b.Logf("firewalls written %v after the mesh started; changes by agent: %v", last.Sub(start).Round(time.Millisecond), changes)
			return max(last.Sub(start), 0)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Fatalf("kg on %s still writing its firewall %v after the mesh started", busy, within)
		}
	}
}

// firewallSettledAt reads a kg log and returns when the first
// reconciliation since start that ended after the agent's last firewall
// change ended, how many firewall changes it logged since start, and
// whether that reconciliation ended (the log holds the earlier meshes of
// the lab too). An agent killed in an earlier round left its rules in
// place: it has nothing to change.
func firewallSettledAt(path string, start time.Time) (at time.Time, changes int, settled bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		t, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(strings.Fields(line + " x")[0], "time="))
		if err != nil || t.Before(start) {
			continue
		}
		switch {
		case strings.Contains(line, "component=firewall"):
			changes, settled = changes+1, false
		case strings.Contains(line, "msg=reconciled") && !settled:
			at, settled = t, true
		}
	}
	return at, changes, settled
}
