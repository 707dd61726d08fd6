//go:build linux

package mtu

import (
	"testing"

	"github.com/kilofed/kilofed/mesh/link/linktest"
)

func TestPrivilegedAuto(t *testing.T) {
	linktest.Require(t)
	ns := linktest.NetNS(t)
	a, b := linktest.Name(t, "ma"), linktest.Name(t, "mb")
	linktest.Veth(t, ns, a, "10.99.2.1/24", ns, b, "")
	linktest.IP(t, "-n", ns, "link", "set", a, "mtu", "1460")
	linktest.IP(t, "-n", ns, "route", "add", "default", "via", "10.99.2.2", "dev", a)
	for _, underlay := range []string{a, ""} {
		var got Plan
		linktest.Run(t, ns, func() (err error) {
			got, err = Auto(underlay, VXLANOverhead)
			return err
		})
		if want := (Plan{Underlay: 1460, WireGuard: 1380, Encap: 1410, Path: 1380}); got != want {
			t.Errorf("Auto(%q) = %+v, want %+v", underlay, got, want)
		}
	}
}
