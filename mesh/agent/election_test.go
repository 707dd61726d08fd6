package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

func TestDecide(t *testing.T) {
	const d = 3 * time.Second
	held := func(holder string, age time.Duration) k8s.LocationLease {
		return k8s.LocationLease{Known: true, Exists: true, Holder: holder, Term: 4, Age: age}
	}
	base := electionInput{Self: "me", Trusted: true, Forwarding: true, Rank: 0, LeaseDuration: d, ProbeFailures: 3, Prober: true}
	for _, tc := range []struct {
		name string
		edit func(*electionInput)
		want electionAction
	}{
		{name: "lease not known yet", edit: func(in *electionInput) { in.Lease = k8s.LocationLease{} }, want: wait},
		{name: "holder renews", edit: func(in *electionInput) { in.Lease = held("me", 0) }, want: renew},
		{name: "holder renews even when its lease looks expired (API outage)", edit: func(in *electionInput) { in.Lease = held("me", time.Hour) }, want: renew},
		{name: "holder that cannot forward releases", edit: func(in *electionInput) { in.Lease, in.Forwarding = held("me", 0), false }, want: release},
		{name: "no lease: the best candidate takes it at once", edit: func(in *electionInput) { in.Lease = k8s.LocationLease{Known: true} }, want: takeVacant},
		{name: "no lease: the second waits its rank", edit: func(in *electionInput) {
			in.Lease, in.Rank, in.VacantFor = k8s.LocationLease{Known: true}, 1, rankDelay-time.Millisecond
		}, want: wait},
		{name: "no lease: the second takes it after its rank", edit: func(in *electionInput) {
			in.Lease, in.Rank, in.VacantFor = k8s.LocationLease{Known: true}, 1, rankDelay
		}, want: takeVacant},
		{name: "released lease", edit: func(in *electionInput) { in.Lease = held("", 0) }, want: takeVacant},
		{name: "held by a node of another location: as if vacant", edit: func(in *electionInput) { in.Lease, in.Trusted = held("intruder", 0), false }, want: takeVacant},
		{name: "a live holder keeps the lead (sticky)", edit: func(in *electionInput) { in.Lease, in.ProbeArmed = held("old", 0), true }, want: wait},
		{name: "a node annotated kilo.squat.ai/leader (or public) takes a held lead from a holder below it, as in Kilo", edit: func(in *electionInput) {
			in.Lease, in.ProbeArmed, in.Outranks = held("old", 0), true, true
		}, want: takePreferred},
		{name: "a preferred node that cannot forward does not take the lead", edit: func(in *electionInput) {
			in.Lease, in.Outranks, in.Forwarding = held("old", 0), true, false
		}, want: wait},
		{name: "only the best standby takes a held lead by preference", edit: func(in *electionInput) {
			in.Lease, in.Outranks, in.Rank = held("old", 0), true, 1
		}, want: wait},
		{name: "a holder answering probes keeps the lead while its renewals stop (API outage)", edit: func(in *electionInput) {
			in.Lease, in.ProbeArmed = held("old", time.Minute), true
		}, want: wait},
		{name: "the best standby takes the lead of a holder failing probes", edit: func(in *electionInput) {
			in.Lease, in.ProbeArmed, in.Failures = held("old", 0), true, 3
		}, want: takeDead},
		{name: "the second standby waits one failure more", edit: func(in *electionInput) {
			in.Lease, in.ProbeArmed, in.Failures, in.Rank = held("old", 0), true, 3, 1
		}, want: wait},
		{name: "the second standby after one failure more", edit: func(in *electionInput) {
			in.Lease, in.ProbeArmed, in.Failures, in.Rank = held("old", 0), true, 4, 1
		}, want: takeDead},
		{name: "failed probes never answered during the term do not count", edit: func(in *electionInput) {
			in.Lease, in.Failures = held("old", 0), 100
		}, want: wait},
		{name: "without working probes: take an expired lease", edit: func(in *electionInput) { in.Lease = held("old", d) }, want: takeExpired},
		{name: "without working probes: the second waits its rank after expiry", edit: func(in *electionInput) {
			in.Lease, in.Rank = held("old", d+rankDelay-time.Millisecond), 1
		}, want: wait},
		{name: "a standby that does not probe never takes a held lead", edit: func(in *electionInput) {
			in.Lease, in.Rank, in.Prober = held("old", time.Hour), 5, false
		}, want: wait},
		{name: "a standby that does not probe takes a vacant lead after its rank", edit: func(in *electionInput) {
			in.Lease, in.Rank, in.Prober, in.VacantFor = k8s.LocationLease{Known: true}, 5, false, 5*rankDelay
		}, want: takeVacant},
		{name: "a standby that cannot forward takes nothing", edit: func(in *electionInput) {
			in.Lease, in.Forwarding = k8s.LocationLease{Known: true}, false
		}, want: wait},
		{name: "a holder whose tunnels do not answer releases", edit: func(in *electionInput) {
			in.Lease, in.TunnelsFailed = held("me", 0), true
		}, want: release},
		{name: "a standby whose tunnels failed when it led waits for every other standby to take a vacant lead", edit: func(in *electionInput) {
			in.Lease, in.TunnelsFailed, in.Standbys, in.VacantFor = k8s.LocationLease{Known: true}, true, 3, 3*rankDelay-time.Millisecond
		}, want: wait},
		{name: "a standby whose tunnels failed takes a vacant lead nobody else took (a location keeps a leader)", edit: func(in *electionInput) {
			in.Lease, in.TunnelsFailed, in.Standbys, in.VacantFor = k8s.LocationLease{Known: true}, true, 3, 3*rankDelay
		}, want: takeVacant},
		{name: "a standby whose tunnels failed takes no lead by preference", edit: func(in *electionInput) {
			in.Lease, in.ProbeArmed, in.Outranks, in.TunnelsFailed, in.Standbys = held("old", 0), true, true, true, 1
		}, want: wait},
		{name: "a standby whose tunnels failed waits one failure more than the last standby for a dead lead", edit: func(in *electionInput) {
			in.Lease, in.ProbeArmed, in.Failures, in.TunnelsFailed, in.Standbys = held("old", 0), true, 4, true, 2
		}, want: wait},
		{name: "a standby whose tunnels failed takes a dead lead after the other standbys", edit: func(in *electionInput) {
			in.Lease, in.ProbeArmed, in.Failures, in.TunnelsFailed, in.Standbys = held("old", 0), true, 5, true, 2
		}, want: takeDead},
		{name: "not a candidate (no key published yet)", edit: func(in *electionInput) {
			in.Lease, in.Rank = k8s.LocationLease{Known: true}, -1
		}, want: wait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			tc.edit(&in)
			if got := decide(in); got != tc.want {
				t.Errorf("decide = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCandidatesRankLeaderAnnotationThenPublicThenName(t *testing.T) {
	key := wgconf.Key{1}
	ep := func(s string) *topology.Endpoint { return &topology.Endpoint{Addr: netip.MustParseAddrPort(s)} }
	in := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	nodes := []topology.Node{
		{Name: "a", Location: "l", Key: key, InternalIP: in("10.0.0.1/24")},
		{Name: "b", Location: "l", Key: key, InternalIP: in("10.0.0.2/24"), ExternalIP: netip.MustParseAddr("192.0.2.2")},
		{Name: "c", Location: "l", Key: key, InternalIP: in("10.0.0.3/24"), Leader: true},
		{Name: "d", Location: "l", Key: key, InternalIP: in("10.0.0.4/24"), Endpoint: ep("198.51.100.4:51820")},
		{Name: "e", Location: "l", Key: key, InternalIP: in("10.0.0.5/24"), Endpoint: ep("10.0.0.5:51820")},
		{Name: "f", Location: "l", InternalIP: in("10.0.0.6/24"), Leader: true},
		{Name: "g", Location: "other", Key: key, Leader: true},
	}
	got := candidates(nodes, "l")
	want := []string{"c", "b", "d", "a", "e"}
	if !slices.Equal(got, want) {
		t.Errorf("candidates = %v, want %v (leader annotation, public endpoint, name; no key: none)", got, want)
	}
}

// electionRig is one agent's election over a Fake, stepped by hand.
type electionRig struct {
	t       *testing.T
	fake    *k8s.Fake
	e       *election
	now     time.Time
	probeOK map[string]bool
	forward error

	mu            sync.Mutex
	tunnelOK      map[string]bool // locations whose tunnels answer
	probedTunnels []string        // the locations probed, in order
}

func newElectionRig(t *testing.T, self string, nodes []topology.Node) *electionRig {
	r := &electionRig{t: t, fake: k8s.NewFake(), now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), probeOK: map[string]bool{}}
	a := &Agent{log: slog.New(slog.DiscardHandler), nodes: nodes, cfg: Config{
		Hostname: self, Backend: r.fake, Election: r.fake, HeartbeatPeriod: time.Second, LeaseDuration: 3 * time.Second,
		ProbeInterval: 200 * time.Millisecond, ProbeFailures: 3,
		Forwarding: func() error { return r.forward },
		Probe: func(_ context.Context, n topology.Node) error {
			if r.probeOK[n.Name] {
				return nil
			}
			return errors.New("connection refused")
		},
	}}
	r.e = newElection(a, r.fake)
	return r
}

// steps runs n election steps, one probe interval apart.
func (r *electionRig) steps(n int) {
	for range n {
		r.e.step(context.Background(), r.now)
		r.e.tunnels.wait()
		r.now = r.now.Add(200 * time.Millisecond)
	}
}

func (r *electionRig) holder() string { return r.fake.LocationLease("l").Holder }

func electionNodes() []topology.Node {
	key := wgconf.Key{1}
	return []topology.Node{
		{Name: "n1", Location: "l", Key: key, InternalIP: netip.MustParsePrefix("10.0.0.1/24")},
		{Name: "n2", Location: "l", Key: key, InternalIP: netip.MustParsePrefix("10.0.0.2/24")},
		{Name: "n3", Location: "l", Key: key, InternalIP: netip.MustParsePrefix("10.0.0.3/24")},
		{Name: "x1", Location: "x", Key: key, InternalIP: netip.MustParsePrefix("10.9.0.1/24")},
	}
}

func TestElectionTakesAVacantLeadAndPublishesIt(t *testing.T) {
	r := newElectionRig(t, "n1", electionNodes())
	r.steps(1)
	if r.fake.Followed() != "l" || r.holder() != "n1" {
		t.Fatalf("followed %q, holder %q: want l, n1", r.fake.Followed(), r.holder())
	}
	if got := r.fake.PublishedLeads("n1"); got != "0:l" {
		t.Errorf("published %q, want 0:l", got)
	}
	// A Lease deleted by hand starts above the terms announced.
	r.fake.SetLocationLease("l", nil)
	r.steps(1)
	if l := r.fake.LocationLease("l"); l.Holder != "n1" || l.Term != 1 || r.fake.PublishedLeads("n1") != "1:l" {
		t.Errorf("after the Lease was deleted: %+v, published %q; want n1 in term 1", l, r.fake.PublishedLeads("n1"))
	}
}

func TestElectionStandbyTakesTheLeadOfALeaderFailingProbes(t *testing.T) {
	// The second standby waits one failure more.
	second := newElectionRig(t, "n2", electionNodes())
	second.fake.FollowLocation("l")
	second.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n3", Term: 5})
	second.probeOK["n3"] = true
	second.steps(1)
	second.probeOK["n3"] = false
	second.steps(3)
	if second.holder() != "n3" {
		t.Errorf("the second standby took the lead after 3 failures, want 4")
	}
	second.steps(1)
	if second.holder() != "n2" {
		t.Errorf("the second standby did not take the lead after 4 failures: %q", second.holder())
	}

	// n1 is the best standby (n1, n2 by name; n3 holds the lead).
	r := newElectionRig(t, "n1", electionNodes())
	r.fake.FollowLocation("l")
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n3", Term: 5})
	r.probeOK["n3"] = true
	r.steps(20)
	if r.holder() != "n3" {
		t.Fatalf("the lead was taken from a leader answering probes: holder %q", r.holder())
	}
	r.probeOK["n3"] = false
	r.steps(2)
	if r.holder() != "n3" {
		t.Fatalf("taken after 2 failed probes, want 3: holder %q", r.holder())
	}
	r.steps(1)
	if l := r.fake.LocationLease("l"); l.Holder != "n1" || l.Term != 6 || r.fake.PublishedLeads("n1") != "6:l" {
		t.Errorf("after 3 failed probes: %+v, published %q; want n1 in term 6", l, r.fake.PublishedLeads("n1"))
	}
}

func TestElectionNodeThatComesBackDoesNotTakeTheLead(t *testing.T) {
	// n1 ranks first, but n3 holds the lead and answers: n1 waits.
	r := newElectionRig(t, "n1", electionNodes())
	r.fake.FollowLocation("l")
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n3", Term: 2})
	r.probeOK["n3"] = true
	r.steps(50)
	if r.holder() != "n3" || r.fake.PublishedLeads("n1") != "" {
		t.Errorf("holder %q, n1 published %q: want n3 kept, nothing published", r.holder(), r.fake.PublishedLeads("n1"))
	}
}

func TestElectionOldLeaderCutFromItsLANDoesNotTakeTheLeadBack(t *testing.T) {
	// n1 led; n2 took over while n1's LAN was cut: n1's probes of n2 never
	// answered, so they never count, and n2 renews: n1 stays a standby.
	r := newElectionRig(t, "n1", electionNodes())
	r.steps(1)
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n2", Term: 1})
	r.steps(50)
	if r.holder() != "n2" || r.fake.PublishedLeads("n1") != "" {
		t.Errorf("holder %q, n1 published %q: want n2, n1's lead withdrawn", r.holder(), r.fake.PublishedLeads("n1"))
	}
}

func TestElectionLeaderThatCannotForwardReleases(t *testing.T) {
	r := newElectionRig(t, "n1", electionNodes())
	r.steps(1)
	r.forward = errors.New("eth0 has no carrier")
	r.steps(1)
	if l := r.fake.LocationLease("l"); l.Holder != "" {
		t.Errorf("a leader that cannot forward: lease %+v, want released", l)
	}
	r.steps(10)
	if r.holder() != "" {
		t.Errorf("a node that cannot forward took the lead: %q", r.holder())
	}
}

func TestElectionFormerLeaderWithdrawsItsLeadOnceItsSuccessorPublishedIts(t *testing.T) {
	// Withdrawn at once, the lead would leave the other locations to guess
	// a leader by rank, and they might reconfigure for the successor
	// before it took its own tunnels: their first handshake would be lost.
	r := newElectionRig(t, "n1", electionNodes())
	r.steps(1)
	r.forward = errors.New("eth0 has no carrier")
	r.steps(1)
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n2", Term: 1})
	r.steps(5)
	if got := r.fake.PublishedLeads("n1"); got != "0:l" {
		t.Errorf("n1 published %q before its successor's lead was out, want 0:l kept", got)
	}
	_ = r.fake.PublishLeads(context.Background(), "n2", "1:l")
	r.steps(1)
	if got := r.fake.PublishedLeads("n1"); got != "" {
		t.Errorf("n1 published %q once n2's lead was out, want it withdrawn", got)
	}

	// Nobody takes the lead: it is withdrawn after a lease duration.
	alone := newElectionRig(t, "n1", electionNodes())
	alone.steps(1)
	alone.forward = errors.New("eth0 has no carrier")
	alone.steps(14)
	if got := alone.fake.PublishedLeads("n1"); got != "0:l" {
		t.Errorf("n1 published %q less than a lease duration after it left the lead, want 0:l kept", got)
	}
	alone.steps(2)
	if got := alone.fake.PublishedLeads("n1"); got != "" {
		t.Errorf("n1 published %q a lease duration after it left a lead nobody took, want it withdrawn", got)
	}
}

func TestElectionAPIOutageChangesNoLeader(t *testing.T) {
	// The holder cannot renew; its lease ages, but it answers probes.
	r := newElectionRig(t, "n1", electionNodes())
	r.fake.FollowLocation("l")
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n2", Term: 3})
	r.probeOK["n2"] = true
	r.steps(1)
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n2", Term: 3, Age: time.Minute})
	r.fake.FailHolds(errors.New("connection refused"))
	r.steps(50)
	r.fake.FailHolds(nil)
	r.steps(10)
	if r.holder() != "n2" {
		t.Errorf("holder %q after the outage, want n2", r.holder())
	}
	// The leader's own renewals fail during the outage: it keeps leading.
	l := newElectionRig(t, "n2", electionNodes())
	l.steps(3) // n2 ranks second: it takes the vacant lead after rankDelay
	l.fake.FailHolds(errors.New("connection refused"))
	l.steps(50)
	if l.fake.PublishedLeads("n2") != "0:l" {
		t.Errorf("the leader withdrew its lead during an outage: %q", l.fake.PublishedLeads("n2"))
	}
}

func TestElectionNodeThatComesBackWithdrawsTheLeadItLeft(t *testing.T) {
	r := newElectionRig(t, "n1", electionNodes())
	_ = r.fake.PublishLeads(context.Background(), "n1", "3:l")
	r.fake.FollowLocation("l")
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n2", Term: 4})
	r.probeOK["n2"] = true
	r.steps(1)
	if got := r.fake.PublishedLeads("n1"); got != "" {
		t.Errorf("n1 came back as a standby and left its old lead %q", got)
	}
}

func TestElectionIgnoresAHolderOfAnotherLocation(t *testing.T) {
	r := newElectionRig(t, "n1", electionNodes())
	r.fake.FollowLocation("l")
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "x1", Term: 7})
	r.steps(1)
	if l := r.fake.LocationLease("l"); l.Holder != "n1" || l.Term != 8 {
		t.Errorf("lease %+v: want taken by n1 from x1, which is not in the location", l)
	}
}

func TestElectionFormerHolderRanksLastForTheLeadItReleased(t *testing.T) {
	// n2 ranks second by name, but n1 released the lead (it cannot forward,
	// or it stopped): n2 takes it at once instead of waiting for n1's turn.
	r := newElectionRig(t, "n2", electionNodes())
	r.fake.FollowLocation("l")
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n1", Term: 2})
	r.probeOK["n1"] = true
	r.steps(2)
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "", Term: 2})
	r.steps(1)
	if r.holder() != "n2" {
		t.Errorf("holder %q one step after n1 released: want n2 at once", r.holder())
	}
	// Without having seen who released it, n2 keeps its rank.
	fresh := newElectionRig(t, "n2", electionNodes())
	fresh.fake.FollowLocation("l")
	fresh.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "", Term: 2})
	fresh.steps(1)
	if fresh.holder() != "" {
		t.Errorf("holder %q: n2 took a lead released by a node it never saw hold it before its rank's delay", fresh.holder())
	}
}

