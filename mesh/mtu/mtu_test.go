package mtu

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompute(t *testing.T) {
	tests := []struct {
		name     string
		underlay int
		overhead int
		want     Plan
		wantErr  error
	}{
		{name: "ethernet, no encapsulation", underlay: 1500, want: Plan{Underlay: 1500, WireGuard: 1420, Path: 1420}},
		{name: "ethernet, vxlan", underlay: 1500, overhead: VXLANOverhead, want: Plan{Underlay: 1500, WireGuard: 1420, Encap: 1450, Path: 1420}},
		{name: "ethernet, ipip", underlay: 1500, overhead: IPIPOverhead, want: Plan{Underlay: 1500, WireGuard: 1420, Encap: 1480, Path: 1420}},
		{name: "jumbo frames", underlay: 9001, overhead: VXLAN6Overhead, want: Plan{Underlay: 9001, WireGuard: 8921, Encap: 8931, Path: 8921}},
		{name: "cloud 1460", underlay: 1460, want: Plan{Underlay: 1460, WireGuard: 1380, Path: 1380}},
		{name: "smallest usable", underlay: 1360, want: Plan{Underlay: 1360, WireGuard: 1280, Path: 1280}},
		{name: "too small", underlay: 1359, wantErr: ErrTooSmall},
		{name: "loopback-like huge", underlay: 65536, overhead: VXLANOverhead, want: Plan{Underlay: 65536, WireGuard: 65456, Encap: 65486, Path: 65456}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compute(tt.underlay, tt.overhead)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Compute() error = %v, want %v", err, tt.wantErr)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Compute() (-want +got):\n%s", d)
			}
		})
	}
}
