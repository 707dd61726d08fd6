//go:build linux

package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kilofed/kilofed/mesh/link"

	"github.com/kilofed/kilofed/mesh/topology"
)

// NewRouter returns a Router that applies routes and rules through netlink
// in the calling process's network namespace, owning those marked with
// opts.Protocol.
func NewRouter(opts RouterOptions) (Router, error) {
	if opts.Protocol == 0 {
		opts.Protocol = DefaultProtocol
	}
	if opts.Protocol <= unix.RTPROT_STATIC || opts.Protocol > 255 {
		return nil, fmt.Errorf("route protocol %d: use a number from 5 to 255 that no other routing software uses", opts.Protocol)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &netlinkRouter{proto: opts.Protocol, log: log}, nil
}

type netlinkRouter struct {
	mu    sync.Mutex
	proto int
	log   *slog.Logger
}

func (r *netlinkRouter) Set(ctx context.Context, routes []topology.Route, rules []topology.Rule) error {
	if err := Validate(routes, rules); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	links, err := linkIndexes()
	if err != nil {
		return err
	}
	curRoutes, err := r.listRoutes(links)
	if err != nil {
		return err
	}
	curRules, err := r.listRules()
	if err != nil {
		return err
	}
	rp := DiffRoutes(routes, curRoutes)
	lp := DiffRules(rules, curRules)
	// Make before break: new routes and rules first, stale ones last. A
	// route whose link is missing is reported and the rest still applied.
	var errs []error
	for _, rt := range rp.Add {
		if err := r.install(rt, links, false); err != nil {
			errs = append(errs, err)
		}
	}
	for _, rt := range rp.Replace {
		if err := r.install(rt, links, true); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ru := range lp.Add {
		if err := netlink.RuleAdd(r.toNetlinkRule(ru)); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("add rule %q: %w", ru, err))
			continue
		}
		r.log.Info("rule added", "rule", ru.String())
	}
	for _, ru := range lp.Delete {
		if err := netlink.RuleDel(r.toNetlinkRule(ru)); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete rule %q: %w", ru, err))
			continue
		}
		r.log.Info("rule deleted", "rule", ru.String())
	}
	for _, rt := range rp.Delete {
		nr, err := r.toNetlinkRoute(rt, links)
		if err != nil {
			// The link is gone, and so is the kernel's route with it.
			continue
		}
		if err := netlink.RouteDel(nr); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %q: %w", rt, err))
			continue
		}
		r.log.Info("route deleted", "route", rt.String())
	}
	return errors.Join(errs...)
}

func (r *netlinkRouter) Close(ctx context.Context) error {
	return r.Set(ctx, nil, nil)
}

// install adds one route, or replaces the owned route of the same table
// and destination. Adding never overwrites a route that others own.
func (r *netlinkRouter) install(rt topology.Route, links map[string]int, replace bool) error {
	nr, err := r.toNetlinkRoute(rt, links)
	if err != nil {
		return err
	}
	if replace {
		err = netlink.RouteReplace(nr)
	} else {
		err = netlink.RouteAdd(nr)
	}
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add route %q: a route to %s that kilofed does not own is in the way (see ip route show table all %s): %w",
			rt, rt.Dst, rt.Dst, ErrForeignRoute)
	}
	if err != nil {
		return fmt.Errorf("install route %q: %w", rt, err)
	}
	r.log.Info("route installed", "route", rt.String(), "replace", replace)
	return nil
}

func (r *netlinkRouter) toNetlinkRoute(rt topology.Route, links map[string]int) (*netlink.Route, error) {
	rt = normRoute(rt)
	idx, ok := links[rt.Dev]
	if !ok {
		return nil, fmt.Errorf("route %q: link %q: %w", rt, rt.Dev, link.ErrLinkNotFound)
	}
	nr := &netlink.Route{
		LinkIndex: idx,
		Dst:       ipNet(rt.Dst),
		Protocol:  netlink.RouteProtocol(r.proto),
		Table:     rt.Table,
		Family:    family(rt.Dst.Addr()),
	}
	if nr.Table == 0 {
		nr.Table = topology.MainTable
	}
	switch {
	case rt.Gw.IsValid():
		nr.Gw = rt.Gw.AsSlice()
	case rt.Dst.Addr().Is4():
		nr.Scope = netlink.SCOPE_LINK
	}
	if rt.Src.IsValid() {
		nr.Src = rt.Src.AsSlice()
	}
	if rt.OnLink {
		nr.Flags |= int(netlink.FLAG_ONLINK)
	}
	return nr, nil
}

func (r *netlinkRouter) toNetlinkRule(ru topology.Rule) *netlink.Rule {
	ru = normRule(ru)
	nr := netlink.NewRule()
	nr.Protocol = uint8(r.proto)
	nr.Table = ru.Table
	if nr.Table == 0 {
		nr.Table = topology.MainTable
	}
	if ru.Priority != 0 {
		nr.Priority = ru.Priority
	}
	if ru.Src.IsValid() {
		nr.Src = ipNet(ru.Src)
		nr.Family = family(ru.Src.Addr())
	}
	if ru.Dst.IsValid() {
		nr.Dst = ipNet(ru.Dst)
		nr.Family = family(ru.Dst.Addr())
	}
	return nr
}

// listRoutes returns the owned routes of every table and both families.
func (r *netlinkRouter) listRoutes(links map[string]int) ([]topology.Route, error) {
	names := make(map[int]string, len(links))
	for n, i := range links {
		names[i] = n
	}
	filter := &netlink.Route{Protocol: netlink.RouteProtocol(r.proto), Table: unix.RT_TABLE_UNSPEC}
	var list []netlink.Route
	err := retryDump(func() (err error) {
		list, err = netlink.RouteListFiltered(netlink.FAMILY_ALL, filter, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	out := make([]topology.Route, 0, len(list))
	for _, nr := range list {
		rt := topology.Route{Dev: names[nr.LinkIndex], Table: nr.Table, OnLink: nr.Flags&int(netlink.FLAG_ONLINK) != 0}
		if nr.Dst != nil {
			rt.Dst = prefix(nr.Dst)
		} else if nr.Family == netlink.FAMILY_V6 {
			rt.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		} else {
			rt.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		rt.Gw = addr(nr.Gw)
		rt.Src = addr(nr.Src)
		out = append(out, rt)
	}
	return out, nil
}

// listRules returns the owned rules of both families.
func (r *netlinkRouter) listRules() ([]topology.Rule, error) {
	var out []topology.Rule
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		var list []netlink.Rule
		err := retryDump(func() (err error) {
			list, err = netlink.RuleList(fam)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list rules: %w", err)
		}
		for _, nr := range list {
			if int(nr.Protocol) != r.proto {
				continue
			}
			ru := topology.Rule{Table: nr.Table, Priority: nr.Priority}
			if nr.Src != nil {
				ru.Src = prefix(nr.Src)
			}
			if nr.Dst != nil {
				ru.Dst = prefix(nr.Dst)
			}
			out = append(out, ru)
		}
	}
	return out, nil
}

func linkIndexes() (map[string]int, error) {
	var list []netlink.Link
	err := retryDump(func() (err error) {
		list, err = netlink.LinkList()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	m := make(map[string]int, len(list))
	for _, l := range list {
		m[l.Attrs().Name] = l.Attrs().Index
	}
	return m, nil
}

// retryDump repeats a netlink dump that a concurrent change interrupted.
func retryDump(f func() error) error {
	var err error
	for range 5 {
		if err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return err
		}
	}
	return err
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}

func prefix(n *net.IPNet) netip.Prefix {
	a := addr(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones)
}

func addr(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}