// publishOrder is an Elector that records, when the lead is published,
// how many WireGuard peers the node's device had then.
type publishOrder struct {
	k8s.Elector
	dev   *wireguard.Fake
	peers chan int
}

func (p publishOrder) PublishLeads(ctx context.Context, node, v string) error {
	if v != "" {
		st, _ := p.dev.Show(ctx)
		p.peers <- len(st.Peers)
	}
	return p.Elector.PublishLeads(ctx, node, v)
}

func TestNewLeaderConfiguresItsTunnelsBeforeItPublishesItsLead(t *testing.T) {
	// The other locations reconfigure when the lead is published: if the
	// new leader were configured after them, their first handshake (from
	// behind NAT, the only one that can come) would find no peer and wait
	// for a restart.
	r := newRig(t, "node-beijing-2", 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	order := publishOrder{Elector: r.backend, dev: r.device, peers: make(chan int, 10)}
	e := newElection(r.agent, order)
	e.former = "node-beijing" // it left the lead: node-beijing-2 is first in line
	r.backend.FollowLocation("cn-beijing")
	r.backend.SetLocationLease("cn-beijing", &k8s.FakeLease{Holder: ""})
	done := make(chan error)
	go func() { done <- r.agent.Run(ctx) }()
	e.step(ctx, time.Now())
	if h := r.backend.LocationLease("cn-beijing").Holder; h != "node-beijing-2" {
		t.Fatalf("holder %q, want node-beijing-2", h)
	}
	if n := <-order.peers; n != 1 {
		t.Errorf("the lead was published with %d WireGuard peers on the new leader, want shanghai's already", n)
	}
	cancel()
	<-done
}

// tunnelNodes are electionNodes with a third location: the leader of l
// checks its tunnels through x and y.
func tunnelNodes() []topology.Node {
	nodes := electionNodes()
	for i := range nodes {
		nodes[i].Key = wgconf.Key{byte(i + 1)}
		nodes[i].Ready = true
	}
	return append(nodes, topology.Node{Name: "y1", Location: "y", Key: wgconf.Key{9}, Ready: true, InternalIP: netip.MustParsePrefix("10.8.0.1/24")})
}

// withTunnels gives the rig a topology of nodes and a TunnelProbe that
// answers through the tunnels to the locations in r.tunnelOK; each step
// then waits for its probes.
func (r *electionRig) withTunnels(nodes []topology.Node) {
	r.t.Helper()
	topo, err := topology.New(nodes, nil, topology.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	r.e.a.topo = topo
	r.tunnelOK = map[string]bool{}
	byIP := map[netip.Addr]string{}
	for _, s := range topo.Segments {
		byIP[s.WireGuardIP.Addr()] = s.Location
	}
	r.e.a.cfg.TunnelProbe = func(_ context.Context, from, ip netip.Addr) error {
		r.mu.Lock()
		if byIP[from] != r.e.loc {
			r.t.Errorf("tunnel probe of %s from %v, not from this node's segment's WireGuard IP", byIP[ip], from)
		}
		defer r.mu.Unlock()
		r.probedTunnels = append(r.probedTunnels, byIP[ip])
		if r.tunnelOK[byIP[ip]] {
			return nil
		}
		return errors.New("i/o timeout")
	}
}

func (r *electionRig) setTunnels(ok ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.tunnelOK)
	for _, l := range ok {
		r.tunnelOK[l] = true
	}
}

func TestElectionLeaderWhoseTunnelsStopAnsweringReleasesAndDoesNotTakeTheLeadBack(t *testing.T) {
	nodes := tunnelNodes()
	nodes[0].Leader = true // n1 outranks the others: only the tunnel failure keeps it from preempting
	r := newElectionRig(t, "n1", nodes)
	r.withTunnels(nodes)
	r.setTunnels("x", "y")
	r.steps(5)
	if r.holder() != "n1" || r.e.a.Forwarding() != nil {
		t.Fatalf("holder %q, forwarding %v: want n1 leading, forwarding", r.holder(), r.e.a.Forwarding())
	}
	if got := slices.Compact(slices.Sorted(slices.Values(r.probedTunnels))); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("probed the tunnels to %v, want x and y (not its own location)", got)
	}
	r.setTunnels()
	r.steps(3)
	if r.holder() != "n1" {
		t.Fatalf("released after %d rounds, want %d silent rounds", 3, DefaultProbeFailures)
	}
	r.steps(1)
	if l := r.fake.LocationLease("l"); l.Holder != "" {
		t.Fatalf("after %d silent rounds: lease %+v, want released", DefaultProbeFailures, l)
	}
	if err := r.e.a.Forwarding(); err == nil || !strings.Contains(err.Error(), "no tunnel answers") {
		t.Errorf("Forwarding = %v, want the tunnels named (what /forwarding answers)", err)
	}
	// n2 takes the lead; n1, annotated kilo.squat.ai/leader, does not
	// preempt it while its tunnels have not answered since.
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n2", Term: 1})
	r.probeOK["n2"] = true
	r.steps(50)
	if r.holder() != "n2" {
		t.Errorf("holder %q: the node whose tunnels failed took the lead back", r.holder())
	}
}

