//go:build linux

package encap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

type vxlan struct {
	mu   sync.Mutex
	opts Options
	log  *slog.Logger
}

func newVXLAN(opts Options, log *slog.Logger) (*vxlan, error) {
	if !opts.Local.IsValid() {
		return nil, fmt.Errorf("%w: VXLAN needs the node's internal IP as local address", ErrInvalid)
	}
	opts.Local = opts.Local.Unmap()
	if opts.Name == "" {
		opts.Name = VXLANLink
	}
	if opts.VNI == 0 {
		opts.VNI = DefaultVNI
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	return &vxlan{opts: opts, log: log}, nil
}

func (v *vxlan) Link() string { return v.opts.Name }

func (v *vxlan) Inbound() Inbound { return Inbound{Kind: KindVXLAN, Port: v.opts.Port} }

func (v *vxlan) Set(ctx context.Context, remotes []netip.Addr) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	l, err := v.ensureLink()
	if err != nil {
		return err
	}
	current, err := v.entries(l)
	if err != nil {
		return err
	}
	add, del := DiffEntries(Entries(v.opts.Local, remotes), current)
	var errs []error
	for _, e := range add {
		if err := netlink.NeighAppend(v.neigh(l, e)); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("add forwarding entry %s dst %s: %w", net.HardwareAddr(e.MAC[:]), e.Dst, err))
			continue
		}
		v.log.Info("VXLAN forwarding entry added", "mac", net.HardwareAddr(e.MAC[:]).String(), "dst", e.Dst)
	}
	for _, e := range del {
		if err := netlink.NeighDel(v.neigh(l, e)); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete forwarding entry %s dst %s: %w", net.HardwareAddr(e.MAC[:]), e.Dst, err))
			continue
		}
		v.log.Info("VXLAN forwarding entry deleted", "mac", net.HardwareAddr(e.MAC[:]).String(), "dst", e.Dst)
	}
	errs = append(errs, v.syncNeighbours(l, remotes))
	return errors.Join(errs...)
}

// syncNeighbours keeps a permanent neighbour entry Gateway6(r) -> MAC(r)
// for each remote r, the next hop of IPv6 routes through the link.
func (v *vxlan) syncNeighbours(l netlink.Link, remotes []netip.Addr) error {
	want := map[netip.Addr]bool{}
	for _, e := range Entries(v.opts.Local, remotes) {
		want[Gateway6(e.Dst)] = true
	}
	list, err := netlink.NeighList(l.Attrs().Index, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("list neighbours of %s: %w", v.opts.Name, err)
	}
	var errs []error
	for _, n := range list {
		a, _ := netip.AddrFromSlice(n.IP)
		switch {
		case n.State&netlink.NUD_PERMANENT == 0:
			// Learnt: NeighSet below replaces it if a is a remote.
		case want[a] && n.HardwareAddr.String() == gatewayMAC(a).String():
			delete(want, a)
		case !want[a]:
			if err := netlink.NeighDel(&n); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete neighbour %s: %w", a, err))
				continue
			}
			v.log.Info("VXLAN neighbour deleted", "ip", a)
		}
	}
	for a := range want {
		n := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V6, State: netlink.NUD_PERMANENT,
			IP: a.AsSlice(), HardwareAddr: gatewayMAC(a)}
		if err := netlink.NeighSet(n); err != nil {
			errs = append(errs, fmt.Errorf("set neighbour %s: %w", a, err))
			continue
		}
		v.log.Info("VXLAN neighbour set", "ip", a, "mac", gatewayMAC(a).String())
	}
	return errors.Join(errs...)
}

