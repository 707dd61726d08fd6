package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology"
)

func TestInternalCIDRPicksTheLocalAddress(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	// The host's addresses: a CNI bridge first, then the underlay.
	local := pp("10.42.0.1/24", "10.0.1.10/24", "fd00:1::10/64", "203.0.113.10/32")
	fromNode := topology.Node{Name: "node-beijing", InternalIP: netip.MustParsePrefix("10.42.0.1/24")}
	for _, tc := range []struct {
		name    string
		cidrs   []netip.Prefix
		want4   string
		want6   string
		wantErr string
	}{
		{name: "no flag keeps the Node's", want4: "10.42.0.1/24"},
		{name: "Kilo's manifests: the host IP as a /32", cidrs: pp("10.0.1.10/32"), want4: "10.0.1.10/24"},
		{name: "a range, both families", cidrs: pp("10.0.0.0/16", "fd00::/16"), want4: "10.0.1.10/24", want6: "fd00:1::10/64"},
		{name: "IPv6 only", cidrs: pp("fd00::/16"), want6: "fd00:1::10/64"},
		{name: "nothing local in it", cidrs: pp("192.168.0.0/16"), wantErr: "no address of this host is in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withInternalCIDRs(fromNode, tc.cidrs, local)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want4, want6 netip.Prefix
			if tc.want4 != "" {
				want4 = netip.MustParsePrefix(tc.want4)
			}
			if tc.want6 != "" {
				want6 = netip.MustParsePrefix(tc.want6)
			}
			if diff := cmp.Diff([2]netip.Prefix{want4, want6}, [2]netip.Prefix{got.InternalIP, got.InternalIP6}, prefixCmp); diff != "" {
				t.Errorf("internal IPs (-want +got):\n%s", diff)
			}
			if got.Name != fromNode.Name {
				t.Errorf("name %q changed", got.Name)
			}
		})
	}
}
