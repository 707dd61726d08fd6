//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nsConn is an open network namespace with a netlink handle inside it.
type nsConn struct {
	name string // "" for the host namespace
	fd   netns.NsHandle
	h    *netlink.Handle
}

// openNS opens a named namespace ("" = the lab process's own namespace).
func openNS(name string) (*nsConn, error) {
	var fd netns.NsHandle
	var err error
	if name == "" {
		// The calling thread's namespace, not /proc/self/ns/net: that is
		// the main thread's, and a goroutine locked to a thread that it
		// switched into a lab namespace, ending on the main thread, leaves
		// the main thread wedged there for good (the runtime cannot end
		// it). A lab opened from it then had its management bridge in a
		// former node's namespace, out of its API servers' reach. Unlocked
		// goroutines only run on threads in the process's own namespace.
		fd, err = netns.Get()
	} else {
		fd, err = netns.GetFromName(name)
	}
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", name, err)
	}
	h, err := netlink.NewHandleAt(fd)
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("netlink in netns %q: %w", name, err)
	}
	return &nsConn{name: name, fd: fd, h: h}, nil
}

func (n *nsConn) Close() {
	n.h.Close()
	n.fd.Close()
}

// addNetns creates a named namespace with `ip netns add` (which also sets
// up /run/netns as the mount point ip expects).
func addNetns(ctx context.Context, name string) error {
	_, err := execIn(ctx, "", "ip", "netns", "add", name)
	return err
}

// delNetns deletes a named namespace; a missing one is not an error.
func delNetns(name string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_, err := execIn(context.Background(), "", "ip", "netns", "del", name)
	return err
}

// do runs fn with the calling goroutine's thread inside the namespace.
func (n *nsConn) do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current netns: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(n.fd); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns %s: %w", n.name, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread stays locked and dies with the goroutine.
		return errors.Join(ferr, fmt.Errorf("leave netns %s: %w", n.name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// sysctl writes key=value pairs (keys like "net.ipv4.ip_forward") in the
// namespace.
func (n *nsConn) sysctl(kv ...string) error {
	return n.do(func() error {
		for i := 0; i+1 < len(kv); i += 2 {
			path := "/proc/sys/" + strings.ReplaceAll(kv[i], ".", "/")
			if err := os.WriteFile(path, []byte(kv[i+1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s in %s: %w", kv[i], kv[i+1], n.name, err)
			}
		}
		return nil
	})
}

func (n *nsConn) link(name string) (netlink.Link, error) {
	l, err := n.h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("link %s in netns %q: %w", name, n.name, err)
	}
	return l, nil
}

func (n *nsConn) up(name string) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	if err := n.h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in netns %q: %w", name, n.name, err)
	}
	return nil
}

func (n *nsConn) down(name string) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	if err := n.h.LinkSetDown(l); err != nil {
		return fmt.Errorf("set %s down in netns %q: %w", name, n.name, err)
	}
	return nil
}

func (n *nsConn) addBridge(name string) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := n.h.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge %s in netns %q: %w", name, n.name, err)
	}
	return nil
}

// addVeth creates a veth pair: name here, peer in the other namespace.
func (n *nsConn) addVeth(name, peer string, other *nsConn) error {
	v := netlink.NewVeth(netlink.LinkAttrs{Name: name})
	v.PeerName = peer
	v.PeerNamespace = netlink.NsFd(int(other.fd))
	if err := n.h.LinkAdd(v); err != nil {
		return fmt.Errorf("add veth %s (netns %q) <-> %s (netns %q): %w", name, n.name, peer, other.name, err)
	}
	return nil
}

func (n *nsConn) setMaster(name, master string) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	m, err := n.link(master)
	if err != nil {
		return err
	}
	if err := n.h.LinkSetMaster(l, m); err != nil {
		return fmt.Errorf("enslave %s to %s in netns %q: %w", name, master, n.name, err)
	}
	return nil
}

func (n *nsConn) addAddr(name string, p netip.Prefix) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD // usable at once: the lab has no duplicates
	}
	if err := n.h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("add %s to %s in netns %q: %w", p, name, n.name, err)
	}
	return nil
}

// route describes a route for replaceRoute.
type route struct {
	dst    netip.Prefix // invalid = default route
	via    netip.Addr   // invalid = directly connected
	dev    string
	onlink bool
}

func (n *nsConn) replaceRoute(r route) error {
	l, err := n.link(r.dev)
	if err != nil {
		return err
	}
	nr := &netlink.Route{LinkIndex: l.Attrs().Index}
	switch {
	case r.dst.IsValid():
		nr.Dst = ipNet(r.dst)
	case r.via.Is6():
		nr.Dst = ipNet(netip.PrefixFrom(netip.IPv6Unspecified(), 0))
	default:
		nr.Dst = ipNet(netip.PrefixFrom(netip.IPv4Unspecified(), 0))
	}
	if r.via.IsValid() {
		nr.Gw = net.IP(r.via.AsSlice())
	} else {
		nr.Scope = netlink.SCOPE_LINK
	}
	if r.onlink {
		nr.Flags |= int(netlink.FLAG_ONLINK)
	}
	if err := n.h.RouteReplace(nr); err != nil {
		return fmt.Errorf("route %v via %v dev %s in netns %q: %w", r.dst, r.via, r.dev, n.name, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
