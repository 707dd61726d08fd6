//go:build linux

package kgctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/kilofed/kilofed/mesh/link"
	"github.com/kilofed/kilofed/mesh/route"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// Connect joins this machine (or the network namespace cfg.NetNS) to the
// mesh as the Peer cfg.Peer: it creates a WireGuard interface (kernel, or
// wireguard-go embedded in this process), configures it from
// topology.PeerConf, gives it the Peer's addresses, routes every allowed IP
// of its [Peer] sections through it, and prints progress and handshakes.
// It then follows the topology (a new leader, a rotated key, a new
// endpoint) until ctx ends, and removes the interface and its routes
// before returning. It fails at once when the Peer is unknown or its key
// is not cfg.PrivateKey's.
func Connect(ctx context.Context, cfg ConnectConfig) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	c := &connector{cfg: cfg, waiting: map[wgconf.Key]time.Time{}, handshaken: map[wgconf.Key]bool{}, warned: map[wgconf.Key]bool{}}
	plan, _, err := c.plan()
	if err != nil {
		return err
	}
	c.dev, err = wireguard.Open(ctx, wireguard.OpenOptions{
		Name: cfg.Interface, Mode: cfg.Mode, MTU: cfg.MTU, NetNS: cfg.NetNS, Logger: cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("peer %s: %w", cfg.Peer, err)
	}
	c.router, err = route.NewRouter(route.RouterOptions{Protocol: cfg.RouteProtocol, Logger: cfg.Logger})
	if err == nil {
		err = c.apply(ctx, plan)
	}
	if err != nil {
		return errors.Join(err, c.cleanUp())
	}
	kind := "WireGuard"
	if st, err := c.dev.Show(ctx); err == nil {
		kind = st.Type + " WireGuard"
	}
	c.printf("interface %s up (%s), %s, waiting for handshake ...", cfg.Interface, kind, plan.summary())
	for _, s := range plan.Skipped {
		c.printf("not routed: %s", s)
	}
	c.track(plan)

	resync := time.NewTicker(cfg.ResyncPeriod)
	defer resync.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			c.printf("disconnecting")
			return c.cleanUp()
		case <-poll.C:
			c.checkHandshakes(ctx)
			continue
		case <-cfg.Source.Changes():
		case <-resync.C:
		case <-retry:
		}
		retry = nil
		next, notes, err := c.plan()
		if err != nil {
			c.printOnce(fmt.Sprintf("%v; keeping the last configuration", err))
			continue
		}
		for _, n := range notes {
			c.printOnce(n)
		}
		changes := c.cur.changes(next)
		for _, l := range changes {
			c.printf("topology changed: %s", l)
		}
		if err := c.apply(ctx, next); err != nil {
			c.printf("%v; retrying in 2s", err)
			retry = time.After(2 * time.Second)
			continue
		}
		if len(changes) > 0 {
			c.printf("%s", next.summary())
		}
		c.track(next)
	}
}

// connector is the state of one Connect.
type connector struct {
	cfg        ConnectConfig
	dev        wireguard.Device
	router     route.Router
	cur        Plan
	waiting    map[wgconf.Key]time.Time // peers without handshake yet, since when
	handshaken map[wgconf.Key]bool      // peers whose first handshake was reported
	warned     map[wgconf.Key]bool
	last       string // the last printOnce line
}

// plan computes the plan from a fresh snapshot; notes are the warnings
// about the options.
func (c *connector) plan() (Plan, []string, error) {
	m, err := Compute(c.cfg.Source.Snapshot(), c.cfg.Flags)
	if err != nil {
		return Plan{}, nil, err
	}
	p, err := m.NewPlan(c.cfg.Peer, c.cfg.PrivateKey, c.cfg.Interface)
	if err != nil {
		return Plan{}, nil, err // names the peer
	}
	return p, warnings(m.Notes), nil
}

