// Command kilofed-controller runs, once per cluster, the federation
// controller: it announces this cluster's gateways (computed with the mesh's
// own topology) and mirrors every joined cluster's gateways as local Peers.
// It also runs servicesync (--servicesync): Multi-Cluster Services across
// the joined clusters.
// Its topology flags must match the agents' (kg) flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kilofed/kilofed/federation/controller"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/servicesync"
	"github.com/kilofed/kilofed/servicesync/merge"
)

type options struct {
	kubeconfig     string
	subnet         string
	granularity    string
	port           uint
	topologyLabel  string
	leaseNamespace string
	leaseDuration  time.Duration
	listen         string
	logLevel       string
	poll, resync   time.Duration
	podCIDRs       string
	serviceCIDRs   string
	servicesync    bool
	withdrawAfter  time.Duration
	dnsListen      string
	dnsUpstreams   string
	elect          election
	qps            float64
	burst          int
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("kilofed-controller", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty uses the in-cluster service account")
	fs.StringVar(&o.subnet, "subnet", topology.DefaultSubnet.String(), "the agents' --subnet")
	fs.StringVar(&o.granularity, "mesh-granularity", string(topology.LocationGranularity), "the agents' --mesh-granularity")
	fs.UintVar(&o.port, "port", uint(topology.DefaultPort), "the agents' WireGuard --port")
	fs.StringVar(&o.topologyLabel, "topology-label", k8s.DefaultTopologyLabel, "the agents' --topology-label")
	fs.StringVar(&o.leaseNamespace, "lease-namespace", k8s.DefaultLeaseNamespace, "the agents' --lease-namespace")
	fs.DurationVar(&o.leaseDuration, "lease-duration", k8s.DefaultLeaseDuration, "the agents' --lease-duration")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:1108", "address of /metrics and /health")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&o.poll, "poll", time.Second, "how often each joined cluster's Announcement is read")
	fs.DurationVar(&o.resync, "resync-period", 30*time.Second, "re-announce and re-check everything this often")
	fs.StringVar(&o.podCIDRs, "pod-cidr", "", "comma-separated pod ranges of this cluster, where its Nodes carry no podCIDRs")
	fs.StringVar(&o.serviceCIDRs, "service-cidr", "", "comma-separated Service ranges (default: the ServiceCIDR objects)")
	fs.BoolVar(&o.servicesync, "servicesync", true, "run servicesync: publish this cluster's ServiceExports and import the joined clusters' (needs the MCS CRDs)")
	fs.DurationVar(&o.withdrawAfter, "withdraw-after", merge.WithdrawAfter, "withdraw a joined cluster's endpoints once its API does not answer and its tunnels had no handshake for this long")
	fs.Float64Var(&o.qps, "kube-api-qps", servicesync.LocalQPS, "requests per second to this cluster's API server (client-go's default, 5, made 1000 exported services take over 20 min to converge)")
	fs.IntVar(&o.burst, "kube-api-burst", servicesync.LocalBurst, "burst of requests to this cluster's API server above --kube-api-qps")
	dnsFlags(fs, &o)
	electionFlags(fs, &o.elect)
	return o, fs.Parse(args)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "kilofed-controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// controller-runtime's own logs (servicesync's informers) go to the same log.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	topo, ranges, err := o.meshOptions()
	if err != nil {
		return err
	}
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	local, err := kube.New("local", cfg)
	if err != nil {
		return err
	}
	mesh, err := k8s.New(ctx, k8s.Config{RESTConfig: cfg, TopologyLabel: o.topologyLabel,
		LeaseNamespace: o.leaseNamespace, LeaseDuration: o.leaseDuration, Logger: log.With("component", "mesh")})
	if err != nil {
		return fmt.Errorf("read the mesh: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.dnsListen != "" {
		if err := o.startDNS(ctx, cfg, reg, log); err != nil {
			return err
		}
	}
	if err := serve(ctx, o.listen, reg, log); err != nil {
		return err
	}
	o.elect.leading = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kilofed_controller_leading",
		Help: "1 while this replica holds the kilofed-controller Lease and runs federation and servicesync (always 1 without --leader-elect)."})
	reg.MustRegister(o.elect.leading)
	return o.elect.run(ctx, cfg, log, func(ctx context.Context) error {
		ctl, err := newController(ctx, controller.Config{
			Local: local, Mesh: mesh, Topology: topo, Ranges: ranges,
			Poll: o.poll, Resync: o.resync, Metrics: controller.NewMetrics(reg), Logger: log,
		}, o.poll, log)
		if err != nil {
			return err
		}
		log.Info("kilofed-controller started", "cluster", ctl.ID(), "listen", o.listen)
		if o.servicesync {
			startServicesync(ctx, cfg, ctl.ID(), ranges, o, log)
		}
		return ctl.Run(ctx)
	})
}

