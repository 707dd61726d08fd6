package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// defaultCNIPath is the CNI configuration Kilo's manifests install.
const defaultCNIPath = "/etc/cni/net.d/10-kilo.conflist"

// defaultLeaderElection is --leader-election's default (a variable so that
// a build can try the other mode: -ldflags -X main.defaultLeaderElection=node-leases).
var defaultLeaderElection = string(k8s.ElectionLocation)

// options are kg's flags.
type options struct {
	kubeconfig           string
	master               string
	backend              string
	hostname             string
	iface                string
	createIface          bool
	port                 uint
	subnet               string
	granularity          string
	encapsulate          string
	compatibility        string
	tunnel               string
	topologyLabel        string
	mtu                  string
	resync               time.Duration
	logLevel             string
	listen               string
	serveGraph           bool
	profiling            bool
	wireguard            wireguard.Mode
	keyFile              string
	forceExternalIP      string
	prioritisePrivate    bool
	serviceCIDRs         listFlag
	internalCIDRs        listFlag
	iptablesForwardRules bool
	cni                  bool
	cniPath              string
	local                bool
	leaseDuration        time.Duration
	meshKeepalive        time.Duration
	leaseNamespace       string
	leaderElection       string
	cleanUp              bool
	cleanUpIface         bool
	version              bool

	// notes are warnings about flags that kilofed accepts for Kilo's sake
	// but that do not apply to it, logged once at start.
	notes []string
}

