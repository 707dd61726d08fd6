package encap

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFakeRecord(t *testing.T) {
	ctx := context.Background()
	f := NewFake(VXLANLink)
	f.Set(ctx, []netip.Addr{ip("10.99.1.3"), ip("10.99.1.2"), ip("10.99.1.3")})
	f.Set(ctx, nil)
	f.Close(ctx)
	want := "set kilo-vxlan 10.99.1.2 10.99.1.3\nset kilo-vxlan\nclose kilo-vxlan\n"
	if d := cmp.Diff(want, f.Record()); d != "" {
		t.Errorf("Record (-want +got):\n%s", d)
	}
	if f.Link() != VXLANLink {
		t.Errorf("Link() = %q", f.Link())
	}
}