// apply makes the interface, its addresses and the routes match p.
func (c *connector) apply(ctx context.Context, p Plan) error {
	if err := c.dev.Set(ctx, p.Interface.Config); err != nil {
		return fmt.Errorf("peer %s: %w", c.cfg.Peer, err)
	}
	err := link.RunInNetNS(c.cfg.NetNS, func() error {
		if err := link.SetAddresses(c.cfg.Interface, p.Interface.Address); err != nil {
			return err
		}
		if err := link.SetUp(c.cfg.Interface); err != nil {
			return err
		}
		return c.router.Set(ctx, p.Routes, nil)
	})
	if err != nil {
		return fmt.Errorf("peer %s: %w", c.cfg.Peer, err)
	}
	c.cur = p
	return nil
}

// track waits for the first handshake of every peer of p not seen before,
// and nudges those without keepalive with a packet; peers gone from p are
// forgotten.
func (c *connector) track(p Plan) {
	now := time.Now()
	keep := map[wgconf.Key]bool{}
	for _, pc := range p.Interface.Peers {
		keep[pc.PublicKey] = true
		if _, ok := c.waiting[pc.PublicKey]; ok || c.handshaken[pc.PublicKey] {
			continue
		}
		c.waiting[pc.PublicKey] = now
		if a, ok := p.Kick[pc.PublicKey]; ok && pc.PersistentKeepalive == 0 {
			c.kick(a)
		}
	}
	for _, m := range []map[wgconf.Key]bool{c.handshaken, c.warned} {
		for k := range m {
			if !keep[k] {
				delete(m, k)
			}
		}
	}
	for k := range c.waiting {
		if !keep[k] {
			delete(c.waiting, k)
		}
	}
}

// checkHandshakes reports the first handshake of each awaited peer, and
// says what to check for those that take too long.
func (c *connector) checkHandshakes(ctx context.Context) {
	if len(c.waiting) == 0 {
		return
	}
	st, err := c.dev.Show(ctx)
	if err != nil {
		c.printOnce(fmt.Sprintf("read interface %s: %v", c.cfg.Interface, err))
		return
	}
	for _, pc := range c.cur.Interface.Peers {
		since, ok := c.waiting[pc.PublicKey]
		if !ok {
			continue
		}
		if ps, ok := st.Peer(pc.PublicKey); ok && !ps.LastHandshake.IsZero() {
			c.printf("handshake with %s after %.1fs", c.cur.describePeer(pc), time.Since(since).Seconds())
			delete(c.waiting, pc.PublicKey)
			c.handshaken[pc.PublicKey] = true
			continue
		}
		if !c.warned[pc.PublicKey] && time.Since(since) > c.cfg.HandshakeWarning {
			c.warned[pc.PublicKey] = true
			c.printf("no handshake with %s after %v: check that its UDP port is reachable from here and that the Peer's publicKey is this machine's key (wg pubkey < private key file); still waiting",
				c.cur.describePeer(pc), c.cfg.HandshakeWarning)
		}
	}
}

// kick sends one UDP packet to a, inside the mesh, so that WireGuard starts
// a handshake with the peer that carries it.
func (c *connector) kick(a netip.Addr) {
	_ = link.RunInNetNS(c.cfg.NetNS, func() error {
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 9))) // discard
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Write([]byte{0})
		return err
	})
}

// cleanUp removes the routes and the interface.
func (c *connector) cleanUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	n := len(c.cur.Routes)
	if c.router != nil {
		errs = append(errs, link.RunInNetNS(c.cfg.NetNS, func() error { return c.router.Close(ctx) }))
	}
	kernel := false
	if st, err := c.dev.Show(ctx); err == nil {
		kernel = st.Type != "userspace"
	}
	errs = append(errs, c.dev.Close())
	if kernel {
		err := link.RunInNetNS(c.cfg.NetNS, func() error { return link.Delete(c.cfg.Interface) })
		if !errors.Is(err, link.ErrLinkNotFound) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("peer %s: clean up interface %s: %w", c.cfg.Peer, c.cfg.Interface, err)
	}
	c.printf("interface %s and its %d routes removed", c.cfg.Interface, n)
	return nil
}

func (c *connector) printf(format string, args ...any) {
	fmt.Fprintf(c.cfg.Out, "peer %s: %s\n", c.cfg.Peer, fmt.Sprintf(format, args...))
}

// printOnce prints line unless it was the last line printed this way.
func (c *connector) printOnce(line string) {
	if line != c.last {
		c.last = line
		c.printf("%s", line)
	}
}
