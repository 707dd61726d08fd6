//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// goneTimeout bounds how long a stopped component may take to release its
// process group and its port.
const goneTimeout = 10 * time.Second

// StopAPIServer stops the cluster's kube-apiserver as a crash or an upgrade
// would: SIGTERM to its process group, 5 s of grace, SIGKILL, then it checks
// that no process of the group is left and that nothing listens on the
// API server's address any more. etcd and kube-controller-manager keep
// running; every client gets "connection refused" until StartAPIServer.
func (c *Cluster) StopAPIServer() error {
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	return c.stopComponent(&c.cp.apiserver, netip.AddrPortFrom(c.APIServerIP, APIServerPort))
}

// StartAPIServer starts the kube-apiserver stopped by StopAPIServer (or
// StopControlPlane) again with the same flags, certificates, etcd and
// address, and returns once /readyz answers ok.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	return c.startStopped(ctx, &c.cp.apiserver)
}

// StopControlPlane stops kube-scheduler, kube-controller-manager,
// kube-apiserver and etcd, in that order (see StopAPIServer); the etcd data dir, the certificates
// and the ports are kept for StartControlPlane.
func (c *Cluster) StopControlPlane() error {
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	etcd, err := hostPort(c.etcdURL)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		comp *component
		addr netip.AddrPort
	}{
		{&c.cp.scheduler, netip.AddrPort{}},
		{&c.cp.kcm, netip.AddrPort{}},
		{&c.cp.apiserver, netip.AddrPortFrom(c.APIServerIP, APIServerPort)},
		{&c.cp.etcd, etcd},
	} {
		if err := c.stopComponent(s.comp, s.addr); err != nil {
			return err
		}
	}
	return nil
}

// StartControlPlane starts what StopControlPlane stopped: etcd on its data
// dir and ports, kube-apiserver on its address, kube-controller-manager,
// kube-scheduler, each waited for. Components that still run are left alone.
func (c *Cluster) StartControlPlane(ctx context.Context) error {
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	for _, comp := range []*component{&c.cp.etcd, &c.cp.apiserver, &c.cp.kcm, &c.cp.scheduler} {
		if comp.proc != nil && !comp.proc.Exited() {
			continue
		}
		if err := c.startStopped(ctx, comp); err != nil {
			return err
		}
	}
	return nil
}

// FreezeAPIServer stops the kube-apiserver's processes with SIGSTOP: unlike
// StopAPIServer, connections stay open and requests hang (a hung server, a
// black-holed network) until ThawAPIServer.
func (c *Cluster) FreezeAPIServer() error {
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	p := c.cp.apiserver.proc
	if p == nil || p.Exited() {
		return fmt.Errorf("freeze kube-apiserver of %s: %w: it does not run", c.Name, ErrControlPlaneState)
	}
	return p.Signal(syscall.SIGSTOP)
}

// ThawAPIServer resumes a frozen kube-apiserver (SIGCONT) and returns once
// /readyz answers ok.
func (c *Cluster) ThawAPIServer(ctx context.Context) error {
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	p := c.cp.apiserver.proc
	if p == nil || p.Exited() {
		return fmt.Errorf("thaw kube-apiserver of %s: %w: it does not run", c.Name, ErrControlPlaneState)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	return c.waitAPIServer(ctx, p)
}

// APIServerProcess returns the kube-apiserver's current process (a new one
// after each StartAPIServer).
func (c *Cluster) APIServerProcess() *Process {
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	return c.cp.apiserver.proc
}

// stopComponent stops comp's process and checks that its group is gone and,
// when addr is valid, that nothing accepts connections there any more.
func (c *Cluster) stopComponent(comp *component, addr netip.AddrPort) error {
	p := comp.proc
	if p == nil || p.Exited() {
		return fmt.Errorf("stop %s: %w: it does not run", comp.name, ErrControlPlaneState)
	}
	_ = p.Signal(syscall.SIGCONT) // a frozen process cannot handle SIGTERM
	if err := p.Stop(); err != nil {
		return fmt.Errorf("stop %s: %w", comp.name, err)
	}
	deadline := time.Now().Add(goneTimeout)
	for groupAlive(p.pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("stop %s: process group %d still has members %s after SIGKILL", comp.name, p.pid, goneTimeout)
		}
		_ = p.Signal(syscall.SIGKILL)
		time.Sleep(50 * time.Millisecond)
	}
	for addr.IsValid() && listening(addr) {
		if time.Now().After(deadline) {
			return fmt.Errorf("stop %s: %s still accepts connections %s after its process group is gone", comp.name, addr, goneTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.lab.logger.Info("control-plane component stopped", "cluster", c.Name, "name", comp.name, "pid", p.pid)
	return nil
}

// startStopped starts a stopped component again with its own command line.
func (c *Cluster) startStopped(ctx context.Context, comp *component) error {
	if comp.proc == nil {
		return fmt.Errorf("start %s: %w: it never ran", comp.name, ErrControlPlaneState)
	}
	if !comp.proc.Exited() {
		return fmt.Errorf("start %s: %w: it still runs", comp.name, ErrControlPlaneState)
	}
	began := time.Now()
	if err := c.lab.startComponent(ctx, comp); err != nil {
		return err
	}
	c.lab.logger.Info("control-plane component started again", "cluster", c.Name, "name", comp.name,
		"pid", comp.proc.pid, "ready_after", time.Since(began).Round(time.Millisecond))
	return nil
}

// groupAlive reports whether process group pgid still has a member.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// listening reports whether a TCP connection to addr is accepted.
func listening(addr netip.AddrPort) bool {
	conn, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// hostPort parses the host:port of a URL such as http://127.0.0.1:2379.
func hostPort(rawURL string) (netip.AddrPort, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("parse %q: %w", rawURL, err)
	}
	return ap, nil
}