func TestElectionNodeWhoseTunnelsFailedStillTakesALeadNobodyElseTakes(t *testing.T) {
	nodes := tunnelNodes()
	r := newElectionRig(t, "n1", nodes)
	r.withTunnels(nodes)
	r.setTunnels("x", "y")
	r.steps(3)
	r.setTunnels()
	r.steps(5)
	if r.holder() != "" {
		t.Fatalf("holder %q, want released", r.holder())
	}
	// Nobody else takes it: n1 does, after every other standby's turn, and
	// keeps it although its tunnels stay silent (one handover at most).
	r.steps(int(3*rankDelay/(200*time.Millisecond)) + 1)
	if r.holder() != "n1" {
		t.Fatalf("holder %q: a location must keep a leader", r.holder())
	}
	r.steps(50)
	if r.holder() != "n1" {
		t.Errorf("holder %q: the lead flapped", r.holder())
	}
	// Its tunnels answer again: it is a node like the others.
	r.setTunnels("y")
	r.steps(2)
	if err := r.e.a.Forwarding(); err != nil {
		t.Errorf("Forwarding = %v after an answer, want nil", err)
	}
}

// lastResortLead makes n1 of a rig with tunnels a last-resort leader: its
// tunnels failed, it released the lead, nobody took it, and it took it
// back; it returns once n1 holds it again.
func lastResortLead(t *testing.T) *electionRig {
	t.Helper()
	nodes := tunnelNodes()
	r := newElectionRig(t, "n1", nodes)
	r.withTunnels(nodes)
	r.setTunnels("x", "y")
	r.steps(3)
	r.setTunnels()
	r.steps(5)
	if r.holder() != "" {
		t.Fatalf("holder %q: want released after its tunnels failed", r.holder())
	}
	for range 20 {
		if r.steps(1); r.holder() == "n1" {
			return r
		}
	}
	t.Fatalf("holder %q: n1 did not take back a lead nobody took", r.holder())
	return nil
}

