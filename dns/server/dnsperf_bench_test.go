package server

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kilofed/kilofed/dns/zone"
)

var (
	perfRounds   = flag.Int("dnsperf.rounds", 5, "BenchmarkDNSAgainstCoreDNS: rounds, each measuring kilofed and CoreDNS in turn (the order alternates)")
	perfSeconds  = flag.Int("dnsperf.seconds", 5, "BenchmarkDNSAgainstCoreDNS: dnsperf -l of each measurement")
	perfServices = flag.Int("dnsperf.services", 1000, "BenchmarkDNSAgainstCoreDNS: ClusterSetIP imports in the zone")
	perfRate     = flag.Int("dnsperf.latency-qps", 5000, "BenchmarkDNSAgainstCoreDNS: dnsperf -Q of the latency measurement")
)

// perfEndpoints is the number of endpoints of each import of the zone.
const perfEndpoints = 10

// BenchmarkDNSAgainstCoreDNS measures kilofed's DNS server (Listen and
// NewHandler on 127.0.0.1, fed a zone of -dnsperf.services ClusterSetIP
// imports of 10 endpoints each, filled directly) and the lab's CoreDNS
// (e2e/labbins, its file plugin serving a zone file holding the records
// kilofed answers for the same names) with dnsperf, the same query file
// for both: A of the services (60%), SRV of their named port (20%), and
// names that are not exported (NXDOMAIN, 20%), in a fixed random order.
// Before measuring, every name of the query file is asked of both and must
// get the same rcode and the same answer records. Each round measures the
// two servers in turn (the order alternates): first queries per second
// with dnsperf unbounded for -dnsperf.seconds (qps-S), then latency at a
// fixed offered load (-dnsperf.latency-qps, dnsperf -v) for the same
// duration, its 50th and 99th percentiles (p50-ms-S, p99-ms-S), and the
// share of queries lost in both. The figures are medians over the rounds,
// with min:/max:; hack/bench puts CoreDNS's beside kilofed's, with the
// ratio of the medians (also logged).
//
// It is skipped when dnsperf (Debian package dnsperf) or the lab's
// CoreDNS (make lab-bins) is missing.
func BenchmarkDNSAgainstCoreDNS(b *testing.B) {
	dnsperf, err := exec.LookPath("dnsperf")
	if err != nil {
		b.Skip("dnsperf is not installed (apt-get install dnsperf; hack/deps.sh installs it): BenchmarkDNSAgainstCoreDNS needs it")
	}
	coredns := filepath.Join(labBinsDir(b), "coredns")
	if _, err := os.Stat(coredns); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("the lab's CoreDNS is not built (%v): make lab-bins", err)
		}
		b.Skipf("the lab's CoreDNS is not built (%v): make lab-bins", err)
	}
	dir := b.TempDir()
	z := perfZone(*perfServices)
	queries := perfQueries(*perfServices)
	queryFile := filepath.Join(dir, "queries")
	var qf bytes.Buffer
	for _, q := range queries {
		fmt.Fprintf(&qf, "%s %s\n", q.name, dns.TypeToString[q.qtype])
	}
	if err := os.WriteFile(queryFile, qf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()

	// kilofed: the server of this package, in this process.
	srv, err := Listen("127.0.0.1:0", NewHandler(Config{Zone: z}))
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ctx) }()
	kilofedAddr := srv.Addr()

	// CoreDNS: its own process, the same records in a zone file.
	zoneFile := filepath.Join(dir, "db.clusterset.local")
	if err := os.WriteFile(zoneFile, zoneFileOf(z, queries), 0o644); err != nil {
		b.Fatal(err)
	}
	port := freePort(b)
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, fmt.Appendf(nil, "clusterset.local:%d {\n\tbind 127.0.0.1\n\tfile %s clusterset.local\n}\n", port, zoneFile), 0o644); err != nil {
		b.Fatal(err)
	}
	var coreLog bytes.Buffer
	cmd := exec.CommandContext(ctx, coredns, "-conf", corefile)
	cmd.Stdout, cmd.Stderr = &coreLog, &coreLog
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	corednsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitAnswers(corednsAddr, 10*time.Second); err != nil {
		b.Fatalf("CoreDNS on %s: %v\n%s", corednsAddr, err, coreLog.String())
	}
	if err := sameAnswers(kilofedAddr, corednsAddr, queries); err != nil {
		b.Fatalf("kilofed and CoreDNS do not serve the same records: %v", err)
	}

	servers := []struct{ name, addr string }{{"kilofed", kilofedAddr}, {"coredns", corednsAddr}}
	type sample struct{ qps, p50, p99, lost float64 }
	for range b.N {
		got := map[string][]sample{}
		for round := range *perfRounds {
			order := slices.Clone(servers)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, s := range order {
				tp, err := runDNSPerf(ctx, dnsperf, s.addr, queryFile, *perfSeconds, 0)
				if err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				lat, err := runDNSPerf(ctx, dnsperf, s.addr, queryFile, *perfSeconds, *perfRate)
				if err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				sm := sample{qps: tp.qps, p50: lat.percentile(50) * 1e3, p99: lat.percentile(99) * 1e3, lost: 100 * (tp.lost + lat.lost) / max(1, tp.sent+lat.sent)}
				b.Logf("round %d, %s: %.0f queries/s; at %d queries/s: p50 %.3f ms, p99 %.3f ms (%d answers timed); lost %.2f%%; rcodes %s",
					round+1, s.name, sm.qps, *perfRate, sm.p50, sm.p99, len(lat.latencies), sm.lost, tp.rcodes)
				got[s.name] = append(got[s.name], sm)
			}
		}
		b.StopTimer()
		med := map[string]float64{}
		for _, s := range servers {
			for unit, f := range map[string]func(sample) float64{
				"qps": func(x sample) float64 { return x.qps }, "p50-ms": func(x sample) float64 { return x.p50 },
				"p99-ms": func(x sample) float64 { return x.p99 }, "lost-%": func(x sample) float64 { return x.lost },
			} {
				var v []float64
				for _, x := range got[s.name] {
					v = append(v, f(x))
				}
				u := s.name + "-" + unit
				med[u] = median(v)
				b.ReportMetric(med[u], u)
				b.ReportMetric(slices.Min(v), "min:"+u)
				b.ReportMetric(slices.Max(v), "max:"+u)
			}
		}
		for _, u := range []string{"qps", "p50-ms", "p99-ms"} {
			if med["coredns-"+u] > 0 {
				b.Logf("%s: kilofed %.4g, CoreDNS %.4g, kilofed/CoreDNS %.2f", u, med["kilofed-"+u], med["coredns-"+u], med["kilofed-"+u]/med["coredns-"+u])
			}
		}
	}
}

