package agent

import (
	"context"
	"errors"
	"github.com/kilofed/kilofed/mesh/golden"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/route"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

type fakeLinks struct{ addrs map[string][]netip.Prefix }

func (l *fakeLinks) SetAddresses(name string, addrs []netip.Prefix) error {
	l.addrs[name] = addrs
	return nil
}
func (l *fakeLinks) SetUp(string) error { return nil }

func key(t *testing.T, seed byte) wgconf.SecretKey {
	t.Helper()
	var k wgconf.SecretKey
	for i := range k {
		k[i] = seed + byte(i)
	}
	return k
}

// pubKey is the public half of key(t, seed).
func pubKey(t *testing.T, seed byte) wgconf.Key { return key(t, seed).PublicKey() }

// seedNodes are the Chinese seed's two nodes, each with a second node in
// its location, all ready.
func seedNodes(t *testing.T) []topology.Node {
	mk := func(name, loc, internal, external, pods string, seed byte) topology.Node {
		n := topology.Node{
			Name: name, Location: loc, Ready: true,
			Key:        pubKey(t, seed),
			InternalIP: netip.MustParsePrefix(internal),
			PodCIDRs:   []netip.Prefix{netip.MustParsePrefix(pods)},
		}
		if external != "" {
			n.ExternalIP = netip.MustParseAddr(external)
		}
		return n
	}
	return []topology.Node{
		mk("node-beijing", "cn-beijing", "10.0.1.10/24", "203.0.113.10", "10.42.0.0/24", 1),
		mk("node-beijing-2", "cn-beijing", "10.0.1.11/24", "", "10.42.2.0/24", 2),
		mk("node-shanghai", "cn-shanghai", "10.0.2.20/24", "198.51.100.20", "10.42.1.0/24", 3),
	}
}

type rig struct {
	agent   *Agent
	backend *k8s.Fake
	device  *wireguard.Fake
	router  *route.Fake
	links   *fakeLinks
	reg     *prometheus.Registry
}

// newRig returns an agent for host with fakes, its Config changed by opts.
func newRig(t *testing.T, host string, seed byte, opts ...func(*Config)) *rig {
	t.Helper()
	r := &rig{
		backend: k8s.NewFake(),
		device:  wireguard.NewFake("kilo0", func() time.Time { return time.Unix(1e9, 0) }),
		router:  &route.Fake{},
		links:   &fakeLinks{addrs: map[string][]netip.Prefix{}},
		reg:     prometheus.NewRegistry(),
	}
	cfg := Config{
		Hostname: host, Backend: r.backend, PrivateKey: key(t, seed), ListenPort: 51820,
		Topology: topology.Options{Subnet: netip.MustParsePrefix("10.5.0.0/16"),
			Links: topology.Links{WireGuard: "kilo0", Underlay: "eth0"}},
		Device: r.device, Links: r.links, Router: r.router, Metrics: NewMetrics(r.reg),
	}
	for _, o := range opts {
		o(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.agent = a
	r.backend.Set(seedNodes(t), nil, nil)
	return r
}

func TestReconcileAppliesLeaderShareAndIsIdempotent(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	ctx := context.Background()
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	dev1, routes1 := r.device.Record(), r.router.Record()
	golden.Check(t, "leader-beijing.golden", dev1+"---\n"+routes1)
	if got := r.links.addrs["kilo0"]; len(got) != 1 || !netip.MustParsePrefix("10.5.0.0/16").Contains(got[0].Addr()) {
		t.Errorf("leader addresses = %v, want one address in 10.5.0.0/16", got)
	}
	if p := r.backend.Published["node-beijing"]; p.Key != pubKey(t, 1) || !p.WireGuardIP.IsValid() {
		t.Errorf("published %+v, want the public key and a WireGuard IP", p)
	}
	// Idempotent: the same cluster again sends WireGuard nothing and gives
	// the router the same whole desired state.
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if r.device.Record() != dev1 {
		t.Errorf("a second identical reconcile changed the device:\n%s", strings.TrimPrefix(r.device.Record(), dev1))
	}
	if got := r.router.Record(); got != routes1+routes1 {
		t.Errorf("a second identical reconcile set other routes:\n%s", strings.TrimPrefix(got, routes1))
	}
	if got := testutil.ToFloat64(r.agent.cfg.Metrics.leader.WithLabelValues("cn-beijing")); got != 1 {
		t.Errorf("kilo_leader = %v, want 1", got)
	}
}

func TestReconcileNonLeaderRoutesThroughLeader(t *testing.T) {
	r := newRig(t, "node-beijing-2", 2)
	if err := r.agent.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	routes, _ := r.router.State()
	var viaLeader bool
	for _, rt := range routes {
		if rt.Dst == netip.MustParsePrefix("10.42.1.0/24") {
			viaLeader = rt.Gw == netip.MustParseAddr("10.0.1.10") && rt.Dev == "eth0"
		}
	}
	if !viaLeader {
		t.Errorf("no route to shanghai's pods via the beijing leader 10.0.1.10:\n%s", r.router.Record())
	}
	if got := r.links.addrs["kilo0"]; len(got) != 0 {
		t.Errorf("non-leader wears %v on kilo0, want nothing", got)
	}
	if st, _ := r.device.Show(context.Background()); len(st.Peers) != 0 {
		t.Errorf("non-leader has %d WireGuard peers, want 0", len(st.Peers))
	}
}

func TestLeaderChangeIsCountedWhenLeaderDies(t *testing.T) {
	r := newRig(t, "node-beijing-2", 2)
	ctx := context.Background()
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r.backend.SetForwarding("node-beijing", false) // node-beijing's lease expired
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.agent.Topology().IsLeader("node-beijing-2") {
		t.Fatalf("node-beijing-2 did not take over")
	}
	if got := testutil.ToFloat64(r.agent.cfg.Metrics.leaderChanges); got != 1 {
		t.Errorf("kilo_leader_changes_total = %v, want 1", got)
	}
	if len(r.links.addrs["kilo0"]) != 1 {
		t.Errorf("new leader wears %v, want the segment's WireGuard IP", r.links.addrs["kilo0"])
	}
}

func TestReconcileLeadsTheLocationAsSoonAsTheElectionTakesIt(t *testing.T) {
	// node-beijing-2 takes the lead: it reconciles at once, as the leader,
	// before its kilofed.io/leads annotation comes back through the watch
	// (the other locations reconfigure on that annotation: the new leader
	// is ready first, so the first handshake from behind NAT finds it).
	r := newRig(t, "node-beijing-2", 2)
	ctx := context.Background()
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r.agent.setLeading("cn-beijing")
	select {
	case <-r.agent.kick:
	default:
		t.Fatal("taking the lead did not ask the loop for a reconciliation")
	}
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.agent.Topology().IsLeader("node-beijing-2") {
		t.Fatal("node-beijing-2 took the lead and does not lead in its own reconciliation")
	}
	if st, _ := r.device.Show(ctx); len(st.Peers) != 1 {
		t.Errorf("new leader has %d WireGuard peers, want shanghai's", len(st.Peers))
	}
	r.agent.setLeading("")
	if err := r.agent.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if r.agent.Topology().IsLeader("node-beijing-2") {
		t.Error("node-beijing-2 still leads after giving the lead up")
	}
}

func TestBadObjectsAreReportedAndMeshKeepsWorking(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	nodes := append(seedNodes(t), topology.Node{Name: "node-nokey", Location: "cn-beijing", InternalIP: netip.MustParsePrefix("10.0.1.99/24")})
	r.backend.Set(nodes, nil, []k8s.Problem{{Kind: "node", Name: "broken", Err: errors.New("annotation kilo.squat.ai/key: not a WireGuard key")}})
	if err := r.agent.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.device.Show(context.Background()); len(st.Peers) != 1 {
		t.Errorf("leader has %d peers, want 1 (shanghai) despite bad objects", len(st.Peers))
	}
	if got := testutil.ToFloat64(r.agent.cfg.Metrics.problems.WithLabelValues("object", "excluded")); got != 1 {
		t.Errorf("object problems = %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.agent.cfg.Metrics.problems.WithLabelValues("node", "excluded")); got != 1 {
		t.Errorf("excluded node problems = %v, want 1", got)
	}
}

func TestFirewallMasqueradesPodsOnlyOutsideTheMesh(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	if err := r.agent.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	rules := FirewallRules(r.agent.Topology(), "node-beijing", FirewallOptions{ListenPort: 51820})
	if len(rules.Masquerade) != 1 || rules.Masquerade[0].Src != netip.MustParsePrefix("10.42.0.0/24") {
		t.Fatalf("masquerade = %+v, want the node's pod CIDR", rules.Masquerade)
	}
	except := rules.Masquerade[0].Except
	for _, want := range []string{"10.42.1.0/24", "10.5.0.0/16"} {
		found := false
		for _, e := range except {
			found = found || e == netip.MustParsePrefix(want)
		}
		if !found {
			t.Errorf("masquerade does not exempt mesh range %s: %v", want, except)
		}
	}
	if diff := cmp.Diff([]uint16{51820}, rules.AcceptUDP); diff != "" {
		t.Errorf("AcceptUDP (-want +got):\n%s", diff)
	}
}

func TestHeartbeatStopsWhileNotForwarding(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	var broken error
	r.agent.cfg.Forwarding = func() error { return broken }
	h := heartbeats{a: r.agent}
	ctx := context.Background()
	now := time.Unix(1e9, 0)
	beat := func() int {
		h.beat(ctx, now)
		now = now.Add(time.Second)
		return r.backend.HeartbeatCount("node-beijing")
	}
	n := beat()
	if n == 0 {
		t.Fatal("no heartbeat while forwarding")
	}
	broken = errors.New("eth0 has no carrier")
	for range 3 {
		if got := beat(); got != n {
			t.Fatalf("heartbeats went on while not forwarding: %d -> %d", n, got)
		}
	}
	broken = nil
	if got := beat(); got <= n {
		t.Errorf("heartbeats did not resume with forwarding: %d -> %d", n, got)
	}

	// RunHeartbeat releases the lease when its context ends.
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.agent.RunHeartbeat(stopped); err != nil {
		t.Fatal(err)
	}
	if got := r.backend.HeartbeatCount("node-beijing"); got != 0 {
		t.Errorf("lease not released on shutdown: %d heartbeats left", got)
	}
}

func TestLoadOrCreateKeyIsPrivateAndStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kilo", "key")
	k1, created, err := LoadOrCreateKey(path, nil)
	if err != nil || !created {
		t.Fatalf("first load: created=%v err=%v", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	k2, created, err := LoadOrCreateKey(path, nil)
	if err != nil || created || k1 != k2 {
		t.Errorf("second load: created=%v err=%v same=%v", created, err, k1 == k2)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(path, nil); err == nil || !strings.Contains(err.Error(), "delete the file") {
		t.Errorf("garbage key: err = %v, want advice to delete the file", err)
	}
}

func TestGatewayLeaderReportsPeerStatusAndOverlap(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	peers := []topology.Peer{
		{Name: "seb-laptop", AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.5.100.10/32")}, PublicKey: pubKey(t, 50), Created: old, PersistentKeepalive: 25 * time.Second},
		{Name: "intruder", AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.5.100.10/32")}, PublicKey: pubKey(t, 60), Created: old.Add(time.Hour)},
	}
	r.backend.Set(seedNodes(t), peers, []k8s.Problem{{Kind: topology.KindPeer, Name: "garbage", Err: errors.New("publicKey: not a WireGuard key")}})
	if err := r.agent.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for name, st := range r.backend.PeerStatus {
		for _, c := range st.Conditions {
			if c.Type == "Accepted" {
				got[name] = string(c.Status) + "/" + c.Reason
			}
		}
	}
	want := map[string]string{"seb-laptop": "True/Valid", "intruder": "False/AllowedIPsOverlap", "garbage": "False/InvalidSpec"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Accepted conditions (-want +got):\n%s", diff)
	}

	other := newRig(t, "node-shanghai", 3)
	other.backend.Set(seedNodes(t), peers, nil)
	if err := other.agent.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(other.backend.PeerStatus) != 0 {
		t.Errorf("a node that does not lead the gateway segment wrote %d statuses", len(other.backend.PeerStatus))
	}
}

type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestDNSEndpointsAreResolvedAndKeptWhenDNSFails(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	dns := fakeResolver{"dr-gateway.example.com": {netip.MustParseAddr("2001:db8::9"), netip.MustParseAddr("198.51.100.99")}}
	r.agent.cfg.Resolver = dns
	dr := topology.Peer{
		Name: "cluster-dr-ovhcloud", PublicKey: pubKey(t, 70), PersistentKeepalive: 25 * time.Second,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.11.0.0/16"), netip.MustParsePrefix("10.21.0.0/16")},
		Endpoint:   &topology.Endpoint{DNS: "dr-gateway.example.com", Port: 51820},
	}
	r.backend.Set(seedNodes(t), []topology.Peer{dr}, nil)
	endpoint := func() netip.AddrPort {
		t.Helper()
		if err := r.agent.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		st, _ := r.device.Show(context.Background())
		p, ok := st.Peer(dr.PublicKey)
		if !ok {
			t.Fatalf("DR peer not configured")
		}
		return p.Endpoint
	}
	if got, want := endpoint(), netip.MustParseAddrPort("198.51.100.99:51820"); got != want {
		t.Errorf("endpoint = %v, want the IPv4 answer %v", got, want)
	}
	dns["dr-gateway.example.com"] = []netip.Addr{netip.MustParseAddr("198.51.100.77")}
	if got, want := endpoint(), netip.MustParseAddrPort("198.51.100.77:51820"); got != want {
		t.Errorf("after the record changed, endpoint = %v, want %v", got, want)
	}
	delete(dns, "dr-gateway.example.com")
	if got, want := endpoint(), netip.MustParseAddrPort("198.51.100.77:51820"); got != want {
		t.Errorf("when DNS fails, endpoint = %v, want the last address %v", got, want)
	}
}

// hookResolver answers from r after calling during.
type hookResolver struct {
	r      fakeResolver
	during func()
}

func (h hookResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	h.during()
	return h.r.LookupNetIP(ctx, network, host)
}

// TestElectionSeesNodesOnlyOnceTheirEndpointsAreResolved proves that the
// nodes the election step reads (lastNodes, from another goroutine) are
// never the snapshot the reconciliation is still filling in: resolving a
// DNS endpoint writes into it, a data race with the election's reads.
func TestElectionSeesNodesOnlyOnceTheirEndpointsAreResolved(t *testing.T) {
	r := newRig(t, "node-beijing", 1)
	nodes := seedNodes(t)
	nodes[1].Endpoint = &topology.Endpoint{DNS: "node-1.example.com", Port: 51820}
	var unresolved []string
	r.agent.cfg.Resolver = hookResolver{
		r: fakeResolver{"node-1.example.com": {netip.MustParseAddr("198.51.100.1")}},
		during: func() {
			for _, n := range r.agent.lastNodes() {
				if n.Endpoint != nil && n.Endpoint.DNS != "" && !n.Endpoint.Addr.IsValid() {
					unresolved = append(unresolved, n.Name)
				}
			}
		},
	}
	r.backend.Set(nodes, nil, nil)
	for range 2 {
		if err := r.agent.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(unresolved) > 0 {
		t.Errorf("lastNodes returned the snapshot being resolved (unresolved endpoints of %v)", unresolved)
	}
	if got := r.agent.lastNodes(); len(got) != len(nodes) {
		t.Errorf("lastNodes has %d nodes after the reconciliation, want %d", len(got), len(nodes))
	}
}
