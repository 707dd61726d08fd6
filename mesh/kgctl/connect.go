package kgctl

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// Defaults of ConnectConfig.
const (
	// DefaultConnectInterface is the WireGuard interface connect creates.
	DefaultConnectInterface = "kfc0"
	// ConnectRouteProtocol marks the routes connect owns ('L'); it differs
	// from the agents' route.DefaultProtocol so that connect never touches
	// an agent's routes on the same machine.
	ConnectRouteProtocol = 0x4c
	// DefaultResyncPeriod is how often connect re-applies its plan even
	// without a change.
	DefaultResyncPeriod = 30 * time.Second
	// DefaultHandshakeWarning is how long connect waits for a handshake
	// before it says what to check.
	DefaultHandshakeWarning = 10 * time.Second
)

// ConnectConfig configures Connect.
type ConnectConfig struct {
	// Peer is the name of the Peer object this machine joins as; required.
	Peer string
	// PrivateKey is this machine's WireGuard key; its public half must be
	// the Peer's publicKey.
	PrivateKey wgconf.SecretKey
	// Source gives the mesh's snapshots; required.
	Source Source
	// Flags are the agents' options (see MeshFlags).
	Flags MeshFlags
	// Interface is the WireGuard interface name; empty means
	// DefaultConnectInterface.
	Interface string
	// Mode picks kernel WireGuard or the embedded wireguard-go; empty
	// means wireguard.ModeAuto.
	Mode wireguard.Mode
	// MTU of the interface; zero keeps the implementation's default.
	MTU int
	// NetNS is the path of the network namespace to connect (such as
	// /run/netns/NAME); empty means this process's.
	NetNS string
	// Out receives the progress lines; nil discards them.
	Out io.Writer
	// Logger receives the WireGuard device's logs; nil discards them.
	Logger *slog.Logger
	// ResyncPeriod re-applies the plan this often; zero means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// HandshakeWarning is how long to wait for a peer's handshake before
	// saying what to check; zero means DefaultHandshakeWarning.
	HandshakeWarning time.Duration
	// RouteProtocol marks the routes connect owns; zero means
	// ConnectRouteProtocol.
	RouteProtocol int
}

func (c ConnectConfig) withDefaults() (ConnectConfig, error) {
	if c.Peer == "" {
		return c, errors.New("connect: no Peer name given")
	}
	if c.Source == nil {
		return c, errors.New("connect: no Source given")
	}
	if c.Interface == "" {
		c.Interface = DefaultConnectInterface
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ResyncPeriod <= 0 {
		c.ResyncPeriod = DefaultResyncPeriod
	}
	if c.HandshakeWarning <= 0 {
		c.HandshakeWarning = DefaultHandshakeWarning
	}
	if c.RouteProtocol == 0 {
		c.RouteProtocol = ConnectRouteProtocol
	}
	return c, nil
}