// labBinsDir is the folder of the lab's binaries: $KILOFED_LAB_BINS, else
// what e2e/labbins/build.sh --print-dir prints.
func labBinsDir(b *testing.B) string {
	if d := os.Getenv("KILOFED_LAB_BINS"); d != "" {
		return d
	}
	out, err := exec.Command(filepath.Join("..", "..", "e2e", "labbins", "build.sh"), "--print-dir").Output()
	if err != nil {
		b.Skipf("e2e/labbins/build.sh --print-dir: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// perfZone is a zone of n ClusterSetIP imports svc-NNNN.bench, each with a
// port http/TCP 80 and 10 ready endpoints in cluster a.
func perfZone(n int) *zone.Zone {
	z := zone.New(zone.Config{})
	for i := range n {
		name := fmt.Sprintf("svc-%04d", i)
		z.SetImport(zone.Import{Namespace: "bench", Name: name, IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(i%250 + 1)})},
			Ports: []zone.Port{{Name: "http", Protocol: "TCP", Port: 80}}})
		eps := make([]zone.Endpoint, perfEndpoints)
		for j := range eps {
			k := i*perfEndpoints + j
			eps[j] = zone.Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 10, byte(k / 250), byte(k%250 + 1)})}, Ready: true}
		}
		z.SetSlice(zone.Slice{Namespace: "bench", Name: name + "-a", Service: name, Cluster: "a", Endpoints: eps})
	}
	return z
}

type perfQuery struct {
	name  string
	qtype uint16
}

// perfQueries is the query file: 10 000 questions, 60% A of a service, 20%
// SRV of its named port, 20% a name not exported, in a fixed random order.
func perfQueries(n int) []perfQuery {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]perfQuery, 10000)
	for i := range out {
		svc := fmt.Sprintf("svc-%04d.bench.svc.clusterset.local.", r.IntN(n))
		switch k := r.IntN(10); {
		case k < 6:
			out[i] = perfQuery{svc, dns.TypeA}
		case k < 8:
			out[i] = perfQuery{"_http._tcp." + svc, dns.TypeSRV}
		default:
			out[i] = perfQuery{fmt.Sprintf("nope-%04d.bench.svc.clusterset.local.", r.IntN(n)), dns.TypeA}
		}
	}
	return out
}

// zoneFileOf writes, as a zone file, the SOA of z and every record z
// answers to the questions of queries.
func zoneFileOf(z *zone.Zone, queries []perfQuery) []byte {
	var b bytes.Buffer
	b.WriteString("$ORIGIN clusterset.local.\n")
	for _, rr := range z.Lookup(zone.Origin, dns.TypeSOA).Answer {
		b.WriteString(rr.String() + "\n")
	}
	seen := map[string]bool{}
	for _, q := range queries {
		for _, rr := range z.Lookup(q.name, q.qtype).Answer {
			if s := rr.String(); !seen[s] {
				seen[s] = true
				b.WriteString(s + "\n")
			}
		}
	}
	return b.Bytes()
}

