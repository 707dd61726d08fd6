//go:build linux

package mesh

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilofed/kilofed/e2e/lab"
)

// throughputVXLAN runs the second phase of BenchmarkPodToPodThroughput, with
// the agents restarted with --encapsulate=always --tunnel=vxlan.
var throughputVXLAN = flag.Bool("throughput.vxlan", true,
	"BenchmarkPodToPodThroughput: also measure with --encapsulate=always --tunnel=vxlan")

const (
	// throughputBytes is what one transfer moves.
	throughputBytes = 200_000_000
	// throughputRounds is how many transfers each path makes; the paths
	// alternate inside a round, so that the machine's load weighs on both.
	throughputRounds = 5
)

// throughputPhase is one kg configuration and the names of its two paths.
type throughputPhase struct {
	mesh           meshOptions
	local, crossed string
}

// throughputPath is one pod-to-pod path: the client runs in pod from and
// fetches /bytes/N from the echo pod to, so the bytes flow to -> from. Each
// transfer must add at least N to the received bytes of every link in via.
type throughputPath struct {
	name     string
	from, to string
	via      []nodeLink
}

// nodeLink is a network link of a node.
type nodeLink struct {
	node *lab.Node
	link string
}

// BenchmarkPodToPodThroughput measures the data plane's tunnel throughput
// as a ratio of the raw veth throughput, both measured in one run on the
// meta-cloud lab with kg in location granularity (userspace WireGuard).
// Every transfer ends in the pod of scaleway-paris's non-leader:
//
//   - veth: from the pod of the scaleway leader (pod veth -> node -> LAN
//     bridge -> node -> pod veth, no WireGuard);
//   - wireguard: from the pod of aws-euwest3's non-leader (LAN -> leader ->
//     wireguard-go kilo0 -> WAN -> leader -> LAN);
//   - then (unless -throughput.vxlan=false) the agents restart with
//     --encapsulate=always --tunnel=vxlan and the same two pairs are
//     measured again, alternating with each other (vxlan, vxlan+wireguard);
//     their ratios over veth use the first phase's veth median.
//
// The machine is shared, so the paths alternate within each round (the
// first path of a round alternates too), and the medians are reported
// (MB/s, 10^6 bytes per second) with "tunnel/veth", the wireguard median
// over the veth one. ns/op is the time of the measured rounds. It fails
// only when a transfer fails or moves a wrong byte count, or when the
// WireGuard or VXLAN link that a path must cross did not receive its bytes.
func BenchmarkPodToPodThroughput(b *testing.B) {
	// go test keeps only 10 lines of a benchmark's log (without -v): the
	// lab's own info lines would hide the table, so only its warnings are
	// kept, on stderr. A failing start still logs the components' tails.
	l := lab.StartT(b, metaCloud(), lab.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	c := l.Cluster("meta")
	installCRD(ctx, b, c)
	ips := lab.EchoPodsT(ctx, b, c)
	phases := []throughputPhase{{mesh: meshOptions{granularity: "location", encapsulate: "never"}, local: "veth", crossed: "wireguard"}}
	if *throughputVXLAN {
		phases = append(phases, throughputPhase{
			mesh:  meshOptions{granularity: "location", encapsulate: "always", extra: []string{"--tunnel=vxlan"}},
			local: "vxlan", crossed: "vxlan+wireguard",
		})
	}
	samples := map[string][]float64{}
	var order []throughputPath
	b.ResetTimer()
	for range b.N {
		for _, ph := range phases {
			b.StopTimer()
			as := startMesh(b, c, ph.mesh)
			paths := throughputPaths(ctx, b, l, c, as, ips, ph)
			for _, p := range paths {
				// Warm up: handshakes, ARP, TCP's first windows.
				if _, err := transfer(ctx, l, c, p.from, ips[p.to], 1_000_000); err != nil {
					b.Fatalf("%s warm-up: %v", p.name, err)
				}
				if !slices.ContainsFunc(order, func(o throughputPath) bool { return o.name == p.name }) {
					order = append(order, p)
				}
			}
			before := readRx(ctx, b, paths)
			b.StartTimer()
			for round := range throughputRounds {
				// Alternate which path goes first, against drifts in load.
				for i := range paths {
					p := paths[i]
					if round%2 == 1 {
						p = paths[len(paths)-1-i]
					}
					mbs, err := transfer(ctx, l, c, p.from, ips[p.to], throughputBytes)
					if err != nil {
						b.Fatalf("%s round %d: %v", p.name, round+1, err)
					}
					samples[p.name] = append(samples[p.name], mbs)
				}
			}
			b.StopTimer()
			checkRx(ctx, b, paths, before)
			for _, p := range as {
				_ = p.Stop()
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	reportThroughput(b, order, samples)
}

// reportThroughput reports each path's median MB/s and its median over
// veth's ("tunnel/veth" for wireguard, the figure this benchmark is for),
// and logs a table of all samples.
func reportThroughput(b *testing.B, order []throughputPath, samples map[string][]float64) {
	var table strings.Builder
	fmt.Fprintf(&table, "%-16s %-24s %8s %6s %8s %8s  %s\n", "path", "bytes flow", "MB/s", "/veth", "min", "max", "each transfer")
	veth := median(samples["veth"])
	for _, p := range order {
		s := samples[p.name]
		m := median(s)
		b.ReportMetric(m, p.name+"-MB/s")
		switch {
		case p.name == "veth" || veth == 0:
		case p.name == "wireguard":
			b.ReportMetric(m/veth, "tunnel/veth")
		default:
			b.ReportMetric(m/veth, p.name+"/veth")
		}
		fmt.Fprintf(&table, "%-16s %-24s %8.1f %6.3f %8.1f %8.1f  %s\n",
			p.name, p.to+" -> "+p.from, m, m/veth, slices.Min(s), slices.Max(s), formatSamples(s))
	}
	b.Logf("pod-to-pod throughput (medians, MB = 10^6 bytes), %d alternating rounds of %d MB per path:\n%s", throughputRounds, throughputBytes/1_000_000, table.String())
}

// transferLine is what `workload get --discard` prints.
var transferLine = regexp.MustCompile(`bytes=(\d+) seconds=([0-9.]+) mbps=([0-9.]+)`)

// transfer fetches n bytes from ip's echo server inside pod from and
// returns the rate in MB/s (10^6 bytes per second) that the client timed.
// It fails when the client fails or reads another byte count.
func transfer(ctx context.Context, l *lab.Lab, c *lab.Cluster, from, ip string, n int64) (float64, error) {
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(int(lab.EchoPort))) + "/bytes/" + strconv.FormatInt(n, 10)
	out, err := l.PodExec(ctx, c.Name, "default", from, l.LabBinary(), "workload", "get", "--discard", "--timeout", "90s", url)
	if err != nil {
		return 0, fmt.Errorf("%s -> %s: %w", from, url, err)
	}
	m := transferLine.FindStringSubmatch(string(out))
	if m == nil {
		return 0, fmt.Errorf("%s -> %s: client printed %q, want bytes=N seconds=S mbps=M", from, url, out)
	}
	got, _ := strconv.ParseInt(m[1], 10, 64)
	secs, _ := strconv.ParseFloat(m[2], 64)
	if got != n {
		return 0, fmt.Errorf("%s -> %s: moved %d bytes, want %d", from, url, got, n)
	}
	if secs <= 0 {
		return 0, fmt.Errorf("%s -> %s: client timed %q seconds", from, url, m[2])
	}
	return float64(n) / secs / 1e6, nil
}

// throughputPaths returns the two paths of phase ph, both delivering into
// the pod of scaleway-paris's non-leader: from the leader's pod (local),
// and from the pod of aws-euwest3's non-leader (crossed). The crossed bytes
// arrive through the scaleway leader's kilo0; with encapsulation, both
// arrive through the client node's VXLAN link.
func throughputPaths(ctx context.Context, b *testing.B, l *lab.Lab, c *lab.Cluster, as agents, ips map[string]string, ph throughputPhase) []throughputPath {
	b.Helper()
	scwLeader := leaderAfterMesh(ctx, b, l, c, as, ips, "scaleway-paris")
	scw := c.Node(locationMate(c, scwLeader, "scaleway-paris"))
	aws := locationMate(c, leaderAfterMesh(ctx, b, l, c, as, ips, "aws-euwest3"), "aws-euwest3")
	local := throughputPath{name: ph.local, from: "echo-" + scw.Name, to: "echo-" + scwLeader}
	crossed := throughputPath{name: ph.crossed, from: "echo-" + scw.Name, to: "echo-" + aws,
		via: []nodeLink{{node: c.Node(scwLeader), link: lab.AgentLink}}}
	if ph.mesh.encapsulate == "always" {
		vxlan := nodeLink{node: scw, link: "kilo-vxlan"}
		local.via = append(local.via, vxlan)
		crossed.via = append(crossed.via, vxlan)
	}
	return []throughputPath{local, crossed}
}

// readRx returns the received bytes of every link the paths go through.
func readRx(ctx context.Context, b *testing.B, paths []throughputPath) map[nodeLink]int64 {
	b.Helper()
	rx := map[nodeLink]int64{}
	for _, p := range paths {
		for _, v := range p.via {
			out, err := v.node.Exec(ctx, "cat", "/sys/class/net/"+v.link+"/statistics/rx_bytes")
			if err != nil {
				b.Fatalf("%s goes through %s of %s, which has no counters: %v", p.name, v.link, v.node.Name, err)
			}
			n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
			if err != nil {
				b.Fatalf("rx_bytes of %s on %s: %v", v.link, v.node.Name, err)
			}
			rx[v] = n
		}
	}
	return rx
}

// checkRx fails unless every link the paths go through received at least
// the bytes of all their transfers since before: the bytes took the path
// the benchmark names.
func checkRx(ctx context.Context, b *testing.B, paths []throughputPath, before map[nodeLink]int64) {
	b.Helper()
	after := readRx(ctx, b, paths)
	want := map[nodeLink]int64{}
	for _, p := range paths {
		for _, v := range p.via {
			want[v] += throughputRounds * throughputBytes
		}
	}
	for v, w := range want {
		if got := after[v] - before[v]; got < w {
			b.Fatalf("%s of %s received %d bytes during the transfers, want at least %d: the paths do not go where their names say", v.link, v.node.Name, got, w)
		}
	}
}

// leaderAfterMesh waits until the pods of loc answer from another location
// (so the mesh is up) and returns the name of loc's leader.
func leaderAfterMesh(ctx context.Context, b *testing.B, l *lab.Lab, c *lab.Cluster, as agents, ips map[string]string, loc string) string {
	b.Helper()
	here := c.Location(loc).Nodes()[0].Name
	for _, other := range c.Nodes() {
		if other.Location != loc {
			if _, err := get(ctx, l, c, "echo-"+here, ips["echo-"+other.Name], 60*time.Second); err != nil {
				b.Fatalf("mesh not up: echo-%s -> echo-%s: %v", here, other.Name, err)
			}
			break
		}
	}
	return leaderOf(ctx, b, c, as, loc).Name
}

// locationMate returns the node of loc (a location of two nodes) that is
// not named name.
func locationMate(c *lab.Cluster, name, loc string) string {
	for _, n := range c.Location(loc).Nodes() {
		if n.Name != name {
			return n.Name
		}
	}
	return ""
}

// median returns the median of s (0 when empty), without reordering s.
func median(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func formatSamples(s []float64) string {
	f := make([]string, len(s))
	for i, v := range s {
		f[i] = strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strings.Join(f, " ")
}