func TestElectionLastResortLeaderHandsTheLeadToAStandbyThatCanForward(t *testing.T) {
	// A double fault: n1's tunnels failed, n2 led, n2 died; n1 took the
	// lead as the last resort. When n2 comes back able to forward, n1,
	// whose tunnels still carry nothing, hands the lead over.
	r := lastResortLead(t)
	r.steps(20) // n2 and n3 do not answer: n1 keeps the lead
	if r.holder() != "n1" {
		t.Fatalf("holder %q: the last-resort leader gave up a lead nobody can take", r.holder())
	}
	r.probeOK["n2"] = true // n2 is back and can forward
	r.steps(2)             // n1 asks one standby per probe interval, in turn
	if l := r.fake.LocationLease("l"); l.Holder != "" {
		t.Fatalf("lease %+v: want released to n2, which can forward", l)
	}
	r.fake.SetLocationLease("l", &k8s.FakeLease{Holder: "n2", Term: 9})
	r.steps(50)
	if r.holder() != "n2" {
		t.Errorf("holder %q: n1, whose tunnels failed, took the lead back", r.holder())
	}
}

func TestElectionLastResortLeaderHandsOverOnlyOnceInABackoff(t *testing.T) {
	// n2 answers that it can forward but never takes the lead (say, its
	// API access is broken): n1 takes the lead back and keeps it for
	// handoverBackoff before it tries again.
	r := lastResortLead(t)
	r.steps(DefaultProbeFailures)
	r.probeOK["n2"] = true
	r.steps(2)
	if r.holder() != "" {
		t.Fatalf("holder %q: want the lead handed over", r.holder())
	}
	releases := 0
	held := false
	for range int(handoverBackoff/(200*time.Millisecond)) - 2 {
		r.steps(1)
		switch h := r.holder(); {
		case h == "n1":
			held = true
		case held && h == "":
			releases++
			held = false
		}
	}
	if r.holder() != "n1" || releases != 0 {
		t.Errorf("holder %q, %d more releases within the backoff: want n1 leading, none", r.holder(), releases)
	}
	r.steps(5)
	if r.holder() != "" {
		t.Errorf("holder %q after the backoff: want a second handover", r.holder())
	}
}

