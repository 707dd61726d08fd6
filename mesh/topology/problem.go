package topology

import (
	"cmp"
	"fmt"
	"slices"
)

// Severity says what a Problem did to the node or peer it concerns.
type Severity int

const (
	// Warning means the node or peer stays in the mesh, possibly with
	// some of its ranges left out.
	Warning Severity = iota + 1
	// Excluded means the node or peer was left out of the mesh; the rest
	// of the mesh works without it.
	Excluded
)

// String returns "warning" or "excluded".
func (s Severity) String() string {
	switch s {
	case Warning:
		return "warning"
	case Excluded:
		return "excluded"
	default:
		return fmt.Sprintf("severity(%d)", int(s))
	}
}

// Problem kinds.
const (
	// KindNode marks a Problem about a Node.
	KindNode = "node"
	// KindPeer marks a Problem about a Peer.
	KindPeer = "peer"
)

// Problem codes: short, stable identifiers fit for a metric label.
const (
	// CodeNoName: the node or peer has an empty name.
	CodeNoName = "no-name"
	// CodeDuplicateName: two nodes or two peers share a name.
	CodeDuplicateName = "duplicate-name"
	// CodeNoKey: the node or peer has no WireGuard public key.
	CodeNoKey = "no-key"
	// CodeDuplicateKey: the public key is already used by a node or peer.
	CodeDuplicateKey = "duplicate-key"
	// CodeNoAddress: the node has neither an internal IP nor an endpoint.
	CodeNoAddress = "no-address"
	// CodeNoLocation: the node has no location and forms a segment of its own.
	CodeNoLocation = "no-location"
	// CodeNoInternalIP: the node has no internal IP and forms a segment of
	// its own.
	CodeNoInternalIP = "no-internal-ip"
	// CodeNoPodCIDR: the node has no pod CIDR; nothing is routed to its pods.
	CodeNoPodCIDR = "no-pod-cidr"
	// CodeNoAllowedIPs: the peer has no allowed IPs; nothing is routed to it.
	CodeNoAllowedIPs = "no-allowed-ips"
	// CodeOverlap: a range collides with one that another owner keeps.
	CodeOverlap = "overlap"
	// CodeSubnetOverlap: a node's range overlaps the WireGuard subnet.
	CodeSubnetOverlap = "subnet-overlap"
	// CodeNoWireGuardIP: the subnet has no free address for the segment.
	CodeNoWireGuardIP = "no-wireguard-ip"
)

// Problem is something wrong with one node or peer, found by New.
type Problem struct {
	// Kind is KindNode or KindPeer.
	Kind string
	// Name is the node's or peer's name.
	Name string
	// Severity says whether the node or peer was kept or excluded.
	Severity Severity
	// Code is one of the Code* constants.
	Code string
	// Reason says what is wrong and how to fix it, in one sentence.
	Reason string
}

// String returns the problem on one line, as the agent logs it.
func (p Problem) String() string {
	return fmt.Sprintf("%s %q %s (%s): %s", p.Kind, p.Name, p.Severity, p.Code, p.Reason)
}

// problems collects Problems while New runs.
type problems []Problem

func (ps *problems) add(kind, name string, sev Severity, code, format string, args ...any) {
	*ps = append(*ps, Problem{Kind: kind, Name: name, Severity: sev, Code: code, Reason: fmt.Sprintf(format, args...)})
}

// sorted returns the problems in a canonical order: by kind, name,
// severity (excluded first), code and reason.
func (ps problems) sorted() []Problem {
	out := slices.Clone([]Problem(ps))
	slices.SortFunc(out, func(a, b Problem) int {
		return cmp.Or(
			cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Name, b.Name),
			cmp.Compare(b.Severity, a.Severity),
			cmp.Compare(a.Code, b.Code),
			cmp.Compare(a.Reason, b.Reason),
		)
	})
	return slices.Compact(out)
}
