//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
)

// Sysctls of every lab namespace: forward, no reverse-path filter (the mesh
// routes asymmetrically), no ICMP redirects (routers hairpin).
var commonSysctls = []string{
	"net.ipv4.ip_forward", "1",
	"net.ipv6.conf.all.forwarding", "1",
	"net.ipv4.conf.all.rp_filter", "0",
	"net.ipv4.conf.default.rp_filter", "0",
	"net.ipv4.conf.all.send_redirects", "0",
	"net.ipv4.conf.default.send_redirects", "0",
}

// buildNetwork creates the management bridge, the WAN, the routers and the
// nodes' namespaces with their links, registering each for Close.
func (l *Lab) buildNetwork(ctx context.Context) error {
	host, err := openNS("")
	if err != nil {
		return err
	}
	defer host.Close()
	run := l.Spec.Name

	br := mgmtBridge(run) // created by claim
	for _, c := range l.clusters {
		if err := host.addAddr(br, netip.PrefixFrom(c.APIServerIP, 16)); err != nil {
			return err
		}
	}
	if err := host.up(br); err != nil {
		return err
	}

	wan, err := l.newNetns(ctx, l.wan.Name)
	if err != nil {
		return err
	}
	defer wan.Close()
	if err := wan.sysctl("net.ipv4.conf.all.proxy_arp", "1", "net.ipv4.conf.default.proxy_arp", "1"); err != nil {
		return err
	}
	if err := wan.addAddr("lo", netip.PrefixFrom(WANHostIP, 32)); err != nil {
		return err
	}
	if l.dualStack() {
		if err := wan.addAddr("lo", netip.PrefixFrom(WANHostIP6, 128)); err != nil {
			return err
		}
	}
	for _, c := range l.clusters {
		for _, loc := range c.locations {
			if err := l.buildLocation(ctx, wan, loc); err != nil {
				return fmt.Errorf("location %s/%s: %w", c.Name, loc.Name, err)
			}
		}
	}
	return nil
}

