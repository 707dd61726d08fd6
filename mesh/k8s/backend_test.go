package k8s_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

const (
	keyA = "4jtvKgjTuwyokGD20xKD+dprGSbpy61QRApiAO0kM20="
	keyB = "Lw+uB7XCFqhSLtDC+0q6Y+L6XRUkypc7OWZ8+RU6yQ0="
	keyC = "rq3iv0e/ygoFaF5Hc38nwYov6HvfRrUi8mxazIua6Xo="
)

// counter counts API requests by "METHOD path".
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.n[r.Method+" "+r.URL.Path]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// eventually polls cond every 50 ms until it holds or timeout passes, and
// returns how long it took.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not true after %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

func makeNode(t *testing.T, kube kubernetes.Interface, name string, annotations map[string]string, labels map[string]string, ip string) {
	t.Helper()
	ctx := t.Context()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: labels}}
	n.Spec.PodCIDRs = []string{"10.42." + ip[len(ip)-1:] + ".0/24"}
	n, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// drain empties the change channel.
func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func byName(nodes []topology.Node, name string) (topology.Node, bool) {
	i := slices.IndexFunc(nodes, func(n topology.Node) bool { return n.Name == name })
	if i < 0 {
		return topology.Node{}, false
	}
	return nodes[i], true
}

func ready(b k8s.Backend, name string) bool {
	nodes, _, _ := b.Snapshot()
	n, ok := byName(nodes, name)
	return ok && n.Ready
}

