package agent

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func TestTunnelCheckFailsOnlyArmedAndSilentForTheRoundsNeeded(t *testing.T) {
	const need = 3
	for _, tc := range []struct {
		name     string
		rounds   string // a: some probed location answered, s: none did
		need     int
		failedAt int // the 1-based round the tunnels count as failed in; 0 never
	}{
		{name: "answers keep it working", rounds: "aaaaaaaaaa", need: need},
		{name: "a new lead whose tunnels never answered is not armed (no flapping)", rounds: "ssssssssss", need: need},
		{name: "silent for the rounds needed once armed", rounds: "asss", need: need, failedAt: 4},
		{name: "two silent rounds are not enough", rounds: "assass", need: need},
		{name: "armed late, then silent", rounds: "sssssasss", need: need, failedAt: 9},
		{name: "an answer resets the count", rounds: "assasss", need: need, failedAt: 7},
		{name: "one other location: longer, since its own failover silences it", rounds: "a" + strings.Repeat("s", soloTunnelRounds), need: soloTunnelRounds, failedAt: 1 + soloTunnelRounds},
		{name: "nothing to check never fails", rounds: "asssssssss", need: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c tunnelCheck
			got := 0
			for i, r := range tc.rounds {
				var failed bool
				c, failed = c.next(r == 'a', tc.need)
				if failed && got == 0 {
					got = i + 1
				}
			}
			if got != tc.failedAt {
				t.Errorf("rounds %s: failed in round %d, want %d (0: never)", tc.rounds, got, tc.failedAt)
			}
		})
	}
}

func TestTunnelRoundsNeededGrowWhenOneLocationCannotBeToldFromItsOwnFailover(t *testing.T) {
	for _, tc := range []struct{ locations, want int }{{0, 0}, {1, soloTunnelRounds}, {2, 3}, {9, 3}} {
		if got := tunnelRoundsNeeded(tc.locations, 3); got != tc.want {
			t.Errorf("tunnelRoundsNeeded(%d locations) = %d, want %d", tc.locations, got, tc.want)
		}
	}
}

// tunnelTopology returns a location-granularity topology of one node per
// location l0..l(n-1), plus a second node in l0.
func tunnelTopology(t *testing.T, n int, opts topology.Options) *topology.Topology {
	t.Helper()
	var nodes []topology.Node
	for i := range n {
		loc := "l" + string(rune('0'+i))
		nodes = append(nodes, topology.Node{
			Name: loc + "-a", Location: loc, Key: wgconf.Key{byte(i + 1)}, Ready: true,
			InternalIP: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 1}), 24),
			Endpoint:   &topology.Endpoint{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 51820)},
		})
	}
	nodes = append(nodes, topology.Node{Name: "l0-b", Location: "l0", Key: wgconf.Key{99}, Ready: true,
		InternalIP: netip.MustParsePrefix("10.0.0.2/24")})
	topo, err := topology.New(nodes, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestTunnelTargetsAreOtherLocationsTakenInTurn(t *testing.T) {
	names := func(ts []tunnelTarget) []string {
		var out []string
		for _, x := range ts {
			out = append(out, x.Location)
		}
		return out
	}
	topo := tunnelTopology(t, 6, topology.Options{})
	got, n := tunnelTargetsOf(topo, "l0-a", 0)
	if n != 5 || !slices.Equal(names(got), []string{"l1", "l2", "l3"}) {
		t.Errorf("round 0 of l0: %v of %d locations, want [l1 l2 l3] of 5", names(got), n)
	}
	for _, x := range got {
		s, _ := topo.Segment(x.Location + "-a")
		if x.IP != s.WireGuardIP.Addr() {
			t.Errorf("target %s at %s, want its segment's WireGuard IP %s", x.Location, x.IP, s.WireGuardIP.Addr())
		}
	}
	if got, _ := tunnelTargetsOf(topo, "l0-a", 1); !slices.Equal(names(got), []string{"l4", "l5", "l1"}) {
		t.Errorf("round 1 of l0: %v, want [l4 l5 l1] (the next ones in turn)", names(got))
	}
	// Each location starts after its own, so that they spread their probes.
	if got, _ := tunnelTargetsOf(topo, "l3-a", 0); !slices.Equal(names(got), []string{"l4", "l5", "l0"}) {
		t.Errorf("round 0 of l3: %v, want [l4 l5 l0]", names(got))
	}
	if got, n := tunnelTargetsOf(tunnelTopology(t, 3, topology.Options{}), "l0-a", 7); n != 2 || !slices.Equal(names(got), []string{"l1", "l2"}) {
		t.Errorf("3 locations: %v of %d, want both others", names(got), n)
	}
	if got, n := tunnelTargetsOf(tunnelTopology(t, 1, topology.Options{}), "l0-a", 0); n != 0 || len(got) != 0 {
		t.Errorf("a location alone in its cluster: %v of %d, want nothing to check", names(got), n)
	}
	if got, n := tunnelTargetsOf(tunnelTopology(t, 3, topology.Options{Granularity: topology.FullGranularity}), "l0-a", 0); n != 0 || len(got) != 0 {
		t.Errorf("full granularity (no location leads): %v of %d, want nothing to check", names(got), n)
	}
	if got, n := tunnelTargetsOf(topo, "nobody", 0); n != 0 || len(got) != 0 {
		t.Errorf("a node not in the topology: %v of %d, want nothing", names(got), n)
	}
}

// TestHTTPTunnelProbeCountsAnyAnswerAndARefusal serves an agent's Handler
// on loopback: any HTTP answer, 503 included, proves the tunnel, and so
// does a refusal (the remote host answered); a timeout does not.
func TestHTTPTunnelProbeCountsAnyAnswerAndARefusal(t *testing.T) {
	// Stuck since an hour: /health answers 503.
	a := &Agent{cfg: Config{ResyncPeriod: time.Nanosecond}, now: time.Now, started: time.Now().Add(-time.Hour)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	h := a.Handler(prometheus.NewRegistry())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		sources = append(sources, host)
		h.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	var controlled int
	probe := HTTPTunnelProbe(port, func(network, address string, c syscall.RawConn) error { controlled++; return nil })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	// The prober's own WireGuard IP stands in as 127.0.0.2: loopback
	// takes all of 127/8.
	lo, from := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	if err := probe(ctx, from, lo); err != nil {
		t.Errorf("probe of an agent answering 503 on /health: %v, want the tunnel counted as working", err)
	}
	if !slices.Equal(sources, []string{from.String()}) {
		t.Errorf("the probe came from %v, want from %v (the prober's WireGuard IP), so that the answer goes back through the tunnel", sources, from)
	}
	if controlled == 0 {
		t.Error("the probe's socket was not handed to the control function (kg binds it to the WireGuard link)")
	}
	srv.Close()
	if err := probe(ctx, from, lo); err != nil {
		t.Errorf("probe refused by the remote host: %v, want the tunnel counted as working", err)
	}
	// A host that takes the connection but never answers: a timeout.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	mutePort := mute.Addr().(*net.TCPAddr).Port
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := HTTPTunnelProbe(mutePort, nil)(short, from, lo); err == nil {
		t.Error("a probe that got no answer in time counted as working")
	}
	// No route through the link: the control function fails the dial.
	noRoute := HTTPTunnelProbe(port, func(network, address string, c syscall.RawConn) error { return syscall.ENETUNREACH })
	if err := noRoute(ctx, from, lo); err == nil {
		t.Error("a probe that could not be sent counted as working")
	}
}
