// Command kg is kilofed's node agent, a successor of Kilo's kg: it builds the
// WireGuard mesh of one cluster from Node annotations and Peer objects. Run
// one per node (a DaemonSet in production, a process per node namespace in
// the lab). Flags keep Kilo's names.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// options are kg's flags.
type options struct {
	kubeconfig      string
	hostname        string
	iface           string
	port            uint
	subnet          string
	granularity     string
	encapsulate     string
	tunnel          string
	topologyLabel   string
	mtu             string
	resync          time.Duration
	logLevel        string
	listen          string
	wireguard       wireguard.Mode
	keyFile         string
	forceExternalIP string
	serviceCIDRs    string
	local           bool
	leaseDuration   time.Duration
	meshKeepalive   time.Duration
	leaseNamespace  string
	cleanUp         bool
	cleanUpIface    bool
}

func parseFlags(args []string) (options, error) {
	host, _ := os.Hostname()
	o := options{wireguard: wireguard.ModeAuto}
	fs := flag.NewFlagSet("kg", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty uses the in-cluster service account")
	fs.StringVar(&o.hostname, "hostname", host, "name of this node's Node object")
	fs.StringVar(&o.iface, "interface", topology.DefaultWireGuardLink, "name of the WireGuard interface")
	fs.UintVar(&o.port, "port", uint(topology.DefaultPort), "WireGuard UDP listen port")
	fs.StringVar(&o.subnet, "subnet", topology.DefaultSubnet.String(), "CIDR from which WireGuard IPs are allocated to locations")
	fs.StringVar(&o.granularity, "mesh-granularity", string(topology.LocationGranularity), "location, full or cross")
	fs.StringVar(&o.encapsulate, "encapsulate", string(topology.EncapsulateAlways), "encapsulate traffic inside a location: never, crosssubnet or always")
	fs.StringVar(&o.tunnel, "tunnel", "auto", "encapsulation inside a location: auto (IPIP if the kernel has it, else VXLAN), ipip or vxlan")
	fs.StringVar(&o.topologyLabel, "topology-label", k8s.DefaultTopologyLabel, "node label read for the location when kilo.squat.ai/location is absent")
	fs.StringVar(&o.mtu, "mtu", "auto", "MTU of the WireGuard interface, or auto (underlay MTU minus WireGuard overhead)")
	fs.DurationVar(&o.resync, "resync-period", 30*time.Second, "re-apply the whole configuration this often, even without changes")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.listen, "listen", ":1107", "address of the HTTP server (/metrics, /health, /graph)")
	fs.Var(&o.wireguard, "wireguard", "WireGuard implementation: auto, kernel or userspace (embedded wireguard-go)")
	fs.StringVar(&o.keyFile, "key-file", "/var/lib/kilo/key", "file holding this node's WireGuard private key (created 0600 if absent; delete it and restart to rotate)")
	fs.StringVar(&o.forceExternalIP, "force-external-ip", "", "announce this IP (or host:port) as the node's endpoint instead of its ExternalIP")
	fs.StringVar(&o.serviceCIDRs, "service-cidr", "", "comma-separated Service CIDRs of the cluster, routed to external peers (default: read from the cluster's ServiceCIDR objects)")
	fs.DurationVar(&o.meshKeepalive, "mesh-keepalive", topology.DefaultMeshKeepalive, "least persistent keepalive of the tunnels between locations: keeps them and NAT mappings up, and lets a new gateway's handshake go out at once; 0 leaves it to the nodes' kilo.squat.ai/persistent-keepalive")
	fs.BoolVar(&o.local, "local", true, "manage the routes between nodes of one location (false leaves them to the CNI)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 3*time.Second, "a node whose heartbeat lease is older than this loses leadership")
	fs.StringVar(&o.leaseNamespace, "lease-namespace", k8s.DefaultLeaseNamespace, "namespace of the heartbeat leases")
	fs.BoolVar(&o.cleanUp, "clean-up", true, "remove routes, rules and firewall chains on exit")
	fs.BoolVar(&o.cleanUpIface, "clean-up-interface", false, "also delete the WireGuard interface on exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.hostname == "" {
		return o, fmt.Errorf("--hostname is empty and the host name is unknown")
	}
	return o, nil
}

// topologyOptions turns the flags into the options every agent computes with.
func (o options) topologyOptions() (topology.Options, error) {
	subnet, err := netip.ParsePrefix(o.subnet)
	if err != nil {
		return topology.Options{}, fmt.Errorf("--subnet %q: %w", o.subnet, err)
	}
	t := topology.Options{
		Subnet:        subnet,
		Port:          uint16(o.port),
		Links:         topology.Links{WireGuard: o.iface},
		NoLocalRoutes: !o.local,
		MeshKeepalive: o.meshKeepalive,
	}
	if t.Granularity, err = topology.ParseGranularity(o.granularity); err != nil {
		return t, fmt.Errorf("--mesh-granularity %w", err)
	}
	if t.Encapsulate, err = topology.ParseEncapsulate(o.encapsulate); err != nil {
		return t, fmt.Errorf("--encapsulate %w", err)
	}
	for _, s := range strings.Split(o.serviceCIDRs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return t, fmt.Errorf("--service-cidr %q: %w", s, err)
		}
		t.ServiceCIDRs = append(t.ServiceCIDRs, p.Masked())
	}
	return t, nil
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			return
		}
		fmt.Fprintln(os.Stderr, "kg:", err)
		os.Exit(2)
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kg:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("kg stopped", "err", err)
		os.Exit(1)
	}
}
