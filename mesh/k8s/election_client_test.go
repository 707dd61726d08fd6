package k8s_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	"github.com/kilofed/kilofed/mesh/topology"
)

// TestLocationElectionClient runs the location election's Lease client
// against a real API server: of candidates writing at once exactly one
// holds the Lease (resourceVersion), a takeover raises the term and the
// old holder's next renewal finds it lost, a release empties the holder,
// each Client watches only its own location's Lease, and Snapshot marks
// ready the node whose kilofed.io/leads has the highest term of its
// location, ignoring (and reporting) one that claims another location.
func TestLocationElectionClient(t *testing.T) {
	env := k8stest.Start(t)
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	makeNode(t, admin, "p1", map[string]string{k8s.KeyAnnotation: keyA, k8s.LocationAnnotation: "paris"}, nil, "10.0.1.1")
	makeNode(t, admin, "p2", map[string]string{k8s.KeyAnnotation: keyB, k8s.LocationAnnotation: "paris"}, nil, "10.0.1.2")
	makeNode(t, admin, "b1", map[string]string{k8s.KeyAnnotation: keyC, k8s.LocationAnnotation: "berlin"}, nil, "10.0.2.1")

	var mu sync.Mutex
	var watches []string
	newClient := func() *k8s.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if strings.Contains(r.URL.Path, "/leases") && r.URL.Query().Get("watch") == "true" {
					mu.Lock()
					watches = append(watches, r.URL.Query().Get("fieldSelector"))
					mu.Unlock()
				}
				return rt.RoundTrip(r)
			})
		}
		c, err := k8s.New(ctx, k8s.Config{RESTConfig: cfg, Election: k8s.ElectionLocation, LeaseDuration: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2, c3 := newClient(), newClient(), newClient()
	for _, c := range []*k8s.Client{c1, c2, c3} {
		c.FollowLocation("paris")
		eventually(t, 10*time.Second, "the election Lease's watch synced", func() bool { return c.LocationLease("paris").Known })
	}

	t.Run("of candidates writing at once exactly one holds the Lease", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i, c := range []*k8s.Client{c1, c2, c3} {
			wg.Go(func() {
				_, errs[i] = c.HoldLocation(ctx, "paris", []string{"p1", "p2", "p3"}[i], k8s.LocationLease{Known: true}, 0)
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, k8s.ErrLeaseTaken):
				t.Errorf("candidate %d: %v, want ErrLeaseTaken", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d candidates hold the Lease (%v), want 1", won, errs)
		}
	})

	l, err := admin.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).Get(ctx, k8s.LocationLeaseName("paris"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := *l.Spec.HolderIdentity
	holderC, other := map[string]*k8s.Client{"p1": c1, "p2": c2, "p3": c3}[holder], "p1"
	if holder == "p1" {
		other = "p2"
	}
	otherC := map[string]*k8s.Client{"p1": c1, "p2": c2}[other]

	t.Run("a renewal keeps the term, a takeover raises it, the old holder finds it lost", func(t *testing.T) {
		mine := k8s.LocationLease{Known: true, Exists: true, Holder: holder}
		s, err := holderC.HoldLocation(ctx, "paris", holder, mine, 0)
		if err != nil || s.Holder != holder || s.Term != 0 {
			t.Fatalf("renewal: %+v, %v; want %s in term 0", s, err, holder)
		}
		// A takeover from a view older than the renewal is refused (and
		// refreshes the view); from the current one it succeeds.
		for range 3 {
			if s, err = otherC.HoldLocation(ctx, "paris", other, mine, 0); !errors.Is(err, k8s.ErrLeaseTaken) {
				break
			}
		}
		if err != nil || s.Holder != other || s.Term != 1 {
			t.Fatalf("takeover: %+v, %v; want %s in term 1", s, err, other)
		}
		if s, err := holderC.HoldLocation(ctx, "paris", holder, mine, 0); !errors.Is(err, k8s.ErrLeaseTaken) || s.Holder != other {
			t.Errorf("the old holder's renewal: %+v, %v; want ErrLeaseTaken, held by %s", s, err, other)
		}
		if s := holderC.LocationLease("paris"); s.Holder != other || s.Term != 1 {
			t.Errorf("the old holder sees %+v, want %s in term 1", s, other)
		}
	})

	t.Run("a release empties the holder and keeps the term", func(t *testing.T) {
		if err := otherC.ReleaseLocation(ctx, "paris", other); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the release seen", func() bool {
			s := holderC.LocationLease("paris")
			return s.Exists && s.Holder == "" && s.Term == 1
		})
		s, err := holderC.HoldLocation(ctx, "paris", holder, k8s.LocationLease{Known: true, Exists: true, Term: 1}, 0)
		if err != nil || s.Term != 2 {
			t.Errorf("taking a released Lease: %+v, %v; want term 2", s, err)
		}
	})

	t.Run("each Client watches only its own location's Lease", func(t *testing.T) {
		berlin := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k8s.LocationLeaseName("berlin"), Namespace: k8s.DefaultLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new("b1")}}
		if _, err := admin.CoordinationV1().Leases(k8s.DefaultLeaseNamespace).Create(ctx, berlin, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if s := c1.LocationLease("berlin"); s.Known {
			t.Errorf("a Client following paris knows berlin's Lease: %+v", s)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(watches) == 0 {
			t.Fatal("no Lease watch seen")
		}
		for _, w := range watches {
			if w != "metadata.name="+k8s.LocationLeaseName("paris") {
				t.Errorf("a Lease watch with field selector %q, want only paris's Lease", w)
			}
		}
	})

	t.Run("Snapshot: the highest term of each location leads, another location's claim is ignored", func(t *testing.T) {
		for node, v := range map[string]string{"p1": "1:paris", "p2": "2:paris", "b1": "7:paris"} {
			if err := c1.PublishLeads(ctx, node, v); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 5*time.Second, "p2 alone ready in paris", func() bool {
			nodes, _, _ := c3.Snapshot()
			p1, _ := byName(nodes, "p1")
			p2, _ := byName(nodes, "p2")
			return p2.Ready && !p1.Ready
		})
		// A reader of the mesh (kgctl, kilofed-controller: Election empty)
		// sees the same leader without knowing the agents' mode.
		reader, err := k8s.New(ctx, k8s.Config{RESTConfig: env.Config, LeaseDuration: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the reader sees p2 alone ready in paris", func() bool {
			return ready(reader, "p2") && !ready(reader, "p1")
		})
		eventually(t, 5*time.Second, "b1's claim on paris reported", func() bool {
			_, _, problems := c3.Snapshot()
			for _, p := range problems {
				if p.Kind == topology.KindNode && p.Name == "b1" && strings.Contains(p.Error(), "names location \"paris\"") {
					return true
				}
			}
			return false
		})
		nodes, _, _ := c3.Snapshot()
		if b1, _ := byName(nodes, "b1"); !b1.Ready {
			t.Errorf("b1 (berlin, with no valid lead) not ready: berlin has no leader, every node stays a candidate")
		}
		if err := c1.PublishLeads(ctx, "p2", ""); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "p1 leads once p2 withdrew", func() bool { return ready(c3, "p1") && !ready(c3, "p2") })
	})
}