func (v *vxlan) Close(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	l, err := netlink.LinkByName(v.opts.Name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err == nil && l.Type() == "vxlan" {
		err = netlink.LinkDel(l)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", v.opts.Name, err)
	}
	return nil
}

// ensureLink creates the VXLAN link, or recreates it when its parameters
// differ from the options, and brings it up.
func (v *vxlan) ensureLink() (netlink.Link, error) {
	want := &netlink.Vxlan{
		LinkAttrs: netlink.LinkAttrs{Name: v.opts.Name, MTU: v.opts.MTU, HardwareAddr: MAC(v.opts.Local)},
		VxlanId:   v.opts.VNI,
		SrcAddr:   v.opts.Local.AsSlice(),
		Port:      v.opts.Port,
		Learning:  false,
	}
	if v.opts.Underlay != "" {
		u, err := netlink.LinkByName(v.opts.Underlay)
		if err != nil {
			return nil, fmt.Errorf("VXLAN underlay link %q: %w", v.opts.Underlay, err)
		}
		want.VtepDevIndex = u.Attrs().Index
	}
	l, err := netlink.LinkByName(v.opts.Name)
	var nf netlink.LinkNotFoundError
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return nil, fmt.Errorf("find %s: %w", v.opts.Name, err)
	case l.Type() != "vxlan":
		return nil, fmt.Errorf("%w: link %s exists with type %s; delete it (ip link del %s)", ErrInvalid, v.opts.Name, l.Type(), v.opts.Name)
	case sameVXLAN(l.(*netlink.Vxlan), want):
		return v.up(l)
	default:
		v.log.Info("VXLAN link parameters changed, recreating it", "link", v.opts.Name)
		if err := netlink.LinkDel(l); err != nil {
			return nil, fmt.Errorf("delete outdated %s: %w", v.opts.Name, err)
		}
	}
	if err := netlink.LinkAdd(want); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("%w: the kernel cannot create vxlan links: %w", ErrUnavailable, err)
		}
		return nil, fmt.Errorf("create VXLAN link %s: %w", v.opts.Name, err)
	}
	v.log.Info("VXLAN link created", "link", v.opts.Name, "vni", v.opts.VNI, "port", v.opts.Port, "local", v.opts.Local)
	if l, err = netlink.LinkByName(v.opts.Name); err != nil {
		return nil, fmt.Errorf("find %s: %w", v.opts.Name, err)
	}
	// No IPv6 link-local address: it would only flood router and listener
	// messages to every remote.
	if err := netlink.LinkSetIP6AddrGenMode(l, nl.IN6_ADDR_GEN_MODE_NONE); err != nil {
		v.log.Warn("cannot turn off IPv6 address generation", "link", v.opts.Name, "err", err)
	}
	return v.up(l)
}

func (v *vxlan) up(l netlink.Link) (netlink.Link, error) {
	if v.opts.MTU > 0 && l.Attrs().MTU != v.opts.MTU {
		if err := netlink.LinkSetMTU(l, v.opts.MTU); err != nil {
			return nil, fmt.Errorf("set MTU of %s: %w", v.opts.Name, err)
		}
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("set %s up: %w", v.opts.Name, err)
		}
	}
	return l, nil
}

func sameVXLAN(have, want *netlink.Vxlan) bool {
	return have.VxlanId == want.VxlanId && have.Port == want.Port && !have.Learning &&
		have.SrcAddr.Equal(want.SrcAddr) && have.VtepDevIndex == want.VtepDevIndex &&
		have.HardwareAddr.String() == want.HardwareAddr.String()
}

// entries lists the link's static forwarding entries that have a remote.
func (v *vxlan) entries(l netlink.Link) ([]Entry, error) {
	list, err := netlink.NeighList(l.Attrs().Index, unix.AF_BRIDGE)
	if err != nil {
		return nil, fmt.Errorf("list forwarding entries of %s: %w", v.opts.Name, err)
	}
	var out []Entry
	for _, n := range list {
		dst, ok := netip.AddrFromSlice(n.IP)
		if !ok || len(n.HardwareAddr) != 6 {
			continue
		}
		var e Entry
		copy(e.MAC[:], n.HardwareAddr)
		e.Dst = dst.Unmap()
		out = append(out, e)
	}
	return out, nil
}

func (v *vxlan) neigh(l netlink.Link, e Entry) *netlink.Neigh {
	return &netlink.Neigh{
		LinkIndex:    l.Attrs().Index,
		Family:       unix.AF_BRIDGE,
		State:        netlink.NUD_NOARP | netlink.NUD_PERMANENT,
		Flags:        netlink.NTF_SELF,
		IP:           e.Dst.AsSlice(),
		HardwareAddr: net.HardwareAddr(e.MAC[:]),
	}
}
