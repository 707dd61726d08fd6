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
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sys/unix"
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
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// links adapts package link to agent.Links.
type links struct{}

func (links) SetAddresses(name string, addrs []netip.Prefix) error {
	return link.SetAddresses(name, addrs)
}
func (links) SetUp(name string) error { return link.SetUp(name) }

// addresses are the node's underlay link and internal addresses.
type addresses struct {
	underlay            string
	internal, internal6 netip.Prefix
}

// dataplane holds the kernel state kg sets up and tears down.
type dataplane struct {
	dev    wireguard.Device
	health *deviceHealth // whether dev answered lately, for forwarding
	router route.Router
	fw     firewall.Firewall // nil when the firewall is unavailable
	enc    encap.Encapsulator
}

// run starts kg on this node and blocks until ctx is done.
func run(ctx context.Context, o options, log *slog.Logger) error {
	topo, key, err := loadConfig(o, log)
	if err != nil {
		return err
	}
	backend, err := newBackend(ctx, o, &topo, log)
	if err != nil {
		return err
	}
	self, err := waitForNode(ctx, backend, o.hostname, len(o.internalCIDRs) > 0, log)
	if err != nil {
		return err
	}
	if self, err = applyInternalCIDRs(self, o); err != nil {
		return err
	}
	if o.cni {
		if err := updateCNIConfig(o.cniPath, self.PodCIDRs, log); err != nil {
			log.Warn("CNI configuration not updated", "err", err)
		}
	}
	addrs, err := nodeAddresses(self, link.ByAddress, log)
	if err != nil {
		return err
	}
	topo.Links.Underlay = addrs.underlay
	enableForwarding(log)
	dp, err := setUpDataplane(ctx, o, &topo, addrs, log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a, err := agent.New(agentConfig(ctx, o, topo, key, backend, addrs, dp, reg, log))
	if err != nil {
		return err
	}
	reg.MustRegister(agent.NewDeviceCollector(dp.dev, a.PeerNames))
	h := a.Handler(reg)
	if o.profiling {
		h = withProfiling(h)
	}
	srv := serveHTTP(o.listen, h, log)
	log.Info("kg running", "node", o.hostname, "interface", o.iface, "granularity", topo.Granularity, "encapsulate", topo.Encapsulate)
	runErr := runAgent(ctx, a, log)

	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	dp.close(sctx, o, log)
	log.Info("kg stopped cleanly")
	return runErr
}

// loadConfig turns the flags into topology options and loads (or creates)
// the node's WireGuard key.
func loadConfig(o options, log *slog.Logger) (topology.Options, wgconf.SecretKey, error) {
	topo, err := o.topologyOptions()
	if err != nil {
		return topo, wgconf.SecretKey{}, err
	}
	key, created, err := agent.LoadOrCreateKey(o.keyFile, log)
	if err != nil {
		return topo, wgconf.SecretKey{}, err
	}
	log.Info("WireGuard key ready", "file", o.keyFile, "created", created, "public", key.PublicKey().String())
	return topo, key, nil
}

// newBackend connects to the cluster and, when no --service-cidr was given,
// reads the Service ranges into topo.
func newBackend(ctx context.Context, o options, topo *topology.Options, log *slog.Logger) (*k8s.Client, error) {
	rc, err := restConfig(o.master, o.kubeconfig)
	if err != nil {
		return nil, err
	}
	backend, err := k8s.New(ctx, k8s.Config{
		RESTConfig:     rc,
		TopologyLabel:  o.topologyLabel,
		LeaseNamespace: o.leaseNamespace,
		LeaseDuration:  o.leaseDuration,
		Election:       k8s.Election(o.leaderElection),
		Logger:         log.With("component", "k8s"),
	})
	if err != nil {
		return nil, err
	}
	if k8s.Election(o.leaderElection) == k8s.ElectionNodeLeases {
		// A lead published by an earlier run with the location election
		// would mislead the readers of the mesh (kgctl, kilofed-controller).
		if err := backend.PublishLeads(ctx, o.hostname, ""); err != nil {
			log.Warn("lead of an earlier run not withdrawn", "err", err)
		}
	}
	if len(topo.ServiceCIDRs) == 0 {
		if topo.ServiceCIDRs, err = backend.ServiceCIDRs(ctx); err != nil {
			log.Warn("Service ranges unknown: external peers will not reach ClusterIPs", "err", err)
		} else {
			log.Info("Service ranges read from the cluster", "cidrs", topo.ServiceCIDRs)
		}
	}
	return backend, nil
}

// errNoInternalIP is returned by nodeAddresses for a node without any
// internal IP.
var errNoInternalIP = errors.New("the node has no InternalIP")

// nodeAddresses picks the node's underlay link and internal addresses from
// its Node object and the links that carry them (byAddress is
// link.ByAddress): the underlay is the link of the IPv4 InternalIP, else of
// the IPv6 one, so that IPv4-only, dual-stack and IPv6-only nodes start. The
// address that gives the underlay must be on this host; a second family's
// that is not is left out.
func nodeAddresses(self topology.Node, byAddress func(netip.Addr) (string, netip.Prefix, error), log *slog.Logger) (addresses, error) {
	var a addresses
	for _, ip := range []netip.Prefix{self.InternalIP, self.InternalIP6} {
		if !ip.IsValid() {
			continue
		}
		name, p, err := byAddress(ip.Addr())
		switch {
		case err != nil && a.underlay == "":
			return addresses{}, fmt.Errorf("underlay of InternalIP %s: %w", ip.Addr(), err)
		case err != nil:
			log.Warn("InternalIP not on this host: left out", "internal-ip", ip.Addr(), "err", err)
			continue
		case a.underlay == "":
			a.underlay = name
		}
		if p.Addr().Is4() {
			a.internal = p
		} else {
			a.internal6 = p
		}
	}
	if a.underlay == "" {
		return addresses{}, fmt.Errorf("%w: kg needs an IPv4 or IPv6 InternalIP in the Node's status (or --internal-cidr)", errNoInternalIP)
	}
	log.Info("underlay found", "link", a.underlay, "internal-ip", a.internal, "internal-ip6", a.internal6)
	return a, nil
}

// enableForwarding turns on IPv4 and IPv6 forwarding, warning where it cannot.
func enableForwarding(log *slog.Logger) {
	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
			log.Warn("cannot enable forwarding", "file", f, "err", err)
		}
	}
}

