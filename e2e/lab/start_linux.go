//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Start builds and starts a lab: it sweeps the leftovers of crashed runs
// when no other lab is alive (see LiveLockPath), creates the network (WAN,
// routers, nodes, management bridge), starts every cluster's control plane
// in parallel, then on each node the kubelet stand-in and, if
// spec.KubeProxy, kube-proxy. It returns once every Node is Ready with its
// podCIDR, the pod routes are in place (spec.PodRoutes) and the default
// ServiceAccount exists, so that Pods can be created at once. ctx bounds the
// start-up only; the lab lives until Close. On error, everything created so
// far is torn down.
func Start(ctx context.Context, spec Spec, opts ...Option) (_ *Lab, err error) {
	o := options{logger: slog.New(slog.DiscardHandler), tempBase: os.TempDir()}
	for _, opt := range opts {
		opt(&o)
	}
	began := time.Now()
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	full, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := full.validate(); err != nil {
		return nil, err
	}
	if o.bins == "" {
		if o.bins, err = BinsDir(); err != nil {
			return nil, err
		}
	}
	if err := checkBins(o.bins); err != nil {
		return nil, err
	}
	l := &Lab{Spec: full, bins: o.bins, logger: o.logger.With("lab", full.Name)}
	defer func() {
		if err != nil {
			if cerr := l.Close(); cerr != nil {
				l.logger.Error("teardown after failed start", "err", cerr)
			}
		}
	}()

	// Build (or find) the kilofed-lab binary while the lab comes up.
	var binErr error
	binDone := make(chan struct{})
	go func() {
		defer close(binDone)
		if o.labBin != "" {
			l.labBin = o.labBin
			return
		}
		l.labBin, binErr = labBinary(ctx)
	}()
	defer func() { <-binDone }() // never leave the build goroutine behind

	if err := l.claim(ctx); err != nil {
		return nil, err
	}
	if l.Dir, err = os.MkdirTemp(o.tempBase, Prefix+full.Name+"-"); err != nil {
		return nil, fmt.Errorf("lab temp dir: %w", err)
	}
	dir := l.Dir
	l.addUndo("remove "+dir, func() error { return os.RemoveAll(dir) })
	l.logger.Info("lab starting", "dir", l.Dir, "slot", l.slot)

	if err := l.buildNetwork(ctx); err != nil {
		return nil, fmt.Errorf("lab network: %w", err)
	}
	l.logger.Info("network ready", "elapsed", time.Since(began).Round(time.Millisecond))
	if err := l.startControlPlanes(ctx); err != nil {
		return nil, err
	}
	l.logger.Info("control planes ready", "elapsed", time.Since(began).Round(time.Millisecond))
	if full.CoreDNS {
		if err := l.startClusterDNS(ctx); err != nil {
			return nil, err
		}
	}
	<-binDone
	if binErr != nil {
		return nil, binErr
	}
	local := filepath.Join(l.Dir, "kilofed-lab")
	if err := copyFile(l.labBin, local); err != nil {
		return nil, fmt.Errorf("copy kilofed-lab into the lab dir: %w", err)
	}
	l.labBin = local
	if err := l.startNodes(ctx); err != nil {
		return nil, err
	}
	if full.CoreDNS {
		if err := l.waitClusterDNS(ctx); err != nil {
			return nil, err
		}
	}
	l.logger.Info("lab ready", "elapsed", time.Since(began).Round(time.Millisecond))
	return l, nil
}

// claim takes the lab locks (sweeping when alone) and the first free
// management slot, whose bridge it creates before letting others in.
func (l *Lab) claim(ctx context.Context) error {
	setup, err := flockFile(ctx, SetupLockPath, syscall.LOCK_EX, false)
	if err != nil {
		return err
	}
	defer setup.Close()
	live, swept, err := joinLabs(ctx)
	if live != nil {
		l.addUndo("release "+LiveLockPath, live.Close)
	}
	if len(swept) > 0 {
		l.logger.Info("swept leftovers of earlier runs", "items", strings.Join(swept, ", "))
	}
	if err != nil {
		return fmt.Errorf("sweep leftovers: %w", err)
	}
	slot, err := freeSlot()
	if err != nil {
		return err
	}
	l.layout(slot)
	host, err := openNS("")
	if err != nil {
		return err
	}
	defer host.Close()
	br := mgmtBridge(l.Spec.Name)
	if err := host.addBridge(br); err != nil {
		return fmt.Errorf("%w (is a lab named %q already running?)", err, l.Spec.Name)
	}
	l.addUndo("delete link "+br, func() error { return delHostLink(br) })
	return host.addAddr(br, netip.PrefixFrom(mgmtHostIP(slot), 16))
}

