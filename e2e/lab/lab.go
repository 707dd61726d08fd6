package lab

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalidSpec is returned when a Spec is inconsistent.
	ErrInvalidSpec = errors.New("invalid lab spec")
	// ErrNotRoot is returned when the lab runs without root privileges.
	ErrNotRoot = errors.New("the lab needs root (network namespaces, links, iptables)")
	// ErrBinaryMissing is returned when a control-plane binary is absent.
	ErrBinaryMissing = errors.New("lab binary missing")
	// ErrLabRunning is returned by Sweep when another lab is alive.
	ErrLabRunning = errors.New("another lab is running on this machine")
	// ErrClosed is returned when a closed lab is used.
	ErrClosed = errors.New("lab closed")
	// ErrNotFound is returned when a cluster, node or pod does not exist.
	ErrNotFound = errors.New("not found")
)

// Lab is a running lab: clusters with their control planes, and the network
// (WAN, routers, nodes) that joins them. Create it with Start or StartT and
// tear it down with Close.
type Lab struct {
	// Spec is the lab's spec with every default filled in.
	Spec Spec
	// Dir is the lab's temp dir: certificates, kubeconfigs, etcd data,
	// component logs (logs/*.log). Close removes it.
	Dir string

	slot     int
	bins     string
	labBin   string
	logger   *slog.Logger
	clusters []*Cluster
	wan      *Namespace

	mu      sync.Mutex
	procs   []*Process
	undo    []undoStep
	closed  bool
	closeMu sync.Mutex // serializes Close

	kubeletCancel context.CancelFunc
	kubeletDone   sync.WaitGroup
	podNetns      []string // namespaces of the lab's pods, listed by Close
	netns         []string // namespaces the lab created
	hosts         []*Host  // AddHost's hosts, under mu
	hostSeq       int      // hosts AddHost tried to build, under closeMu
	nextPort      int      // next offset in the slot's port block, under mu
}

// undoStep is one thing Close undoes, newest first.
type undoStep struct {
	what string
	fn   func() error
}

// Cluster is one cluster of a lab: a real etcd, kube-apiserver and
// kube-controller-manager, and its nodes.
type Cluster struct {
	// Name is the cluster's name.
	Name string
	// Index is the cluster's 1-based position in Spec.Clusters.
	Index int
	// Kubeconfig is the path of the admin kubeconfig (user
	// kubernetes-admin in group system:masters).
	Kubeconfig string
	// APIServer is the API server's URL, https://100.64.<Index>.1:6443 for
	// the first lab on the machine. Nodes reach it over their mgmt0 link.
	APIServer string
	// APIServerIP is the API server's address on the management bridge.
	APIServerIP netip.Addr
	// PodCIDR, ServiceCIDR and WireGuardSubnet are the cluster's ranges
	// (see ClusterSpec).
	PodCIDR, ServiceCIDR, WireGuardSubnet netip.Prefix
	// PodCIDR6 and ServiceCIDR6 are the IPv6 ranges of a DualStack
	// cluster; invalid otherwise.
	PodCIDR6, ServiceCIDR6 netip.Prefix
	// ClusterDNS and ClusterDomain are what pods get in resolv.conf.
	ClusterDNS    netip.Addr
	ClusterDomain string

	lab        *Lab
	spec       ClusterSpec
	locations  []*Location
	nodes      []*Node
	pki        *clusterPKI
	restConfig *rest.Config
	client     kubernetes.Interface
	etcdURL    string
	cp         controlPlane
	dns        *clusterDNS // nil without Spec.CoreDNS
}

// Location is one location of a cluster: a LAN bridge in a router
// namespace, joined to the WAN by the router's public address.
type Location struct {
	// Name is the location's name (also the nodes' region label).
	Name string
	// Cluster is the name of the location's cluster.
	Cluster string
	// LAN is the location's subnet.
	LAN netip.Prefix
	// RouterIP is the router's address on the LAN (the nodes' gateway).
	RouterIP netip.Addr
	// LAN6 and RouterIP6 are the IPv6 subnet and router address of a
	// DualStack cluster's location; invalid otherwise.
	LAN6      netip.Prefix
	RouterIP6 netip.Addr
	// PublicIP is the router's public address.
	PublicIP netip.Addr
	// NAT reports whether the LAN hides behind PublicIP (masquerade).
	NAT bool
	// Router is the router's network namespace.
	Router *Namespace

	index int // 1-based in the whole lab
	nodes []*Node
}

