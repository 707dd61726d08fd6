//go:build linux

package mesh

import (
	"bufio"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/kilofed/kilofed/e2e/lab"
)

var (
	dataplaneRuns    = flag.Int("dataplane.runs", 3, "BenchmarkDataPlaneTCP: iperf3 runs per path and stream count")
	dataplaneSeconds = flag.Int("dataplane.seconds", 5, "BenchmarkDataPlaneTCP: seconds measured per iperf3 run (after 1 s omitted)")
)

const (
	// iperfPort is where the benchmark's iperf3 servers listen.
	iperfPort = "5201"
	// stockIperfPort is where the iperf3 server of the stock-pod path
	// listens: rules route its connections into the stock pair.
	stockIperfPort = "5202"
	// stockPort is the UDP port of the stock wireguard-go pair (kg uses 51820).
	stockPort = 51901
	// stockLink is the TUN link of the stock pair, on both ends.
	stockLink = "kflstock0"
	// stockTable is the routing table that sends the stock-pod path's
	// packets, marked with stockTOS, into the stock pair.
	stockTable = "1901"
	// stockTOS is the TOS byte of the stock-pod path's pings (and of
	// their replies, which copy it).
	stockTOS = "0x10"
)

// stockNet holds the stock pair's tunnel addresses: .1 on the first
// leader, .2 on the second; no range of the lab overlaps it.
var stockNet = netip.MustParsePrefix("172.31.254.0/24")

// dpPath is one TCP path measured by BenchmarkDataPlaneTCP: an iperf3
// client in namespace from sends to an iperf3 server at ip.
type dpPath struct {
	name string
	from *lab.Namespace
	ip   string
	// port is the iperf3 server's port, iperfPort when empty.
	port string
	// tos is the TOS byte of the pings ("" for none): the stock-pod
	// path's carry stockTOS, which routes them and their replies into the
	// stock pair.
	tos string
}

