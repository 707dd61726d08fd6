//go:build linux

package mtu

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// Auto reads the MTU of the underlay link and returns the Plan for it (see
// Compute). An empty underlay means the link of the default route, IPv4
// first.
func Auto(underlay string, encapOverhead int) (Plan, error) {
	var l netlink.Link
	var err error
	if underlay == "" {
		l, err = defaultRouteLink()
	} else {
		l, err = netlink.LinkByName(underlay)
	}
	if err != nil {
		return Plan{}, fmt.Errorf("find underlay link %q for the MTU: %w", underlay, err)
	}
	return Compute(l.Attrs().MTU, encapOverhead)
}

func defaultRouteLink() (netlink.Link, error) {
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(fam, &netlink.Route{Dst: nil}, 0)
		if err != nil {
			return nil, err
		}
		for _, r := range routes {
			if r.Dst != nil {
				if ones, _ := r.Dst.Mask.Size(); ones != 0 {
					continue
				}
			}
			if r.LinkIndex > 0 {
				return netlink.LinkByIndex(r.LinkIndex)
			}
		}
	}
	return nil, errors.New("no default route: name the underlay link")
}
