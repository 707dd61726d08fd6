//go:build linux

package lab

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Ready-wait bounds. The machine may be busy (two cores shared with builds),
// so they are generous; a healthy API server answers /readyz in about 5 s.
const (
	etcdReadyTimeout      = 60 * time.Second
	apiServerReadyTimeout = 180 * time.Second
	kcmReadyTimeout       = 120 * time.Second
)

// startControlPlane writes the cluster's PKI and kubeconfigs and starts its
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler, each
// waited for (the last two started together).
func (l *Lab) startControlPlane(ctx context.Context, c *Cluster) error {
	dir := filepath.Join(l.Dir, c.Name)
	first, err := firstAddr(c.ServiceCIDR)
	if err != nil {
		return err
	}
	pki, err := newClusterPKI(filepath.Join(dir, "pki"), c.Name, serverIdentity{
		IPs:    []netip.Addr{c.APIServerIP, first, netip.MustParseAddr("127.0.0.1")},
		Domain: c.ClusterDomain,
	})
	if err != nil {
		return err
	}
	c.pki = pki
	admin, err := pki.issueClient("kubernetes-admin", "system:masters")
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.Name, c.APIServer, pki.caPEM, "kubernetes-admin", admin); err != nil {
		return err
	}
	c.restConfig = restConfigFor(c.APIServer, pki.caPEM, admin)
	if c.client, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return fmt.Errorf("client for %s: %w", c.Name, err)
	}
	kcmKubeconfig := filepath.Join(dir, "kube-controller-manager.kubeconfig")
	if err := c.writeIdentity(kcmKubeconfig, "system:kube-controller-manager"); err != nil {
		return err
	}
	if err := c.writeIdentity(filepath.Join(dir, "kube-proxy.kubeconfig"), "system:kube-proxy"); err != nil {
		return err
	}

	etcdPort, err := l.freePort()
	if err != nil {
		return err
	}
	peerPort, err := l.freePort()
	if err != nil {
		return err
	}
	c.etcdURL = "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	c.cp.etcd = component{name: c.Name + "-etcd", tier: 3, argv: []string{
		filepath.Join(l.bins, "etcd"),
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + c.etcdURL,
		"--advertise-client-urls=" + c.etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--initial-cluster-state=new", // ignored once the data dir exists (a restart)
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, ready: func(ctx context.Context, p *Process) error {
		if err := waitHTTP(ctx, p, etcdReadyTimeout, c.etcdURL+"/health", nil, `"health":"true"`); err != nil {
			return fmt.Errorf("etcd of %s: %w", c.Name, err)
		}
		return nil
	}}

	c.cp.apiserver = component{name: c.Name + "-kube-apiserver", tier: 2, argv: []string{
		filepath.Join(l.bins, "kube-apiserver"),
		"--bind-address=" + c.APIServerIP.String(),
		"--advertise-address=" + c.APIServerIP.String(),
		"--secure-port=" + strconv.Itoa(APIServerPort),
		"--etcd-servers=" + c.etcdURL,
		"--tls-cert-file=" + pki.serverCert,
		"--tls-private-key-file=" + pki.serverKy,
		"--client-ca-file=" + pki.caCert,
		"--service-account-issuer=https://kubernetes.default.svc." + c.ClusterDomain,
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=" + c.serviceCIDRs(),
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + pki.kubeletCert,
		"--kubelet-client-key=" + pki.kubeletKy,
		// The kubelet stand-ins serve their API on the nodes' management
		// addresses, published as InternalDNS (InternalIP is the LAN
		// address, which the host does not reach), with certificates of
		// the cluster CA.
		"--kubelet-preferred-address-types=InternalDNS,InternalIP,Hostname,ExternalDNS,ExternalIP",
		"--kubelet-certificate-authority=" + pki.caCert,
		"--enable-priority-and-fairness=false",
		"--cert-dir=" + filepath.Join(dir, "apiserver"),
		"--profiling=false",
	}, ready: c.waitAPIServer}

	kcmPort, err := l.freePort()
	if err != nil {
		return err
	}
	c.cp.kcm = component{name: c.Name + "-kube-controller-manager", tier: 1, argv: append([]string{
		filepath.Join(l.bins, "kube-controller-manager"),
		"--kubeconfig=" + kcmKubeconfig,
		"--authentication-kubeconfig=" + kcmKubeconfig,
		"--authorization-kubeconfig=" + kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + filepath.Join(dir, "kcm"),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + pki.saKey,
		"--root-ca-file=" + pki.caCert,
		"--cluster-signing-cert-file=" + pki.caCert,
		"--cluster-signing-key-file=" + pki.caKeyF,
		"--cluster-name=" + c.Name,
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + c.podCIDRs(),
		"--service-cluster-ip-range=" + c.serviceCIDRs(),
		"--profiling=false",
	}, c.nodeCIDRMaskSizes()...), ready: func(ctx context.Context, p *Process) error {
		insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // local self-signed health endpoint
		health := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(kcmPort)) + "/healthz"
		if err := waitHTTP(ctx, p, kcmReadyTimeout, health, insecure, "ok"); err != nil {
			return fmt.Errorf("kube-controller-manager of %s: %w", c.Name, err)
		}
		return nil
	}}

	if err := l.defineScheduler(c, dir); err != nil {
		return err
	}

	c.cp.mu.Lock()
	defer c.cp.mu.Unlock()
	for _, comp := range []*component{&c.cp.etcd, &c.cp.apiserver} {
		if err := l.startComponent(ctx, comp); err != nil {
			return err
		}
	}
	return l.startComponents(ctx, &c.cp.kcm, &c.cp.scheduler)
}

