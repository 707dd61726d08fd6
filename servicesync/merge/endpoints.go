package merge

import (
	"net/netip"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kilofed/kilofed/federation/ranges"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// MaxEndpointsPerSlice is the most endpoints one imported EndpointSlice
// holds (the endpointslice controller's default).
const MaxEndpointsPerSlice = 100

// Slice is the content of one imported EndpointSlice.
type Slice struct {
	// Cluster is the source cluster.
	Cluster     string
	AddressType discoveryv1.AddressType
	// Ports are the endpoints' ports whose names are ports of the import
	// as this cluster exports them.
	Ports     []ssv1.EndpointPort
	Endpoints []ssv1.Endpoint
	// Index tells apart the slices of one cluster, address type and ports.
	Index int
}

// Refusal is an endpoint address left out of the import.
type Refusal struct {
	Cluster, Address, Why string
}

// endpoints returns the slices of export e: every address of a remote
// cluster must lie in one of its pod ranges that this cluster accepts
// (ranges.Accept: not overlapping a local or another member's range, not
// reserved); the local cluster's are taken as they are. An endpoint port
// reaches the import only if e exports the import's port of that name.
func endpoints(e ssv1.ExportedServiceSpec, imp *Import, from ranges.Cluster, local bool, localRanges ranges.Cluster, remotes []ranges.Cluster) ([]Slice, []Refusal) {
	var pods []ranges.Range
	if !local {
		accepted, _ := ranges.Accept(from, localRanges, remotes)
		for _, r := range accepted {
			if r.Kind == ranges.Pods {
				pods = append(pods, r)
			}
		}
	}
	exposed := map[string]bool{}
	for _, p := range e.Ports {
		if slices.Contains(imp.Ports, p) {
			exposed[p.Name] = true
		}
	}
	var out []Slice
	var refused []Refusal
	for _, g := range e.Endpoints {
		var ports []ssv1.EndpointPort
		for _, p := range g.Ports {
			if exposed[p.Name] {
				ports = append(ports, p)
			}
		}
		var eps []ssv1.Endpoint
		for _, ep := range g.Endpoints {
			var addrs []string
			for _, a := range ep.Addresses {
				if why := check(a, g.AddressType, local, pods, from.ID); why != "" {
					refused = append(refused, Refusal{Cluster: e.ClusterID, Address: a, Why: why})
					continue
				}
				addrs = append(addrs, a)
			}
			if len(addrs) > 0 {
				ep.Addresses = addrs
				eps = append(eps, ep)
			}
		}
		for i := 0; len(eps) > 0; i++ {
			n := min(len(eps), MaxEndpointsPerSlice)
			out = append(out, Slice{Cluster: e.ClusterID, AddressType: g.AddressType, Ports: ports, Endpoints: eps[:n:n], Index: i})
			eps = eps[n:]
		}
	}
	return out, refused
}

// check returns why address a may not be imported, or "".
func check(a string, t discoveryv1.AddressType, local bool, pods []ranges.Range, cluster string) string {
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return "not an IP address"
	}
	if t == discoveryv1.AddressTypeIPv4 && !ip.Is4() || t == discoveryv1.AddressTypeIPv6 && !ip.Is6() {
		return "not an " + string(t) + " address"
	}
	if local {
		return ""
	}
	if why := ranges.Reserved(netip.PrefixFrom(ip, ip.BitLen())); why != "" {
		return "in a range that is never routed between clusters: " + why
	}
	if !ranges.Allowed(netip.PrefixFrom(ip, ip.BitLen()), pods) {
		return "outside " + cluster + "'s pod ranges that this cluster accepts (see its RemoteCluster's acceptedCIDRs)"
	}
	return ""
}

// refuseAll refuses every address of e.
func refuseAll(e ssv1.ExportedServiceSpec, why string) []Refusal {
	var out []Refusal
	for _, g := range e.Endpoints {
		for _, ep := range g.Endpoints {
			for _, a := range ep.Addresses {
				out = append(out, Refusal{Cluster: e.ClusterID, Address: a, Why: why})
			}
		}
	}
	return out
}
