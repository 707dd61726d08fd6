package encap

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var ip = netip.MustParseAddr

var cmpAddr = cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpopts.EquateEmpty()}

func mac(ip netip.Addr) [6]byte {
	var m [6]byte
	copy(m[:], MAC(ip))
	return m
}

func TestMAC(t *testing.T) {
	tests := []struct {
		name string
		ip   netip.Addr
		want string
	}{
		{name: "IPv4 is embedded", ip: ip("10.99.1.2"), want: "02:4b:0a:63:01:02"},
		{name: "IPv4-mapped is the same", ip: ip("::ffff:10.99.1.2"), want: "02:4b:0a:63:01:02"},
		{name: "IPv6 is hashed", ip: ip("fd99::2"), want: MAC(ip("fd99::2")).String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MAC(tt.ip).String(); got != tt.want {
				t.Errorf("MAC(%s) = %s, want %s", tt.ip, got, tt.want)
			}
		})
	}
	if MAC(ip("fd99::2")).String() == MAC(ip("fd99::3")).String() {
		t.Error("two IPv6 addresses give the same MAC")
	}
	if m := MAC(ip("fd99::2")); m[0] != 0x02 || m[1] != 0x4b {
		t.Errorf("IPv6 MAC %s is not locally administered 02:4b:...", m)
	}
}

func TestEntries(t *testing.T) {
	local := ip("10.99.1.1")
	tests := []struct {
		name    string
		remotes []netip.Addr
		want    []Entry
	}{
		{name: "none"},
		{
			name:    "one remote: flood and unicast entries",
			remotes: []netip.Addr{ip("10.99.1.2")},
			want:    []Entry{{Dst: ip("10.99.1.2")}, {MAC: mac(ip("10.99.1.2")), Dst: ip("10.99.1.2")}},
		},
		{
			name:    "self, other family and duplicates dropped",
			remotes: []netip.Addr{ip("10.99.1.3"), local, ip("fd99::2"), ip("::ffff:10.99.1.3"), {}},
			want:    []Entry{{Dst: ip("10.99.1.3")}, {MAC: mac(ip("10.99.1.3")), Dst: ip("10.99.1.3")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, Entries(local, tt.remotes), cmpAddr); d != "" {
				t.Errorf("Entries (-want +got):\n%s", d)
			}
		})
	}
}

func TestDiffEntries(t *testing.T) {
	a, b, c := Entry{Dst: ip("10.99.1.2")}, Entry{Dst: ip("10.99.1.3")}, Entry{MAC: mac(ip("10.99.1.3")), Dst: ip("10.99.1.3")}
	tests := []struct {
		name             string
		desired, current []Entry
		add, del         []Entry
	}{
		{name: "none"},
		{name: "same", desired: []Entry{a, b}, current: []Entry{b, a}},
		{name: "new remote", desired: []Entry{a, b, c}, current: []Entry{a}, add: []Entry{b, c}},
		{name: "remote gone", desired: []Entry{a}, current: []Entry{c, a, b}, del: []Entry{b, c}},
		{name: "remote replaced", desired: []Entry{b}, current: []Entry{a}, add: []Entry{b}, del: []Entry{a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			add, del := DiffEntries(tt.desired, tt.current)
			if d := cmp.Diff(tt.add, add, cmpAddr); d != "" {
				t.Errorf("add (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.del, del, cmpAddr); d != "" {
				t.Errorf("del (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseKind(t *testing.T) {
	tests := []struct {
		name, in string
		want     Kind
		overhead int
		wantErr  bool
	}{
		{name: "detect", in: ""},
		{name: "none", in: "none", want: KindNone},
		{name: "ipip", in: "ipip", want: KindIPIP, overhead: 20},
		{name: "vxlan", in: "vxlan", want: KindVXLAN, overhead: 50},
		{name: "bad", in: "gre", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKind(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want || got.Overhead() != tt.overhead {
				t.Errorf("ParseKind(%q) = %q (overhead %d), %v", tt.in, got, got.Overhead(), err)
			}
		})
	}
}

func TestGateway6(t *testing.T) {
	tests := []struct {
		name   string
		remote netip.Addr
		want   netip.Addr
	}{
		{name: "IPv4 remote", remote: ip("10.99.1.2"), want: ip("fe80::4b:aff:fe63:102")},
		{name: "IPv6 remote", remote: ip("fd99:1::2"), want: Gateway6(ip("fd99:1::2"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Gateway6(tt.remote)
			if got != tt.want || !got.IsLinkLocalUnicast() {
				t.Errorf("Gateway6(%s) = %s, want link-local %s", tt.remote, got, tt.want)
			}
			if m := gatewayMAC(got); m.String() != MAC(tt.remote).String() {
				t.Errorf("gatewayMAC(%s) = %s, want MAC(remote) %s", got, m, MAC(tt.remote))
			}
		})
	}
}

func TestNextHop(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.95.2.0/24"), netip.MustParsePrefix("fd95:2::/64")
	tests := []struct {
		name       string
		kind       Kind
		dst        netip.Prefix
		remote     netip.Addr
		gw         netip.Addr
		onlink, ok bool
	}{
		{name: "vxlan IPv4 via remote by ARP", kind: KindVXLAN, dst: v4, remote: ip("10.99.1.2"), gw: ip("10.99.1.2"), onlink: true, ok: true},
		{name: "vxlan IPv6 over IPv4", kind: KindVXLAN, dst: v6, remote: ip("10.99.1.2"), gw: Gateway6(ip("10.99.1.2")), ok: true},
		{name: "vxlan IPv6 over IPv6", kind: KindVXLAN, dst: v6, remote: ip("fd99:1::2"), gw: Gateway6(ip("fd99:1::2")), ok: true},
		{name: "vxlan IPv4 over IPv6 impossible", kind: KindVXLAN, dst: v4, remote: ip("fd99:1::2")},
		{name: "ipip IPv4", kind: KindIPIP, dst: v4, remote: ip("10.99.1.2"), gw: ip("10.99.1.2"), onlink: true, ok: true},
		{name: "ipip IPv6 impossible", kind: KindIPIP, dst: v6, remote: ip("10.99.1.2")},
		{name: "none", kind: KindNone, dst: v4, remote: ip("10.99.1.2")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw, onlink, ok := tt.kind.NextHop(tt.dst, tt.remote)
			if gw != tt.gw || onlink != tt.onlink || ok != tt.ok {
				t.Errorf("NextHop = %s, %v, %v; want %s, %v, %v", gw, onlink, ok, tt.gw, tt.onlink, tt.ok)
			}
		})
	}
}
