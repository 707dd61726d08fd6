package lab

import (
	"net/netip"
)

// Spec describes a lab: its clusters, their locations and nodes. Zero fields
// get defaults (see ClusterSpec, LocationSpec and NodeSpec); Start fills them
// in and the filled-in Spec is available as Lab.Spec.
type Spec struct {
	// Name is the run id: 1 to 6 characters [a-z0-9] that appear in every
	// name the lab gives to a namespace, link or temp dir (kfl-<Name>-...).
	// Empty means a random id, so that two labs on one machine never clash.
	Name string
	// Clusters are the clusters to start, each with its own etcd, API
	// server and controller manager. At least one.
	Clusters []ClusterSpec
	// PodRoutes makes the lab install host-gw routes (flannel host-gw
	// style) between the nodes of one location, so that their pods reach
	// each other without any mesh. Leave it false when the kg agent does the
	// routing.
	PodRoutes bool
	// KubeProxy runs the real kube-proxy (iptables mode) in every node's
	// namespace, so that Service ClusterIPs work.
	KubeProxy bool
	// CoreDNS runs the real CoreDNS as each cluster's DNS, in the namespace
	// of the cluster's first node, behind the kube-dns Service whose
	// ClusterIP is ClusterSpec.ClusterDNS (pods' nameserver). It needs
	// KubeProxy. See Cluster.SetClusterSetDNS for clusterset.local.
	CoreDNS bool
}

// ClusterSpec describes one cluster. Its index i (1-based, position in
// Spec.Clusters) picks the defaults: pod CIDR 10.(9+i).0.0/16, service CIDR
// 10.(19+i).0.0/16, WireGuard subnet 10.(4+i).0.0/16, cluster DNS at .10 of
// the service CIDR. So cluster 1 has the seed's WireGuard subnet 10.5.0.0/16
// and cluster 2 the seed's DR CIDRs 10.11.0.0/16 and 10.21.0.0/16.
type ClusterSpec struct {
	// Name is the cluster's name (a DNS label); default "c<i>".
	Name string
	// PodCIDR is the cluster CIDR from which kube-controller-manager hands
	// each node a /NodeCIDRMaskSize podCIDR.
	PodCIDR netip.Prefix
	// ServiceCIDR is the service-cluster-ip-range of the API server.
	ServiceCIDR netip.Prefix
	// WireGuardSubnet is not used by the lab: it is the --subnet to hand to
	// the mesh agents, chosen not to overlap anything else in the lab.
	WireGuardSubnet netip.Prefix
	// NodeCIDRMaskSize is the prefix length of each node's podCIDR
	// (default 24).
	NodeCIDRMaskSize int
	// ClusterDNS is the DNS address written into pods' resolv.conf
	// (default: .10 of ServiceCIDR): the kube-dns Service's ClusterIP when
	// Spec.CoreDNS is set; without it no DNS server answers there.
	ClusterDNS netip.Addr
	// ClusterDomain is the cluster's DNS domain (default cluster.local).
	ClusterDomain string
	// DualStack gives the cluster IPv6 besides IPv4 (off: IPv4 only): an
	// IPv6 pod CIDR and service CIDR, an IPv6 subnet on each of its LANs
	// routed by the WAN, an IPv6 InternalIP on each node and an IPv6 address
	// in each pod. IPv6 comes only from the documentation range
	// 2001:db8::/32 (see IPv6Range).
	DualStack bool
	// PodCIDR6 is the IPv6 cluster CIDR of a DualStack cluster, from which
	// kube-controller-manager hands each node a /NodeCIDRMaskSize6;
	// default 2001:db8:<9+i>::/56 (the digits of PodCIDR's default second
	// byte: 2001:db8:10::/56 for cluster 1).
	PodCIDR6 netip.Prefix
	// ServiceCIDR6 is the IPv6 service range of a DualStack cluster;
	// default 2001:db8:<19+i>::/112.
	ServiceCIDR6 netip.Prefix
	// NodeCIDRMaskSize6 is the prefix length of each node's IPv6 podCIDR
	// (default 64).
	NodeCIDRMaskSize6 int
	// Locations are the cluster's locations; at least one.
	Locations []LocationSpec
}