// TestClient runs the backend against a real API server: Snapshot, lease
// readiness and failover, publishing, Peer status.
func TestClient(t *testing.T) {
	env := k8stest.Start(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)

	region := map[string]string{k8s.DefaultTopologyLabel: "eu"}
	makeNode(t, kube, "a", map[string]string{k8s.KeyAnnotation: keyA, k8s.LeaderAnnotation: ""}, region, "10.0.1.1")
	makeNode(t, kube, "b", map[string]string{k8s.KeyAnnotation: keyB}, region, "10.0.1.2")
	makeNode(t, kube, "c", map[string]string{k8s.LocationAnnotation: "us", k8s.KeyAnnotation: "not-a-key"}, nil, "10.0.2.3")

	scheme := runtimeScheme(t)
	cl, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	seb := &v1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "seb-laptop"}, Spec: v1alpha1.PeerSpec{AllowedIPs: []string{"10.5.100.10/32"}, PublicKey: keyC, PersistentKeepalive: 25}}
	if err := cl.Create(ctx, seb); err != nil {
		t.Fatal(err)
	}
	bad := &v1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "bad-endpoint"}, Spec: v1alpha1.PeerSpec{AllowedIPs: []string{"10.5.100.11/32"}, PublicKey: keyC}}
	if err := cl.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	// A bad endpoint passes the schema (free-form) and is reported.
	patch := []byte(`{"spec":{"endpoint":"gw.example.com"}}`)
	if err := cl.Patch(ctx, bad, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}

	requests := &counter{n: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(requests.wrap)
	const leaseDuration = 2 * time.Second
	b, err := k8s.New(ctx, k8s.Config{RESTConfig: cfg, LeaseDuration: leaseDuration})
	if err != nil {
		t.Fatal(err)
	}

	// Agents of a and b heartbeat; c has no agent.
	heartbeat := func(node string) context.CancelFunc {
		hctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); runHeartbeat(hctx, b, node, leaseDuration/3) }()
		return func() { cancel(); <-done }
	}
	stopA := heartbeat("a")
	defer stopA()
	stopB := heartbeat("b")

	t.Run("snapshot", func(t *testing.T) {
		eventually(t, 10*leaseDuration, "a and b ready", func() bool { return ready(b, "a") && ready(b, "b") })
		nodes, peers, problems := b.Snapshot()
		var names []string
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		if !slices.Equal(names, []string{"a", "b", "c"}) {
			t.Errorf("nodes = %v, want a b c", names)
		}
		a, _ := byName(nodes, "a")
		if a.Location != "eu" || !a.Leader || a.Key.String() != keyA || a.InternalIP != netip.MustParsePrefix("10.0.1.1/32") ||
			len(a.PodCIDRs) != 1 || a.PodCIDRs[0] != netip.MustParsePrefix("10.42.1.0/24") {
			t.Errorf("node a = %+v", a)
		}
		if c, _ := byName(nodes, "c"); c.Ready || c.Location != "us" {
			t.Errorf("node c (no lease) = %+v, want not ready in us", c)
		}
		if len(peers) != 1 || peers[0].Name != "seb-laptop" || peers[0].PersistentKeepalive != 25*time.Second || peers[0].Created.IsZero() {
			t.Errorf("peers = %+v, want only seb-laptop", peers)
		}
		var got []string
		for _, p := range problems {
			got = append(got, p.Error())
		}
		want := []string{
			`node "c": annotation kilo.squat.ai/key="not-a-key" is invalid: want a WireGuard public key: 44 base64 characters as printed by ` + "`wg pubkey`",
			`peer "bad-endpoint": invalid peer: endpoint: invalid endpoint "gw.example.com": not host:port`,
		}
		if len(got) != 2 || got[0] != want[0] || !strings.HasPrefix(got[1], want[1]) {
			t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("the node cache holds no image, managed field or system info", func(t *testing.T) {
		n, err := kube.CoreV1().Nodes().Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example.com/app:v1"}, SizeBytes: 1 << 20}}
		n.Status.NodeInfo.KubeletVersion = "v1.37.2"
		if n, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(n.ManagedFields) == 0 {
			t.Fatal("the API server set no managed fields: nothing to drop")
		}
		eventually(t, 10*time.Second, "the cache sees b's new status", func() bool {
			c, ok := k8s.CachedNode(b, "b")
			return ok && c.ResourceVersion == n.ResourceVersion
		})
		c, _ := k8s.CachedNode(b, "b")
		if c.ManagedFields != nil || c.Status.Images != nil || c.Status.NodeInfo.KubeletVersion != "" {
			t.Errorf("cached node b keeps %d managed fields, images %v, system info %+v", len(c.ManagedFields), c.Status.Images, c.Status.NodeInfo)
		}
		if len(c.Status.Addresses) != 1 || len(c.Status.Conditions) != 1 || !ready(b, "b") {
			t.Errorf("cached node b lost its address or Ready condition: %+v", c.Status)
		}
	})

	t.Run("since: the Lease's creation, kept by renewals, new for a new run", func(t *testing.T) {
		since := func() time.Time {
			nodes, _, _ := b.Snapshot()
			a, _ := byName(nodes, "a")
			return a.Since
		}
		first := since()
		if first.IsZero() {
			t.Fatal("node a has no Since although its agent heartbeats")
		}
		time.Sleep(leaseDuration) // several renewals
		if got := since(); !got.Equal(first) {
			t.Errorf("Since moved from %v to %v with plain renewals", first, got)
		}
		// Another process (a restarted agent) takes the same lease over:
		// its run starts now, so it would not take the lead back.
		other, err := k8s.New(ctx, k8s.Config{RESTConfig: env.Config, LeaseDuration: leaseDuration})
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Heartbeat(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*leaseDuration, "a new Since", func() bool { return since().After(first) })
		l, err := kube.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).Get(ctx, k8s.LeaseName("a"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !l.CreationTimestamp.Equal(&metav1.Time{Time: since()}) {
			t.Errorf("Since = %v, want the Lease's creationTimestamp %v", since(), l.CreationTimestamp)
		}
		node, err := kube.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "a", UID: node.UID}}
		if diff := cmp.Diff(want, l.OwnerReferences); diff != "" {
			t.Errorf("owners of a's Lease (-want +got):\n%s", diff)
		}
	})

	t.Run("failover: a node whose lease stops is not ready within the lease duration", func(t *testing.T) {
		drain(b.Changes())
		stopB()
		took := eventually(t, 5*leaseDuration, "b not ready", func() bool { return !ready(b, "b") })
		t.Logf("b not ready %v after its last heartbeat was stopped (lease duration %v)", took, leaseDuration)
		select {
		case <-b.Changes():
		case <-time.After(time.Second):
			t.Error("no change signalled when b's lease expired")
		}
		if !ready(b, "a") {
			t.Error("a lost readiness too")
		}
		stopB = heartbeat("b")
		eventually(t, 5*leaseDuration, "b ready again", func() bool { return ready(b, "b") })
	})

	t.Run("released lease: not ready at once", func(t *testing.T) {
		stopA()
		if err := b.ReleaseHeartbeat(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		took := eventually(t, leaseDuration, "a not ready", func() bool { return !ready(b, "a") })
		t.Logf("a not ready %v after its lease was deleted", took)
		stopA = heartbeat("a")
		eventually(t, 5*leaseDuration, "a ready again", func() bool { return ready(b, "a") })
	})

	t.Run("publish only when changed", func(t *testing.T) {
		path := "PATCH /api/v1/nodes/c"
		pub := k8s.NodeAnnotations{Key: mustKey(t, keyC), Endpoint: ":51821", InternalIP: netip.MustParsePrefix("10.0.2.3/24"),
			WireGuardIP: netip.MustParsePrefix("10.4.0.2/16"), Granularity: topology.LocationGranularity}
		if err := b.PublishNode(ctx, "c", pub); err != nil {
			t.Fatal(err)
		}
		if got := requests.get(path); got != 1 {
			t.Fatalf("patches = %d, want 1", got)
		}
		eventually(t, 10*time.Second, "cache sees c's key", func() bool {
			nodes, _, _ := b.Snapshot()
			c, _ := byName(nodes, "c")
			return c.Key.String() == keyC && c.InternalIP == netip.MustParsePrefix("10.0.2.3/24")
		})
		for range 3 {
			if err := b.PublishNode(ctx, "c", pub); err != nil {
				t.Fatal(err)
			}
		}
		if got := requests.get(path); got != 1 {
			t.Errorf("patches = %d after publishing the same annotations again, want 1", got)
		}
		pub.WireGuardIP = netip.Prefix{}
		if err := b.PublishNode(ctx, "c", pub); err != nil {
			t.Fatal(err)
		}
		n, err := kube.CoreV1().Nodes().Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, has := n.Annotations[k8s.WireGuardIPAnnotation]; has || requests.get(path) != 2 {
			t.Errorf("after removing the WireGuard IP: annotations %v, %d patches", n.Annotations, requests.get(path))
		}
		if n.Annotations[k8s.EndpointAnnotation] != ":51821" || n.Annotations[k8s.GranularityAnnotation] != "location" || n.Annotations[k8s.LocationAnnotation] != "us" {
			t.Errorf("annotations = %v", n.Annotations)
		}
		err = b.PublishNode(ctx, "nowhere", pub)
		if !errors.Is(err, k8s.ErrNotFound) {
			t.Errorf("publish to a missing node: %v, want ErrNotFound", err)
		}
	})

	t.Run("status writes and kubelet heartbeats do not signal", func(t *testing.T) {
		time.Sleep(200 * time.Millisecond)
		drain(b.Changes())
		n, err := kube.CoreV1().Nodes().Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Second))
		if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		setStatus(t, b, "seb-laptop", 100)
		select {
		case <-b.Changes():
			t.Error("a change was signalled for a Node status heartbeat or a Peer status write")
		case <-time.After(time.Second):
		}
	})

	t.Run("a key rotation request signals and reads back", func(t *testing.T) {
		drain(b.Changes())
		patch := []byte(`{"metadata":{"annotations":{"` + k8s.RotateKeyRequestAnnotation + `":"2026-12-01T10:00:00Z"}}}`)
		if _, err := kube.CoreV1().Nodes().Patch(ctx, "b", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-b.Changes():
		case <-time.After(10 * time.Second):
			t.Error("no change signalled for a rotation request")
		}
		if got := b.RotateKeyRequest("b"); got != "2026-12-01T10:00:00Z" {
			t.Errorf("RotateKeyRequest(b) = %q, want the request", got)
		}
		if got := b.RotateKeyRequest("nowhere"); got != "" {
			t.Errorf("RotateKeyRequest of a missing node = %q, want none", got)
		}
	})

	t.Run("peer status", func(t *testing.T) {
		setStatus(t, b, "seb-laptop", 200)
		var p v1alpha1.Peer
		if err := cl.Get(ctx, client.ObjectKey{Name: "seb-laptop"}, &p); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if p.Status.RxBytes != 200 || p.Status.Endpoint != "198.51.100.20:40000" || c == nil || c.Status != metav1.ConditionTrue || p.Status.ObservedGeneration != p.Generation {
			t.Errorf("status = %+v", p.Status)
		}
		// Once the cache holds the written status, writing it again is no request.
		put := "PUT /apis/kilo.squat.ai/v1alpha1/peers/seb-laptop/status"
		eventually(t, 10*time.Second, "an unchanged status is not written", func() bool {
			before := requests.get(put)
			setStatus(t, b, "seb-laptop", 200)
			return requests.get(put) == before
		})
		if err := b.UpdatePeerStatus(ctx, "nobody", func(*v1alpha1.Peer) {}); !errors.Is(err, k8s.ErrNotFound) {
			t.Errorf("status of a missing peer: %v, want ErrNotFound", err)
		}
	})
	stopB()
}

// runHeartbeat renews node's Lease every period until ctx ends, as the
// agent does.
func runHeartbeat(ctx context.Context, b k8s.Backend, node string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_ = b.Heartbeat(ctx, node)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setStatus writes a Ready status with rx bytes.
func setStatus(t *testing.T, b k8s.Backend, name string, rx int64) {
	t.Helper()
	hs := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	err := b.UpdatePeerStatus(t.Context(), name, func(p *v1alpha1.Peer) {
		p.Status.ObservedGeneration = p.Generation
		p.Status.LatestHandshake = &hs
		p.Status.Endpoint = "198.51.100.20:40000"
		p.Status.RxBytes = rx
		p.Status.Node = "a"
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonHandshake, Message: "handshake seen", ObservedGeneration: p.Generation})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustKey(t *testing.T, s string) wgconf.Key {
	t.Helper()
	k, err := wgconf.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