// listFlag is a flag that may be repeated and takes comma-separated values,
// as Kilo's string-slice flags do.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// prefixes parses every value of l as a CIDR, naming flag in errors.
func (l listFlag) prefixes(flag string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range l {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: %w", flag, s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// errVersion is returned by parseFlags for --version and "kg version".
var errVersion = errors.New("version requested")

func parseFlags(args []string) (options, error) {
	host, _ := os.Hostname()
	o := options{wireguard: wireguard.ModeAuto}
	fs := flag.NewFlagSet("kg", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty uses the in-cluster service account")
	fs.StringVar(&o.master, "master", "", "address of the Kubernetes API server (overrides the kubeconfig's)")
	fs.StringVar(&o.backend, "backend", "kubernetes", "where the mesh is read from: kubernetes (the only backend, as in Kilo)")
	fs.StringVar(&o.hostname, "hostname", host, "name of this node's Node object")
	fs.StringVar(&o.iface, "interface", topology.DefaultWireGuardLink, "name of the WireGuard interface")
	fs.BoolVar(&o.createIface, "create-interface", true, "create the WireGuard interface; false adopts one that a userspace WireGuard (such as a wireguard-go sidecar) created")
	fs.UintVar(&o.port, "port", uint(topology.DefaultPort), "WireGuard UDP listen port")
	fs.StringVar(&o.subnet, "subnet", topology.DefaultSubnet.String(), "CIDR from which WireGuard IPs are allocated to locations")
	fs.StringVar(&o.granularity, "mesh-granularity", string(topology.LocationGranularity), "location, full or cross")
	fs.StringVar(&o.encapsulate, "encapsulate", string(topology.EncapsulateAlways), "encapsulate traffic inside a location: never, crosssubnet or always")
	fs.StringVar(&o.compatibility, "compatibility", "", "Kilo's CNI compatibility mode: flannel or cilium (accepted; kilofed runs its own tunnel inside a location next to the CNI's)")
	fs.StringVar(&o.tunnel, "tunnel", "auto", "encapsulation inside a location: auto (IPIP if the kernel has it, else VXLAN), ipip or vxlan")
	fs.StringVar(&o.topologyLabel, "topology-label", k8s.DefaultTopologyLabel, "node label read for the location when kilo.squat.ai/location is absent")
	fs.StringVar(&o.mtu, "mtu", "auto", "MTU of the WireGuard interface, or auto (underlay MTU minus WireGuard overhead)")
	fs.DurationVar(&o.resync, "resync-period", 30*time.Second, "re-apply the whole configuration this often, even without changes")
	fs.StringVar(&o.logLevel, "log-level", "info", "all, debug, info, warn, error or none")
	fs.StringVar(&o.listen, "listen", ":1107", "address of the HTTP server (/metrics, /health; /graph with --serve-graph); bind it to a private address, it has no authentication")
	fs.BoolVar(&o.serveGraph, "serve-graph", false, "also serve the mesh's topology (node names, addresses, keys' owners) on /graph")
	fs.BoolVar(&o.profiling, "profiling", false, "also serve Go's runtime profiles (CPU, heap, goroutines) under /debug/pprof/, as kube-apiserver's --profiling does")
	fs.Var(&o.wireguard, "wireguard", "WireGuard implementation: auto, kernel or userspace (embedded wireguard-go)")
	fs.StringVar(&o.keyFile, "key-file", "/var/lib/kilo/key", "file holding this node's WireGuard private key (created 0600 if absent; delete it and restart to rotate)")
	fs.StringVar(&o.forceExternalIP, "force-external-ip", "", "announce this IP (or host:port) as the node's endpoint instead of its ExternalIP")
	fs.BoolVar(&o.prioritisePrivate, "prioritise-private-addresses", false, "announce the node's internal IP as its endpoint, even when it has an ExternalIP")
	fs.Var(&o.serviceCIDRs, "service-cidr", "Service CIDR of the cluster, routed to external peers; repeat it or separate with commas (default: read from the cluster's ServiceCIDR objects)")
	fs.Var(&o.internalCIDRs, "internal-cidr", "take the node's internal IP from the local addresses in this CIDR instead of the Node's InternalIP; repeat it or separate with commas")
	fs.BoolVar(&o.iptablesForwardRules, "iptables-forward-rules", false, "accept forwarded mesh traffic in the FORWARD chain ahead of every other rule (bypasses a deny-all FORWARD policy and NetworkPolicy enforcers that use FORWARD)")
	fs.BoolVar(&o.cni, "cni", true, "write the node's pod CIDR into the CNI configuration at --cni-path, if that file exists (Kilo's bridge CNI set-up)")
	fs.StringVar(&o.cniPath, "cni-path", defaultCNIPath, "CNI configuration list that --cni manages")
	fs.DurationVar(&o.meshKeepalive, "mesh-keepalive", topology.DefaultMeshKeepalive, "least persistent keepalive of the tunnels between locations: keeps them and NAT mappings up, and lets a new gateway's handshake go out at once; 0 leaves it to the nodes' kilo.squat.ai/persistent-keepalive")
	fs.BoolVar(&o.local, "local", true, "manage the routes between nodes of one location (false leaves them to the CNI)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 3*time.Second, "a leader whose Lease (its location's election Lease, or with --leader-election=node-leases its heartbeat Lease) this node saw not renewed for this long loses the lead (with location, only where LAN probes cannot tell); renewed every third of it")
	fs.StringVar(&o.leaseNamespace, "lease-namespace", k8s.DefaultLeaseNamespace, "namespace of the location election Leases (and of the heartbeat Leases with --leader-election=node-leases)")
	fs.StringVar(&o.leaderElection, "leader-election", defaultLeaderElection, "how each location's leader is chosen: location (one election Lease per location, renewed by its leader every third of --lease-duration; its best standbys probe the leader's /forwarding on the --listen port over the LAN every 200 ms and take over after 3 failures; the leader probes the --listen port of up to 3 other locations' leaders through the WireGuard interface every 200 ms and gives the lead up when none answered for 3 rounds) or node-leases (every node renews a heartbeat Lease and watches every other one)")
	fs.BoolVar(&o.cleanUp, "clean-up", true, "remove routes, rules and firewall chains on exit")
	fs.BoolVar(&o.cleanUpIface, "clean-up-interface", false, "also delete the WireGuard interface on exit")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if len(args) > 0 && args[0] == "version" {
		return o, errVersion
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.version {
		return o, errVersion
	}
	if e := k8s.Election(o.leaderElection); e != k8s.ElectionLocation && e != k8s.ElectionNodeLeases {
		return o, fmt.Errorf("--leader-election %q: want %s or %s", o.leaderElection, k8s.ElectionLocation, k8s.ElectionNodeLeases)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: kg takes flags only (see kg --help)", fs.Arg(0))
	}
	return o, o.check()
}

// check refuses flag values that cannot work and notes the Kilo flags that
// do not apply to kilofed.
func (o *options) check() error {
	if o.hostname == "" {
		return fmt.Errorf("--hostname is empty and the host name is unknown")
	}
	if o.backend != "kubernetes" {
		return fmt.Errorf("--backend %q: the only backend is kubernetes", o.backend)
	}
	if o.port < 1 || o.port > 65535 {
		return fmt.Errorf("--port %d: use a UDP port from 1 to 65535", o.port)
	}
	if _, err := o.internalCIDRs.prefixes("internal-cidr"); err != nil {
		return err
	}
	switch o.compatibility {
	case "":
	case "flannel", "cilium":
		o.notes = append(o.notes, fmt.Sprintf("--compatibility=%s has no effect: kilofed does not reuse the CNI's tunnel; inside a location it runs its own (--encapsulate, --tunnel) next to %s's", o.compatibility, o.compatibility))
	default:
		return fmt.Errorf("--compatibility %q: use flannel or cilium, or leave it empty", o.compatibility)
	}
	return nil
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
	if t.ServiceCIDRs, err = o.serviceCIDRs.prefixes("service-cidr"); err != nil {
		return t, err
	}
	return t, nil
}
