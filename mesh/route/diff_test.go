package route

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kilofed/kilofed/mesh/topology"
)

var (
	pfx = netip.MustParsePrefix
	ip  = netip.MustParseAddr
	// cmpNetip compares netip values, whose fields are unexported.
	cmpNetip = cmp.Options{
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmpopts.EquateEmpty(),
	}
)

func TestDiffRoutes(t *testing.T) {
	wg := topology.Route{Dst: pfx("10.2.0.0/24"), Dev: "kilo0"}
	viaLeader := topology.Route{Dst: pfx("10.3.0.0/24"), Gw: ip("172.16.0.1"), Dev: "eth0"}
	v6 := topology.Route{Dst: pfx("fd02::/64"), Dev: "kilo0", Table: 1107}
	tests := []struct {
		name             string
		desired, current []topology.Route
		want             RoutePlan
	}{
		{name: "nothing"},
		{
			name:    "all new",
			desired: []topology.Route{v6, viaLeader, wg},
			want:    RoutePlan{Add: []topology.Route{wg, viaLeader, v6}},
		},
		{
			name:    "same",
			desired: []topology.Route{wg, viaLeader, v6},
			current: []topology.Route{v6, wg, viaLeader},
		},
		{
			name:    "main table spelled 254 and unmasked destination are the same route",
			desired: []topology.Route{{Dst: pfx("10.2.0.9/24"), Dev: "kilo0", Table: topology.MainTable}},
			current: []topology.Route{wg},
		},
		{
			name:    "gateway change replaces",
			desired: []topology.Route{{Dst: pfx("10.3.0.0/24"), Gw: ip("172.16.0.2"), Dev: "eth0"}},
			current: []topology.Route{viaLeader},
			want:    RoutePlan{Replace: []topology.Route{{Dst: pfx("10.3.0.0/24"), Gw: ip("172.16.0.2"), Dev: "eth0"}}},
		},
		{
			name:    "leader change: wireguard route becomes a route via the leader",
			desired: []topology.Route{{Dst: pfx("10.2.0.0/24"), Gw: ip("172.16.0.1"), Dev: "eth0"}},
			current: []topology.Route{wg},
			want:    RoutePlan{Replace: []topology.Route{{Dst: pfx("10.2.0.0/24"), Gw: ip("172.16.0.1"), Dev: "eth0"}}},
		},
		{
			name:    "onlink and src changes replace",
			desired: []topology.Route{{Dst: pfx("10.2.0.0/24"), Dev: "kilo0", Src: ip("10.4.0.1"), OnLink: true}},
			current: []topology.Route{wg},
			want:    RoutePlan{Replace: []topology.Route{{Dst: pfx("10.2.0.0/24"), Dev: "kilo0", Src: ip("10.4.0.1"), OnLink: true}}},
		},
		{
			name:    "same destination in another table is another route",
			desired: []topology.Route{wg, {Dst: pfx("10.2.0.0/24"), Dev: "kilo0", Table: 1107}},
			current: []topology.Route{wg},
			want:    RoutePlan{Add: []topology.Route{{Dst: pfx("10.2.0.0/24"), Dev: "kilo0", Table: 1107}}},
		},
		{
			name:    "stale deleted",
			desired: []topology.Route{wg},
			current: []topology.Route{v6, wg, viaLeader},
			want:    RoutePlan{Delete: []topology.Route{viaLeader, v6}},
		},
		{
			name:    "duplicate owned routes for one destination: extra deleted",
			desired: []topology.Route{wg},
			current: []topology.Route{wg, wg},
			want:    RoutePlan{Delete: []topology.Route{wg}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DiffRoutes(tt.desired, tt.current)
			if d := cmp.Diff(tt.want, got, cmpNetip); d != "" {
				t.Errorf("DiffRoutes (-want +got):\n%s", d)
			}
			if got.Empty() != (len(tt.want.Add)+len(tt.want.Replace)+len(tt.want.Delete) == 0) {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}

func TestDiffRules(t *testing.T) {
	fromPods := topology.Rule{Src: pfx("10.1.0.0/24"), Table: 1107, Priority: 1000}
	anyPrio := topology.Rule{Dst: pfx("fd02::/64"), Table: 1107}
	tests := []struct {
		name             string
		desired, current []topology.Rule
		want             RulePlan
	}{
		{name: "nothing"},
		{name: "new", desired: []topology.Rule{fromPods, anyPrio}, want: RulePlan{Add: []topology.Rule{anyPrio, fromPods}}},
		{name: "same", desired: []topology.Rule{fromPods}, current: []topology.Rule{fromPods}},
		{
			name:    "zero priority matches the kernel's choice",
			desired: []topology.Rule{anyPrio},
			current: []topology.Rule{{Dst: pfx("fd02::/64"), Table: 1107, Priority: 32765}},
		},
		{
			name:    "priority change is delete and add",
			desired: []topology.Rule{{Src: pfx("10.1.0.0/24"), Table: 1107, Priority: 900}},
			current: []topology.Rule{fromPods},
			want:    RulePlan{Add: []topology.Rule{{Src: pfx("10.1.0.0/24"), Table: 1107, Priority: 900}}, Delete: []topology.Rule{fromPods}},
		},
		{
			name:    "main table spelled two ways",
			desired: []topology.Rule{{Src: pfx("10.1.0.0/24"), Table: topology.MainTable, Priority: 5}},
			current: []topology.Rule{{Src: pfx("10.1.0.0/24"), Priority: 5}},
		},
		{
			name:    "duplicates in the kernel: one kept",
			desired: []topology.Rule{fromPods, fromPods},
			current: []topology.Rule{fromPods, fromPods},
			want:    RulePlan{Delete: []topology.Rule{fromPods}},
		},
		{name: "stale", current: []topology.Rule{fromPods}, want: RulePlan{Delete: []topology.Rule{fromPods}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, DiffRules(tt.desired, tt.current), cmpNetip); d != "" {
				t.Errorf("DiffRules (-want +got):\n%s", d)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		routes  []topology.Route
		rules   []topology.Rule
		wantErr bool
	}{
		{name: "ok", routes: []topology.Route{
			{Dst: pfx("10.2.0.0/24"), Dev: "kilo0"},
			{Dst: pfx("fd02::/64"), Gw: ip("fd00:1::1"), Dev: "kilo-vxlan", OnLink: true},
		}, rules: []topology.Rule{{Src: pfx("10.1.0.0/24"), Table: 1}}},
		{name: "identical duplicates are fine", routes: []topology.Route{{Dst: pfx("10.2.0.0/24"), Dev: "kilo0"}, {Dst: pfx("10.2.0.0/24"), Dev: "kilo0"}}},
		{name: "conflicting duplicates", wantErr: true, routes: []topology.Route{{Dst: pfx("10.2.0.0/24"), Dev: "kilo0"}, {Dst: pfx("10.2.0.0/24"), Dev: "eth0"}}},
		{name: "no link", wantErr: true, routes: []topology.Route{{Dst: pfx("10.2.0.0/24")}}},
		{name: "no destination", wantErr: true, routes: []topology.Route{{Dev: "kilo0"}}},
		{name: "IPv4 gateway for IPv6", wantErr: true, routes: []topology.Route{{Dst: pfx("fd02::/64"), Gw: ip("172.16.0.1"), Dev: "kilo0"}}},
		{name: "IPv6 gateway for IPv4", wantErr: true, routes: []topology.Route{{Dst: pfx("10.2.0.0/24"), Gw: ip("fd00:1::1"), Dev: "kilo0"}}},
		{name: "mixed src", wantErr: true, routes: []topology.Route{{Dst: pfx("10.2.0.0/24"), Src: ip("fd00:1::1"), Dev: "kilo0"}}},
		{name: "rule without family", wantErr: true, rules: []topology.Rule{{Table: 1}}},
		{name: "rule mixing families", wantErr: true, rules: []topology.Rule{{Src: pfx("10.0.0.0/8"), Dst: pfx("fd00:1::/64"), Table: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.routes, tt.rules)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
