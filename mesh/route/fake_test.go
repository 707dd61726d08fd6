package route

import (
	"context"
	"github.com/kilofed/kilofed/mesh/golden"
	"testing"

	"github.com/kilofed/kilofed/mesh/topology"
)

func TestFakeRecord(t *testing.T) {
	ctx := context.Background()
	f := &Fake{}
	routes := []topology.Route{
		{Dst: pfx("fd02::/64"), Gw: ip("fd16::2"), Dev: "kilo-vxlan", OnLink: true},
		{Dst: pfx("10.2.0.0/24"), Dev: "kilo0", Src: ip("10.1.0.1")},
		{Dst: pfx("10.3.0.0/24"), Gw: ip("172.16.0.2"), Dev: "kilo-vxlan", OnLink: true},
		{Dst: pfx("10.9.0.0/16"), Dev: "kilo0", Table: 1107},
	}
	rules := []topology.Rule{
		{Src: pfx("10.1.0.0/24"), Dst: pfx("10.9.0.0/16"), Table: 1107, Priority: 1100},
		{Dst: pfx("fd09::/64"), Table: topology.MainTable},
	}
	if err := f.Set(ctx, routes, rules); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, routes[:1], nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, []topology.Route{{Dst: pfx("10.2.0.0/24")}}, nil); err == nil {
		t.Error("Set accepted a route without link")
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "fake.golden", f.Record())
	if r, l := f.State(); len(r)+len(l) != 0 {
		t.Errorf("state after Close: %v %v", r, l)
	}
}