// startComponent starts comp and waits until it serves.
func (l *Lab) startComponent(ctx context.Context, comp *component) error {
	p, err := l.startProcess(procSpec{name: comp.name, tier: comp.tier, argv: comp.argv})
	if err != nil {
		return err
	}
	comp.proc = p
	return comp.ready(ctx, p)
}

// podCIDRs is the cluster's --cluster-cidr: IPv4, then IPv6 if DualStack.
func (c *Cluster) podCIDRs() string { return joinPrefixes(c.PodCIDR, c.PodCIDR6) }

// serviceCIDRs is the cluster's --service-cluster-ip-range.
func (c *Cluster) serviceCIDRs() string { return joinPrefixes(c.ServiceCIDR, c.ServiceCIDR6) }

// nodeCIDRMaskSizes are kube-controller-manager's flags for the size of
// each node's podCIDR (one per family in a dual-stack cluster).
func (c *Cluster) nodeCIDRMaskSizes() []string {
	if !c.PodCIDR6.IsValid() {
		return []string{"--node-cidr-mask-size=" + strconv.Itoa(c.spec.NodeCIDRMaskSize)}
	}
	return []string{
		"--node-cidr-mask-size-ipv4=" + strconv.Itoa(c.spec.NodeCIDRMaskSize),
		"--node-cidr-mask-size-ipv6=" + strconv.Itoa(c.spec.NodeCIDRMaskSize6),
	}
}

// joinPrefixes joins the valid prefixes with commas.
func joinPrefixes(ps ...netip.Prefix) string {
	var out []string
	for _, p := range ps {
		if p.IsValid() {
			out = append(out, p.String())
		}
	}
	return strings.Join(out, ",")
}

// writeIdentity writes a kubeconfig for a client certificate of user.
func (c *Cluster) writeIdentity(path, user string, groups ...string) error {
	cc, err := c.pki.issueClient(user, groups...)
	if err != nil {
		return err
	}
	return writeKubeconfig(path, c.Name, c.APIServer, c.pki.caPEM, user, cc)
}

// waitAPIServer polls /readyz until it answers ok.
func (c *Cluster) waitAPIServer(ctx context.Context, p *Process) error {
	ctx, cancel := context.WithTimeout(ctx, apiServerReadyTimeout)
	defer cancel()
	var last error
	for {
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
		last = err
		select {
		case <-p.Done():
			return fmt.Errorf("kube-apiserver of %s exited: %v%s", c.Name, p.Err(), p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver of %s %s (%v): %w%s", c.Name, notReady(ctx, apiServerReadyTimeout), last, ctx.Err(), p.logTail())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitHTTP polls url until its body contains want, the process exits, or
// the timeout passes.
func waitHTTP(ctx context.Context, p *Process, timeout time.Duration, url string, tlsCfg *tls.Config, want string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: nil}}
	defer client.CloseIdleConnections()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), want) {
				return nil
			}
			err = fmt.Errorf("status %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		last = err
		select {
		case <-p.Done():
			return fmt.Errorf("%s exited: %v%s", p.Name, p.Err(), p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s %s (%v): %w%s", p.Name, notReady(ctx, timeout), last, ctx.Err(), p.logTail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// firstAddr returns the first host address of a prefix (the kubernetes
// Service's ClusterIP for a service CIDR).
func firstAddr(p netip.Prefix) (netip.Addr, error) {
	a := p.Masked().Addr().Next()
	if !p.Contains(a) {
		return netip.Addr{}, fmt.Errorf("prefix %s has no host address", p)
	}
	return a, nil
}

// notReady says why a wait ended: its own timeout, or the caller giving up.
func notReady(ctx context.Context, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("not ready after %s", timeout)
	}
	return "start interrupted before it was ready"
}
