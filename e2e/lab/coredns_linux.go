//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of the CoreDNS waits.
const (
	coreDNSReadyTimeout  = 90 * time.Second
	coreDNSReloadTimeout = 30 * time.Second
)

// reloadLine is what CoreDNS's reload plugin logs each time a Corefile
// starts serving (at start and after every reload).
const reloadLine = "Running configuration SHA512 = "

// clusterDNS is a cluster's CoreDNS: the process, where it runs and the
// Corefile it serves.
type clusterDNS struct {
	mu      sync.Mutex
	node    *Node
	path    string // the Corefile
	cfg     corednsConfig
	proc    *Process
	started time.Time
}

// startClusterDNS starts every cluster's CoreDNS (see startCoreDNS), in
// parallel.
func (l *Lab) startClusterDNS(ctx context.Context) error {
	errs := make([]error, len(l.clusters))
	var wg sync.WaitGroup
	for i, c := range l.clusters {
		wg.Go(func() {
			if err := l.startCoreDNS(ctx, c); err != nil {
				errs[i] = fmt.Errorf("cluster %s: CoreDNS: %w", c.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startCoreDNS runs the real CoreDNS as the cluster's DNS, as a process in
// the network namespace of the cluster's first node (a hostNetwork CoreDNS
// pod, in effect), serving port 53 of the node's LAN address, reading the
// API as CoreDNSUser, and creates the kube-dns Service (ClusterIP
// ClusterDNS) with an EndpointSlice to it, so that kube-proxy takes pods'
// queries there. It does not wait for CoreDNS (see waitClusterDNS).
func (l *Lab) startCoreDNS(ctx context.Context, c *Cluster) error {
	if len(c.nodes) == 0 {
		return errors.New("the cluster has no node to run on")
	}
	n := c.nodes[0]
	dir := filepath.Join(l.Dir, c.Name)
	kubeconfig := filepath.Join(dir, "coredns.kubeconfig")
	if err := c.writeIdentity(kubeconfig, CoreDNSUser); err != nil {
		return err
	}
	role, binding := coreDNSRBAC()
	if _, err := c.client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRole %s: %w", role.Name, err)
	}
	if _, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRoleBinding %s: %w", binding.Name, err)
	}
	d := &clusterDNS{node: n, path: filepath.Join(dir, "Corefile"), cfg: corednsConfig{
		cluster:    c.Name,
		domain:     c.ClusterDomain,
		bind:       n.LANIP,
		ready:      netip.AddrPortFrom(n.MgmtIP, CoreDNSReadyPort),
		kubeconfig: kubeconfig,
	}}
	if err := writeFileAtomic(d.path, corefile(d.cfg)); err != nil {
		return err
	}
	p, err := l.startProcess(procSpec{name: c.Name + "-" + n.Name + "-coredns", netns: n.Netns, argv: []string{
		filepath.Join(l.bins, "coredns"), "-conf", d.path,
	}})
	if err != nil {
		return err
	}
	d.proc, d.started = p, time.Now()
	c.dns = d
	if _, err := c.client.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, kubeDNSService(c.ClusterDNS), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Service %s/%s with ClusterIP %s: %w", metav1.NamespaceSystem, KubeDNSService, c.ClusterDNS, err)
	}
	if _, err := c.client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Create(ctx, kubeDNSEndpointSlice(n.Name, n.LANIP), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the EndpointSlice of %s: %w", KubeDNSService, err)
	}
	return nil
}

// waitClusterDNS waits until every cluster's CoreDNS is ready (its
// kubernetes plugin has synced with the API).
func (l *Lab) waitClusterDNS(ctx context.Context) error {
	errs := make([]error, len(l.clusters))
	var wg sync.WaitGroup
	for i, c := range l.clusters {
		wg.Go(func() {
			if errs[i] = c.waitCoreDNS(ctx, coreDNSReadyTimeout); errs[i] == nil {
				l.logger.Info("CoreDNS ready", "cluster", c.Name, "node", c.dns.node.Name, "after", time.Since(c.dns.started).Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitCoreDNS polls CoreDNS's /ready until it answers OK.
func (c *Cluster) waitCoreDNS(ctx context.Context, timeout time.Duration) error {
	d := c.dns
	if err := waitHTTP(ctx, d.proc, timeout, "http://"+d.cfg.ready.String()+"/ready", nil, "OK"); err != nil {
		return fmt.Errorf("CoreDNS of %s: %w", c.Name, err)
	}
	return nil
}

// ErrNoCoreDNS is returned by the cluster DNS methods of a lab started
// without Spec.CoreDNS.
var ErrNoCoreDNS = errors.New("the lab runs no CoreDNS (set Spec.CoreDNS)")

// DNSNode returns the node whose namespace runs the cluster's CoreDNS (its
// first node), or nil without Spec.CoreDNS.
func (c *Cluster) DNSNode() *Node {
	if c.dns == nil {
		return nil
	}
	return c.dns.node
}

// CoreDNSProcess returns the cluster's CoreDNS process, or nil without
// Spec.CoreDNS.
func (c *Cluster) CoreDNSProcess() *Process {
	if c.dns == nil {
		return nil
	}
	return c.dns.proc
}

// Corefile returns the Corefile the cluster's CoreDNS serves.
func (c *Cluster) Corefile() (string, error) {
	if c.dns == nil {
		return "", ErrNoCoreDNS
	}
	c.dns.mu.Lock()
	defer c.dns.mu.Unlock()
	return corefile(c.dns.cfg), nil
}

// SetClusterSetDNS makes the cluster's CoreDNS forward the clusterset.local
// zone to addr (kilofed's DNS server), as users wire it in production: it
// rewrites the Corefile with a clusterset.local stanza (none when addr is
// the zero AddrPort) and returns once CoreDNS's reload plugin has loaded it
// and CoreDNS is ready again. CoreDNS runs in the namespace of DNSNode, so
// addr must be reachable from there (a ClusterIP, a node or pod address, a
// management address).
func (c *Cluster) SetClusterSetDNS(ctx context.Context, addr netip.AddrPort) error {
	d := c.dns
	if d == nil {
		return ErrNoCoreDNS
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg.clusterSet == addr {
		return nil
	}
	cfg := d.cfg
	cfg.clusterSet = addr
	var offset int64
	if st, err := os.Stat(d.proc.LogPath); err == nil {
		offset = st.Size()
	}
	if err := writeFileAtomic(d.path, corefile(cfg)); err != nil {
		return err
	}
	d.cfg = cfg
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, coreDNSReloadTimeout)
	defer cancel()
	for {
		log := readFrom(d.proc.LogPath, offset)
		if strings.Contains(log, reloadLine) {
			break
		}
		if strings.Contains(log, "reload failed") || strings.Contains(log, "Corefile parse failed") {
			return fmt.Errorf("CoreDNS of %s refused the new Corefile:\n%s", c.Name, log)
		}
		select {
		case <-d.proc.Done():
			return fmt.Errorf("CoreDNS of %s exited: %v%s", c.Name, d.proc.Err(), d.proc.logTail())
		case <-ctx.Done():
			return fmt.Errorf("CoreDNS of %s did not reload its Corefile within %s: %w%s", c.Name, coreDNSReloadTimeout, ctx.Err(), d.proc.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := c.waitCoreDNS(ctx, coreDNSReloadTimeout); err != nil {
		return err
	}
	c.lab.logger.Info("CoreDNS reloaded", "cluster", c.Name, "clusterset", addr, "after", time.Since(began).Round(time.Millisecond))
	return nil
}

// readFrom returns what a file holds past offset ("" when it cannot be read).
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

// writeFileAtomic writes a file through a temporary file and a rename, so
// that a reader never sees half of it.
func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
