//go:build linux

package encap

import (
	"net/netip"
	"testing"
)

func TestInboundNamesWhatTheTunnelReceives(t *testing.T) {
	local := netip.MustParseAddr("192.168.10.2")
	tests := []struct {
		name string
		opts Options
		want Inbound
	}{
		{name: "none", opts: Options{Kind: KindNone}, want: Inbound{Kind: KindNone}},
		{name: "ipip", opts: Options{Kind: KindIPIP}, want: Inbound{Kind: KindIPIP}},
		{name: "vxlan default port", opts: Options{Kind: KindVXLAN, Local: local}, want: Inbound{Kind: KindVXLAN, Port: DefaultPort}},
		{name: "vxlan own port", opts: Options{Kind: KindVXLAN, Local: local, Port: 8472}, want: Inbound{Kind: KindVXLAN, Port: 8472}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Inbound(); got != tt.want {
				t.Errorf("Inbound() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
