package wireguard

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Fake is an in-memory Device for tests of code that drives a Device. It
// applies Set like a real device (same change computation, same learnt
// endpoint rule) and records every change it would send as canonical text.
type Fake struct {
	mu     sync.Mutex
	dev    wgtypes.Device
	now    func() time.Time
	record strings.Builder
	closed bool
}

var _ Device = (*Fake)(nil)

// NewFake returns a Fake for the named interface; now gives the time used
// for the learnt endpoint rule (nil means time.Now).
func NewFake(name string, now func() time.Time) *Fake {
	if now == nil {
		now = time.Now
	}
	return &Fake{dev: wgtypes.Device{Name: name, Type: wgtypes.Userspace}, now: now}
}

// Set applies cfg to the in-memory device and records the changes, as
// "set NAME" followed by one indented line per change; a Set without
// changes records nothing.
func (f *Fake) Set(ctx context.Context, cfg wgconf.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if err := validate(cfg); err != nil {
		return err
	}
	merged := MergeLearned(cfg, stateFrom(&f.dev), f.now())
	c, ok := changes(merged, &f.dev)
	if !ok {
		return nil
	}
	fmt.Fprintf(&f.record, "set %s\n", f.dev.Name)
	for _, line := range strings.Split(strings.TrimSuffix(formatChanges(c), "\n"), "\n") {
		fmt.Fprintf(&f.record, "  %s\n", line)
	}
	apply(&f.dev, c)
	return nil
}

// Show returns the in-memory state.
func (f *Fake) Show(ctx context.Context) (State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return State{}, ErrClosed
	}
	return stateFrom(&f.dev), nil
}

// Close records "close NAME".
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		fmt.Fprintf(&f.record, "close %s\n", f.dev.Name)
	}
	f.closed = true
	return nil
}

// Record returns the text recorded so far.
func (f *Fake) Record() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record.String()
}

// Observe simulates traffic: it sets the live endpoint, latest handshake
// and byte counters of a configured peer, and reports whether the peer
// exists.
func (f *Fake) Observe(p PeerState) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.dev.Peers {
		l := &f.dev.Peers[i]
		if wgconf.Key(l.PublicKey) != p.PublicKey {
			continue
		}
		l.Endpoint = nil
		if p.Endpoint.IsValid() {
			l.Endpoint = udpFromAddrPort(p.Endpoint)
		}
		l.LastHandshakeTime = p.LastHandshake
		l.ReceiveBytes, l.TransmitBytes = p.ReceiveBytes, p.TransmitBytes
		return true
	}
	return false
}

// apply changes dev as a WireGuard device applies cfg, including moving an
// allowed IP away from the peer that held it.
func apply(dev *wgtypes.Device, cfg wgtypes.Config) {
	if cfg.PrivateKey != nil {
		dev.PrivateKey, dev.PublicKey = *cfg.PrivateKey, cfg.PrivateKey.PublicKey()
	}
	if cfg.ListenPort != nil {
		dev.ListenPort = *cfg.ListenPort
	}
	for _, pc := range cfg.Peers {
		i := slices.IndexFunc(dev.Peers, func(p wgtypes.Peer) bool { return p.PublicKey == pc.PublicKey })
		switch {
		case pc.Remove:
			if i >= 0 {
				dev.Peers = slices.Delete(dev.Peers, i, i+1)
			}
			continue
		case i < 0 && pc.UpdateOnly:
			continue
		case i < 0:
			dev.Peers = append(dev.Peers, wgtypes.Peer{PublicKey: pc.PublicKey, ProtocolVersion: 1})
			i = len(dev.Peers) - 1
		}
		p := &dev.Peers[i]
		if pc.PresharedKey != nil {
			p.PresharedKey = *pc.PresharedKey
		}
		if pc.Endpoint != nil {
			p.Endpoint = pc.Endpoint
		}
		if pc.PersistentKeepaliveInterval != nil {
			p.PersistentKeepaliveInterval = *pc.PersistentKeepaliveInterval
		}
		if pc.ReplaceAllowedIPs {
			p.AllowedIPs = nil
		}
		for _, a := range pc.AllowedIPs {
			for j := range dev.Peers {
				dev.Peers[j].AllowedIPs = slices.DeleteFunc(dev.Peers[j].AllowedIPs, func(n net.IPNet) bool {
					return n.String() == a.String()
				})
			}
			p.AllowedIPs = append(p.AllowedIPs, a)
		}
	}
}
