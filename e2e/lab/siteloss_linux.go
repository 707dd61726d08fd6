//go:build linux

package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// LoseSite makes the cluster's site go dark at once, as a datacenter lost
// to a power cut looks from outside: every node is cut off its LAN
// (Node.Down), so that nothing reaches its nodes' addresses, public or
// private, and they reach nothing; then kube-apiserver, etcd,
// kube-controller-manager and kube-scheduler are killed (SIGKILL, no
// grace) and LoseSite returns once nothing accepts connections at the API
// server's address. Processes started on the nodes (kg, pods, kube-proxy)
// keep running, unreachable; stop those the caller started itself.
// StartControlPlane starts the control plane again on its data; Node.Up
// reconnects the nodes.
func (c *Cluster) LoseSite() error {
	var errs []error
	for _, n := range c.Nodes() {
		if err := n.Down(); err != nil {
			errs = append(errs, fmt.Errorf("lose site %s: node %s: %w", c.Name, n.Name, err))
		}
	}
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	for _, comp := range []*component{&c.cp.apiserver, &c.cp.etcd, &c.cp.kcm, &c.cp.scheduler} {
		if comp.proc == nil || comp.proc.Exited() {
			continue
		}
		if err := comp.proc.Kill(); err != nil {
			errs = append(errs, fmt.Errorf("lose site %s: %s: %w", c.Name, comp.name, err))
		}
	}
	addr := netip.AddrPortFrom(c.APIServerIP, APIServerPort)
	for deadline := time.Now().Add(goneTimeout); listening(addr); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("lose site %s: %s still accepts connections %s after kube-apiserver was killed", c.Name, addr, goneTimeout))
			break
		}
	}
	c.lab.logger.Info("site lost", "cluster", c.Name, "nodes", len(c.Nodes()))
	return errors.Join(errs...)
}
