//go:build linux

package wireguard

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// createKernelLink creates the wireguard link name, or adopts an existing
// one; it returns ErrKernelUnsupported when the kernel lacks the link type.
func createKernelLink(name string, mtu int) error {
	l, err := netlink.LinkByName(name)
	if err == nil {
		if l.Type() != "wireguard" {
			return fmt.Errorf("%w: link %s exists with type %s, not wireguard: delete it (ip link del %s) or choose another interface name",
				ErrLinkBusy, name, l.Type(), name)
		}
		if mtu > 0 && l.Attrs().MTU != mtu {
			if err := netlink.LinkSetMTU(l, mtu); err != nil {
				return fmt.Errorf("set MTU of %s: %w", name, err)
			}
		}
		return nil
	}
	var nf netlink.LinkNotFoundError
	if !errors.As(err, &nf) {
		return fmt.Errorf("find link %s: %w", name, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if mtu > 0 {
		attrs.MTU = mtu
	}
	err = netlink.LinkAdd(&netlink.Wireguard{LinkAttrs: attrs})
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
		return fmt.Errorf("%w: the kernel cannot create wireguard links (load the wireguard module, or use userspace mode): %w",
			ErrKernelUnsupported, err)
	}
	if err != nil {
		return fmt.Errorf("create wireguard link %s: %w", name, err)
	}
	return nil
}
