package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// ErrInvalidHost is returned by AddHost when its name or options are
// wrong.
var ErrInvalidHost = errors.New("invalid lab host")

// HostOptions says how AddHost connects a host to the lab's Internet.
type HostOptions struct {
	// PublicIP is the host's address on the WAN, or with NAT its home
	// router's. Default: the next address of 198.51.100.0/24 (from .100),
	// then of 203.0.113.0/24 (from .100), that the lab does not use.
	PublicIP netip.Addr
	// NAT puts the host behind its own home router, which masquerades
	// its private network 172.16.<n>.0/24 behind PublicIP and lets
	// nothing in: a laptop at home.
	NAT bool
	// Mgmt gives the host a link (mgmt0) to the lab's management bridge,
	// so that it reaches the clusters' API servers: a developer with
	// kubectl access. Without it, the host reaches no API server.
	Mgmt bool
}

// Host is a machine on the lab's Internet: a developer laptop, an
// external WireGuard peer, another datacenter's gateway. It is a network
// namespace whose link wan0 joins the WAN namespace (or, with NAT, whose
// link eth0 joins its home router, which joins the WAN). Lab.Close and
// Sweep remove it with the rest of the lab.
type Host struct {
	// Name is the host's name (a DNS label).
	Name string
	// Netns is the name of the host's network namespace.
	Netns string
	// PublicIP is the address the WAN sees: the host's own, or with NAT
	// its home router's.
	PublicIP netip.Addr
	// NAT reports whether the host sits behind a home router.
	NAT bool
	// PrivateIP is the host's address behind its home router (in
	// 172.16.<n>.0/24); invalid without NAT.
	PrivateIP netip.Addr
	// Router is the home router's namespace; nil without NAT.
	Router *Namespace
	// MgmtIP is the host's address on the management network; invalid
	// without HostOptions.Mgmt.
	MgmtIP netip.Addr

	routerIP netip.Addr // the home router's LAN address (NAT only)
	index    int        // 1-based, in AddHost order
	ns       *Namespace
}

// Names of links inside a host's namespaces.
const (
	// HostWANLink is the link to the WAN namespace: in the host's own
	// namespace, or with NAT in its home router's.
	HostWANLink = "wan0"
	// HostLANLink is a NAT host's link to its home router.
	HostLANLink = "eth0"
	// HostRouterLANLink is the home router's link to its host.
	HostRouterLANLink = "lan0"
)

// maxHosts bounds the hosts of a lab (their management addresses
// 100.(64+s).255.(9+n) and private networks 172.16.<n>.0/24).
const maxHosts = 200

// Hosts returns the lab's hosts in AddHost order.
func (l *Lab) Hosts() []*Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hosts)
}

// Host returns the host with the given name, or nil.
func (l *Lab) Host(name string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Namespace returns the host's network namespace.
func (h *Host) Namespace() *Namespace { return h.ns }

// Exec runs argv in the host's namespace and returns its standard output.
func (h *Host) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	return h.ns.Exec(ctx, argv...)
}

// Start launches a long-running process in the host's namespace (its own
// process group, output in Dir/logs/host-<host>-<name>.log). Close stops
// it if it still runs.
func (h *Host) Start(name string, argv ...string) (*Process, error) {
	return h.ns.start("host-"+h.Name+"-"+name, argv)
}

// hostNetns is the namespace of a host.
func hostNetns(run, name string) string { return Prefix + run + "-h-" + name }

// hostRouterNetns is the namespace of a NAT host's home router.
func hostRouterNetns(run, name string) string { return hostNetns(run, name) + "-r" }

// hostWANPort is the WAN end of host n's link (n 1-based).
func hostWANPort(n int) string { return fmt.Sprintf("kfl-h%d", n) }

// hostMgmtLink is the host-namespace end of host n's management veth; at
// most 15 characters for run ids of 6.
func hostMgmtLink(run string, n int) string { return fmt.Sprintf("%s%s-h%d", Prefix, run, n) }

// hostMgmtIP is host n's management address: 100.(64+slot).255.(9+n).
// Cluster indexes stop at 200, so the third octet 255 is the hosts' own.
func hostMgmtIP(slot, n int) netip.Addr {
	return netip.AddrFrom4([4]byte{100, byte(64 + slot), 255, byte(9 + n)})
}