// BenchmarkDataPlaneTCP measures TCP throughput (iperf3, one stream and 4
// streams) and ping RTT between the leaders of two public locations of the
// meta-cloud lab (scaleway-paris -> aws-euwest3), over four paths that
// share the same underlay (node veth -> LAN bridge -> router -> WAN ->
// router -> LAN bridge -> node veth):
//
//   - plain: node to node public address, no tunnel: the baseline;
//   - kilofed: pod to pod through kg's embedded WireGuard (kilo0), the
//     path of the figure (it adds a pod veth at each end);
//   - kilofed-node: node to the other leader's kilo0 address, the same
//     endpoints as stock;
//   - stock: node to node through a stock wireguard-go pair (the library's
//     defaults, hack/bench/stockwg) on the same two nodes;
//   - stock-pod: pod to pod, the kilofed path's two pods, through that stock
//     pair: rules on each node route its pod's packets to the other pod
//     into the stock pair when they belong to the TCP port of the
//     stock-pod path's iperf3 server (stockIperfPort) or carry stockTOS
//     (the pings and their replies, which copy it). Only
//     the tunnel differs from the kilofed path, so kilofed over stock-pod
//     compares the two on the same path.
//
// The paths alternate inside each run. It reports medians in Mbit/s with
// min:/max: spreads, each path over plain, kilofed over stock, the median
// RTTs and their overhead over plain in ms, and the largest resident memory
// (VmRSS) of kg on both leaders (a: the sender, z: the receiver), and of
// the stock processes, sampled while their path ran at full throughput
// (and kg's before any traffic). It fails only when a path cannot be
// measured.
func BenchmarkDataPlaneTCP(b *testing.B) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Fatalf("iperf3 not found (make deps installs it): %v", err)
	}
	stockBin := buildStockWG(b)
	l := lab.StartT(b, metaCloud(), lab.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	c := l.Cluster("meta")
	installCRD(ctx, b, c)
	ips := lab.EchoPodsT(ctx, b, c)
	as, a, z, podA, podZ := startDataPlaneMesh(ctx, b, l, c, ips)
	podIPA, podIPZ := netip.MustParseAddr(ips["echo-"+a.Name]), netip.MustParseAddr(ips["echo-"+z.Name])
	stock := startStockPair(ctx, b, stockBin, a, z, podIPA, podIPZ)
	routePodsThroughStock(ctx, b, [2]*lab.Node{a, z}, [2]netip.Addr{podIPA, podIPZ})
	for _, srv := range []struct {
		ns   *lab.Namespace
		port string
	}{{z.Namespace(), iperfPort}, {podZ, iperfPort}, {podZ, stockIperfPort}} {
		p, err := srv.ns.Start("iperf3", "iperf3", "-s", "-p", srv.port)
		if err != nil {
			b.Fatalf("start iperf3 server in %s: %v", srv.ns.Name, err)
		}
		b.Cleanup(func() { _ = p.Stop() })
	}
	paths := []dpPath{
		{name: "plain", from: a.Namespace(), ip: z.PublicIP.String()},
		{name: "kilofed", from: podA, ip: ips["echo-"+z.Name]},
		{name: "kilofed-node", from: a.Namespace(), ip: linkAddr(ctx, b, z, lab.AgentLink)},
		{name: "stock", from: a.Namespace(), ip: stockAddr(2).String()},
		{name: "stock-pod", from: podA, ip: podIPZ.String(), port: stockIperfPort, tos: stockTOS},
	}
	pids := map[string][]int{
		"kilofed":      {as[a.Name].Pid(), as[z.Name].Pid()},
		"kilofed-node": {as[a.Name].Pid(), as[z.Name].Pid()},
		"stock":        {stock[0].Pid(), stock[1].Pid()},
		"stock-pod":    {stock[0].Pid(), stock[1].Pid()},
	}
	rss := map[string][]float64{} // by process role, MB
	for i, n := range []*lab.Node{a, z} {
		if mb, err := vmRSS(as[n.Name].Pid()); err == nil {
			rss["idle-kg-"+"az"[i:i+1]] = []float64{mb}
		}
	}
	for _, p := range paths {
		// Warm up (handshakes, ARP), and wait for the servers to listen.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			_, err := iperf(ctx, p, 1, 1)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s warm-up: %v", p.name, err)
			}
		}
	}
	checkStockPodPath(ctx, b, paths[len(paths)-1], a, z)
	mbps := map[string][]float64{} // by path-streams
	rtt := map[string][]float64{}  // by path, ms
	b.ResetTimer()
	for range b.N {
		for run := range *dataplaneRuns {
			for i := range paths {
				p := paths[i]
				if run%2 == 1 { // alternate the order, against drifts in load
					p = paths[len(paths)-1-i]
				}
				ms, err := pingRTT(ctx, p)
				if err != nil {
					b.Fatalf("%s: %v", p.name, err)
				}
				rtt[p.name] = append(rtt[p.name], ms)
				for _, streams := range []int{1, 4} {
					sample := sampleRSS(pids[p.name])
					v, err := iperf(ctx, p, streams, *dataplaneSeconds)
					peak := sample()
					if err != nil {
						b.Fatalf("%s, %d streams, run %d: %v", p.name, streams, run+1, err)
					}
					key := fmt.Sprintf("%s-%d", p.name, streams)
					mbps[key] = append(mbps[key], v)
					if len(peak) == 2 {
						role := "kg"
						if strings.HasPrefix(p.name, "stock") {
							role = "stock"
						}
						rss[role+"-a"] = append(rss[role+"-a"], peak[0])
						rss[role+"-z"] = append(rss[role+"-z"], peak[1])
					}
				}
			}
		}
	}
	b.StopTimer()
	reportDataPlane(b, a.Name, z.Name, paths, mbps, rtt, rss)
}