func TestElectionLastResortLeaderGivesItsTunnelsTheirRoundsBeforeHandingOver(t *testing.T) {
	// A standby that can forward is there at once, but the WAN came back:
	// the tunnels answer within the rounds of the new lead, and the lead
	// stays.
	r := lastResortLead(t)
	r.probeOK["n2"] = true
	r.setTunnels("x", "y")
	for i := range 50 {
		if r.steps(1); r.holder() != "n1" {
			t.Fatalf("step %d: holder %q: the lead moved although the tunnels answer again", i, r.holder())
		}
	}
	if err := r.e.a.Forwarding(); err != nil {
		t.Errorf("Forwarding = %v, want nil once the tunnels answer", err)
	}
}

func TestElectionLastResortLeaderRetriesAHandOverWhoseReleaseFailed(t *testing.T) {
	r := lastResortLead(t)
	r.steps(DefaultProbeFailures)
	r.fake.FailHolds(errors.New("connection refused"))
	r.probeOK["n2"] = true
	r.steps(2)
	if r.holder() != "n1" {
		t.Fatalf("holder %q: the fake API let a release through", r.holder())
	}
	r.fake.FailHolds(nil)
	r.steps(1)
	if r.holder() != "" {
		t.Errorf("holder %q: the hand-over waits for its backoff after a failed release, want it released at the next step", r.holder())
	}
}

