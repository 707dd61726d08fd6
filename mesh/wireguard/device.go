package wireguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Device is one WireGuard interface, kernel or embedded wireguard-go,
// configured declaratively through wgctrl. Its methods are safe for
// concurrent use.
type Device interface {
	// Set makes the device match cfg, sending only the differences: new
	// peers are added, peers absent from cfg removed, changed peers updated
	// in place, and unchanged peers left alone so their sessions survive.
	// Endpoints learnt from recent handshakes of peers behind NAT are kept
	// (see MergeLearned).
	// It is safe to call again with the same cfg.
	Set(ctx context.Context, cfg wgconf.Config) error
	// Show returns the live state of the interface and its peers.
	Show(ctx context.Context) (State, error)
	// Close releases the device. An embedded wireguard-go device is shut
	// down and its link and control socket disappear; a kernel link is
	// kept (delete it with link.Delete when the agent is asked to).
	Close() error
}

// DefaultName is the WireGuard interface name used when none is given.
const DefaultName = "kilo0"

// OpenOptions say which WireGuard interface Open creates or adopts.
type OpenOptions struct {
	// Name is the interface name; empty means DefaultName.
	Name string
	// Mode picks the kernel module or the embedded wireguard-go; empty
	// means ModeAuto.
	Mode Mode
	// MTU of the link; zero keeps the implementation's default (1420).
	MTU int
	// Existing, when set, creates nothing: the interface must exist
	// already, made by another WireGuard implementation (a wireguard-go
	// sidecar, as with Kilo's --create-interface=false), and Open only
	// connects to it through wgctrl; Mode and MTU are ignored.
	Existing bool
	// Logger receives the device's logs; nil discards them.
	Logger *slog.Logger
	// NetNS is the path of a network namespace (such as /run/netns/NAME)
	// that holds the link and, for wireguard-go, the TUN and UDP sockets;
	// empty means the calling thread's namespace. Tests use it to run
	// several devices in one process. The control socket lives in
	// /var/run/wireguard, which all namespaces of a mount namespace share,
	// so names must be unique across namespaces.
	NetNS string
	// InFlight bounds the packets an embedded wireguard-go device holds in
	// each direction between reading and writing them; zero means
	// DefaultInFlight, negative leaves wireguard-go's queues unbounded (and
	// keeps its sticky-source route listener, which it runs only on its own
	// bind type). Kernel and existing devices ignore it.
	InFlight int
	// MemoryLimit is the soft limit, in bytes, of the Go runtime's memory
	// (runtime/debug.SetMemoryLimit) that opening an embedded wireguard-go
	// device sets for the whole process, never above one set already; zero
	// means a limit that follows the live heap, 10 MiB above it and never
	// below DefaultMemoryLimit, while such a device is open, unless the
	// GOMEMLIMIT environment variable is set; negative leaves the runtime
	// alone. Kernel and existing devices ignore it.
	MemoryLimit int64
}

const (
	// DefaultInFlight is how many packets an embedded wireguard-go device
	// lets in, in each direction, before earlier ones leave it; one TUN
	// read or UDP batch more (up to 128 packets) may exceed it. Each packet
	// holds a 64 KiB buffer in wireguard-go.
	DefaultInFlight = 128
	// DefaultMemoryLimit is the least Go memory limit an embedded
	// wireguard-go device sets for its process (the limit follows the live
	// heap above it, see OpenOptions.MemoryLimit): the garbage collector
	// works harder near it instead of letting the heap double. About 24 MiB of
	// wireguard-go's read buffers are always live; 40 and 48 MiB left the
	// collector running so often that throughput halved
	// (docs/performance.md, Data plane).
	DefaultMemoryLimit = 56 << 20
)

// Mode says which WireGuard implementation backs a Device.
type Mode string

const (
	// ModeAuto uses the kernel module when the wireguard link type can be
	// created, else the embedded wireguard-go.
	ModeAuto Mode = "auto"
	// ModeKernel requires the kernel module.
	ModeKernel Mode = "kernel"
	// ModeUserspace embeds wireguard-go in the process (TUN device).
	ModeUserspace Mode = "userspace"
)

var (
	// ErrInvalidMode is returned by ParseMode for an unknown mode.
	ErrInvalidMode = errors.New("invalid WireGuard mode")
	// ErrKernelUnsupported is returned in ModeKernel when the kernel cannot
	// create wireguard links (no module).
	ErrKernelUnsupported = errors.New("kernel WireGuard not available")
	// ErrLinkBusy is returned when the interface name is taken by a link
	// that Open cannot adopt.
	ErrLinkBusy = errors.New("interface name in use")
	// ErrInvalidConfig is returned by Set for a wgconf.Config it cannot apply.
	ErrInvalidConfig = errors.New("invalid WireGuard configuration")
	// ErrClosed is returned by the methods of a closed Device.
	ErrClosed = errors.New("WireGuard device closed")
)

// ParseMode parses "auto", "kernel" or "userspace"; the empty string is
// ModeAuto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeKernel, ModeUserspace:
		return m, nil
	}
	return "", fmt.Errorf("%w %q: use auto, kernel or userspace", ErrInvalidMode, s)
}

// String returns the mode's name.
func (m Mode) String() string { return string(m) }

// Set parses s into m, for use as a command-line flag value.
func (m *Mode) Set(s string) error {
	p, err := ParseMode(s)
	if err != nil {
		return err
	}
	*m = p
	return nil
}

// Type names the flag value type for pflag.
func (m *Mode) Type() string { return "auto|kernel|userspace" }

// validate checks what the device cannot apply.
func validate(cfg wgconf.Config) error {
	seen := make(map[[32]byte]bool, len(cfg.Peers))
	owner := make(map[netip.Prefix]wgconf.Peer)
	pub := cfg.PrivateKey.PublicKey()
	for _, p := range cfg.Peers {
		if seen[p.PublicKey] {
			return fmt.Errorf("%w: peer %s (%s) appears twice", ErrInvalidConfig, p.PublicKey, p.Name)
		}
		seen[p.PublicKey] = true
		if p.PublicKey == pub {
			return fmt.Errorf("%w: peer %s (%s) has the interface's own public key", ErrInvalidConfig, p.PublicKey, p.Name)
		}
		for _, a := range p.AllowedIPs {
			if !a.IsValid() {
				return fmt.Errorf("%w: peer %s (%s) has an invalid allowed IP", ErrInvalidConfig, p.PublicKey, p.Name)
			}
			// WireGuard gives a range to one peer only: the last one set
			// would win, and every Set would move it again.
			if o, ok := owner[a.Masked()]; ok && o.PublicKey != p.PublicKey {
				return fmt.Errorf("%w: allowed IP %s is claimed by peers %s (%s) and %s (%s); give it to one of them",
					ErrInvalidConfig, a.Masked(), o.PublicKey, o.Name, p.PublicKey, p.Name)
			}
			owner[a.Masked()] = p
		}
	}
	if cfg.ListenPort < 0 || cfg.ListenPort > 65535 {
		return fmt.Errorf("%w: listen port %d out of range", ErrInvalidConfig, cfg.ListenPort)
	}
	return nil
}
