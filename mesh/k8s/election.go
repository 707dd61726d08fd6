package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kilofed/kilofed/mesh/topology"
)

// Election says how the leader of each location is chosen.
type Election string

const (
	// ElectionNodeLeases is the first design: every agent renews a
	// heartbeat Lease of its own and watches every other one; each agent
	// elects the leaders from the fresh ones (N writes and N x N watch
	// events per renewal period).
	ElectionNodeLeases Election = "node-leases"
	// ElectionLocation is one election Lease per location, held and renewed
	// by its leader and watched only by that location's nodes; the leader
	// publishes LeadsAnnotation on its Node, which every agent reads (L
	// writes and N watch events per renewal period).
	ElectionLocation Election = "location"
	// ElectionAuto is for the clients that only read the mesh (kgctl,
	// kilofed-controller), whatever mode its agents run: the heartbeat
	// Leases are watched as with ElectionNodeLeases, and a location whose
	// nodes publish LeadsAnnotation is led as they say (ElectionLocation).
	ElectionAuto Election = "auto"
)

// ParseElection returns the Election named s ("" is ElectionAuto).
func ParseElection(s string) (Election, error) {
	switch e := Election(s); e {
	case "":
		return ElectionAuto, nil
	case ElectionNodeLeases, ElectionLocation, ElectionAuto:
		return e, nil
	}
	return "", fmt.Errorf("leader election %q: want %s or %s", s, ElectionLocation, ElectionNodeLeases)
}

// LocationLeaseName returns the name of loc's election Lease:
// LocationLeasePrefix, loc lower-cased with what a name may not hold
// replaced by '-' (at most 40 characters), '-' and 8 hex digits of loc's
// SHA-256, so that locations that sanitize alike still get Leases of
// their own.
func LocationLeaseName(loc string) string {
	return LocationLeasePrefix + sanitizeLocation(loc) + "-" + locationHash(loc)
}

func sanitizeLocation(loc string) string {
	b := []byte(strings.ToLower(loc))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			b[i] = '-'
		}
	}
	s := string(b)
	if len(s) > 40 {
		s = s[:40]
	}
	return strings.Trim(s, "-")
}

func locationHash(loc string) string {
	h := sha256.Sum256([]byte(loc))
	return hex.EncodeToString(h[:4])
}

// Leads is a parsed LeadsAnnotation.
type Leads struct {
	// Term is the election Lease's leaseTransitions when the node took it.
	Term int32
	// Location is the location the node says it leads.
	Location string
}

// String returns the annotation's value.
func (l Leads) String() string { return strconv.Itoa(int(l.Term)) + ":" + l.Location }

// ParseLeads parses a LeadsAnnotation value.
func ParseLeads(v string) (Leads, error) {
	t, loc, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(t, 10, 32)
	if !ok || err != nil || n < 0 || loc == "" {
		return Leads{}, &AnnotationError{Annotation: LeadsAnnotation, Value: v, Want: "<term>:<location>, written by the leader's agent (7:aws-euwest3)"}
	}
	return Leads{Term: int32(n), Location: loc}, nil
}

// electedLeaders returns, per location, the node that leads it by the
// LeadsAnnotation of the nodes (the highest term, then the first name),
// and the problems of annotations that cannot count: unparsable, or naming
// a location that is not the node's own (a node may lead only its own
// location).
func electedLeaders(nodes []topology.Node, leads map[string]string) (map[string]string, []Problem) {
	type best struct {
		name string
		term int32
	}
	out := map[string]best{}
	var problems []Problem
	for _, n := range nodes {
		v, ok := leads[n.Name]
		if !ok || v == "" {
			continue
		}
		l, err := ParseLeads(v)
		if err != nil {
			problems = append(problems, Problem{Kind: topology.KindNode, Name: n.Name, Err: err})
			continue
		}
		if l.Location != n.Location {
			problems = append(problems, Problem{Kind: topology.KindNode, Name: n.Name,
				Err: fmt.Errorf("annotation %s=%q names location %q, but the node is in %q: ignored (a node leads only its own location)", LeadsAnnotation, v, l.Location, n.Location)})
			continue
		}
		b, ok := out[l.Location]
		if !ok || l.Term > b.term || l.Term == b.term && n.Name < b.name {
			out[l.Location] = best{name: n.Name, term: l.Term}
		}
	}
	leaders := make(map[string]string, len(out))
	for loc, b := range out {
		leaders[loc] = b.name
	}
	return leaders, problems
}