// buildLocation creates a router namespace with its LAN bridge and WAN link,
// its NAT rules, and its nodes.
func (l *Lab) buildLocation(ctx context.Context, wan *nsConn, loc *Location) error {
	r, err := l.newNetns(ctx, loc.Router.Name)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.addBridge(RouterLANBridge); err != nil {
		return err
	}
	if err := r.addAddr(RouterLANBridge, netip.PrefixFrom(loc.RouterIP, loc.LAN.Bits())); err != nil {
		return err
	}
	if err := r.up(RouterLANBridge); err != nil {
		return err
	}
	wp := wanPortLink(loc.index)
	if err := r.addVeth(RouterWANLink, wp, wan); err != nil {
		return err
	}
	publics := []netip.Addr{loc.PublicIP}
	for _, n := range loc.nodes {
		if n.PublicIP.IsValid() {
			publics = append(publics, n.PublicIP)
		}
	}
	for _, a := range publics {
		if err := r.addAddr(RouterWANLink, netip.PrefixFrom(a, 32)); err != nil {
			return err
		}
	}
	if err := r.up(RouterWANLink); err != nil {
		return err
	}
	if err := wan.up(wp); err != nil {
		return err
	}
	if err := wan.sysctl("net.ipv4.conf."+wp+".proxy_arp", "1"); err != nil {
		return err
	}
	for _, a := range publics {
		if err := wan.replaceRoute(route{dst: netip.PrefixFrom(a, 32), dev: wp}); err != nil {
			return err
		}
	}
	if err := r.replaceRoute(route{via: WANHostIP, dev: RouterWANLink, onlink: true}); err != nil {
		return err
	}
	if err := iptablesRestore(ctx, loc.Router.Name, routerRules(loc)); err != nil {
		return err
	}
	if loc.LAN6.IsValid() {
		if err := l.buildLocation6(ctx, wan, r, loc); err != nil {
			return err
		}
	}
	for _, n := range loc.nodes {
		if err := l.buildNode(ctx, r, n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

// buildNode creates a node's namespace, its LAN link (eth0, enslaved to the
// router's LAN bridge) and its management link (mgmt0, enslaved to the
// host's management bridge).
func (l *Lab) buildNode(ctx context.Context, r *nsConn, n *Node) error {
	ns, err := l.newNetns(ctx, n.Netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	port := routerPortLink(n.global)
	if err := ns.addVeth(NodeLANLink, port, r); err != nil {
		return err
	}
	if err := r.setMaster(port, RouterLANBridge); err != nil {
		return err
	}
	if err := r.up(port); err != nil {
		return err
	}
	if err := ns.addAddr(NodeLANLink, netip.PrefixFrom(n.LANIP, n.location.LAN.Bits())); err != nil {
		return err
	}
	if err := ns.up(NodeLANLink); err != nil {
		return err
	}
	if err := ns.replaceRoute(route{via: n.location.RouterIP, dev: NodeLANLink}); err != nil {
		return err
	}
	if n.LANIP6.IsValid() {
		if err := ns.addAddr(NodeLANLink, netip.PrefixFrom(n.LANIP6, n.location.LAN6.Bits())); err != nil {
			return err
		}
		if err := ns.replaceRoute(route{via: n.location.RouterIP6, dev: NodeLANLink}); err != nil {
			return err
		}
	}
	if err := l.joinMgmt(ns, mgmtHostLink(l.Spec.Name, n.global), n.MgmtIP); err != nil {
		return err
	}
	// Pods reach the API server (the kubernetes Service's endpoint, on the
	// management network) as in any cluster: their traffic leaves the node
	// through mgmt0 with the node's management address, since the host
	// side has no route back to the pod ranges.
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.Netns, "iptables", "-w", "-t", "nat", "-A", "POSTROUTING",
		"-o", NodeMgmtLink, "!", "-s", n.MgmtIP.String(), "-j", "SNAT", "--to-source", n.MgmtIP.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("SNAT of pod traffic to the management network in %s: %w: %s", n.Netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// buildLocation6 gives a dual-stack location's router its IPv6 LAN address,
// a link-local link to the WAN both ways, the WAN a route to the LAN, and the
// router its IPv6 firewall (routerRules6).
func (l *Lab) buildLocation6(ctx context.Context, wan, r *nsConn, loc *Location) error {
	wp := wanPortLink(loc.index)
	for _, s := range []struct {
		ns   *nsConn
		link string
		p    netip.Prefix
	}{
		{r, RouterLANBridge, netip.PrefixFrom(loc.RouterIP6, loc.LAN6.Bits())},
		{r, RouterWANLink, netip.PrefixFrom(routerWANLinkLocal, 64)},
		{wan, wp, netip.PrefixFrom(wanPortLinkLocal, 64)},
	} {
		if err := s.ns.addAddr(s.link, s.p); err != nil {
			return err
		}
	}
	if err := wan.replaceRoute(route{dst: loc.LAN6, via: routerWANLinkLocal, dev: wp}); err != nil {
		return err
	}
	if err := r.replaceRoute(route{via: wanPortLinkLocal, dev: RouterWANLink}); err != nil {
		return err
	}
	return ip6tablesRestore(ctx, loc.Router.Name, routerRules6(loc))
}

// dualStack reports whether a cluster of the lab is DualStack.
func (l *Lab) dualStack() bool {
	for _, c := range l.clusters {
		if c.PodCIDR6.IsValid() {
			return true
		}
	}
	return false
}

// newNetns creates a namespace (deleted by Close), brings lo up and sets the
// common sysctls.
func (l *Lab) newNetns(ctx context.Context, name string) (*nsConn, error) {
	if err := addNetns(ctx, name); err != nil {
		return nil, err
	}
	l.addUndo("delete netns "+name, func() error { return delNetns(name) })
	l.mu.Lock()
	l.netns = append(l.netns, name)
	l.mu.Unlock()
	c, err := openNS(name)
	if err != nil {
		return nil, err
	}
	if err := c.up("lo"); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.sysctl(commonSysctls...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// iptablesRestore loads rules (iptables-restore format) in a namespace.
func iptablesRestore(ctx context.Context, netns, rules string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", netns, "iptables-restore")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore in %s: %w: %s", netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ip6tablesRestore loads rules (ip6tables-restore format) in a namespace.
func ip6tablesRestore(ctx context.Context, netns, rules string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", netns, "ip6tables-restore")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip6tables-restore in %s: %w: %s", netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// delHostLink deletes a link of the host namespace; a missing one is fine.
func delHostLink(name string) error {
	host, err := openNS("")
	if err != nil {
		return err
	}
	defer host.Close()
	link, err := host.h.LinkByName(name)
	if err != nil {
		return nil //nolint:nilerr // already gone
	}
	if err := host.h.LinkDel(link); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}

// Down cuts the node's LAN link (at the router's side, as a dead switch
// port would): nothing reaches the node over its LAN, and it reaches
// nothing, until Up. Its management link stays up.
func (n *Node) Down() error { return n.setLAN(false) }

// Up restores the node's LAN link after Down.
func (n *Node) Up() error { return n.setLAN(true) }

func (n *Node) setLAN(up bool) error {
	r, err := openNS(n.location.Router.Name)
	if err != nil {
		return err
	}
	defer r.Close()
	if up {
		return r.up(routerPortLink(n.global))
	}
	return r.down(routerPortLink(n.global))
}
