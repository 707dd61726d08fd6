//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kilofed/kilofed/mesh/agent"
	"github.com/kilofed/kilofed/mesh/encap"
	"github.com/kilofed/kilofed/mesh/firewall"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/link"
	"github.com/kilofed/kilofed/mesh/mtu"
	"github.com/kilofed/kilofed/mesh/route"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// links adapts package link to agent.Links.
type links struct{}

func (links) SetAddresses(name string, addrs []netip.Prefix) error {
	return link.SetAddresses(name, addrs)
}
func (links) SetUp(name string) error { return link.SetUp(name) }

func run(ctx context.Context, o options, log *slog.Logger) error {
	topo, err := o.topologyOptions()
	if err != nil {
		return err
	}
	key, created, err := agent.LoadOrCreateKey(o.keyFile)
	if err != nil {
		return err
	}
	log.Info("WireGuard key ready", "file", o.keyFile, "created", created, "public", key.PublicKey().String())

	rc, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	backend, err := k8s.New(ctx, k8s.Config{
		RESTConfig: rc, TopologyLabel: o.topologyLabel,
		LeaseNamespace: o.leaseNamespace, LeaseDuration: o.leaseDuration,
		Logger: log.With("component", "k8s"),
	})
	if err != nil {
		return err
	}
	if len(topo.ServiceCIDRs) == 0 {
		if topo.ServiceCIDRs, err = backend.ServiceCIDRs(ctx); err != nil {
			log.Warn("Service ranges unknown: external peers will not reach ClusterIPs", "err", err)
		} else {
			log.Info("Service ranges read from the cluster", "cidrs", topo.ServiceCIDRs)
		}
	}
	self, err := waitForNode(ctx, backend, o.hostname, log)
	if err != nil {
		return err
	}
	underlay, internal, err := link.ByAddress(self.InternalIP.Addr())
	if err != nil {
		return err
	}
	topo.Links.Underlay = underlay
	var internal6 netip.Prefix
	if self.InternalIP6.IsValid() {
		if _, p, err := link.ByAddress(self.InternalIP6.Addr()); err == nil {
			internal6 = p
		}
	}
	log.Info("underlay found", "link", underlay, "internal-ip", internal)

	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
			log.Warn("cannot enable forwarding", "file", f, "err", err)
		}
	}

	var enc encap.Encapsulator
	if topo.Encapsulate != topology.EncapsulateNever {
		var kind encap.Kind
		if o.tunnel == "auto" {
			kind, err = encap.Detect()
		} else {
			kind, err = encap.ParseKind(o.tunnel)
		}
		if err != nil {
			return fmt.Errorf("--tunnel=%s: %w", o.tunnel, err)
		}
		topo.TunnelNextHop = kind.NextHop
		enc, err = encap.New(encap.Options{Kind: kind, Local: internal.Addr(), Underlay: underlay, Logger: log.With("component", "encap")})
		if err != nil {
			return fmt.Errorf("encapsulation (--encapsulate=%s): %w; use --encapsulate=never if nodes of a location route pod traffic natively", topo.Encapsulate, err)
		}
		topo.Links.Tunnel = enc.Link()
		log.Info("encapsulation ready", "kind", kind, "link", enc.Link())
	}
	wgMTU := 0
	if o.mtu == "auto" {
		plan, err := mtu.Auto(underlay, 0)
		if err != nil {
			return fmt.Errorf("--mtu auto: %w", err)
		}
		wgMTU = plan.WireGuard
	} else if wgMTU, err = strconv.Atoi(o.mtu); err != nil {
		return fmt.Errorf("--mtu %q: use a number or auto", o.mtu)
	}

	dev, err := wireguard.Open(ctx, wireguard.OpenOptions{Name: o.iface, Mode: o.wireguard, MTU: wgMTU, Logger: log.With("component", "wireguard")})
	if err != nil {
		return err
	}
	router, err := route.NewRouter(route.RouterOptions{Logger: log.With("component", "route")})
	if err != nil {
		return err
	}
	fw, err := firewall.New(firewall.Options{Logger: log.With("component", "firewall")})
	if err != nil {
		log.Warn("firewall rules disabled", "err", err)
		fw = nil
	}
	endpoint := ""
	if o.forceExternalIP != "" {
		endpoint = o.forceExternalIP
		if _, _, err := net.SplitHostPort(endpoint); err != nil {
			endpoint = net.JoinHostPort(endpoint, strconv.Itoa(int(o.port)))
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := agent.Config{
		Hostname:        o.hostname,
		Backend:         backend,
		Topology:        topo,
		PrivateKey:      key,
		ListenPort:      int(o.port),
		Endpoint:        endpoint,
		InternalIP:      internal,
		InternalIP6:     internal6,
		HeartbeatPeriod: o.leaseDuration / 3,
		Forwarding:      func() error { return forwarding(ctx, underlay, dev) },
		Device:          dev,
		Links:           links{},
		Router:          router,
		Firewall:        fw,
		ResyncPeriod:    o.resync,
		Metrics:         agent.NewMetrics(reg),
		Logger:          log.With("component", "agent"),
	}
	if enc != nil {
		cfg.Encap = enc
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	reg.MustRegister(agent.NewDeviceCollector(dev, a.PeerNames))

	srv := &http.Server{Addr: o.listen, Handler: a.Handler(reg), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server stopped", "listen", o.listen, "err", err)
		}
	}()
	hb := make(chan error, 1)
	go func() { hb <- a.RunHeartbeat(ctx) }()
	log.Info("kg running", "node", o.hostname, "interface", o.iface, "granularity", topo.Granularity, "encapsulate", topo.Encapsulate)
	runErr := a.Run(ctx)

	// Shut down: give the lease up first so that another node leads at once.
	if err := <-hb; err != nil {
		log.Warn("release heartbeat", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if o.cleanUp {
		errs := []error{router.Close(sctx)}
		if fw != nil {
			errs = append(errs, fw.Close(sctx))
		}
		if enc != nil {
			errs = append(errs, enc.Close(sctx))
		}
		if err := errors.Join(errs...); err != nil {
			log.Warn("clean up", "err", err)
		}
	}
	if err := dev.Close(); err != nil {
		log.Warn("close WireGuard device", "err", err)
	}
	if o.cleanUpIface {
		if err := link.Delete(o.iface); err != nil && !errors.Is(err, link.ErrLinkNotFound) {
			log.Warn("delete interface", "err", err)
		}
	}
	log.Info("kg stopped cleanly")
	return runErr
}

// forwarding is the node's own data-plane check before each heartbeat: its
// underlay link is up with carrier, and its WireGuard device answers.
func forwarding(ctx context.Context, underlay string, dev wireguard.Device) error {
	up, err := link.OperUp(underlay)
	if err != nil {
		return err
	}
	if !up {
		return fmt.Errorf("underlay link %s is down", underlay)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := dev.Show(ctx); err != nil {
		return fmt.Errorf("WireGuard device does not answer: %w", err)
	}
	return nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return rc, nil
}

// waitForNode waits until this node's Node object has an internal IP.
func waitForNode(ctx context.Context, b *k8s.Client, name string, log *slog.Logger) (topology.Node, error) {
	warned := false
	for {
		nodes, _, _ := b.Snapshot()
		for _, n := range nodes {
			if n.Name == name && n.InternalIP.IsValid() {
				return n, nil
			}
		}
		if !warned {
			log.Warn("waiting for this node's Node object and its InternalIP", "node", name)
			warned = true
		}
		select {
		case <-ctx.Done():
			return topology.Node{}, fmt.Errorf("node %q never appeared with an InternalIP: check --hostname", name)
		case <-b.Changes():
		case <-time.After(time.Second):
		}
	}
}