// markElected makes Ready, in each location that has a leader in leaders,
// only that leader (a node whose Ready condition is False stays not ready).
func markElected(nodes []topology.Node, leaders map[string]string) {
	for i := range nodes {
		if l, ok := leaders[nodes[i].Location]; ok {
			nodes[i].Ready = nodes[i].Ready && l == nodes[i].Name
		}
	}
}

// LocationLease is a location's election Lease as this process last saw it.
type LocationLease struct {
	// Known is false until the Lease's watch has synced once.
	Known bool
	// Exists is false while there is no such Lease.
	Exists bool
	// Holder is the node holding it; "" when released.
	Holder string
	// Term is its leaseTransitions.
	Term int32
	// Age is how long ago, on this process's clock, its last change was
	// seen (the start of the watch for a Lease only listed).
	Age time.Duration
}

// ErrLeaseTaken is returned by HoldLocation when another node wrote the
// Lease first; the Lease as it is now is returned with it.
var ErrLeaseTaken = errors.New("the location's election lease was written by another node first")

// locationWatch follows one location's election Lease.
type locationWatch struct {
	loc  string
	name string
	stop chan struct{}
	inf  cache.SharedIndexInformer

	mu sync.Mutex
	// latest is the newest version of the Lease seen, from the watch or
	// from this process's own writes and reads; nil when there is none.
	latest *coordinationv1.Lease
	// seen is when latest's version was first seen (this process's clock).
	seen time.Time
}

// store records l (nil: deleted) if it is not older than what is known.
func (w *locationWatch) store(l *coordinationv1.Lease, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l != nil && w.latest != nil && olderVersion(l.ResourceVersion, w.latest.ResourceVersion) {
		return false
	}
	if l != nil && w.latest != nil && l.ResourceVersion == w.latest.ResourceVersion {
		return false
	}
	w.latest = l
	w.seen = now
	return true
}

// olderVersion reports whether resource version a is older than b, when
// both are numbers (etcd's revisions); unknown forms are never older.
func olderVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// FollowLocation makes the Client watch loc's election Lease, and only it
// (a field selector on its name): the watch started for another location
// before is stopped. Changes of the Lease signal LeaseChanges.
func (c *Client) FollowLocation(loc string) {
	c.elMu.Lock()
	defer c.elMu.Unlock()
	if c.follow != nil && c.follow.loc == loc {
		return
	}
	if c.follow != nil {
		close(c.follow.stop)
		c.follow = nil
	}
	if loc == "" {
		return
	}
	name := LocationLeaseName(loc)
	w := &locationWatch{loc: loc, name: name, stop: make(chan struct{})}
	w.inf = cache.NewSharedIndexInformer(
		Patient(cache.NewFilteredListWatchFromClient(c.kube.CoordinationV1().RESTClient(), "leases", c.cfg.LeaseNamespace,
			func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			})),
		&coordinationv1.Lease{}, 0, cache.Indexers{})
	on := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if l, ok := obj.(*coordinationv1.Lease); ok && l.Name == name && w.store(l, c.now()) {
			c.signalLease()
		}
	}
	_, _ = w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, obj any) { on(obj) },
		DeleteFunc: func(any) {
			w.mu.Lock()
			w.latest, w.seen = nil, c.now()
			w.mu.Unlock()
			c.signalLease()
		},
	})
	c.follow = w
	go func() {
		done := make(chan struct{})
		go func() {
			select {
			case <-w.stop:
			case <-c.ctx.Done():
			}
			close(done)
		}()
		w.inf.Run(done)
	}()
}

// LeaseChanges is signalled when the followed election Lease changes.
func (c *Client) LeaseChanges() <-chan struct{} { return c.leaseChanges }

func (c *Client) signalLease() {
	select {
	case c.leaseChanges <- struct{}{}:
	default:
	}
}