func TestElectionNewLeaderWhoseTunnelsNeverAnsweredKeepsTheLead(t *testing.T) {
	// A total WAN outage: no lead answers through its tunnels, so none is
	// armed, and the lead does not move between nodes.
	nodes := tunnelNodes()
	r := newElectionRig(t, "n1", nodes)
	r.withTunnels(nodes)
	r.steps(100)
	if r.holder() != "n1" || r.e.a.Forwarding() != nil {
		t.Errorf("holder %q, forwarding %v: want n1 kept", r.holder(), r.e.a.Forwarding())
	}
}

func TestElectionLeaderKeepsTheLeadWhileOneLocationAnswers(t *testing.T) {
	nodes := tunnelNodes()
	r := newElectionRig(t, "n1", nodes)
	r.withTunnels(nodes)
	r.setTunnels("x", "y")
	r.steps(3)
	r.setTunnels("y") // x is broken, not this leader
	r.steps(50)
	if r.holder() != "n1" {
		t.Errorf("holder %q: a broken remote location made a healthy leader give up", r.holder())
	}
}

func TestElectionLeaderKeepsTheLeadWhenManyOtherLocationsNeverAnswer(t *testing.T) {
	// Ten locations whose leaders never answer (a lost DR site, a partner
	// datacenter offline, simulated nodes): rounds that probe only them
	// say nothing about this leader's tunnels.
	nodes := tunnelNodes()
	for i := range 10 {
		loc := fmt.Sprintf("d%d", i)
		nodes = append(nodes, topology.Node{Name: loc + "-1", Location: loc, Key: wgconf.Key{byte(20 + i)}, Ready: true,
			InternalIP: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(20 + i), 0, 1}), 24)})
	}
	r := newElectionRig(t, "n1", nodes)
	r.withTunnels(nodes)
	r.setTunnels("x", "y")
	r.steps(100)
	if r.holder() != "n1" || r.e.a.Forwarding() != nil {
		t.Fatalf("holder %q, forwarding %v: a healthy leader gave its lead up for locations that never answered", r.holder(), r.e.a.Forwarding())
	}
	// Its own tunnels break: x and y, which answered, stop.
	r.setTunnels()
	r.steps(DefaultProbeFailures + 1)
	if l := r.fake.LocationLease("l"); l.Holder != "" {
		t.Fatalf("tunnels silent for %d rounds: lease %+v, want released", DefaultProbeFailures+1, l)
	}
	err := r.e.a.Forwarding()
	if err == nil || !strings.Contains(err.Error(), "no tunnel answers") || !strings.Contains(err.Error(), "x, y") || strings.Contains(err.Error(), "d0") {
		t.Errorf("Forwarding = %v, want the locations that stopped answering named (x, y), not those that never did", err)
	}
}

