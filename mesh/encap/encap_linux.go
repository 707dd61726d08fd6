//go:build linux

package encap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Detect returns KindIPIP when the kernel has IPIP (the link tunl0 exists
// or can be created), else KindVXLAN. It may leave tunl0 behind, as
// loading the ipip module does.
func Detect() (Kind, error) {
	if l, err := netlink.LinkByName(IPIPLink); err == nil && l.Type() == "ipip" {
		return KindIPIP, nil
	}
	err := netlink.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: IPIPLink}})
	switch {
	case err == nil, errors.Is(err, unix.EEXIST):
		return KindIPIP, nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EPROTONOSUPPORT):
		return KindVXLAN, nil
	}
	return "", fmt.Errorf("detect IPIP support: %w", err)
}

// New returns the Encapsulator for opts.Kind, detecting it when empty. It
// creates nothing until the first Set.
func New(opts Options) (Encapsulator, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kind := opts.Kind
	if kind == "" {
		k, err := Detect()
		if err != nil {
			return nil, err
		}
		kind = k
		log.Info("encapsulation detected", "kind", kind)
	}
	switch kind {
	case KindNone:
		return none{}, nil
	case KindIPIP:
		return &ipip{mtu: opts.MTU, log: log}, nil
	case KindVXLAN:
		return newVXLAN(opts, log)
	}
	return nil, fmt.Errorf("%w: unknown kind %q", ErrInvalid, kind)
}

// ipip uses the kernel's fallback IPIP link: it carries packets to any
// remote given as an onlink next hop, so Set only keeps it up.
type ipip struct {
	mtu int
	log *slog.Logger
}

func (t *ipip) Link() string { return IPIPLink }

func (t *ipip) Inbound() Inbound { return Inbound{Kind: KindIPIP} }

func (t *ipip) Set(ctx context.Context, remotes []netip.Addr) error {
	l, err := netlink.LinkByName(IPIPLink)
	if err != nil {
		if err := netlink.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: IPIPLink}}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create %s: %w", IPIPLink, err)
		}
		if l, err = netlink.LinkByName(IPIPLink); err != nil {
			return fmt.Errorf("find %s: %w", IPIPLink, err)
		}
		t.log.Info("IPIP link created", "link", IPIPLink)
	}
	if t.mtu > 0 && l.Attrs().MTU != t.mtu {
		if err := netlink.LinkSetMTU(l, t.mtu); err != nil {
			return fmt.Errorf("set MTU of %s: %w", IPIPLink, err)
		}
	}
	if l.Attrs().Flags&unix.IFF_UP == 0 {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", IPIPLink, err)
		}
	}
	return nil
}

// Close leaves tunl0: it belongs to the ipip module and cannot be deleted.
func (t *ipip) Close(ctx context.Context) error { return nil }