// watchOf returns the watch of loc, nil when loc is not followed.
func (c *Client) watchOf(loc string) *locationWatch {
	c.elMu.Lock()
	defer c.elMu.Unlock()
	if c.follow == nil || c.follow.loc != loc {
		return nil
	}
	return c.follow
}

// LocationLease returns loc's election Lease as last seen; Known is false
// when loc is not followed or its watch has not synced yet.
func (c *Client) LocationLease(loc string) LocationLease {
	w := c.watchOf(loc)
	if w == nil || !w.inf.HasSynced() {
		return LocationLease{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return leaseState(w.latest, c.now().Sub(w.seen))
}

func leaseState(l *coordinationv1.Lease, age time.Duration) LocationLease {
	s := LocationLease{Known: true, Age: age}
	if l == nil {
		return s
	}
	s.Exists = true
	s.Holder = derefString(l.Spec.HolderIdentity)
	if l.Spec.LeaseTransitions != nil {
		s.Term = *l.Spec.LeaseTransitions
	}
	return s
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// HoldLocation makes node the holder of loc's election Lease, renewed now:
// a renewal when node holds it, a takeover otherwise (leaseTransitions + 1,
// at least minTerm), a creation when there is none (leaseTransitions
// minTerm). It writes only if the Lease is still as seen (its existence,
// holder and term, from LocationLease) when the caller decided, and the
// write is conditional on the version this process saw last
// (resourceVersion), so that two nodes never both take it and a holder
// that lost it never takes it back by renewing: when another node wrote
// first, it returns ErrLeaseTaken with the Lease as it is now.
func (c *Client) HoldLocation(ctx context.Context, loc, node string, seen LocationLease, minTerm int32) (LocationLease, error) {
	w := c.watchOf(loc)
	if w == nil {
		return LocationLease{}, fmt.Errorf("hold the election lease of location %q: not followed (FollowLocation)", loc)
	}
	api := c.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace)
	w.mu.Lock()
	cur := w.latest
	now0 := c.now().Sub(w.seen)
	w.mu.Unlock()
	if s := leaseState(cur, now0); s.Exists != seen.Exists || s.Holder != seen.Holder || s.Term != seen.Term {
		return s, fmt.Errorf("lease %s/%s changed (held by %q, term %d): %w", c.cfg.LeaseNamespace, w.name, s.Holder, s.Term, ErrLeaseTaken)
	}
	now := metav1.NewMicroTime(time.Now())
	secs := int32(math.Ceil(c.cfg.LeaseDuration.Seconds()))
	var (
		out *coordinationv1.Lease
		err error
	)
	if cur == nil {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: c.cfg.LeaseNamespace,
				Labels: map[string]string{ElectionLabel: sanitizeLocation(loc)}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: &minTerm},
		}
		out, err = api.Create(ctx, l, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsNotFound(err) {
			return LocationLease{}, fmt.Errorf("create lease %s/%s: %w (is namespace %s missing? it comes with mesh/config/rbac/agent.yaml)", c.cfg.LeaseNamespace, w.name, err, c.cfg.LeaseNamespace)
		}
	} else {
		l := cur.DeepCopy()
		if derefString(l.Spec.HolderIdentity) != node {
			t := int32(0)
			if l.Spec.LeaseTransitions != nil {
				t = *l.Spec.LeaseTransitions + 1
			}
			t = max(t, minTerm)
			l.Spec.LeaseTransitions = &t
			l.Spec.AcquireTime = &now
		}
		l.Spec.HolderIdentity = &node
		l.Spec.LeaseDurationSeconds = &secs
		l.Spec.RenewTime = &now
		out, err = api.Update(ctx, l, metav1.UpdateOptions{FieldManager: FieldManager})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
		return c.refreshLocation(ctx, w, node)
	}
	if err != nil {
		return LocationLease{}, fmt.Errorf("write lease %s/%s: %w", c.cfg.LeaseNamespace, w.name, err)
	}
	w.store(out, c.now())
	return leaseState(out, 0), nil
}

// refreshLocation reads w's Lease after a conflict and returns it, with
// ErrLeaseTaken when another node holds it.
func (c *Client) refreshLocation(ctx context.Context, w *locationWatch, node string) (LocationLease, error) {
	l, err := c.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).Get(ctx, w.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		w.store(nil, c.now())
		return LocationLease{Known: true}, fmt.Errorf("lease %s/%s: %w (deleted)", c.cfg.LeaseNamespace, w.name, ErrLeaseTaken)
	case err != nil:
		return LocationLease{}, fmt.Errorf("read lease %s/%s after a conflict: %w", c.cfg.LeaseNamespace, w.name, err)
	}
	w.store(l, c.now())
	s := leaseState(l, 0)
	if s.Holder != node {
		return s, fmt.Errorf("lease %s/%s held by %q: %w", c.cfg.LeaseNamespace, w.name, s.Holder, ErrLeaseTaken)
	}
	// This node holds it: the conflict was with an older write of its own.
	return s, fmt.Errorf("lease %s/%s: conflict with an older write of this node, retry: %w", c.cfg.LeaseNamespace, w.name, errRetry)
}