// setUpDataplane opens the WireGuard device, the router, the firewall and,
// when encapsulation is on, the in-location tunnel (whose link and next-hop
// mode it records in topo).
func setUpDataplane(ctx context.Context, o options, topo *topology.Options, addrs addresses, log *slog.Logger) (*dataplane, error) {
	dp := &dataplane{}
	var err error
	if dp.enc, err = setUpEncap(o, topo, addrs, log); err != nil {
		return nil, err
	}
	wgMTU, err := wireGuardMTU(o.mtu, addrs.underlay)
	if err != nil {
		return nil, err
	}
	if dp.dev, err = wireguard.Open(ctx, wireguard.OpenOptions{
		Name:     o.iface,
		Mode:     o.wireguard,
		MTU:      wgMTU,
		Existing: !o.createIface,
		Logger:   log.With("component", "wireguard"),
	}); err != nil {
		if !o.createIface {
			return nil, fmt.Errorf("--create-interface=false: %w; the WireGuard interface must exist already (made by a userspace WireGuard such as a wireguard-go sidecar), or drop the flag and let kg create it", err)
		}
		return nil, err
	}
	dp.health = newDeviceHealth(deviceStale, time.Now)
	go dp.health.watch(ctx, dp.dev, deviceCheckPeriod)
	if dp.router, err = route.NewRouter(route.RouterOptions{Logger: log.With("component", "route")}); err != nil {
		return nil, err
	}
	if dp.fw, err = firewall.New(firewall.Options{Logger: log.With("component", "firewall")}); err != nil {
		log.Warn("firewall rules disabled", "err", err)
		dp.fw = nil
	}
	return dp, nil
}

// setUpEncap creates the in-location tunnel, or returns nil when
// encapsulation is off.
func setUpEncap(o options, topo *topology.Options, addrs addresses, log *slog.Logger) (encap.Encapsulator, error) {
	if topo.Encapsulate == topology.EncapsulateNever {
		return nil, nil
	}
	var kind encap.Kind
	var err error
	if o.tunnel == "auto" {
		kind, err = encap.Detect()
	} else {
		kind, err = encap.ParseKind(o.tunnel)
	}
	if err != nil {
		return nil, fmt.Errorf("--tunnel=%s: %w", o.tunnel, err)
	}
	topo.TunnelNextHop = kind.NextHop
	enc, err := encap.New(encap.Options{Kind: kind, Local: addrs.internal.Addr(), Underlay: addrs.underlay, Logger: log.With("component", "encap")})
	if err != nil {
		return nil, fmt.Errorf("encapsulation (--encapsulate=%s): %w; use --encapsulate=never if nodes of a location route pod traffic natively", topo.Encapsulate, err)
	}
	topo.Links.Tunnel = enc.Link()
	log.Info("encapsulation ready", "kind", kind, "link", enc.Link())
	return enc, nil
}