// freeSlot returns the lowest management slot no kfl-*-m bridge uses.
func freeSlot() (int, error) {
	host, err := openNS("")
	if err != nil {
		return 0, err
	}
	defer host.Close()
	used := map[int]bool{}
	links, err := host.h.LinkList()
	if err != nil {
		return 0, fmt.Errorf("list host links: %w", err)
	}
	for _, link := range links {
		name := link.Attrs().Name
		if !strings.HasPrefix(name, Prefix) || !strings.HasSuffix(name, "-m") {
			continue
		}
		addrs, _ := host.h.AddrList(link, syscall.AF_INET)
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok && MgmtRange.Contains(ip) {
				used[int(ip.As4()[1])-64] = true
			}
		}
	}
	for s := range maxSlots {
		if !used[s] {
			return s, nil
		}
	}
	return 0, fmt.Errorf("all %d management slots are taken: too many labs on this machine (or leftovers: run `kilofed-lab clean`)", maxSlots)
}

// startControlPlanes starts every cluster's control plane in parallel.
func (l *Lab) startControlPlanes(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(l.clusters))
	var wg sync.WaitGroup
	for i, c := range l.clusters {
		wg.Go(func() {
			if err := l.startControlPlane(ctx, c); err != nil {
				errs[i] = fmt.Errorf("cluster %s: %w", c.Name, err)
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// addUndo registers a step for Close (run newest first).
func (l *Lab) addUndo(what string, fn func() error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.undo = append(l.undo, undoStep{what: what, fn: fn})
}

// Close tears down everything the lab created: the kubelet stand-ins (and
// their pods), every process it started (SIGTERM, then SIGKILL), anything
// still running in its namespaces or from its temp dir, the namespaces, the
// host links and the temp dir; then it releases the lab lock. It is
// idempotent and safe after a failed Start.
func (l *Lab) Close() error {
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	var errs []error
	if err := l.stopNodes(); err != nil {
		errs = append(errs, err)
	}
	l.mu.Lock()
	procs := append([]*Process(nil), l.procs...)
	l.mu.Unlock()
	for tier := 0; tier <= 3; tier++ {
		perrs := make([]error, len(procs))
		var wg sync.WaitGroup
		for i, p := range procs {
			if p.tier == tier || (tier == 3 && p.tier > 3) {
				wg.Go(func() { perrs[i] = p.Stop() })
			}
		}
		wg.Wait()
		errs = append(errs, perrs...)
	}
	if err := l.killStragglers(); err != nil {
		errs = append(errs, err)
	}
	for _, name := range l.podNetns { // the kubelet stand-ins should have deleted them
		if err := delNetns(name); err != nil {
			errs = append(errs, err)
		}
		_ = os.RemoveAll(filepath.Join("/etc/netns", name))
	}
	for i := len(l.undo) - 1; i >= 0; i-- {
		if err := l.undo[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.undo[i].what, err))
		}
	}
	l.logger.Info("lab closed")
	return errors.Join(errs...)
}

// killStragglers kills what still runs in the lab's namespaces or from its
// temp dir (workloads of a kubelet that did not clean up, children that left
// their process group).
func (l *Lab) killStragglers() error {
	if l.Dir == "" {
		return nil
	}
	_, inodes := labNetns(func(name string) bool { return slices.Contains(l.netns, name) || l.ownsPodNetns(name) })
	_, err := killProcesses(func(pi procInfo) bool {
		return inodes[pi.netnsInode] || pi.mentions(l.Dir)
	})
	return err
}
