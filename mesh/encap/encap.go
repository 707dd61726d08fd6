package encap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/kilofed/kilofed/mesh/mtu"
)

// Encapsulator keeps the tunnel link of a node in line with the remote
// nodes it must reach.
type Encapsulator interface {
	// Set makes the tunnel reach exactly remotes (their internal IPs);
	// safe to call again with the same input.
	Set(ctx context.Context, remotes []netip.Addr) error
	// Link is the tunnel's link name for routes; empty for KindNone.
	Link() string
	// Inbound says which packets the tunnel receives, so that the
	// firewall takes them from the remotes only.
	Inbound() Inbound
	// Close removes what the Encapsulator created.
	Close(ctx context.Context) error
}

// Kind is an encapsulation method.
type Kind string

const (
	// KindNone routes natively (--encapsulate never).
	KindNone Kind = "none"
	// KindIPIP uses the kernel's IPIP fallback link tunl0.
	KindIPIP Kind = "ipip"
	// KindVXLAN uses a VXLAN link with static forwarding entries.
	KindVXLAN Kind = "vxlan"
)

// Link names and VXLAN defaults.
const (
	IPIPLink    = "tunl0"
	VXLANLink   = "kilo-vxlan"
	DefaultVNI  = 1107
	DefaultPort = 4789
)

// Inbound is what the packets a tunnel receives look like on the underlay.
type Inbound struct {
	// Kind is the encapsulation; KindNone receives nothing.
	Kind Kind
	// Port is the UDP destination port of KindVXLAN.
	Port int
}

// Overhead returns the bytes the encapsulation adds, for package mtu.
func (k Kind) Overhead() int {
	switch k {
	case KindIPIP:
		return mtu.IPIPOverhead
	case KindVXLAN:
		return mtu.VXLANOverhead
	}
	return 0
}

// ParseKind parses "none", "ipip" or "vxlan"; the empty string is "" (let
// New detect).
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case "", KindNone, KindIPIP, KindVXLAN:
		return k, nil
	}
	return "", fmt.Errorf("%w %q: use none, ipip or vxlan", ErrInvalid, s)
}

// Options configure New.
type Options struct {
	// Kind picks the method; empty means Detect.
	Kind Kind
	// Local is this node's internal IP, the source of VXLAN packets;
	// required for VXLAN. Remotes of the other family are ignored.
	Local netip.Addr
	// Underlay is the link VXLAN packets leave through; empty lets the
	// kernel route them.
	Underlay string
	// Name is the VXLAN link name; empty means VXLANLink.
	Name string
	// VNI is the VXLAN network identifier; zero means DefaultVNI.
	VNI int
	// Port is the VXLAN UDP port; zero means DefaultPort.
	Port int
	// MTU of the tunnel link; zero keeps the kernel's (underlay - 50 for
	// VXLAN).
	MTU int
	// Logger receives one line per change; nil discards.
	Logger *slog.Logger
}

var (
	// ErrInvalid is returned for options that cannot work.
	ErrInvalid = errors.New("invalid encapsulation")
	// ErrUnavailable is returned when the kernel has neither IPIP nor
	// VXLAN.
	ErrUnavailable = errors.New("no encapsulation available")
)

// none is the Encapsulator of KindNone.
type none struct{}

func (none) Set(context.Context, []netip.Addr) error { return nil }
func (none) Link() string                            { return "" }
func (none) Inbound() Inbound                        { return Inbound{Kind: KindNone} }
func (none) Close(context.Context) error             { return nil }