// Node is one node: a network namespace on its location's LAN with a
// management link to its cluster's API server, where the kubelet stand-in,
// kube-proxy and whatever Start launches run.
type Node struct {
	// Name is the Node's name.
	Name string
	// Cluster is the name of the node's cluster.
	Cluster string
	// Location is the name of the node's location.
	Location string
	// Netns is the name of the node's network namespace.
	Netns string
	// LANIP is the node's address on its LAN (its InternalIP).
	LANIP netip.Addr
	// LANIP6 is the node's IPv6 address on its LAN (its second
	// InternalIP) in a DualStack cluster; invalid otherwise.
	LANIP6 netip.Addr
	// PublicIP is the node's 1:1 public address (its ExternalIP); invalid
	// in a NAT location.
	PublicIP netip.Addr
	// MgmtIP is the node's address on the management network.
	MgmtIP netip.Addr
	// Labels and Annotations are what the node registers with.
	Labels, Annotations map[string]string

	lab      *Lab
	cluster  *Cluster
	location *Location
	ns       *Namespace
	index    int // 0-based in its cluster
	global   int // 0-based in the whole lab

	kubeProxy *Process // nil without Spec.KubeProxy

	mu         sync.Mutex
	podCIDRs   []netip.Prefix
	kubeletErr error // set when the kubelet stand-in returned
}

// Namespace is a network namespace of the lab (a node's, a router's, the
// WAN's or a pod's) in which commands can run.
type Namespace struct {
	// Name is the namespace's name (as `ip netns` lists it).
	Name string

	lab *Lab
}

// Clusters returns the lab's clusters in spec order.
func (l *Lab) Clusters() []*Cluster { return l.clusters }

// Cluster returns the cluster with the given name, or nil.
func (l *Lab) Cluster(name string) *Cluster {
	for _, c := range l.clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// WAN returns the WAN namespace, the lab's Internet: run tcpdump there to see
// what crosses between locations.
func (l *Lab) WAN() *Namespace { return l.wan }

// LabBinary returns the path of the kilofed-lab binary whose "workload"
// subcommand runs pods' workloads; run "<LabBinary> workload get URL" in a
// namespace for an HTTP client (see PodGet).
func (l *Lab) LabBinary() string { return l.labBin }

// Bins returns the folder of the control-plane binaries (etcd, kubectl...).
func (l *Lab) Bins() string { return l.bins }

// RESTConfig returns a new admin rest.Config for the cluster.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Client returns an admin clientset for the cluster.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Nodes returns the cluster's nodes in spec order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node with the given name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Locations returns the cluster's locations in spec order.
func (c *Cluster) Locations() []*Location { return c.locations }

// Location returns the location with the given name, or nil.
func (c *Cluster) Location(name string) *Location {
	for _, loc := range c.locations {
		if loc.Name == name {
			return loc
		}
	}
	return nil
}

// Nodes returns the location's nodes in spec order.
func (loc *Location) Nodes() []*Node { return loc.nodes }

// Namespace returns the node's network namespace.
func (n *Node) Namespace() *Namespace { return n.ns }

// PodCIDRs returns the podCIDRs that kube-controller-manager allocated to the
// node (known once Start returned).
func (n *Node) PodCIDRs() []netip.Prefix {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]netip.Prefix(nil), n.podCIDRs...)
}

// Exec runs argv in the node's namespace and returns its standard output.
func (n *Node) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	return n.ns.Exec(ctx, argv...)
}

// Start launches a long-running process in the node's namespace (its own
// process group, output in Dir/logs/<cluster>-<node>-<name>.log). Close stops
// it if it still runs.
func (n *Node) Start(name string, argv ...string) (*Process, error) {
	return n.ns.start(n.Cluster+"-"+n.Name+"-"+name, argv)
}

// Start launches a long-running process in the namespace (its own process
// group, output in Dir/logs/<namespace>-<name>.log). Close stops it if it
// still runs.
func (ns *Namespace) Start(name string, argv ...string) (*Process, error) {
	return ns.start(ns.Name+"-"+name, argv)
}