// hostLAN is the private network of NAT host n: 172.16.<n>.0/24.
func hostLAN(n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, byte(n), 0}), 24)
}

// planHost validates a new host's name and options and fills in its
// addresses and names, as host number n of the lab. It does no I/O; the
// caller holds the lab's locks.
func (l *Lab) planHost(name string, opts HostOptions, n int) (*Host, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: "+format, append([]any{ErrInvalidHost, name}, a...)...)
	}
	if !dnsLabelRe.MatchString(name) {
		return nil, bad("the name must be a DNS label ([a-z0-9-], at most 63 characters)")
	}
	if n > maxHosts {
		return nil, bad("a lab holds at most %d hosts", maxHosts)
	}
	netnsName := hostNetns(l.Spec.Name, name)
	for _, h := range l.hosts {
		if h.Name == name {
			return nil, bad("a host of that name exists: pick another name")
		}
	}
	for _, taken := range l.netns {
		if taken == netnsName || taken == hostRouterNetns(l.Spec.Name, name) {
			return nil, bad("its namespace %s clashes with a namespace of the lab: pick another name", taken)
		}
	}
	used := l.publicAddrs()
	h := &Host{Name: name, Netns: netnsName, NAT: opts.NAT, index: n}
	if opts.PublicIP.IsValid() {
		a := opts.PublicIP
		switch {
		case !PublicRangeA.Contains(a) && !PublicRangeB.Contains(a):
			return nil, bad("PublicIP %s is outside %s and %s", a, PublicRangeA, PublicRangeB)
		case a == PublicRangeA.Addr() || a == PublicRangeB.Addr() || a == lastAddr(PublicRangeA) || a == lastAddr(PublicRangeB):
			return nil, bad("PublicIP %s is a network or broadcast address", a)
		case used[a] != "":
			return nil, bad("PublicIP %s is already used by %s: leave it empty for a free one", a, used[a])
		}
		h.PublicIP = a
	} else {
		taken := map[netip.Addr]bool{}
		for a := range used {
			taken[a] = true
		}
		for _, p := range []*addrPool{newAddrPool(taken, PublicRangeB, 100), newAddrPool(taken, PublicRangeA, 100),
			newAddrPool(taken, PublicRangeB, 1), newAddrPool(taken, PublicRangeA, 1)} {
			if a, ok := p.next(); ok {
				h.PublicIP = a
				break
			}
		}
		if !h.PublicIP.IsValid() {
			return nil, bad("no free public address is left in %s and %s", PublicRangeA, PublicRangeB)
		}
	}
	if opts.NAT {
		lan := hostLAN(n)
		h.routerIP, h.PrivateIP = nthAddr(lan, 1), nthAddr(lan, 10)
		h.Router = &Namespace{Name: hostRouterNetns(l.Spec.Name, name), lab: l}
	}
	if opts.Mgmt {
		h.MgmtIP = hostMgmtIP(l.slot, n)
	}
	h.ns = &Namespace{Name: netnsName, lab: l}
	return h, nil
}

// publicAddrs returns the public addresses the lab uses, with their owner.
func (l *Lab) publicAddrs() map[netip.Addr]string {
	used := map[netip.Addr]string{WANHostIP: "the WAN host"}
	for _, c := range l.clusters {
		for _, loc := range c.locations {
			used[loc.PublicIP] = "the router of location " + c.Name + "/" + loc.Name
			for _, n := range loc.nodes {
				if n.PublicIP.IsValid() {
					used[n.PublicIP] = "node " + c.Name + "/" + n.Name
				}
			}
		}
	}
	for _, h := range l.hosts {
		used[h.PublicIP] = "host " + h.Name
	}
	return used
}

// hostRouterRules returns the iptables-restore input of a NAT host's home
// router: masquerade of the host's private network, nothing inbound.
func hostRouterRules(h *Host) string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	fmt.Fprintf(&b, "-A POSTROUTING -s %s -o %s -j MASQUERADE\n", hostLAN(h.index), HostWANLink)
	b.WriteString("COMMIT\n")
	return b.String()
}
