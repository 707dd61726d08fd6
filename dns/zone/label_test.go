package zone

import "testing"

func TestAddressLabelDashesTheAddress(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"10.11.0.4", "10-11-0-4"},
		{"fd00::4", "fd00--4"},
		{"2001:db8:0:1::a", "2001-db8-0-1--a"},
	} {
		if got := AddressLabel(tc.addr); got != tc.want {
			t.Errorf("AddressLabel(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
