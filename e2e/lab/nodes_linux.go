//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab/kubelet"
)

// Bounds of the node-side waits.
const (
	nodesReadyTimeout     = 120 * time.Second
	kubeProxyReadyTimeout = 90 * time.Second
	kubeletStopTimeout    = 60 * time.Second
)

// kubeletAPIPort is the port of every node's kubelet API, a kubelet's usual.
const kubeletAPIPort = 10250

// startNodes runs the kubelet stand-in of every node (and kube-proxy, if
// asked), then waits for the Nodes, their podCIDRs, the pod routes and
// kube-proxy's first sync.
func (l *Lab) startNodes(ctx context.Context) error {
	kctx, cancel := context.WithCancel(context.Background())
	l.kubeletCancel = cancel
	for _, c := range l.clusters {
		for _, n := range c.nodes {
			cfg := kubelet.Config{
				Client:          c.client,
				Cluster:         c.Name,
				NodeName:        n.Name,
				NodeNetns:       n.Netns,
				InternalIP:      n.LANIP,
				InternalIP6:     n.LANIP6,
				ExternalIP:      n.PublicIP,
				Labels:          n.Labels,
				Annotations:     n.Annotations,
				WorkloadCommand: []string{l.labBin, "workload"},
				ImageBinDir:     imageBinDir(l.labBin),
				ClusterDNS:      c.ClusterDNS,
				ClusterDomain:   c.ClusterDomain,
				Logger:          l.logger.With("cluster", c.Name),
				LogDir:          filepath.Join(l.Dir, "logs", "pods", c.Name+"-"+n.Name),
				RootDir:         filepath.Join(l.Dir, "nodes", c.Name+"-"+n.Name),
			}
			serving, err := l.kubeletServing(c, n)
			if err != nil {
				return err
			}
			cfg.Serving = serving
			l.kubeletDone.Go(func() {
				err := kubelet.Run(kctx, cfg)
				if err != nil && kctx.Err() == nil {
					l.logger.Error("kubelet stand-in stopped", "cluster", c.Name, "node", n.Name, "err", err)
				}
				n.mu.Lock()
				if err == nil {
					err = errors.New("no error")
				}
				n.kubeletErr = fmt.Errorf("kubelet stand-in of %s/%s returned: %w", c.Name, n.Name, err)
				n.mu.Unlock()
			})
			if l.Spec.KubeProxy {
				if err := l.startKubeProxy(c, n); err != nil {
					return err
				}
			}
		}
	}
	ctx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	errs := make([]error, len(l.clusters))
	var wg sync.WaitGroup
	for i, c := range l.clusters {
		wg.Go(func() {
			if errs[i] = c.waitNodes(ctx); errs[i] == nil {
				errs[i] = c.waitServiceAccount(ctx)
			}
			if errs[i] != nil {
				cancelWait()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if l.Spec.PodRoutes {
		if err := l.installPodRoutes(); err != nil {
			return err
		}
	}
	if l.Spec.KubeProxy {
		return l.waitKubeProxies(ctx)
	}
	return nil
}

// kubeletServing opens the node's kubelet API endpoint: port 10250 of its
// management address, in its namespace (the API server reaches it over the
// management bridge), with a serving certificate of the cluster CA.
func (l *Lab) kubeletServing(c *Cluster, n *Node) (*kubelet.ServingConfig, error) {
	cert, err := c.pki.issueKubeletServing(n.Name, []netip.Addr{n.MgmtIP})
	if err != nil {
		return nil, err
	}
	ln, err := kubelet.ListenInNetns(n.Netns, netip.AddrPortFrom(n.MgmtIP, kubeletAPIPort))
	if err != nil {
		return nil, fmt.Errorf("kubelet API of %s/%s: %w", c.Name, n.Name, err)
	}
	return &kubelet.ServingConfig{Listener: ln, Address: n.MgmtIP, Certificate: cert, ClientCAs: c.pki.caPool()}, nil
}

// startKubeProxy starts the real kube-proxy in a node's namespace.
func (l *Lab) startKubeProxy(c *Cluster, n *Node) error {
	p, err := l.startProcess(procSpec{
		name:  c.Name + "-" + n.Name + "-kube-proxy",
		netns: n.Netns,
		argv: []string{
			filepath.Join(l.bins, "kube-proxy"),
			"--kubeconfig=" + filepath.Join(l.Dir, c.Name, "kube-proxy.kubeconfig"),
			"--hostname-override=" + n.Name,
			"--proxy-mode=iptables",
			"--cluster-cidr=" + c.podCIDRs(),
			"--bind-address=" + n.LANIP.String(),
			"--conntrack-max-per-core=0",
			"--conntrack-tcp-timeout-established=0",
			"--conntrack-tcp-timeout-close-wait=0",
			"--metrics-bind-address=127.0.0.1:10249",
			"--healthz-bind-address=127.0.0.1:10256",
		},
	})
	if err != nil {
		return err
	}
	n.kubeProxy = p
	return nil
}

// waitNodes waits until every Node of the cluster is Ready with podCIDRs,
// and records them.
func (c *Cluster) waitNodes(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, nodesReadyTimeout)
	defer cancel()
	for {
		list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		var missing []string
		if err == nil {
			byName := map[string]*corev1.Node{}
			for i := range list.Items {
				byName[list.Items[i].Name] = &list.Items[i]
			}
			for _, n := range c.nodes {
				obj := byName[n.Name]
				if obj == nil || !nodeReady(obj) || len(obj.Spec.PodCIDRs) == 0 {
					missing = append(missing, n.Name)
					continue
				}
				var cidrs []netip.Prefix
				for _, s := range obj.Spec.PodCIDRs {
					if p, perr := netip.ParsePrefix(s); perr == nil {
						cidrs = append(cidrs, p)
					}
				}
				n.mu.Lock()
				n.podCIDRs = cidrs
				n.mu.Unlock()
			}
			if len(missing) == 0 {
				return nil
			}
			err = fmt.Errorf("not Ready with a podCIDR yet: %s", strings.Join(missing, ", "))
		}
		for _, n := range c.nodes {
			n.mu.Lock()
			kerr := n.kubeletErr
			n.mu.Unlock()
			if kerr != nil {
				return kerr
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s: nodes not ready after %s: %w: %w", c.Name, nodesReadyTimeout, err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// nodeReady reports whether a Node has condition Ready=True.
func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitServiceAccount waits for the default ServiceAccount of namespace
// default, without which Pods cannot be created.
func (c *Cluster) waitServiceAccount(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, kcmReadyTimeout)
	defer cancel()
	for {
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			c.lab.logger.Debug("waiting for the default ServiceAccount", "cluster", c.Name, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s: no default ServiceAccount after %s (is kube-controller-manager working? see %s): %w",
				c.Name, kcmReadyTimeout, filepath.Join(c.lab.Dir, "logs", c.Name+"-kube-controller-manager.log"), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// installPodRoutes routes, in each node, the podCIDRs of the other nodes of
// its location via their LAN addresses (flannel host-gw style).
func (l *Lab) installPodRoutes() error {
	for _, c := range l.clusters {
		for _, loc := range c.locations {
			for _, n := range loc.nodes {
				ns, err := openNS(n.Netns)
				if err != nil {
					return err
				}
				for _, m := range loc.nodes {
					if m == n {
						continue
					}
					for _, cidr := range m.PodCIDRs() {
						via := m.LANIP
						if cidr.Addr().Is6() {
							via = m.LANIP6
						}
						if err := ns.replaceRoute(route{dst: cidr, via: via, dev: NodeLANLink}); err != nil {
							ns.Close()
							return err
						}
					}
				}
				ns.Close()
			}
		}
	}
	return nil
}

// waitKubeProxies waits until each kube-proxy wrote its service rules (the
// kubernetes Service's chain in the nat table of its node).
func (l *Lab) waitKubeProxies(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, kubeProxyReadyTimeout)
	defer cancel()
	var nodes []*Node
	for _, c := range l.clusters {
		nodes = append(nodes, c.nodes...)
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			for {
				out, err := n.Exec(ctx, "iptables", "-w", "5", "-t", "nat", "-S", "KUBE-SERVICES")
				if err == nil && strings.Contains(string(out), "default/kubernetes:https") {
					return
				}
				select {
				case <-n.kubeProxy.Done():
					errs[i] = fmt.Errorf("kube-proxy of %s/%s exited: %v%s", n.Cluster, n.Name, n.kubeProxy.Err(), n.kubeProxy.logTail())
					return
				case <-ctx.Done():
					errs[i] = fmt.Errorf("kube-proxy of %s/%s wrote no service rules after %s: %w%s", n.Cluster, n.Name, kubeProxyReadyTimeout, ctx.Err(), n.kubeProxy.logTail())
					return
				case <-time.After(500 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopNodes stops the kubelet stand-ins (which delete their pods'
// namespaces) and waits for them.
func (l *Lab) stopNodes() error {
	if l.kubeletCancel == nil {
		return nil
	}
	l.podNetns = l.listPodNetns()
	l.kubeletCancel()
	done := make(chan struct{})
	go func() {
		l.kubeletDone.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(kubeletStopTimeout):
		return fmt.Errorf("kubelet stand-ins still running %s after the lab's end", kubeletStopTimeout)
	}
}

// listPodNetns returns the namespaces of the pods that run on the lab's
// nodes (asked to the API servers, so before they stop).
func (l *Lab) listPodNetns() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	for _, c := range l.clusters {
		if c.client == nil {
			continue
		}
		pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if c.Node(p.Spec.NodeName) != nil && p.Status.PodIP != "" {
				names = append(names, kubelet.PodNetns(c.Node(p.Spec.NodeName).Netns, p.Namespace, p.Name))
			}
		}
	}
	return names
}

// ownsPodNetns reports whether a namespace belongs to one of the lab's pods.
func (l *Lab) ownsPodNetns(name string) bool { return slices.Contains(l.podNetns, name) }

// imageBinDir is the folder of kilofed's binaries (kg, kilofed-controller)
// that the kubelet stand-ins run for containers of kilofed's images:
// $KILOFED_BIN when it is a folder, else the lab binary's folder when kg is
// next to it, else none (those images then get a built-in workload).
func imageBinDir(labBin string) string {
	if dir := os.Getenv("KILOFED_BIN"); dir != "" {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir
		}
	}
	if dir := filepath.Dir(labBin); labBin != "" && allExecutable(dir, []string{"kg"}) {
		return dir
	}
	return ""
}
