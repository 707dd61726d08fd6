//go:build linux

package kubelet

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Where iproute2 keeps named network namespaces and their /etc overlays.
const (
	netnsRunDir = "/run/netns"
	netnsEtcDir = "/etc/netns"
)

// linuxNetwork is the podNetwork of Linux: netlink plus `ip netns`.
type linuxNetwork struct {
	log *slog.Logger
}

// newPodNetwork returns the platform's podNetwork.
func newPodNetwork(log *slog.Logger) podNetwork {
	return linuxNetwork{log: log}
}

// Setup implements podNetwork.
func (n linuxNetwork) Setup(s sandboxSpec) (err error) {
	if _, err := os.Stat(filepath.Join(netnsRunDir, s.Netns)); err == nil {
		return fmt.Errorf("%w: %s exists already, a leftover of a crashed run or a pod of the same namespace/name in another lab: remove it with `ip netns del %s`",
			ErrNetnsInUse, s.Netns, s.Netns)
	}
	if err := ipCommand("netns", "add", s.Netns); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if terr := n.Teardown(s); terr != nil {
				n.log.Warn("cleanup after failed pod network setup", "netns", s.Netns, "err", terr)
			}
		}
	}()
	nodeNs, err := netns.GetFromName(s.NodeNetns)
	if err != nil {
		return fmt.Errorf("open node netns %s: %w", s.NodeNetns, err)
	}
	defer nodeNs.Close()
	podNs, err := netns.GetFromName(s.Netns)
	if err != nil {
		return fmt.Errorf("open pod netns %s: %w", s.Netns, err)
	}
	defer podNs.Close()
	nh, err := netlink.NewHandleAt(nodeNs)
	if err != nil {
		return fmt.Errorf("netlink in node netns %s: %w", s.NodeNetns, err)
	}
	defer nh.Close()
	ph, err := netlink.NewHandleAt(podNs)
	if err != nil {
		return fmt.Errorf("netlink in pod netns %s: %w", s.Netns, err)
	}
	defer ph.Close()

	if old, err := nh.LinkByName(s.HostVeth); err == nil {
		_ = nh.LinkDel(old) // leftover of a crashed run
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: s.HostVeth, MTU: s.MTU},
		PeerName:      podNetworkName,
		PeerNamespace: netlink.NsFd(int(podNs)),
	}
	if err := nh.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s in %s: %w", s.HostVeth, s.NodeNetns, err)
	}
	host, err := nh.LinkByName(s.HostVeth)
	if err != nil {
		return fmt.Errorf("find veth %s: %w", s.HostVeth, err)
	}
	if err := n.setupNodeSide(nodeNs, nh, host, s); err != nil {
		return err
	}
	if err := setupPodSide(ph, host.Attrs().HardwareAddr, s); err != nil {
		return err
	}
	if s.ResolvConf != "" {
		dir := filepath.Join(netnsEtcDir, s.Netns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(s.ResolvConf), 0o644); err != nil {
			return fmt.Errorf("write resolv.conf of %s: %w", s.Netns, err)
		}
	}
	return nil
}

// setupNodeSide configures the node end: proxy ARP, forwarding, fe80::1 as
// the pods' IPv6 next hop, up, and one host route per pod IP.
func (n linuxNetwork) setupNodeSide(nodeNs netns.NsHandle, nh *netlink.Handle, host netlink.Link, s sandboxSpec) error {
	has6 := false
	for _, ip := range s.IPs {
		has6 = has6 || ip.Is6()
	}
	sysctls := map[string]string{
		"net/ipv4/ip_forward":                         "1",
		"net/ipv4/conf/" + s.HostVeth + "/proxy_arp":  "1",
		"net/ipv4/conf/" + s.HostVeth + "/forwarding": "1",
	}
	if has6 {
		sysctls["net/ipv6/conf/all/forwarding"] = "1"
		sysctls["net/ipv6/conf/"+s.HostVeth+"/forwarding"] = "1"
	}
	if err := inNetns(nodeNs, func() error { return writeSysctls(sysctls) }); err != nil {
		return fmt.Errorf("sysctls in node netns %s: %w", s.NodeNetns, err)
	}
	if has6 {
		gw := &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(podGateway6, 64)), Flags: unix.IFA_F_NODAD}
		if err := nh.AddrAdd(host, gw); err != nil {
			return fmt.Errorf("add %s to %s: %w", podGateway6, s.HostVeth, err)
		}
	}
	if err := nh.LinkSetUp(host); err != nil {
		return fmt.Errorf("set %s up: %w", s.HostVeth, err)
	}
	for _, ip := range s.IPs {
		r := &netlink.Route{LinkIndex: host.Attrs().Index, Dst: prefixNet(netip.PrefixFrom(ip, ip.BitLen())), Scope: netlink.SCOPE_LINK}
		if err := nh.RouteReplace(r); err != nil {
			return fmt.Errorf("route %s dev %s in %s: %w", ip, s.HostVeth, s.NodeNetns, err)
		}
	}
	return nil
}

