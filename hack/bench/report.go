package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Stat is a metric over the runs of a benchmark: its median, and the
// smallest and largest value seen (over the runs, or the min:/max:
// metrics that a benchmark reports for the samples it takes itself).
type Stat struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
}

// Figure is one row of the table.
type Figure struct {
	Figure    string  `json:"figure"`
	Package   string  `json:"package"`
	Benchmark string  `json:"benchmark"`
	Unit      string  `json:"unit"`
	Kilofed   Stat    `json:"kilofed"`
	PeerName  string  `json:"peer_name,omitempty"`
	Peer      *Stat   `json:"peer,omitempty"`
	PeerRef   string  `json:"peer_reference,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
}

// peerRule names a figure and where its peer column comes from: a unit of
// the same benchmark measured in the same run, or a reference measured
// elsewhere (stated as such).
type peerRule struct {
	bench, unit string
	figure      string
	peerUnit    string
	peerName    string
	peerRef     string
}

// key names a metric: a unit of a benchmark of a package.
type key struct{ pkg, name, unit string }

// rules are the figures that have a name and a peer; every other metric
// gets a row named after its benchmark and unit.
var rules = []peerRule{
	{"BenchmarkDataPlaneTCP", "kilofed-1-Mbps", "TCP pod -> pod across locations, 1 stream (Mbit/s)", "stock-pod-1-Mbps", "stock wireguard-go, pod -> pod", ""},
	{"BenchmarkDataPlaneTCP", "kilofed-4-Mbps", "TCP pod -> pod across locations, 4 streams (Mbit/s)", "stock-pod-4-Mbps", "stock wireguard-go, pod -> pod", ""},
	{"BenchmarkDataPlaneTCP", "kilofed-node-1-Mbps", "TCP node -> node through kilo0, 1 stream (Mbit/s)", "stock-1-Mbps", "stock wireguard-go", ""},
	{"BenchmarkDataPlaneTCP", "kilofed-node-4-Mbps", "TCP node -> node through kilo0, 4 streams (Mbit/s)", "stock-4-Mbps", "stock wireguard-go", ""},
	{"BenchmarkDataPlaneTCP", "kilofed-1/plain", "TCP 1 stream, pod -> pod, tunnel / plain underlay", "stock-pod-1/plain", "stock wireguard-go, pod -> pod", ""},
	{"BenchmarkDataPlaneTCP", "kilofed-4/plain", "TCP 4 streams, pod -> pod, tunnel / plain underlay", "stock-pod-4/plain", "stock wireguard-go, pod -> pod", ""},
	{"BenchmarkDataPlaneTCP", "kilofed-rtt-overhead-ms", "ping RTT over plain, pod -> pod (ms)", "stock-pod-rtt-overhead-ms", "stock wireguard-go, pod -> pod", ""},
	{"BenchmarkDataPlaneTCP", "kilofed-node-rtt-overhead-ms", "ping RTT over plain, node -> node (ms)", "stock-rtt-overhead-ms", "stock wireguard-go", ""},
	{"BenchmarkDataPlaneTCP", "kg-a-rss-MB", "resident memory at full throughput, sender (MB)", "stock-a-rss-MB", "stock wireguard-go process", ""},
	{"BenchmarkDataPlaneTCP", "kg-z-rss-MB", "resident memory at full throughput, receiver (MB)", "stock-z-rss-MB", "stock wireguard-go process", ""},
	{"BenchmarkDNSAgainstCoreDNS", "kilofed-qps", "DNS queries/s, dnsperf on loopback, A/SRV/NXDOMAIN mix", "coredns-qps", "CoreDNS file plugin, lab binary", ""},
	{"BenchmarkDNSAgainstCoreDNS", "kilofed-p50-ms", "DNS p50 latency at 5000 queries/s (ms)", "coredns-p50-ms", "CoreDNS file plugin, lab binary", ""},
	{"BenchmarkDNSAgainstCoreDNS", "kilofed-p99-ms", "DNS p99 latency at 5000 queries/s (ms)", "coredns-p99-ms", "CoreDNS file plugin, lab binary", ""},
	{"BenchmarkDNSAgainstCoreDNS", "kilofed-lost-%", "DNS queries lost (%)", "coredns-lost-%", "CoreDNS file plugin, lab binary", ""},
	{"BenchmarkServicesyncScale", "s/converge-1000", "servicesync, 1000 services x 10 endpoints over 3 clusters: exports created -> converged everywhere (s)", "s/converge-100", "100 services, same run", ""},
	{"BenchmarkServicesyncScale", "objects/s-1000", "servicesync, 1000 services: objects written per second until converged", "objects/s-100", "100 services, same run", ""},
	{"BenchmarkServicesyncScale", "requests-1000", "servicesync, 1000 services: API requests of the 3 controllers until converged", "requests-100", "100 services, same run", ""},
	{"BenchmarkServicesyncScale", "steady-requests/s-1000", "servicesync, 1000 services: API requests/s of the 3 controllers once converged", "steady-requests/s-100", "100 services, same run", ""},
	{"BenchmarkServicesyncScale", "heap-MB-1000", "servicesync, 1000 services: heap in use of the 3 controllers, converged (MB)", "heap-MB-100", "100 services, same run", ""},
	{"BenchmarkServicesyncScale", "rss-MB-1000", "servicesync, 1000 services: resident memory of the process of the 3 controllers (MB)", "rss-MB-100", "100 services, same run", ""},
	{"BenchmarkLeaderFailover", "s/failover", "leader killed -> traffic into its location restored (s)", "", "Kilo 944dff5", "58-65 (issue 9, not re-measured)"},
}

// Aggregate turns result lines into figures: one per benchmark and unit,
// in the order the benchmarks ran; min:U and max:U widen the spread of U,
// the peer units of rules become the peer column of their figure, and
// ns/op is left out of lab benchmarks (there it is the whole set-up).
func Aggregate(results []Result, lab map[string]bool) []Figure {
	values := map[key][]float64{}
	units := map[[2]string]int{} // units per package and benchmark
	var order []key
	for _, r := range results {
		us := make([]string, 0, len(r.Metrics))
		for u := range r.Metrics {
			us = append(us, u)
		}
		slices.SortFunc(us, func(a, b string) int { return strings.Compare(unitOrder(a), unitOrder(b)) })
		for _, u := range us {
			k := key{r.Package, r.Name, u}
			if _, ok := values[k]; !ok {
				order = append(order, k)
				units[[2]string{k.pkg, k.name}]++
			}
			values[k] = append(values[k], r.Metrics[u])
		}
	}
	stat := func(k key) *Stat {
		v, ok := values[k]
		if !ok {
			return nil
		}
		s := Stat{Median: median(v), Min: slices.Min(v), Max: slices.Max(v), Values: v}
		if lo, ok := values[key{k.pkg, k.name, "min:" + k.unit}]; ok {
			s.Min = min(s.Min, slices.Min(lo))
		}
		if hi, ok := values[key{k.pkg, k.name, "max:" + k.unit}]; ok {
			s.Max = max(s.Max, slices.Max(hi))
		}
		return &s
	}
	consumed := map[key]bool{}
	for _, k := range order {
		for _, r := range rules {
			if r.bench == benchRoot(k.name) && r.unit == k.unit && r.peerUnit != "" {
				consumed[key{k.pkg, k.name, r.peerUnit}] = true
			}
		}
	}
	var out []Figure
	for _, k := range order {
		if strings.HasPrefix(k.unit, "min:") || strings.HasPrefix(k.unit, "max:") || consumed[k] {
			continue
		}
		if k.unit == "ns/op" && (lab[k.pkg] || lab[k.pkg+"."+benchRoot(k.name)]) && units[[2]string{k.pkg, k.name}] > 1 {
			continue
		}
		f := Figure{Figure: strings.TrimPrefix(k.name, "Benchmark") + " " + k.unit, Package: k.pkg, Benchmark: k.name, Unit: k.unit, Kilofed: *stat(k)}
		for _, r := range rules {
			if r.bench != benchRoot(k.name) || r.unit != k.unit {
				continue
			}
			f.Figure, f.PeerName, f.PeerRef = r.figure, r.peerName, r.peerRef
			if r.peerUnit != "" {
				f.Peer = stat(key{k.pkg, k.name, r.peerUnit})
				if f.Peer != nil && f.Peer.Median != 0 {
					f.Ratio = f.Kilofed.Median / f.Peer.Median
				}
			}
		}
		out = append(out, f)
	}
	return out
}

// benchRoot returns the top-level benchmark of a (sub-)benchmark name.
func benchRoot(name string) string {
	root, _, _ := strings.Cut(name, "/")
	return root
}

// unitOrder sorts Go's own units first, then the others by name.
func unitOrder(u string) string {
	switch u {
	case "ns/op":
		return "0"
	case "B/op":
		return "1"
	case "allocs/op":
		return "2"
	}
	return "3" + u
}

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

// Table renders figures as a markdown table, without the B/op rows (the
// JSON keeps them).
func Table(figs []Figure) string {
	var b strings.Builder
	b.WriteString("| figure | kilofed | peer | ratio | spread |\n|---|---:|---|---:|---|\n")
	for _, f := range figs {
		if f.Unit == "B/op" {
			continue
		}
		peer := ""
		switch {
		case f.Peer != nil:
			peer = fmt.Sprintf("%s (%s)", num(f.Peer.Median), f.PeerName)
			if len(f.Peer.Values) > 1 || f.Peer.Min != f.Peer.Max {
				peer = fmt.Sprintf("%s, %s-%s (%s)", num(f.Peer.Median), num(f.Peer.Min), num(f.Peer.Max), f.PeerName)
			}
		case f.PeerRef != "":
			peer = fmt.Sprintf("%s (%s)", f.PeerRef, f.PeerName)
		}
		ratio := ""
		if f.Ratio != 0 {
			ratio = fmt.Sprintf("%.2fx", f.Ratio)
		}
		spread := fmt.Sprintf("%s-%s, n=%d", num(f.Kilofed.Min), num(f.Kilofed.Max), len(f.Kilofed.Values))
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", strings.ReplaceAll(f.Figure, "|", `\|`), num(f.Kilofed.Median), peer, ratio, spread)
	}
	return b.String()
}

// num formats v with about four significant digits, without exponents.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000 || a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
