package k8s

import (
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

// NodeReady reports whether a node may carry traffic: its Node's Ready
// condition is not False, its Lease is fresh, and no data-plane probe said
// it does not forward.
func NodeReady(conditionReady, leaseFresh, forwarding bool) bool {
	return conditionReady && leaseFresh && forwarding
}

// leases tracks when this process last saw each node's heartbeat Lease
// change, and which nodes a probe marked as not forwarding.
type leases struct {
	mu sync.Mutex
	// seen is the renewal last observed per node: the Lease's version and
	// the local time it was first seen.
	seen map[string]renewal
	// notForwarding holds nodes marked by SetForwarding(node, false).
	notForwarding map[string]bool
}

// renewal is one observed version of a Lease.
type renewal struct {
	// version identifies the renewal: renewTime, else resourceVersion.
	version string
	// at is when this process saw the version; zero when it was only read
	// in the initial list (a renewal not observed live).
	at time.Time
	// acquired is the Lease's acquire time: when the agent's run began.
	acquired time.Time
}

func newLeases() *leases {
	return &leases{seen: make(map[string]renewal), notForwarding: make(map[string]bool)}
}

// leaseNode returns the node a heartbeat Lease belongs to: its holder,
// else its name without LeasePrefix.
func leaseNode(l *coordinationv1.Lease) string {
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		return *h
	}
	if len(l.Name) > len(LeasePrefix) && l.Name[:len(LeasePrefix)] == LeasePrefix {
		return l.Name[len(LeasePrefix):]
	}
	return ""
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
	var acquired time.Time
	if l.Spec.AcquireTime != nil {
		acquired = l.Spec.AcquireTime.Time
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	old, ok := ls.seen[node]
	switch {
	case initial && !ok:
		ls.seen[node] = renewal{version: v, acquired: acquired}
		return false
	case !ok || old.version != v:
		ls.seen[node] = renewal{version: v, at: now, acquired: acquired}
		return !LeaseFresh(old.at, now, d)
	}
	return false
}

// acquired returns the acquire time of every node's Lease.
func (ls *leases) acquired() map[string]time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make(map[string]time.Time, len(ls.seen))
	for node, r := range ls.seen {
		out[node] = r.acquired
	}
	return out
}

// forget drops a deleted Lease: its node is no longer ready.
func (ls *leases) forget(l *coordinationv1.Lease) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.seen, leaseNode(l))
}

// setForwarding records a probe's verdict; it reports whether it changed.
func (ls *leases) setForwarding(node string, forwarding bool) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	changed := ls.notForwarding[node] == forwarding
	if forwarding {
		delete(ls.notForwarding, node)
	} else {
		ls.notForwarding[node] = true
	}
	return changed
}

// ready returns, for every node with a Lease or a probe verdict, whether its
// Lease is fresh at now and it forwards.
func (ls *leases) ready(now time.Time, d time.Duration) map[string]bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make(map[string]bool, len(ls.seen))
	for node, r := range ls.seen {
		out[node] = NodeReady(true, LeaseFresh(r.at, now, d), !ls.notForwarding[node])
	}
	for node := range ls.notForwarding {
		out[node] = false
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