func TestElectionLeaderAloneInItsLocationChecksNoTunnels(t *testing.T) {
	// Nobody to hand over to: releasing would only leave the location
	// without a leader for a while.
	nodes := []topology.Node{
		{Name: "n1", Location: "l", Key: wgconf.Key{1}, Ready: true, InternalIP: netip.MustParsePrefix("10.0.0.1/24")},
		{Name: "x1", Location: "x", Key: wgconf.Key{2}, Ready: true, InternalIP: netip.MustParsePrefix("10.9.0.1/24")},
		{Name: "y1", Location: "y", Key: wgconf.Key{3}, Ready: true, InternalIP: netip.MustParsePrefix("10.8.0.1/24")},
	}
	r := newElectionRig(t, "n1", nodes)
	r.withTunnels(nodes)
	r.setTunnels("x", "y")
	r.steps(3)
	r.setTunnels()
	r.steps(20)
	if r.holder() != "n1" {
		t.Errorf("holder %q: the only node of its location released its lead", r.holder())
	}
}

// TestHTTPProbeAsksTheLeaderWhetherItForwards serves an agent's Handler on
// loopback and probes it as a standby would: 200 while it forwards, an
// error when it cannot, and an error when nothing answers.
func TestHTTPProbeAsksTheLeaderWhetherItForwards(t *testing.T) {
	var forward error
	a := &Agent{log: slog.New(slog.DiscardHandler), cfg: Config{Forwarding: func() error { return forward }}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Handler(prometheus.NewRegistry())}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	leader := topology.Node{Name: "l", InternalIP: netip.MustParsePrefix("127.0.0.1/8")}
	probe := HTTPProbe(port)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := probe(ctx, leader); err != nil {
		t.Errorf("probe of a leader that forwards: %v", err)
	}
	forward = errors.New("eth0 has no carrier")
	if err := probe(ctx, leader); err == nil || !strings.Contains(err.Error(), "eth0 has no carrier") {
		t.Errorf("probe of a leader that cannot forward: %v, want its reason", err)
	}
	srv.Close()
	if err := probe(ctx, leader); err == nil {
		t.Error("probe of a leader whose agent is gone succeeded")
	}
}

func TestOutranksByLeaderAnnotationThenPublicEndpoint(t *testing.T) {
	ext := netip.MustParseAddr("203.0.113.9")
	nodes := []topology.Node{
		{Name: "annotated", Leader: true},
		{Name: "public", ExternalIP: ext},
		{Name: "public2", ExternalIP: ext},
		{Name: "plain"},
	}
	for _, tc := range []struct {
		a    int
		b    string
		want bool
	}{
		{0, "public", true},
		{1, "annotated", false},
		{1, "plain", true},
		{1, "public2", false},
		{3, "plain", false},
		{0, "gone", false},
	} {
		if got := outranks(nodes[tc.a], nodes, tc.b); got != tc.want {
			t.Errorf("outranks(%s, %s) = %v, want %v", nodes[tc.a].Name, tc.b, got, tc.want)
		}
	}
}