// newController returns the controller once the cluster has an ID: the
// controller is deployed before anyone runs kilofed join, which sets the ID,
// so until then it waits (checking every poll) instead of exiting.
func newController(ctx context.Context, cfg controller.Config, poll time.Duration, log *slog.Logger) (*controller.Controller, error) {
	for logged := false; ; {
		ctl, err := controller.New(ctx, cfg)
		if !errors.Is(err, discover.ErrNoClusterID) {
			return ctl, err
		}
		if !logged {
			log.Info("this cluster has no ID yet: waiting for kilofed join to set it", "property", "cluster.clusterset.k8s.io")
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// startServicesync runs servicesync beside the federation controller
// until ctx ends. Its informers need the MCS CRDs and the rights to list
// and watch what it reads: until they sync, it says why every
// servicesyncRetry and tries again, while federation runs on.
func startServicesync(ctx context.Context, cfg *rest.Config, id string, r discover.Options, o options, log *slog.Logger) {
	go func() {
		for {
			c, err := servicesync.NewLocalClient(ctx, cfg)
			if err == nil {
				s, err := servicesync.New(servicesync.Config{Local: c, ClusterID: id, Ranges: r, Poll: o.poll, Resync: o.resync, WithdrawAfter: o.withdrawAfter, Logger: log})
				if err != nil {
					log.Error("servicesync not started", "err", err)
					return
				}
				_ = s.Run(ctx)
				return
			}
			log.Warn("servicesync not started yet: federation runs without it; retrying", "err", err, "retry_in", servicesyncRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(servicesyncRetry):
			}
		}
	}()
}

// servicesyncRetry is how often servicesync tries again to start its
// informers (a missing CRD, missing rights).
const servicesyncRetry = 30 * time.Second

func (o options) meshOptions() (topology.Options, discover.Options, error) {
	var r discover.Options
	subnet, err := netip.ParsePrefix(o.subnet)
	if err != nil {
		return topology.Options{}, r, fmt.Errorf("--subnet %q: %w", o.subnet, err)
	}
	t := topology.Options{Subnet: subnet, Port: uint16(o.port)}
	if t.Granularity, err = topology.ParseGranularity(o.granularity); err != nil {
		return t, r, fmt.Errorf("--mesh-granularity %w", err)
	}
	if r.PodCIDRs, err = prefixList("--pod-cidr", o.podCIDRs); err != nil {
		return t, r, err
	}
	if r.ServiceCIDRs, err = prefixList("--service-cidr", o.serviceCIDRs); err != nil {
		return t, r, err
	}
	t.ServiceCIDRs = r.ServiceCIDRs
	return t, r, nil
}

func prefixList(flag, s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", flag, f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// restConfig is the config of this cluster's API server (in-cluster or
// --kubeconfig) with the --kube-api-qps and --kube-api-burst rate limit.
func (o options) restConfig() (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if o.kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	return cfg, nil
}

// serve starts /metrics and /health on addr.
func serve(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	return nil
}