// wireGuardMTU is the MTU --mtu asks for: a number, or auto (the underlay's
// MTU minus WireGuard's overhead).
func wireGuardMTU(flag, underlay string) (int, error) {
	if flag == "auto" {
		plan, err := mtu.Auto(underlay, 0)
		if err != nil {
			return 0, fmt.Errorf("--mtu auto: %w", err)
		}
		return plan.WireGuard, nil
	}
	n, err := strconv.Atoi(flag)
	if err != nil {
		return 0, fmt.Errorf("--mtu %q: use a number or auto", flag)
	}
	return n, nil
}

// announcedEndpoint is the endpoint --force-external-ip asks to publish
// (host or host:port), else the internal IP's with
// --prioritise-private-addresses, else "" to let the cluster's addresses
// decide.
func announcedEndpoint(o options, addrs addresses) string {
	port := strconv.Itoa(int(o.port))
	switch {
	case o.forceExternalIP != "":
		if _, _, err := net.SplitHostPort(o.forceExternalIP); err == nil {
			return o.forceExternalIP
		}
		return net.JoinHostPort(o.forceExternalIP, port)
	case o.prioritisePrivate && addrs.internal.IsValid():
		return net.JoinHostPort(addrs.internal.Addr().String(), port)
	case o.prioritisePrivate && addrs.internal6.IsValid():
		return net.JoinHostPort(addrs.internal6.Addr().String(), port)
	}
	return ""
}

// agentConfig assembles the agent's configuration.
func agentConfig(ctx context.Context, o options, topo topology.Options, key wgconf.SecretKey, backend *k8s.Client, addrs addresses, dp *dataplane, reg *prometheus.Registry, log *slog.Logger) agent.Config {
	cfg := agent.Config{
		Hostname:             o.hostname,
		Backend:              backend,
		Topology:             topo,
		PrivateKey:           key,
		KeyFile:              o.keyFile,
		ListenPort:           int(o.port),
		Endpoint:             announcedEndpoint(o, addrs),
		InternalIP:           addrs.internal,
		InternalIP6:          addrs.internal6,
		HeartbeatPeriod:      o.leaseDuration / 3,
		Forwarding:           func() error { return forwarding(addrs.underlay, o.iface, dp.health) },
		Device:               dp.dev,
		Links:                links{},
		Router:               dp.router,
		IPTablesForwardRules: o.iptablesForwardRules,
		ServeGraph:           o.serveGraph,
		ResyncPeriod:         o.resync,
		Metrics:              agent.NewMetrics(reg),
		Logger:               log.With("component", "agent"),
	}
	if k8s.Election(o.leaderElection) == k8s.ElectionLocation {
		cfg.Election = backend
		cfg.LeaseDuration = o.leaseDuration
		cfg.Probe = agent.HTTPProbe(listenPort(o.listen))
		cfg.TunnelProbe = agent.HTTPTunnelProbe(listenPort(o.listen), bindToDevice(o.iface))
	}
	if dp.fw != nil {
		cfg.Firewall = dp.fw
	}
	if dp.enc != nil {
		cfg.Encap = dp.enc
	}
	return cfg
}

// bindToDevice returns a dialer control that binds the socket to link, so
// that the tunnel check's probes leave through the WireGuard link as the
// location's traffic does (its routes send the WireGuard subnet there too).
func bindToDevice(link string) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = unix.BindToDevice(int(fd), link) }); cerr != nil {
			return cerr
		}
		if err != nil {
			return fmt.Errorf("bind the probe to %s: %w", link, err)
		}
		return nil
	}
}

// listenPort returns the port of --listen (1107 when it has none).
func listenPort(listen string) int {
	_, p, err := net.SplitHostPort(listen)
	if n, perr := strconv.Atoi(p); err == nil && perr == nil && n > 0 {
		return n
	}
	return 1107
}

