//go:build linux

package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// SetAddresses makes the addresses of the named link exactly addrs: it adds
// the missing ones and deletes the others, except IPv6 link-local addresses.
// IPv6 addresses are added without duplicate address detection. It is safe to
// call again with the same input.
func SetAddresses(name string, addrs []netip.Prefix) error {
	for _, p := range addrs {
		if !p.IsValid() {
			return fmt.Errorf("set addresses of %s: invalid address %v", name, p)
		}
	}
	l, err := byName(name)
	if err != nil {
		return err
	}
	// Deleting a primary IPv4 address also deletes the secondaries of its
	// subnet, so check again after the first pass and repair.
	for range 2 {
		current, err := addresses(l)
		if err != nil {
			return err
		}
		add, del := DiffAddresses(addrs, current)
		if len(add) == 0 && len(del) == 0 {
			return nil
		}
		for _, p := range del {
			if err := netlink.AddrDel(l, toAddr(p)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
				return fmt.Errorf("delete address %s from %s: %w", p, name, err)
			}
		}
		for _, p := range add {
			if err := netlink.AddrAdd(l, toAddr(p)); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("add address %s to %s: %w", p, name, err)
			}
		}
	}
	return nil
}

// Addresses returns the current addresses of the named link.
func Addresses(name string) ([]netip.Prefix, error) {
	l, err := byName(name)
	if err != nil {
		return nil, err
	}
	return addresses(l)
}

// SetUp brings the named link up.
func SetUp(name string) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("set link %s up: %w", name, err)
	}
	return nil
}

// SetMTU sets the MTU of the named link when it differs.
func SetMTU(name string, mtu int) error {
	l, err := byName(name)
	if err != nil {
		return err
	}
	if l.Attrs().MTU == mtu {
		return nil
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("set MTU of %s to %d: %w", name, mtu, err)
	}
	return nil
}

// Delete deletes the named link; a link that does not exist is not an error.
func Delete(name string) error {
	l, err := byName(name)
	if errors.Is(err, ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}

// RunInNetNS runs f on an OS thread that has entered the network namespace
// at path (such as /run/netns/NAME), and returns f's error; with an empty
// path f runs directly in the caller's namespace. Sockets, links and
// processes that f creates belong to that namespace, whichever thread uses
// them later. The thread is discarded after f returns.
func RunInNetNS(path string, f func() error) error {
	if path == "" {
		return f()
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer ns.Close()
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime then ends the thread with the
		// goroutine, so no other goroutine runs in the namespace.
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

func byName(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("link %q: %w", name, ErrLinkNotFound)
		}
		return nil, fmt.Errorf("find link %q: %w", name, err)
	}
	return l, nil
}

func addresses(l netlink.Link) ([]netip.Prefix, error) {
	list, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", l.Attrs().Name, err)
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, a := range list {
		if a.IPNet == nil {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out, nil
}

func toAddr(p netip.Prefix) *netlink.Addr {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	a := &netlink.Addr{IPNet: &net.IPNet{
		IP:   p.Addr().AsSlice(),
		Mask: net.CIDRMask(p.Bits(), bits),
	}}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}
