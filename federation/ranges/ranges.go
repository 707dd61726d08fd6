package ranges

import (
	"fmt"
	"net/netip"
	"slices"
)

// Kind names what a range is used for in its cluster.
type Kind string

// The kinds of range a cluster announces.
const (
	Pods      Kind = "pod"
	Services  Kind = "service"
	WireGuard Kind = "WireGuard"
)

// Range is one range of one cluster.
type Range struct {
	// Cluster is the ID of the cluster that uses the range.
	Cluster string
	// Kind says what the range is for.
	Kind Kind
	// Prefix is the range itself, masked.
	Prefix netip.Prefix
}

// String returns the range as "cluster's pod range 10.1.0.0/16".
func (r Range) String() string {
	return fmt.Sprintf("%s's %s range %s", r.Cluster, r.Kind, r.Prefix)
}

// Cluster is the set of ranges one cluster uses.
type Cluster struct {
	// ID is the cluster's ID (its cluster.clusterset.k8s.io property).
	ID string
	// Pods are the pod CIDRs (Nodes' podCIDRs or the cluster CIDR).
	Pods []netip.Prefix
	// Services are the Service CIDRs.
	Services []netip.Prefix
	// WireGuard is the mesh's WireGuard subnet; invalid when unknown.
	WireGuard netip.Prefix
}

// Ranges returns every range of c, kind by kind, masked and without
// duplicates.
func (c Cluster) Ranges() []Range {
	var out []Range
	add := func(k Kind, ps ...netip.Prefix) {
		for _, p := range ps {
			if !p.IsValid() {
				continue
			}
			r := Range{Cluster: c.ID, Kind: k, Prefix: p.Masked()}
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	add(Pods, c.Pods...)
	add(Services, c.Services...)
	add(WireGuard, c.WireGuard)
	return out
}
