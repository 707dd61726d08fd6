package k8s

import (
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// LeaseFresh reports whether a heartbeat Lease whose last renewal this
// process observed at observed is still fresh at now: observed is not zero
// and less than d ago. Both times come from this process's clock (time.Now
// keeps a monotonic reading), never from the Lease's renewTime, so the
// clocks of different nodes are never compared.
func LeaseFresh(observed, now time.Time, d time.Duration) bool {
	return !observed.IsZero() && now.Sub(observed) < d
}

// leases tracks when this process last saw each node's heartbeat Lease
// change.
type leases struct {
	mu sync.Mutex
	// seen is the renewal last observed per node: the Lease's version and
	// the watch time (see watchClock) it was first seen.
	seen map[string]renewal
	// clock is what Leases age by: it stands still while the watch is
	// silent (an API server outage), so that no Lease expires for it.
	clock watchClock
}

// renewal is one observed version of a Lease.
type renewal struct {
	// version identifies the renewal: renewTime, else resourceVersion.
	version string
	// at is when this process saw the version, in watch time; zero when
	// it was only read in the initial list (a renewal not observed live).
	at time.Time
	// created is the Lease's creationTimestamp, set by the API server when
	// the node's agent began its run (or began again as new): one clock for
	// every node, so the ordering is the same for every agent.
	created time.Time
}

func newLeases() *leases {
	return &leases{seen: make(map[string]renewal)}
}

// leaseNode returns the node a heartbeat Lease belongs to: its name without
// LeasePrefix, or "" when the name has no such prefix or the Lease is held
// by another node (a Lease is trusted only for the node it is named after,
// which is what the admission policy lets that node's agent write).
func leaseNode(l *coordinationv1.Lease) string {
	node, ok := strings.CutPrefix(l.Name, LeasePrefix)
	if !ok || node == "" {
		return ""
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" && *h != node {
		return ""
	}
	return node
}

func leaseVersion(l *coordinationv1.Lease) string {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	return l.ResourceVersion
}

// observe records l as seen at now; a Lease from the informer's initial
// list does not count as an observed renewal. It reports whether the node's
// lease turned fresh, judged with lease duration d.
func (ls *leases) observe(l *coordinationv1.Lease, now time.Time, initial bool, d time.Duration) bool {
	node := leaseNode(l)
	if node == "" {
		return false
	}
	v := leaseVersion(l)
	created := l.CreationTimestamp.Time
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now = ls.clock.event(now, d)
	old, ok := ls.seen[node]
	switch {
	case initial && !ok:
		ls.seen[node] = renewal{version: v, created: created}
		return false
	case !ok || old.version != v || !old.created.Equal(created):
		ls.seen[node] = renewal{version: v, at: now, created: created}
		return !LeaseFresh(old.at, now, d)
	}
	return false
}

// since returns the creation time of every node's Lease.
func (ls *leases) since() map[string]time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make(map[string]time.Time, len(ls.seen))
	for node, r := range ls.seen {
		out[node] = r.created
	}
	return out
}

// forget drops a deleted Lease: its node is no longer ready.
func (ls *leases) forget(l *coordinationv1.Lease) {
	node := leaseNode(l)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.seen, node)
}

// ready returns, for every node with a Lease, whether its Lease is fresh at
// now (judged in watch time: see watchClock).
func (ls *leases) ready(now time.Time, d time.Duration) map[string]bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now = ls.clock.at(now, d)
	out := make(map[string]bool, len(ls.seen))
	for node, r := range ls.seen {
		out[node] = LeaseFresh(r.at, now, d)
	}
	return out
}

// unobserved reports whether some Lease was only read in the initial list
// and has not been seen renewed since.
func (ls *leases) unobserved() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, r := range ls.seen {
		if r.at.IsZero() {
			return true
		}
	}
	return false
}