// setupPodSide configures lo and eth0 in the pod netns: the pod IPs as
// host addresses, permanent neighbours for the link-local gateways (the
// node end's MAC) and default routes through them.
func setupPodSide(ph *netlink.Handle, hostMAC net.HardwareAddr, s sandboxSpec) error {
	lo, err := ph.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo in %s: %w", s.Netns, err)
	}
	if err := ph.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up in %s: %w", s.Netns, err)
	}
	eth, err := ph.LinkByName(podNetworkName)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", podNetworkName, s.Netns, err)
	}
	for _, ip := range s.IPs {
		a := &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(ip, ip.BitLen()))}
		if ip.Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := ph.AddrAdd(eth, a); err != nil {
			return fmt.Errorf("add %s to %s in %s: %w", ip, podNetworkName, s.Netns, err)
		}
	}
	if err := ph.LinkSetUp(eth); err != nil {
		return fmt.Errorf("set %s up in %s: %w", podNetworkName, s.Netns, err)
	}
	for _, ip := range s.IPs {
		gw, family := podGateway4, netlink.FAMILY_V4
		if ip.Is6() {
			gw, family = podGateway6, netlink.FAMILY_V6
		}
		neigh := &netlink.Neigh{LinkIndex: eth.Attrs().Index, Family: family, State: netlink.NUD_PERMANENT,
			IP: gw.AsSlice(), HardwareAddr: hostMAC}
		if err := ph.NeighSet(neigh); err != nil {
			return fmt.Errorf("neighbour %s in %s: %w", gw, s.Netns, err)
		}
		r := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw.AsSlice(), Flags: int(netlink.FLAG_ONLINK), Family: family}
		if err := ph.RouteReplace(r); err != nil {
			return fmt.Errorf("default route via %s in %s: %w", gw, s.Netns, err)
		}
	}
	return nil
}

// Teardown implements podNetwork.
func (n linuxNetwork) Teardown(s sandboxSpec) error {
	var errs []error
	if nodeNs, err := netns.GetFromName(s.NodeNetns); err == nil {
		if nh, err := netlink.NewHandleAt(nodeNs); err == nil {
			if l, err := nh.LinkByName(s.HostVeth); err == nil {
				if err := nh.LinkDel(l); err != nil {
					errs = append(errs, fmt.Errorf("delete veth %s: %w", s.HostVeth, err))
				}
			}
			nh.Close()
		}
		nodeNs.Close()
	}
	if _, err := os.Stat(filepath.Join(netnsRunDir, s.Netns)); err == nil {
		if err := ipCommand("netns", "del", s.Netns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(netnsEtcDir, s.Netns)); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(netnsEtcDir, s.Netns), err))
	}
	return errors.Join(errs...)
}

// ipCommand runs iproute2's ip with args.
func ipCommand(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNetns runs fn on a fresh OS thread switched into ns. If the thread
// cannot be switched back it is discarded, never reused.
func inNetns(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("read current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns: %w", err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it ends with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("leave netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// writeSysctls writes /proc/sys entries of the calling thread's netns.
func writeSysctls(kv map[string]string) error {
	for k, v := range kv {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(k, "/", "."), v, err)
		}
	}
	return nil
}

// prefixNet converts a prefix to the net.IPNet netlink wants.
func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// kernelVersion returns the running kernel's release.
func kernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
