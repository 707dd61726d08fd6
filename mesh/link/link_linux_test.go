//go:build linux

package link_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/kilofed/kilofed/mesh/link"
	"github.com/kilofed/kilofed/mesh/link/linktest"
)

func TestPrivilegedSetAddresses(t *testing.T) {
	linktest.Require(t)
	nsA, nsB := linktest.NetNS(t), linktest.NetNS(t)
	a, b := linktest.Name(t, "va"), linktest.Name(t, "vb")
	linktest.Veth(t, nsA, a, "", nsB, b, "")
	p := netip.MustParsePrefix
	steps := []struct {
		name string
		want []netip.Prefix
	}{
		{name: "add", want: []netip.Prefix{p("10.98.0.1/24"), p("10.98.0.2/24"), p("fd4b:1::1/64")}},
		{name: "again", want: []netip.Prefix{p("10.98.0.1/24"), p("10.98.0.2/24"), p("fd4b:1::1/64")}},
		// Deleting the primary 10.98.0.1 also drops its secondary 10.98.0.2
		// in the kernel; SetAddresses must repair that.
		{name: "remove primary keep secondary", want: []netip.Prefix{p("10.98.0.2/24")}},
		{name: "change prefix length", want: []netip.Prefix{p("10.98.0.2/16")}},
		{name: "clear", want: nil},
	}
	for _, s := range steps {
		linktest.Run(t, nsA, func() error {
			if err := link.SetAddresses(a, s.want); err != nil {
				return err
			}
			got, err := link.Addresses(a)
			if err != nil {
				return err
			}
			var global []netip.Prefix
			for _, g := range got {
				if !(g.Addr().Is6() && g.Addr().IsLinkLocalUnicast()) {
					global = append(global, g)
				}
			}
			add, del := link.DiffAddresses(s.want, global)
			if len(add)+len(del) != 0 {
				t.Errorf("%s: addresses %v, want %v", s.name, got, s.want)
			}
			return nil
		})
	}
	linktest.Run(t, nsA, func() error {
		if err := link.SetMTU(a, 1400); err != nil {
			return err
		}
		err := link.SetUp("kflmissing")
		if !errors.Is(err, link.ErrLinkNotFound) {
			t.Errorf("SetUp(missing) = %v, want ErrLinkNotFound", err)
		}
		if err := link.Delete(a); err != nil {
			return err
		}
		if err := link.Delete(a); err != nil {
			t.Errorf("second Delete: %v", err)
		}
		return nil
	})
	// Deleting one end of a veth pair deletes the other.
	if out, err := linktest.Exec(nsB, "ip", "link", "show", b); err == nil {
		t.Errorf("%s still exists after deleting its peer: %s", b, out)
	}
}
