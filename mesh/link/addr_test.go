package link

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDiffAddresses(t *testing.T) {
	p := netip.MustParsePrefix
	tests := []struct {
		name             string
		desired, current []netip.Prefix
		add, del         []netip.Prefix
	}{
		{name: "empty"},
		{
			name:    "add to empty link",
			desired: []netip.Prefix{p("10.4.0.1/16"), p("fd4b::1/64")},
			add:     []netip.Prefix{p("10.4.0.1/16"), p("fd4b::1/64")},
		},
		{
			name:    "unchanged",
			desired: []netip.Prefix{p("10.4.0.1/16")},
			current: []netip.Prefix{p("10.4.0.1/16")},
		},
		{
			name:    "prefix length change replaces the address",
			desired: []netip.Prefix{p("10.4.0.1/16")},
			current: []netip.Prefix{p("10.4.0.1/32")},
			add:     []netip.Prefix{p("10.4.0.1/16")},
			del:     []netip.Prefix{p("10.4.0.1/32")},
		},
		{
			name:    "stale addresses removed, link-local kept",
			desired: []netip.Prefix{p("10.4.0.2/16")},
			current: []netip.Prefix{p("10.4.0.1/16"), p("fe80::1/64"), p("10.4.0.2/16"), p("fd4b::1/64")},
			del:     []netip.Prefix{p("10.4.0.1/16"), p("fd4b::1/64")},
		},
		{
			name:    "desired duplicates collapse",
			desired: []netip.Prefix{p("10.4.0.2/16"), p("10.4.0.2/16")},
			add:     []netip.Prefix{p("10.4.0.2/16")},
		},
		{
			name:    "empty desired clears all but link-local",
			current: []netip.Prefix{p("10.4.0.1/16"), p("fe80::1/64")},
			del:     []netip.Prefix{p("10.4.0.1/16")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			add, del := DiffAddresses(tt.desired, tt.current)
			cmpPrefix := cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })
			if d := cmp.Diff(tt.add, add, cmpPrefix, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("add (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.del, del, cmpPrefix, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("del (-want +got):\n%s", d)
			}
		})
	}
}
