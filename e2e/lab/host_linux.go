//go:build linux

package lab

import (
	"context"
	"fmt"
	"net/netip"
)

// AddHost adds a host to the running lab's Internet (see Host and
// HostOptions): a namespace on the WAN with its own public address, or
// behind a home router that masquerades it, optionally with a management
// link to the clusters' API servers. The lab tears it down with the rest.
// A wrong name or option returns an error wrapping ErrInvalidHost.
func (l *Lab) AddHost(ctx context.Context, name string, opts HostOptions) (*Host, error) {
	l.closeMu.Lock() // no Close meanwhile
	defer l.closeMu.Unlock()
	l.mu.Lock()
	if l.closed || l.wan == nil {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	l.hostSeq++ // a failed build keeps its number: its links may remain until Close
	h, err := l.planHost(name, opts, l.hostSeq)
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := l.buildHost(ctx, h); err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	l.mu.Lock()
	l.hosts = append(l.hosts, h)
	l.mu.Unlock()
	l.logger.Info("host added", "host", h.Name, "public", h.PublicIP, "nat", h.NAT, "mgmt", h.MgmtIP.IsValid())
	return h, nil
}

// buildHost creates a host's namespaces and links, registering each for
// Close.
func (l *Lab) buildHost(ctx context.Context, h *Host) error {
	wan, err := openNS(l.wan.Name)
	if err != nil {
		return err
	}
	defer wan.Close()
	ns, err := l.newNetns(ctx, h.Netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	outer := ns // the namespace that holds wan0
	if h.NAT {
		r, err := l.newNetns(ctx, h.Router.Name)
		if err != nil {
			return err
		}
		defer r.Close()
		if err := r.addVeth(HostRouterLANLink, HostLANLink, ns); err != nil {
			return err
		}
		lan := hostLAN(h.index)
		if err := r.addAddr(HostRouterLANLink, netip.PrefixFrom(h.routerIP, lan.Bits())); err != nil {
			return err
		}
		if err := r.up(HostRouterLANLink); err != nil {
			return err
		}
		if err := ns.addAddr(HostLANLink, netip.PrefixFrom(h.PrivateIP, lan.Bits())); err != nil {
			return err
		}
		if err := ns.up(HostLANLink); err != nil {
			return err
		}
		if err := ns.replaceRoute(route{via: h.routerIP, dev: HostLANLink}); err != nil {
			return err
		}
		if err := iptablesRestore(ctx, h.Router.Name, hostRouterRules(h)); err != nil {
			return err
		}
		outer = r
	}
	if err := l.joinWAN(wan, outer, hostWANPort(h.index), h.PublicIP); err != nil {
		return err
	}
	if h.MgmtIP.IsValid() {
		return l.joinMgmt(ns, hostMgmtLink(l.Spec.Name, h.index), h.MgmtIP)
	}
	return nil
}

// joinWAN links a namespace to the WAN (its end wan0 holding public/32,
// default route via WANHostIP; the WAN's end port, with proxy ARP and a
// route to public).
func (l *Lab) joinWAN(wan, outer *nsConn, port string, public netip.Addr) error {
	if err := outer.addVeth(HostWANLink, port, wan); err != nil {
		return err
	}
	if err := outer.addAddr(HostWANLink, netip.PrefixFrom(public, 32)); err != nil {
		return err
	}
	if err := outer.up(HostWANLink); err != nil {
		return err
	}
	if err := wan.up(port); err != nil {
		return err
	}
	if err := wan.sysctl("net.ipv4.conf."+port+".proxy_arp", "1"); err != nil {
		return err
	}
	if err := wan.replaceRoute(route{dst: netip.PrefixFrom(public, 32), dev: port}); err != nil {
		return err
	}
	return outer.replaceRoute(route{via: WANHostIP, dev: HostWANLink, onlink: true})
}

// joinMgmt gives a namespace a link mgmt0 (holding ip/16) whose other end,
// hostEnd in the host namespace, is enslaved to the management bridge.
func (l *Lab) joinMgmt(ns *nsConn, hostEnd string, ip netip.Addr) error {
	host, err := openNS("")
	if err != nil {
		return err
	}
	defer host.Close()
	if err := ns.addVeth(NodeMgmtLink, hostEnd, host); err != nil {
		return err
	}
	// Deleting the namespace would destroy the veth too, but
	// asynchronously: delete it at once so that nothing is left behind.
	l.addUndo("delete link "+hostEnd, func() error { return delHostLink(hostEnd) })
	if err := host.setMaster(hostEnd, mgmtBridge(l.Spec.Name)); err != nil {
		return err
	}
	if err := host.up(hostEnd); err != nil {
		return err
	}
	if err := ns.addAddr(NodeMgmtLink, netip.PrefixFrom(ip, 16)); err != nil {
		return err
	}
	return ns.up(NodeMgmtLink)
}