// sameAnswers asks every distinct question of queries of both servers and
// returns an error naming the first that gets a different rcode or answer.
func sameAnswers(a, z string, queries []perfQuery) error {
	c := &dns.Client{Timeout: 2 * time.Second}
	seen := map[perfQuery]bool{}
	for _, q := range queries {
		if seen[q] {
			continue
		}
		seen[q] = true
		var got [2]string
		for i, addr := range []string{a, z} {
			m := new(dns.Msg)
			m.SetQuestion(q.name, q.qtype)
			r, _, err := c.Exchange(m, addr)
			if err != nil {
				return fmt.Errorf("%s %s of %s: %w", q.name, dns.TypeToString[q.qtype], addr, err)
			}
			var rrs []string
			for _, rr := range r.Answer {
				rrs = append(rrs, rr.String())
			}
			sort.Strings(rrs)
			got[i] = dns.RcodeToString[r.Rcode] + " " + strings.Join(rrs, "; ")
		}
		if got[0] != got[1] {
			return fmt.Errorf("%s %s: kilofed %q, CoreDNS %q", q.name, dns.TypeToString[q.qtype], got[0], got[1])
		}
	}
	return nil
}

// waitAnswers waits until addr answers a query over UDP.
func waitAnswers(addr string, d time.Duration) error {
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	deadline := time.Now().Add(d)
	for {
		m := new(dns.Msg)
		m.SetQuestion(zone.Origin, dns.TypeSOA)
		_, _, err := c.Exchange(m, addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort returns a loopback port free for UDP and TCP at the time.
func freePort(b *testing.B) int {
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		p := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		pc.Close()
		if err == nil {
			ln.Close()
			return p
		}
	}
	b.Fatal("no free loopback port for UDP and TCP")
	return 0
}

// perfResult is what one dnsperf run printed.
type perfResult struct {
	qps             float64
	sent, lost      float64
	rcodes          string
	latencies       []float64 // seconds, with -v
	sortedLatencies bool
}

func (r *perfResult) percentile(p float64) float64 {
	if len(r.latencies) == 0 {
		return 0
	}
	if !r.sortedLatencies {
		slices.Sort(r.latencies)
		r.sortedLatencies = true
	}
	i := int(float64(len(r.latencies))*p/100+0.5) - 1
	return r.latencies[min(max(i, 0), len(r.latencies)-1)]
}

var (
	perfQPS     = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
	perfSent    = regexp.MustCompile(`Queries sent:\s+([0-9]+)`)
	perfLost    = regexp.MustCompile(`Queries lost:\s+([0-9]+)`)
	perfRcodes  = regexp.MustCompile(`Response codes:\s+(.*)`)
	perfVerbose = regexp.MustCompile(`^> (\S+) .* ([0-9]+\.[0-9]+)$`)
)

// runDNSPerf runs dnsperf against addr for seconds with the query file:
// as fast as it can with qps 0, else at qps with every answer's latency.
func runDNSPerf(ctx context.Context, dnsperf, addr, queryFile string, seconds, qps int) (*perfResult, error) {
	host, port, _ := net.SplitHostPort(addr)
	args := []string{"-s", host, "-p", port, "-d", queryFile, "-l", strconv.Itoa(seconds), "-c", "4", "-T", "1", "-q", "200"}
	if qps > 0 {
		args = append(args, "-Q", strconv.Itoa(qps), "-v")
	}
	out, err := exec.CommandContext(ctx, dnsperf, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("dnsperf %s: %v\n%s", strings.Join(args, " "), err, tail(out))
	}
	r := &perfResult{}
	m := perfQPS.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("dnsperf %s printed no queries per second:\n%s", strings.Join(args, " "), tail(out))
	}
	r.qps, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := perfSent.FindSubmatch(out); m != nil {
		r.sent, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := perfLost.FindSubmatch(out); m != nil {
		r.lost, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := perfRcodes.FindSubmatch(out); m != nil {
		r.rcodes = strings.TrimSpace(string(m[1]))
	}
	if qps > 0 {
		s := bufio.NewScanner(bytes.NewReader(out))
		for s.Scan() {
			if m := perfVerbose.FindStringSubmatch(s.Text()); m != nil {
				if v, err := strconv.ParseFloat(m[2], 64); err == nil {
					r.latencies = append(r.latencies, v)
				}
			}
		}
		if len(r.latencies) == 0 {
			return nil, fmt.Errorf("dnsperf -v %s printed no latency:\n%s", strings.Join(args, " "), tail(out))
		}
	}
	return r, nil
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func median(v []float64) float64 {
	c := slices.Clone(v)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}