// reportDataPlane reports the medians and spreads of BenchmarkDataPlaneTCP
// and logs them as a table.
func reportDataPlane(b *testing.B, a, z string, paths []dpPath, mbps, rtt, rss map[string][]float64) {
	var t strings.Builder
	fmt.Fprintf(&t, "%s -> %s, %d runs of %d s per path:\n", a, z, *dataplaneRuns, *dataplaneSeconds)
	fmt.Fprintf(&t, "%-13s %8s %17s %8s %17s %9s\n", "path", "1 stream", "min-max", "4 streams", "min-max", "rtt ms")
	spread := func(unit string, s []float64) {
		b.ReportMetric(median(s), unit)
		b.ReportMetric(slices.Min(s), "min:"+unit)
		b.ReportMetric(slices.Max(s), "max:"+unit)
	}
	for _, p := range paths {
		one, four := mbps[p.name+"-1"], mbps[p.name+"-4"]
		spread(p.name+"-1-Mbps", one)
		spread(p.name+"-4-Mbps", four)
		spread(p.name+"-rtt-ms", rtt[p.name])
		if p.name != "plain" {
			for _, s := range []string{"1", "4"} {
				b.ReportMetric(median(mbps[p.name+"-"+s])/median(mbps["plain-"+s]), p.name+"-"+s+"/plain")
			}
			b.ReportMetric(median(rtt[p.name])-median(rtt["plain"]), p.name+"-rtt-overhead-ms")
		}
		fmt.Fprintf(&t, "%-13s %8.0f %8.0f-%-8.0f %8.0f %8.0f-%-8.0f %9.3f\n", p.name,
			median(one), slices.Min(one), slices.Max(one), median(four), slices.Min(four), slices.Max(four), median(rtt[p.name]))
	}
	for _, s := range []string{"1", "4"} {
		b.ReportMetric(median(mbps["kilofed-node-"+s])/median(mbps["stock-"+s]), "kilofed-node-"+s+"/stock")
		b.ReportMetric(median(mbps["kilofed-"+s])/median(mbps["stock-"+s]), "kilofed-"+s+"/stock")
		b.ReportMetric(median(mbps["kilofed-"+s])/median(mbps["stock-pod-"+s]), "kilofed-"+s+"/stock-pod")
	}
	for _, role := range []string{"kg-a", "kg-z", "stock-a", "stock-z"} {
		if s := rss[role]; len(s) > 0 {
			b.ReportMetric(slices.Max(s), role+"-rss-MB")
			fmt.Fprintf(&t, "largest VmRSS of %s at full throughput: %.1f MB\n", role, slices.Max(s))
		}
	}
	for _, role := range []string{"idle-kg-a", "idle-kg-z"} {
		if s := rss[role]; len(s) > 0 {
			b.ReportMetric(s[0], role+"-rss-MB")
			fmt.Fprintf(&t, "VmRSS of %s before any traffic: %.1f MB\n", strings.TrimPrefix(role, "idle-"), s[0])
		}
	}
	b.Logf("%s", t.String())
}

