package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology"
)

func TestFlagsGiveTheTopologyOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    topology.Options
		wantErr string
	}{
		{
			name: "Kilo's defaults",
			args: []string{"--hostname=n1"},
			want: topology.Options{
				Granularity: topology.LocationGranularity, Subnet: netip.MustParsePrefix("10.4.0.0/16"), Port: 51820,
				Encapsulate: topology.EncapsulateAlways, Links: topology.Links{WireGuard: "kilo0"}, MeshKeepalive: 25 * time.Second,
			},
		},
		{
			name: "the Chinese seed's DaemonSet args",
			args: []string{"--kubeconfig=/etc/kubernetes/kubeconfig", "--hostname=node-beijing", "--mesh-granularity=location", "--subnet=10.5.0.0/16", "--encapsulate=never"},
			want: topology.Options{
				Granularity: topology.LocationGranularity, Subnet: netip.MustParsePrefix("10.5.0.0/16"), Port: 51820,
				Encapsulate: topology.EncapsulateNever, Links: topology.Links{WireGuard: "kilo0"}, MeshKeepalive: 25 * time.Second,
			},
		},
		{
			name: "service ranges, no local routes, another interface",
			args: []string{"--hostname=n1", "--service-cidr=10.96.0.0/12, fd10:96::/112", "--local=false", "--interface=wg0", "--port=51821", "--mesh-keepalive=0"},
			want: topology.Options{
				Granularity: topology.LocationGranularity, Subnet: netip.MustParsePrefix("10.4.0.0/16"), Port: 51821,
				Encapsulate: topology.EncapsulateAlways, Links: topology.Links{WireGuard: "wg0"}, NoLocalRoutes: true,
				ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd10:96::/112")},
			},
		},
		{name: "bad granularity", args: []string{"--hostname=n1", "--mesh-granularity=region"}, wantErr: `--mesh-granularity "region": invalid value: use location, full or cross`},
		{name: "bad encapsulate", args: []string{"--hostname=n1", "--encapsulate=ipip"}, wantErr: `--encapsulate "ipip": invalid value: use never, crosssubnet or always`},
		{name: "bad subnet", args: []string{"--hostname=n1", "--subnet=10.5.0.0"}, wantErr: `--subnet "10.5.0.0"`},
		{name: "bad service range", args: []string{"--hostname=n1", "--service-cidr=10.96.0.0/33"}, wantErr: `--service-cidr "10.96.0.0/33"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.topologyOptions()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadWireGuardModeIsRefused(t *testing.T) {
	if _, err := parseFlags([]string{"--wireguard=boringtun"}); err == nil {
		t.Error("--wireguard=boringtun accepted; want auto, kernel or userspace only")
	}
}
