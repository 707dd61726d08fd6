package agent

import (
	"context"
	"net/netip"
	"time"

	"github.com/kilofed/kilofed/mesh/topology"
)

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	// LookupNetIP returns the addresses of host for network "ip".
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// resolveTimeout bounds one lookup, so that a dead DNS server cannot stall
// a reconciliation.
const resolveTimeout = 2 * time.Second

// resolveEndpoints fills in the address of every endpoint given as a DNS
// name (force-endpoint, a Peer's endpoint), again at each reconciliation so
// that a changed record is followed. When a lookup fails, the last address
// that worked is kept and the failure is logged once.
func (a *Agent) resolveEndpoints(ctx context.Context, nodes []topology.Node, peers []topology.Peer) {
	fill := func(e *topology.Endpoint) *topology.Endpoint {
		if e == nil || e.DNS == "" {
			return e
		}
		addr, ok := a.lookup(ctx, e.DNS)
		if !ok {
			return e
		}
		c := *e // the snapshot may share the pointer with the backend's cache
		c.Addr = netip.AddrPortFrom(addr, c.Port)
		return &c
	}
	for i := range nodes {
		nodes[i].Endpoint = fill(nodes[i].Endpoint)
	}
	for i := range peers {
		peers[i].Endpoint = fill(peers[i].Endpoint)
	}
}

// lookup returns one address of host, IPv4 first, from DNS or, when DNS
// fails, from the last answer.
func (a *Agent) lookup(ctx context.Context, host string) (netip.Addr, bool) {
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr, true
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := a.cfg.Resolver.LookupNetIP(ctx, "ip", host)
	if err == nil && len(addrs) > 0 {
		best := addrs[0].Unmap()
		for _, x := range addrs {
			if x.Unmap().Is4() {
				best = x.Unmap()
				break
			}
		}
		if old, ok := a.resolved[host]; ok && old != best {
			a.log.Info("endpoint name resolves to a new address", "host", host, "from", old, "to", best)
		}
		a.resolved[host] = best
		delete(a.lookupErr, host)
		return best, true
	}
	msg := "no address"
	if err != nil {
		msg = err.Error()
	}
	if a.lookupErr[host] != msg {
		a.lookupErr[host] = msg
		a.log.Warn("cannot resolve endpoint; keeping the last address", "host", host, "err", msg, "last", a.resolved[host])
	}
	old, ok := a.resolved[host]
	return old, ok
}