// iperfResult is the part of iperf3 -J's output the benchmark reads.
type iperfResult struct {
	End struct {
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// iperf runs an iperf3 client of p with the given streams for secs seconds
// (after one second omitted, TCP's slow start) and returns the received
// rate in Mbit/s.
func iperf(ctx context.Context, p dpPath, streams, secs int) (float64, error) {
	port := cmp.Or(p.port, iperfPort)
	args := []string{"-c", p.ip, "-p", port, "-J", "-O", "1", "-t", strconv.Itoa(secs), "-P", strconv.Itoa(streams)}
	out, err := p.from.Exec(ctx, append([]string{"iperf3"}, args...)...)
	var r iperfResult
	if jerr := json.Unmarshal(out, &r); jerr != nil || r.Error != "" || err != nil {
		return 0, fmt.Errorf("iperf3 -> %s: %v %s (json: %v)", p.ip, err, r.Error, jerr)
	}
	if r.End.SumReceived.BitsPerSecond <= 0 {
		return 0, fmt.Errorf("iperf3 -> %s received nothing", p.ip)
	}
	return r.End.SumReceived.BitsPerSecond / 1e6, nil
}

// rttLine is ping's summary line.
var rttLine = regexp.MustCompile(`= ([0-9.]+)/([0-9.]+)/([0-9.]+)/`)

// pingRTT pings p's server 20 times, 50 ms apart, and returns the average
// round trip in ms.
func pingRTT(ctx context.Context, p dpPath) (float64, error) {
	args := []string{"-q", "-n", "-c", "20", "-i", "0.05", "-W", "1", p.ip}
	if p.tos != "" {
		args = append([]string{"-Q", p.tos}, args...)
	}
	out, err := p.from.Exec(ctx, append([]string{"ping"}, args...)...)
	m := rttLine.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		return 0, fmt.Errorf("ping %s: %v\n%s", p.ip, err, out)
	}
	return strconv.ParseFloat(m[2], 64)
}

// sampleRSS samples the VmRSS of pids every 200 ms until the returned
// function is called, which returns the largest of each in MB (nil when
// pids is empty or a sample failed).
func sampleRSS(pids []int) func() []float64 {
	if len(pids) == 0 {
		return func() []float64 { return nil }
	}
	peak := make([]float64, len(pids))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed bool
	wg.Go(func() {
		for t := time.NewTicker(200 * time.Millisecond); ; {
			for i, pid := range pids {
				mb, err := vmRSS(pid)
				if err != nil {
					failed = true
				}
				peak[i] = max(peak[i], mb)
			}
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
	})
	return func() []float64 {
		close(stop)
		wg.Wait()
		if failed {
			return nil
		}
		return peak
	}
}

// vmRSS returns the resident memory of pid in MB (10^6 bytes).
func vmRSS(pid int) (float64, error) { return procStatusMB(pid, "VmRSS") }

// procStatusMB returns the field of /proc/PID/status named field (a size
// in kB: VmRSS, RssAnon, RssFile...) in MB (10^6 bytes).
func procStatusMB(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024 / 1e6, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// buildStockWG builds hack/bench/stockwg into a temporary folder.
func buildStockWG(b *testing.B) string {
	b.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "stockwg")
	cmd := exec.Command("go", "build", "-o", bin, "./hack/bench/stockwg")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the stock wireguard-go pair: %v\n%s", err, out)
	}
	return bin
}

// stockAddr returns the stock pair's tunnel address of end i (1 or 2).
func stockAddr(i int) netip.Addr {
	a := stockNet.Addr()
	for range i {
		a = a.Next()
	}
	return a
}

// startDataPlaneMesh runs kg on every node of c (location granularity, no
// encapsulation), waits until the leaders of scaleway-paris (a) and
// aws-euwest3 (z) lead and a's pod reaches z's through them, and returns
// the agents, a, z and their pods' namespaces: the ends of the data plane
// benchmarks.
func startDataPlaneMesh(ctx context.Context, b *testing.B, l *lab.Lab, c *lab.Cluster, ips map[string]string, extra ...string) (as agents, a, z *lab.Node, podA, podZ *lab.Namespace) {
	b.Helper()
	as = startMesh(b, c, meshOptions{granularity: "location", encapsulate: "never", extra: extra})
	a = waitLeaderOf(ctx, b, c, as, "scaleway-paris", 60*time.Second)
	z = waitLeaderOf(ctx, b, c, as, "aws-euwest3", 60*time.Second)
	if _, err := get(ctx, l, c, "echo-"+a.Name, ips["echo-"+z.Name], 60*time.Second); err != nil {
		b.Fatalf("mesh not up: echo-%s -> echo-%s: %v", a.Name, z.Name, err)
	}
	var err error
	if podA, err = c.PodNamespace(ctx, "default", "echo-"+a.Name); err != nil {
		b.Fatal(err)
	}
	if podZ, err = c.PodNamespace(ctx, "default", "echo-"+z.Name); err != nil {
		b.Fatal(err)
	}
	return as, a, z, podA, podZ
}

// startStockPair runs the two ends of the stock wireguard-go pair on nodes
// a and z, each reaching the other at its public address and routing to it
// its tunnel address and its pod (podA, podZ), and waits until a pings z
// through it.
func startStockPair(ctx context.Context, b *testing.B, bin string, a, z *lab.Node, podA, podZ netip.Addr) [2]*lab.Process {
	b.Helper()
	var keys [2]wgtypes.Key
	for i := range keys {
		k, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	hexKey := func(k wgtypes.Key) string { return hex.EncodeToString(k[:]) }
	var ps [2]*lab.Process
	for i, n := range []*lab.Node{a, z} {
		other, otherPod := []*lab.Node{z, a}[i], []netip.Addr{podZ, podA}[i]
		p, err := n.Start("stockwg", bin,
			"-name", stockLink,
			"-private-key", hexKey(keys[i]),
			"-listen-port", strconv.Itoa(stockPort),
			"-peer-key", hexKey(keys[1-i].PublicKey()),
			"-endpoint", netip.AddrPortFrom(other.PublicIP, stockPort).String(),
			"-allowed-ip", netip.PrefixFrom(stockAddr(2-i), 32).String()+","+netip.PrefixFrom(otherPod, 32).String(),
			"-address", netip.PrefixFrom(stockAddr(i+1), stockNet.Bits()).String())
		if err != nil {
			b.Fatalf("start the stock wireguard-go end on %s: %v", n.Name, err)
		}
		b.Cleanup(func() { _ = p.Stop() })
		ps[i] = p
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := a.Exec(ctx, "ping", "-c", "1", "-W", "1", stockAddr(2).String())
		if err == nil {
			return ps
		}
		if time.Now().After(deadline) {
			b.Fatalf("the stock wireguard-go pair does not carry a ping after 30 s: %v\n%s: %s\n%s: %s",
				err, a.Name, ps[0].Tail(10), z.Name, ps[1].Tail(10))
		}
	}
}

// routePodsThroughStock makes the stock-pod path: on each of nodes, rules
// send the packets from its pod to the other (pods, in the same order) of
// the stock-pod path's TCP connections (to stockIperfPort on a, from it
// on z) and those that carry stockTOS to table stockTable, which routes
// the other pod into the stock pair. The lab's namespaces go away with the
// lab, and these with them.
func routePodsThroughStock(ctx context.Context, b *testing.B, nodes [2]*lab.Node, pods [2]netip.Addr) {
	b.Helper()
	for i, n := range nodes {
		from, to := pods[i].String(), pods[1-i].String()
		portSel := []string{"dport", stockIperfPort}
		if i == 1 {
			portSel = []string{"sport", stockIperfPort}
		}
		for _, argv := range [][]string{
			append([]string{"ip", "rule", "add", "pref", "100", "from", from, "to", to, "ipproto", "tcp"}, append(portSel, "lookup", stockTable)...),
			{"ip", "rule", "add", "pref", "101", "from", from, "to", to, "tos", stockTOS, "lookup", stockTable},
			{"ip", "route", "replace", netip.PrefixFrom(pods[1-i], 32).String(), "dev", stockLink, "table", stockTable},
		} {
			if out, err := n.Exec(ctx, argv...); err != nil {
				b.Fatalf("%s: %v: %v\n%s", n.Name, argv, err, out)
			}
		}
	}
}

// checkStockPodPath fails the benchmark unless the stock-pod path p runs
// through the stock pair both ways: an iperf3 run of one second on it must
// bring its data (1 MB at least) to the stock pair's link on z and z's
// replies (10 kB at least: ACKs, coalesced) to the stock pair's link on a,
// and 20 pings and their replies must cross it.
func checkStockPodPath(ctx context.Context, b *testing.B, p dpPath, a, z *lab.Node) {
	b.Helper()
	rx := func(n *lab.Node) int64 {
		out, err := n.Exec(ctx, "cat", "/sys/class/net/"+stockLink+"/statistics/rx_bytes")
		if err != nil {
			b.Fatalf("%s: rx bytes of %s: %v\n%s", n.Name, stockLink, err, out)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			b.Fatalf("%s: rx bytes of %s: %v", n.Name, stockLink, err)
		}
		return v
	}
	beforeA, beforeZ := rx(a), rx(z)
	if _, err := iperf(ctx, p, 1, 1); err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	if got := rx(z) - beforeZ; got < 1e6 {
		b.Fatalf("%s: the stock pair's link on %s received %d bytes during an iperf3 run: the data does not go through it", p.name, z.Name, got)
	}
	if got := rx(a) - beforeA; got < 1e4 {
		b.Fatalf("%s: the stock pair's link on %s received %d bytes during an iperf3 run: the replies do not go through it", p.name, a.Name, got)
	}
	beforeA, beforeZ = rx(a), rx(z)
	if _, err := pingRTT(ctx, p); err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	if gotA, gotZ := rx(a)-beforeA, rx(z)-beforeZ; gotA < 20*84 || gotZ < 20*84 {
		b.Fatalf("%s: during 20 pings the stock pair's links received %d bytes on %s and %d on %s: the pings or their replies do not go through it", p.name, gotA, a.Name, gotZ, z.Name)
	}
}

// linkAddr returns the first IPv4 address of link on node n.
func linkAddr(ctx context.Context, b *testing.B, n *lab.Node, link string) string {
	b.Helper()
	out, err := n.Exec(ctx, "ip", "-4", "-o", "addr", "show", "dev", link)
	if err != nil {
		b.Fatalf("addresses of %s on %s: %v", link, n.Name, err)
	}
	for _, f := range strings.Fields(string(out)) {
		if p, err := netip.ParsePrefix(f); err == nil {
			return p.Addr().String()
		}
	}
	b.Fatalf("%s on %s has no IPv4 address:\n%s", link, n.Name, out)
	return ""
}
