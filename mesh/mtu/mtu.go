package mtu

import (
	"errors"
	"fmt"
)

// Overheads in bytes added by each wrapping, for the worst case outer
// header.
const (
	// WireGuardOverhead is an IPv6 outer header (40), UDP (8) and
	// WireGuard's header and tag (32); it also covers IPv4 outer headers.
	WireGuardOverhead = 80
	// VXLANOverhead is an IPv4 outer header (20), UDP (8), VXLAN (8) and
	// the inner Ethernet header (14).
	VXLANOverhead = 50
	// VXLAN6Overhead is VXLANOverhead with an IPv6 outer header.
	VXLAN6Overhead = 70
	// IPIPOverhead is the outer IPv4 header.
	IPIPOverhead = 20
	// Minimum is the smallest MTU IPv6 allows on a link.
	Minimum = 1280
)

// ErrTooSmall is returned when the underlay leaves less than Minimum.
var ErrTooSmall = errors.New("underlay MTU too small")

// Plan holds the MTUs of a node's mesh links.
type Plan struct {
	// Underlay is the MTU of the link that carries the mesh.
	Underlay int
	// WireGuard is the MTU for the WireGuard interface.
	WireGuard int
	// Encap is the MTU of the encapsulation link (IPIP or VXLAN); zero
	// without encapsulation.
	Encap int
	// Path is the largest packet that crosses both: what a CNI should give
	// pods so that nothing fragments on the way to another location.
	Path int
}

// Compute returns the Plan for an underlay MTU and the overhead of the
// encapsulation used inside a location (0 for none, IPIPOverhead,
// VXLANOverhead or VXLAN6Overhead). A packet from a pod goes through the
// encapsulation to its leader, then through WireGuard, one after the other,
// so Path is the smaller of the two.
func Compute(underlay, encapOverhead int) (Plan, error) {
	p := Plan{Underlay: underlay, WireGuard: underlay - WireGuardOverhead}
	p.Path = p.WireGuard
	if encapOverhead > 0 {
		p.Encap = underlay - encapOverhead
		p.Path = min(p.WireGuard, p.Encap)
	}
	if encapOverhead < 0 {
		return Plan{}, fmt.Errorf("negative encapsulation overhead %d", encapOverhead)
	}
	if p.Path < Minimum {
		return Plan{}, fmt.Errorf("%w: %d leaves %d for the mesh, below %d; use a larger underlay MTU or set --mtu by hand",
			ErrTooSmall, underlay, p.Path, Minimum)
	}
	return p, nil
}