// LocationSpec describes a location: a LAN (a bridge in a router namespace)
// and the nodes on it. The router reaches the WAN namespace with its public
// address. A location is either "public" (cloud style: each node has a
// public address that the router maps 1:1 to its LAN address, and the node's
// ExternalIP is that address) or, with NAT, hidden behind the router's single
// public address (masquerade, no inbound mapping, no ExternalIP).
type LocationSpec struct {
	// Name is the location's name (a DNS label); nodes get it as their
	// topology.kubernetes.io/region label. Default "loc<j>" (1-based in the
	// cluster).
	Name string
	// LAN is the location's subnet; the router is its first address.
	// Default 10.0.<g>.0/24, g being the location's 1-based index in the
	// whole lab (so the first two are the seed's 10.0.1.0/24 and
	// 10.0.2.0/24).
	LAN netip.Prefix
	// LAN6 is the location's IPv6 subnet in a DualStack cluster; the router
	// is its first address. Default 2001:db8:0:<g>::/64, g as in LAN. The
	// WAN routes it to the router: IPv6 addresses are global, and a NAT
	// location's router lets no connection in from the WAN (a stateful
	// firewall instead of NAT).
	LAN6 netip.Prefix
	// NAT hides the location behind its router's public address.
	NAT bool
	// PublicIP is the router's own public address (default: the next free
	// one of 198.51.100.0/24, from .1).
	PublicIP netip.Addr
	// Nodes are the location's nodes; at least one.
	Nodes []NodeSpec
}

// NodeSpec describes one node: a network namespace on its location's LAN.
type NodeSpec struct {
	// Name is the Node's name (a DNS label); default
	// "<cluster>-<location>-<k>" (k 1-based in the location).
	Name string
	// LANIP is the node's address on the LAN (its InternalIP); default
	// .10, .11, ... of the LAN in node order, skipping taken addresses.
	LANIP netip.Addr
	// LANIP6 is the node's IPv6 address on the LAN (its second InternalIP)
	// in a DualStack cluster; default LAN6 with the host number of LANIP
	// written with the same digits (10.0.1.10 -> 2001:db8:0:1::10).
	LANIP6 netip.Addr
	// PublicIP is the node's 1:1 public address (its ExternalIP) in a
	// public location; default the next free one of 203.0.113.0/24 from
	// .10, then 198.51.100.0/24. It must stay empty in a NAT location.
	PublicIP netip.Addr
	// Labels are added to the Node at registration, after the lab's own
	// topology.kubernetes.io/region=<location> (which they may override).
	Labels map[string]string
	// Annotations are added to the Node at registration.
	Annotations map[string]string
}

// RegionLabel is the Node label that carries the location name, as cloud
// providers set it and as Kilo reads it.
const RegionLabel = "topology.kubernetes.io/region"

// Public address ranges of the lab (documentation ranges, RFC 5737).
var (
	// PublicRangeA is where node public addresses are taken from first.
	PublicRangeA = netip.MustParsePrefix("203.0.113.0/24")
	// PublicRangeB is where router addresses are taken from, and node
	// public addresses once PublicRangeA is used up.
	PublicRangeB = netip.MustParsePrefix("198.51.100.0/24")
	// WANHostIP is an address of the WAN namespace itself (on its
	// loopback): "a host on the Internet" that nodes can ping, and the
	// routers' default gateway.
	WANHostIP = netip.MustParseAddr("203.0.113.254")
	// MgmtRange holds the management networks: one /16 per running lab,
	// 100.64.0.0/16 for the first.
	MgmtRange = netip.MustParsePrefix("100.64.0.0/10")
	// IPv6Range holds every IPv6 address of the lab (the documentation
	// range, RFC 3849): nothing else is used, least of all this machine's
	// own ULA network.
	IPv6Range = netip.MustParsePrefix("2001:db8::/32")
	// WANRange6 is the WAN's own IPv6 range, out of the clusters' reach.
	WANRange6 = netip.MustParsePrefix("2001:db8:ffff::/48")
	// WANHostIP6 is the WAN namespace's IPv6 address (on its loopback),
	// there when a cluster is DualStack.
	WANHostIP6 = netip.MustParseAddr("2001:db8:ffff::254")
)

// SeedClusterSpec returns the cluster of the Chinese seed article: location
// cn-beijing (LAN 10.0.1.0/24) with node-beijing (10.0.1.10, public
// 203.0.113.10) and location cn-shanghai (LAN 10.0.2.0/24) with
// node-shanghai (10.0.2.20, public 198.51.100.20), each location with a
// second node (node-beijing-2, node-shanghai-2) on default addresses. The
// cluster's name and ranges are left to the defaults.
func SeedClusterSpec() ClusterSpec {
	return ClusterSpec{Locations: []LocationSpec{
		{Name: "cn-beijing", LAN: netip.MustParsePrefix("10.0.1.0/24"), Nodes: []NodeSpec{
			{Name: "node-beijing", LANIP: netip.MustParseAddr("10.0.1.10"), PublicIP: netip.MustParseAddr("203.0.113.10")},
			{Name: "node-beijing-2"},
		}},
		{Name: "cn-shanghai", LAN: netip.MustParsePrefix("10.0.2.0/24"), Nodes: []NodeSpec{
			{Name: "node-shanghai", LANIP: netip.MustParseAddr("10.0.2.20"), PublicIP: netip.MustParseAddr("198.51.100.20")},
			{Name: "node-shanghai-2"},
		}},
	}}
}
