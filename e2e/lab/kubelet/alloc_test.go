package kubelet

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// allocStep is one operation on an allocator: allocate for Owner (expecting
// Want or WantErr), or release Release.
type allocStep struct {
	Owner   string
	Want    string
	WantErr error
	Release string
}

func TestIPAllocator(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		steps  []allocStep
	}{
		{name: "skips network and .1", prefix: "10.42.0.0/24", steps: []allocStep{
			{Owner: "a", Want: "10.42.0.2"}, {Owner: "b", Want: "10.42.0.3"},
		}},
		{name: "same owner gets same address", prefix: "10.42.0.0/24", steps: []allocStep{
			{Owner: "a", Want: "10.42.0.2"}, {Owner: "a", Want: "10.42.0.2"}, {Owner: "b", Want: "10.42.0.3"},
		}},
		{name: "released address is reused, lowest first", prefix: "10.42.1.0/24", steps: []allocStep{
			{Owner: "a", Want: "10.42.1.2"}, {Owner: "b", Want: "10.42.1.3"}, {Owner: "c", Want: "10.42.1.4"},
			{Release: "10.42.1.3"}, {Release: "10.42.1.2"},
			{Owner: "d", Want: "10.42.1.2"}, {Owner: "e", Want: "10.42.1.3"}, {Owner: "f", Want: "10.42.1.5"},
		}},
		{name: "releasing a free address is harmless", prefix: "10.42.1.0/24", steps: []allocStep{
			{Release: "10.42.1.9"}, {Owner: "a", Want: "10.42.1.2"},
		}},
		{name: "host bits of the prefix ignored", prefix: "10.42.2.77/24", steps: []allocStep{
			{Owner: "a", Want: "10.42.2.2"},
		}},
		{name: "/29 exhausts without broadcast", prefix: "10.9.0.0/29", steps: []allocStep{
			{Owner: "a", Want: "10.9.0.2"}, {Owner: "b", Want: "10.9.0.3"}, {Owner: "c", Want: "10.9.0.4"},
			{Owner: "d", Want: "10.9.0.5"}, {Owner: "e", Want: "10.9.0.6"}, {Owner: "f", WantErr: ErrPodCIDRExhausted},
			{Release: "10.9.0.4"}, {Owner: "f", Want: "10.9.0.4"},
		}},
		{name: "ipv6 skips :: and ::1", prefix: "fd10:244:0:1::/64", steps: []allocStep{
			{Owner: "a", Want: "fd10:244:0:1::2"}, {Owner: "b", Want: "fd10:244:0:1::3"},
		}},
		{name: "ipv6 /126 has no broadcast", prefix: "2001:db8::/126", steps: []allocStep{
			{Owner: "a", Want: "2001:db8::2"}, {Owner: "b", Want: "2001:db8::3"}, {Owner: "c", WantErr: ErrPodCIDRExhausted},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := newIPAllocator(netip.MustParsePrefix(tt.prefix))
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				if s.Release != "" {
					a.Release(netip.MustParseAddr(s.Release))
					continue
				}
				got, err := a.Allocate(s.Owner)
				if s.WantErr != nil {
					if !errors.Is(err, s.WantErr) {
						t.Fatalf("step %d: Allocate(%s) error = %v, want %v", i, s.Owner, err, s.WantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: Allocate(%s): %v", i, s.Owner, err)
				}
				if diff := cmp.Diff(s.Want, got.String()); diff != "" {
					t.Errorf("step %d: Allocate(%s) (-want +got):\n%s", i, s.Owner, diff)
				}
			}
		})
	}
}

func TestNewIPAllocatorTooSmall(t *testing.T) {
	for _, p := range []string{"10.0.0.0/31", "10.0.0.1/32", "2001:db8::/127"} {
		if _, err := newIPAllocator(netip.MustParsePrefix(p)); err == nil {
			t.Errorf("newIPAllocator(%s) = nil error, want too small", p)
		}
	}
}
