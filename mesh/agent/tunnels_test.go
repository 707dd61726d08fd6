package agent

import (
	"cmp"
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
	"golang.zx2c4.com/wireguard/device"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// letters returns the one-letter location names of s.
func letters(s string) []string {
	var out []string
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

// TestTunnelCheckIgnoresLocationsThatNeverAnswered runs the rule of the
// tunnel check over rounds of probes: only silent rounds that probed a
// location that answered during the lead count, and how many fail the
// tunnels depends on how many such locations there are.
func TestTunnelCheckIgnoresLocationsThatNeverAnswered(t *testing.T) {
	type round struct{ probed, answered string }
	rep := func(r round, n int) []round { return slices.Repeat([]round{r}, n) }
	cat := func(rs ...[]round) []round { return slices.Concat(rs...) }
	one := func(probed, answered string) []round { return []round{{probed, answered}} }
	for _, tc := range []struct {
		name     string
		others   string // the other locations in the cluster; "abcdefgh" when empty
		rounds   []round
		failedAt int    // the 1-based round the tunnels count as failed in; 0 never
		stopped  string // the locations named as stopped when failed
	}{
		{name: "answers keep it working", rounds: rep(round{"abc", "ab"}, 20)},
		{name: "a new lead whose tunnels never answered is not armed (no flapping, a WAN down everywhere)", rounds: rep(round{"abc", ""}, 30)},
		{name: "silent rounds that probed only locations that never answered do not count",
			rounds: cat(one("abc", "ab"), rep(round{"def", ""}, 30))},
		{name: "silent rounds that probed a location that answered count",
			rounds: cat(one("abc", "ab"), rep(round{"abd", ""}, 3)), failedAt: 4, stopped: "ab"},
		{name: "a location that answered is enough for a silent round to count",
			rounds: cat(one("abc", "ab"), rep(round{"bde", ""}, 3)), failedAt: 4, stopped: "b"},
		{name: "rounds that do not count do not reset the count either",
			rounds: cat(one("abc", "ab"), one("abd", ""), one("def", ""), one("abd", ""), one("def", ""), one("abd", "")), failedAt: 6, stopped: "ab"},
		{name: "two silent rounds are not enough", rounds: cat(one("ab", "ab"), rep(round{"ab", ""}, 2), one("ab", "b"), rep(round{"ab", ""}, 2))},
		{name: "an answer resets the count, late or from another location",
			rounds: cat(one("ab", "a"), one("ab", "b"), rep(round{"ab", ""}, 2), one("ab", "c"), rep(round{"ab", ""}, 3)), failedAt: 8, stopped: "ab"},
		{name: "armed late, then silent",
			rounds: cat(rep(round{"abc", ""}, 5), one("abc", "bc"), rep(round{"abc", ""}, 3)), failedAt: 9, stopped: "bc"},
		{name: "one location answered: longer, since its own failover silences it",
			rounds: cat(one("abc", "a"), rep(round{"abc", ""}, soloTunnelRounds)), failedAt: 1 + soloTunnelRounds, stopped: "a"},
		{name: "one location answered: the usual count is not enough",
			rounds: cat(one("abc", "a"), rep(round{"abc", ""}, soloTunnelRounds-1))},
		{name: "a location that answered, then left the cluster, does not count",
			others: "acd", rounds: cat(one("abc", "ab"), rep(round{"acd", ""}, soloTunnelRounds)), failedAt: 1 + soloTunnelRounds, stopped: "a"},
		{name: "a location that stopped answering for good counts no more: the one left fails over unhurried",
			rounds: cat(one("ab", "ab"), rep(round{"ab", "a"}, soloTunnelRounds+1), rep(round{"ab", ""}, soloTunnelRounds-1))},
		{name: "a location that stopped answering for good counts no more: the one left silent long enough fails",
			rounds: cat(one("ab", "ab"), rep(round{"ab", "a"}, soloTunnelRounds+1), rep(round{"ab", ""}, soloTunnelRounds)), failedAt: 2*soloTunnelRounds + 2, stopped: "ab"},
		{name: "two locations that answered lately: the usual count",
			rounds: cat(one("ab", "ab"), rep(round{"ab", "a"}, soloTunnelRounds-1), rep(round{"ab", ""}, 3)), failedAt: soloTunnelRounds + 3, stopped: "ab"},
		{name: "no location that answered is left in the cluster: never",
			others: "cd", rounds: cat(one("ab", "ab"), rep(round{"ab", ""}, 30))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			others := cmp.Or(tc.others, "abcdefgh")
			var c tunnelCheck
			got, stopped := 0, ""
			for i, r := range tc.rounds {
				var failed bool
				c, failed = c.next(letters(r.probed), letters(r.answered), letters(others), DefaultProbeFailures)
				if failed && got == 0 {
					got, stopped = i+1, strings.Join(slices.Sorted(slices.Values(c.Stopped)), "")
				}
			}
			if got != tc.failedAt || stopped != tc.stopped {
				t.Errorf("failed in round %d naming %q, want round %d naming %q (0: never)", got, stopped, tc.failedAt, tc.stopped)
			}
		})
	}
}

func TestTunnelCheckDoesNotWriteTheLocationsItWasGiven(t *testing.T) {
	c, _ := tunnelCheck{}.next(nil, []string{"a"}, []string{"a", "b"}, 3)
	c2, _ := c.next(nil, []string{"b"}, []string{"a", "b"}, 3)
	if len(c.Heard) != 1 || len(c2.Heard) != 2 {
		t.Errorf("heard %v then %v, want [a] then [a b]: next wrote its receiver's map", c.Heard, c2.Heard)
	}
}

func TestTunnelRoundsNeededGrowWhenOneLocationCannotBeToldFromItsOwnFailover(t *testing.T) {
	for _, tc := range []struct{ heard, want int }{{0, 0}, {1, soloTunnelRounds}, {2, 3}, {9, 3}} {
		if got := tunnelRoundsNeeded(tc.heard, 3); got != tc.want {
			t.Errorf("tunnelRoundsNeeded(%d locations heard) = %d, want %d", tc.heard, got, tc.want)
		}
	}
}

// TestTunnelTargetsPreferLocationsThatAnsweredThenDiscoverTheOthersInTurn
// chooses the targets of rounds of the leader of l0 (l3 where said) among
// l0..l5.
func TestTunnelTargetsPreferLocationsThatAnsweredThenDiscoverTheOthersInTurn(t *testing.T) {
	all := []string{"l0", "l1", "l2", "l3", "l4", "l5"}
	for _, tc := range []struct {
		name  string
		own   string // l0 when empty
		heard []string
		want  [][]string // the targets of rounds 0, 1, ...
	}{
		{name: "none answered yet: all in turn, starting after its own",
			want: [][]string{{"l1", "l2", "l3"}, {"l4", "l5", "l1"}, {"l2", "l3", "l4"}}},
		{name: "each location starts after its own, so that they spread their probes", own: "l3",
			want: [][]string{{"l4", "l5", "l0"}, {"l1", "l2", "l4"}}},
		{name: "one answered: probed every round, the others in turn in the slots left", heard: []string{"l4"},
			want: [][]string{{"l4", "l1", "l2"}, {"l4", "l3", "l5"}, {"l4", "l1", "l2"}}},
		{name: "two answered: both every round, one slot left to discover", heard: []string{"l2", "l5"},
			want: [][]string{{"l2", "l5", "l1"}, {"l2", "l5", "l3"}, {"l2", "l5", "l4"}, {"l2", "l5", "l1"}}},
		{name: "three answered: only them", heard: []string{"l1", "l3", "l5"},
			want: [][]string{{"l1", "l3", "l5"}, {"l1", "l3", "l5"}}},
		{name: "more answered than slots: they take turns", heard: []string{"l1", "l2", "l3", "l5"},
			want: [][]string{{"l1", "l2", "l3"}, {"l5", "l1", "l2"}, {"l3", "l5", "l1"}}},
		{name: "a location that answered and left the cluster is not probed", heard: []string{"gone"},
			want: [][]string{{"l1", "l2", "l3"}, {"l4", "l5", "l1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := cmp.Or(tc.own, "l0")
			var others []tunnelTarget
			for _, l := range all {
				if l != own {
					others = append(others, tunnelTarget{Location: l})
				}
			}
			heard := map[string]int{}
			for _, l := range tc.heard {
				heard[l] = 1
			}
			for round, want := range tc.want {
				if got := locations(chooseTunnelTargets(own, others, heard, nil, round, cadence{1, 1})); !slices.Equal(got, want) {
					t.Errorf("round %d: %v, want %v", round, got, want)
				}
			}
		})
	}
	two := []tunnelTarget{{Location: "l1"}, {Location: "l2"}}
	if got := locations(chooseTunnelTargets("l0", two, nil, nil, 7, cadence{1, 1})); !slices.Equal(got, []string{"l1", "l2"}) {
		t.Errorf("2 other locations: %v, want both", got)
	}
	if got := chooseTunnelTargets("l0", nil, nil, nil, 0, cadence{1, 1}); len(got) != 0 {
		t.Errorf("no other location: %v, want nothing to probe", locations(got))
	}
}

// TestTunnelTargetsProbeALocationThatNeverAnsweredEvery5sThenEvery2Minutes
// plays the rounds of the leader of l0 whose probes l1 answers and l2, l3
// (lost locations) never do: each of those is probed every 5 s for its
// first discoveryTries probes, then every lostInterval, longer than
// wireguard-go's handshake attempts (100-107 s), so that the packets it
// queued for the peer are dropped between two probes; l1 is probed every
// round.
func TestTunnelTargetsProbeALocationThatNeverAnsweredEvery5sThenEvery2Minutes(t *testing.T) {
	others := []tunnelTarget{{Location: "l1"}, {Location: "l2"}, {Location: "l3"}}
	c := discoveryCadence(200 * time.Millisecond)
	if c != (cadence{every: 25, lost: 600}) {
		t.Fatalf("discoveryCadence(200ms) = %+v, want every 25 rounds (5 s), lost 600 (2 min)", c)
	}
	// wireguard-go drops what it queued for a peer only after
	// MaxTimerHandshakes+2 initiations, each retried after RekeyTimeout
	// and up to RekeyTimeoutJitterMaxMs.
	if giveUp := (device.MaxTimerHandshakes + 2) * (device.RekeyTimeout + device.RekeyTimeoutJitterMaxMs*time.Millisecond); lostInterval <= giveUp {
		t.Fatalf("lostInterval %s is not longer than wireguard-go's handshake attempts (%s): a lost location's queue would never empty", lostInterval, giveUp)
	}
	heard, tried := map[string]int{}, map[string]discovery{}
	probes := map[string][]int{} // the rounds each location was probed in
	rounds := (discoveryTries-1)*c.every + 2*c.lost + 1
	for round := range rounds {
		for _, tg := range chooseTunnelTargets("l0", others, heard, tried, round, c) {
			probes[tg.Location] = append(probes[tg.Location], round)
			if tg.Location == "l1" {
				heard["l1"] = round
			} else {
				tried[tg.Location] = tried[tg.Location].probed(round)
			}
		}
	}
	if got := len(probes["l1"]); got != rounds {
		t.Errorf("l1, which answers, was probed in %d of %d rounds, want all", got, rounds)
	}
	var want []int
	for i := range discoveryTries {
		want = append(want, i*c.every)
	}
	last := want[len(want)-1]
	want = append(want, last+c.lost, last+2*c.lost)
	for _, l := range []string{"l2", "l3"} {
		if !slices.Equal(probes[l], want) {
			t.Errorf("%s, which never answers, was probed in rounds %v, want %v", l, probes[l], want)
		}
	}
	if got := discoveryCadence(time.Minute); got != (cadence{every: 1, lost: 2}) {
		t.Errorf("discoveryCadence(1m) = %+v, want every round, lost every 2: a probe interval above 5 s probes every round", got)
	}
	for _, interval := range []time.Duration{7 * time.Second, 70 * time.Second, 100 * time.Second, 3 * time.Minute} {
		if c := discoveryCadence(interval); time.Duration(c.lost)*interval < lostInterval {
			t.Errorf("discoveryCadence(%s): lost every %d rounds, %s, shorter than lostInterval %s", interval, c.lost, time.Duration(c.lost)*interval, lostInterval)
		}
	}
}

// TestTunnelTargetsProbeALostLocationThatAnswersAgainEveryRound plays a
// lost location, l1, that answers its first probe on the slow cadence: from
// then on it is one the lead heard, probed every round like any other.
func TestTunnelTargetsProbeALostLocationThatAnswersAgainEveryRound(t *testing.T) {
	others := []tunnelTarget{{Location: "l1"}}
	c := discoveryCadence(200 * time.Millisecond)
	heard := map[string]int{}
	tried := map[string]discovery{"l1": {last: 0, tries: discoveryTries}}
	var probed []int
	for round := 1; round <= c.lost+5; round++ {
		for _, tg := range chooseTunnelTargets("l0", others, heard, tried, round, c) {
			probed = append(probed, round)
			heard[tg.Location] = round // it answers
		}
	}
	want := []int{c.lost, c.lost + 1, c.lost + 2, c.lost + 3, c.lost + 4, c.lost + 5}
	if !slices.Equal(probed, want) {
		t.Errorf("l1 probed in rounds %v, want %v: once at the slow cadence, then every round once it answered", probed, want)
	}
}

func locations(ts []tunnelTarget) []string {
	var out []string
	for _, x := range ts {
		out = append(out, x.Location)
	}
	return out
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

func TestOtherLeadersAreTheOtherLocationsAtTheirWireGuardIPs(t *testing.T) {
	topo := tunnelTopology(t, 6, topology.Options{})
	own, got := otherLeaders(topo, "l0-b")
	if own != "l0" || !slices.Equal(locations(got), []string{"l1", "l2", "l3", "l4", "l5"}) {
		t.Errorf("otherLeaders of l0-b: %s, %v; want l0, [l1 ... l5] (not its own location), sorted", own, locations(got))
	}
	self, _ := topo.Segment("l0-a")
	for _, x := range got {
		s, _ := topo.Segment(x.Location + "-a")
		if x.IP != s.WireGuardIP.Addr() || x.From != self.WireGuardIP.Addr() {
			t.Errorf("target %s at %s from %s, want its segment's WireGuard IP %s from its own %s", x.Location, x.IP, x.From, s.WireGuardIP.Addr(), self.WireGuardIP.Addr())
		}
	}
	if _, got := otherLeaders(tunnelTopology(t, 1, topology.Options{}), "l0-a"); len(got) != 0 {
		t.Errorf("a location alone in its cluster: %v, want nothing to check", locations(got))
	}
	if _, got := otherLeaders(tunnelTopology(t, 3, topology.Options{Granularity: topology.FullGranularity}), "l0-a"); len(got) != 0 {
		t.Errorf("full granularity (no location leads): %v, want nothing to check", locations(got))
	}
	if _, got := otherLeaders(topo, "nobody"); len(got) != 0 {
		t.Errorf("a node not in the topology: %v, want nothing", locations(got))
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