// serveHTTP serves handler on listen in the background until Shutdown.
func serveHTTP(listen string, handler http.Handler, log *slog.Logger) *http.Server {
	srv := &http.Server{Addr: listen, Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server stopped", "listen", listen, "err", err)
		}
	}()
	return srv
}

// runAgent runs the agent's reconcile loop and heartbeat until ctx is done,
// then waits for the heartbeat to give the lease up, so that another node
// leads at once.
func runAgent(ctx context.Context, a *agent.Agent, log *slog.Logger) error {
	hb := make(chan error, 1)
	go func() { hb <- a.RunLeadership(ctx) }()
	runErr := a.Run(ctx)
	if err := <-hb; err != nil {
		log.Warn("release heartbeat", "err", err)
	}
	return runErr
}

// close removes what kg set up, as far as --clean-up and
// --clean-up-interface ask.
func (dp *dataplane) close(ctx context.Context, o options, log *slog.Logger) {
	if o.cleanUp {
		errs := []error{dp.router.Close(ctx)}
		if dp.fw != nil {
			errs = append(errs, dp.fw.Close(ctx))
		}
		if dp.enc != nil {
			errs = append(errs, dp.enc.Close(ctx))
		}
		if err := errors.Join(errs...); err != nil {
			log.Warn("clean up", "err", err)
		}
	}
	if err := dp.dev.Close(); err != nil {
		log.Warn("close WireGuard device", "err", err)
	}
	if o.cleanUpIface {
		if err := link.Delete(o.iface); err != nil && !errors.Is(err, link.ErrLinkNotFound) {
			log.Warn("delete interface", "err", err)
		}
	}
}

// How often deviceHealth reads the device, and how long without an answer
// makes it dead: a hung device loses the lead within about deviceStale.
const (
	deviceCheckPeriod = 500 * time.Millisecond
	deviceStale       = 2 * time.Second
)

// forwarding is the node's own data-plane check before each heartbeat and
// what it answers the standbys' probes: its underlay link is up with
// carrier, its WireGuard link is up and its device answered lately (dev),
// and IPv4 forwarding is on.
func forwarding(underlay, wgLink string, dev *deviceHealth) error {
	up, err := link.OperUp(underlay)
	if err != nil {
		return err
	}
	wgUp, wgErr := link.OperUp(wgLink)
	ipForward, fwErr := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	var showErr error
	if up {
		showErr = dev.err()
	}
	return forwardingState{underlay: underlay, underlayUp: up, wgLink: wgLink, wgUp: wgUp, wgErr: wgErr,
		ipForward: string(ipForward), ipForwardErr: fwErr, showErr: showErr}.err()
}

// forwardingState is what forwarding found.
type forwardingState struct {
	underlay     string
	underlayUp   bool
	wgLink       string
	wgUp         bool
	wgErr        error
	ipForward    string
	ipForwardErr error
	showErr      error
}

// err says why a node in state s cannot forward, nil when it can: its
// underlay link is up, its WireGuard link is up and its device answers,
// and IPv4 forwarding is on (a leader with kilo0 down or forwarding off
// is Ready but drops its location's traffic, Kilo's issue 489).
func (s forwardingState) err() error {
	switch {
	case !s.underlayUp:
		return fmt.Errorf("underlay link %s is down", s.underlay)
	case s.wgErr != nil:
		return fmt.Errorf("WireGuard link %s: %w", s.wgLink, s.wgErr)
	case !s.wgUp:
		return fmt.Errorf("WireGuard link %s is down", s.wgLink)
	case s.showErr != nil:
		return fmt.Errorf("WireGuard device does not answer: %w", s.showErr)
	case s.ipForwardErr == nil && strings.TrimSpace(s.ipForward) == "0":
		return errors.New("IPv4 forwarding is off (net.ipv4.ip_forward = 0)")
	}
	return nil
}

func restConfig(master, kubeconfig string) (*rest.Config, error) {
	if master == "" && kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags(master, kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %q, --master %q: %w", kubeconfig, master, err)
	}
	return rc, nil
}

// waitForNode waits until this node's Node object exists and, unless
// anyIP (--internal-cidr takes the internal IP from the host), has an
// internal IP.
func waitForNode(ctx context.Context, b *k8s.Client, name string, anyIP bool, log *slog.Logger) (topology.Node, error) {
	warned := false
	for {
		nodes, _, _ := b.Snapshot()
		for _, n := range nodes {
			if n.Name == name && (anyIP || n.InternalIP.IsValid() || n.InternalIP6.IsValid()) {
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
