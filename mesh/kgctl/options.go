package kgctl

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kilofed/kilofed/mesh/topology"
)

// ErrAgentsDisagree is returned by Compute when the agents publish
// different WireGuard subnets or granularities and no flag picks one.
var ErrAgentsDisagree = errors.New("the agents disagree")

// DefaultEncapsulate is the agents' default --encapsulate (kg's and Kilo's).
const DefaultEncapsulate = topology.EncapsulateAlways

// MeshFlags are the agents' options that the CLI needs to compute the mesh
// as they do. A zero field is inferred from what the agents publish, else
// takes the agents' default.
type MeshFlags struct {
	// Subnet is kg's --subnet; the zero Prefix means the subnet of the
	// kilo.squat.ai/wireguard-ip addresses the agents publish, else
	// topology.DefaultSubnet.
	Subnet netip.Prefix
	// Granularity is kg's --mesh-granularity; empty means the
	// kilo.squat.ai/granularity the agents publish, else location.
	Granularity topology.Granularity
	// Port is kg's --port; zero means topology.DefaultPort.
	Port uint16
	// Encapsulate is kg's --encapsulate; empty means DefaultEncapsulate.
	// It changes only the graph's labels.
	Encapsulate topology.Encapsulate
	// ServiceCIDRs is kg's --service-cidr: external peers route them
	// through the mesh, and Peers may not claim them.
	ServiceCIDRs []netip.Prefix
	// MeshKeepalive is kg's --mesh-keepalive.
	MeshKeepalive time.Duration
}

// Options returns the topology options for snapshot s: the flags, with
// the subnet and granularity inferred from the agents when not given. The
// notes say what was inferred, and where a flag contradicts the agents.
// The error matches ErrAgentsDisagree when agents publish different values
// and no flag picks one; it names the nodes.
func (f MeshFlags) Options(s Snapshot) (topology.Options, []string, error) {
	o := topology.Options{
		Subnet:        f.Subnet,
		Granularity:   f.Granularity,
		Port:          f.Port,
		Encapsulate:   f.Encapsulate,
		ServiceCIDRs:  slices.Clone(f.ServiceCIDRs),
		MeshKeepalive: f.MeshKeepalive,
	}
	if o.Encapsulate == "" {
		o.Encapsulate = DefaultEncapsulate
	}
	var notes []string
	if len(o.ServiceCIDRs) == 0 && len(s.ServiceCIDRs) > 0 {
		o.ServiceCIDRs = slices.Clone(s.ServiceCIDRs)
		notes = append(notes, fmt.Sprintf("service CIDRs %v read from the cluster's ServiceCIDR objects", s.ServiceCIDRs))
	}
	var errs []error

	subnets := map[string][]string{}
	for _, n := range s.Nodes {
		if n.WireGuardIP.IsValid() {
			k := n.WireGuardIP.Masked().String()
			subnets[k] = append(subnets[k], n.Name)
		}
	}
	switch {
	case f.Subnet.IsValid():
		if other := differing(subnets, f.Subnet.Masked().String()); other != "" {
			notes = append(notes, fmt.Sprintf("warning: --subnet %s differs from the agents' WireGuard subnet: %s", f.Subnet, other))
		}
	case len(subnets) == 1:
		for k, names := range subnets {
			o.Subnet = netip.MustParsePrefix(k)
			notes = append(notes, fmt.Sprintf("subnet %s inferred from the kilo.squat.ai/wireguard-ip of %s", k, list(names)))
		}
	case len(subnets) > 1:
		errs = append(errs, fmt.Errorf("%w on the WireGuard subnet (kilo.squat.ai/wireguard-ip): %s; pass --subnet with the value of kg's --subnet, and fix the agents that differ",
			ErrAgentsDisagree, describe(subnets)))
	}

	grans := map[string][]string{}
	for name, g := range s.Granularities {
		grans[string(g)] = append(grans[string(g)], name)
	}
	switch {
	case f.Granularity != "":
		if other := differing(grans, string(f.Granularity)); other != "" {
			notes = append(notes, fmt.Sprintf("warning: --mesh-granularity %s differs from the agents' granularity: %s", f.Granularity, other))
		}
	case len(grans) == 1:
		for g, names := range grans {
			o.Granularity = topology.Granularity(g)
			notes = append(notes, fmt.Sprintf("granularity %s inferred from the kilo.squat.ai/granularity of %s", g, list(names)))
		}
	case len(grans) > 1:
		errs = append(errs, fmt.Errorf("%w on the mesh granularity (kilo.squat.ai/granularity): %s; pass --mesh-granularity with the value of kg's --mesh-granularity, and fix the agents that differ",
			ErrAgentsDisagree, describe(grans)))
	}
	if err := errors.Join(errs...); err != nil {
		return o, notes, err
	}
	return o, notes, nil
}

// describe writes "A (node-a, node-b); B (node-c)", values sorted.
func describe(byValue map[string][]string) string {
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(byValue)) {
		parts = append(parts, fmt.Sprintf("%s on %s", v, list(byValue[v])))
	}
	return strings.Join(parts, "; ")
}

// differing describes the values of byValue other than want, or "".
func differing(byValue map[string][]string, want string) string {
	other := map[string][]string{}
	for v, names := range byValue {
		if v != want {
			other[v] = names
		}
	}
	if len(other) == 0 {
		return ""
	}
	return describe(other)
}

// list joins names sorted, the first five then a count.
func list(names []string) string {
	names = slices.Sorted(slices.Values(names))
	if len(names) > 5 {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
	}
	return strings.Join(names, ", ")
}

// warnings returns the notes that flag a contradiction with the agents.
func warnings(notes []string) []string {
	var out []string
	for _, n := range notes {
		if strings.HasPrefix(n, "warning:") {
			out = append(out, n)
		}
	}
	return out
}
