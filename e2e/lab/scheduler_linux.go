//go:build linux

package lab

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// schedulerReadyTimeout bounds the wait for kube-scheduler's /healthz.
const schedulerReadyTimeout = 120 * time.Second

// defineScheduler sets the cluster's kube-scheduler component: the real
// kube-scheduler as user system:kube-scheduler (the bootstrap RBAC role of
// that name), on a free port of 127.0.0.1, no leader election, so that Pods
// without spec.nodeName (Deployments, DaemonSets, StatefulSets, Jobs) get a
// node as in any cluster.
func (l *Lab) defineScheduler(c *Cluster, dir string) error {
	kubeconfig := filepath.Join(dir, "kube-scheduler.kubeconfig")
	if err := c.writeIdentity(kubeconfig, "system:kube-scheduler"); err != nil {
		return err
	}
	port, err := l.freePort()
	if err != nil {
		return err
	}
	c.cp.scheduler = component{name: c.Name + "-kube-scheduler", tier: 1, argv: []string{
		filepath.Join(l.bins, "kube-scheduler"),
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "scheduler"),
		"--leader-elect=false",
		"--profiling=false",
	}, ready: func(ctx context.Context, p *Process) error {
		insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // local self-signed health endpoint
		health := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/healthz"
		if err := waitHTTP(ctx, p, schedulerReadyTimeout, health, insecure, "ok"); err != nil {
			return fmt.Errorf("kube-scheduler of %s: %w", c.Name, err)
		}
		return nil
	}}
	return nil
}

// startComponents starts the components at once, then waits until each
// serves.
func (l *Lab) startComponents(ctx context.Context, comps ...*component) error {
	for _, comp := range comps {
		p, err := l.startProcess(procSpec{name: comp.name, tier: comp.tier, argv: comp.argv})
		if err != nil {
			return err
		}
		comp.proc = p
	}
	errs := make([]error, len(comps))
	var wg sync.WaitGroup
	for i, comp := range comps {
		wg.Go(func() { errs[i] = comp.ready(ctx, comp.proc) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// SchedulerProcess returns the kube-scheduler's current process.
func (c *Cluster) SchedulerProcess() *Process {
	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	return c.cp.scheduler.proc
}