var errRetry = errors.New("retry")

// ReleaseLocation gives loc's election Lease up if node holds it (holder
// "", leaseTransitions kept), so that another node takes it at once.
func (c *Client) ReleaseLocation(ctx context.Context, loc, node string) error {
	w := c.watchOf(loc)
	if w == nil {
		return nil
	}
	w.mu.Lock()
	cur := w.latest
	w.mu.Unlock()
	if cur == nil || derefString(cur.Spec.HolderIdentity) != node {
		return nil
	}
	l := cur.DeepCopy()
	empty := ""
	l.Spec.HolderIdentity = &empty
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	out, err := c.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).Update(ctx, l, metav1.UpdateOptions{FieldManager: FieldManager})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // someone else wrote it since: it is not this node's any more
	}
	if err != nil {
		return fmt.Errorf("release lease %s/%s: %w", c.cfg.LeaseNamespace, w.name, err)
	}
	w.store(out, c.now())
	return nil
}

// PublishLeads writes node's LeadsAnnotation (v == "" removes it), only
// when it differs from what the node carries.
func (c *Client) PublishLeads(ctx context.Context, node, v string) error {
	if obj, ok, _ := c.nodes.GetStore().GetByKey(node); ok {
		if obj.(*corev1.Node).Annotations[LeadsAnnotation] == v {
			return nil
		}
	}
	val := "null"
	if v != "" {
		val = strconv.Quote(v)
	}
	patch := []byte(`{"metadata":{"annotations":{` + strconv.Quote(LeadsAnnotation) + `:` + val + `}}}`)
	_, err := c.kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("publish %s=%q on node %s: %w", LeadsAnnotation, v, node, err)
	}
	return nil
}

// LeadTerm returns the highest term the nodes' LeadsAnnotation give loc,
// -1 when none does: a Lease created again (deleted by hand) starts above
// it, so that the annotation a dead leader left behind does not win.
func (c *Client) LeadTerm(loc string) int32 {
	t := int32(-1)
	for _, v := range c.leadsAnnotations() {
		if l, err := ParseLeads(v); err == nil && l.Location == loc {
			t = max(t, l.Term)
		}
	}
	return t
}

// leadsAnnotations returns the LeadsAnnotation of every node that carries one.
func (c *Client) leadsAnnotations() map[string]string {
	out := map[string]string{}
	for _, obj := range c.nodes.GetStore().List() {
		n := obj.(*corev1.Node)
		if v := n.Annotations[LeadsAnnotation]; v != "" {
			out[n.Name] = v
		}
	}
	return out
}

// Elector is what the agent needs for ElectionLocation: Client and Fake
// implement it.
type Elector interface {
	FollowLocation(loc string)
	LeaseChanges() <-chan struct{}
	LocationLease(loc string) LocationLease
	HoldLocation(ctx context.Context, loc, node string, seen LocationLease, minTerm int32) (LocationLease, error)
	ReleaseLocation(ctx context.Context, loc, node string) error
	PublishLeads(ctx context.Context, node, v string) error
	LeadTerm(loc string) int32
}

var _ Elector = (*Client)(nil)
