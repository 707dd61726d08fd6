package topology

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    Options
		wantErr string // words the error must hold; empty for success
		want    Options
	}{{
		name: "zero value gets Kilo's defaults",
		want: Options{Granularity: LocationGranularity, Subnet: DefaultSubnet, Port: 51820, Encapsulate: EncapsulateNever,
			Links: Links{WireGuard: "kilo0", Tunnel: "tunl0"}, Table: 1107},
	}, {
		name: "given values are kept",
		opts: Options{Granularity: CrossGranularity, Subnet: pfx("10.5.0.0/16"), Port: 51821, Encapsulate: EncapsulateAlways,
			Links: Links{WireGuard: "kf0", Underlay: "eth1", Tunnel: "kilo-vxlan"}, Table: 7, ServiceCIDRs: pfxs("10.96.0.1/12")},
		want: Options{Granularity: CrossGranularity, Subnet: pfx("10.5.0.0/16"), Port: 51821, Encapsulate: EncapsulateAlways,
			Links: Links{WireGuard: "kf0", Underlay: "eth1", Tunnel: "kilo-vxlan"}, Table: 7, ServiceCIDRs: pfxs("10.96.0.0/12")},
	}, {
		name: "an IPv4-mapped subnet is unmapped",
		opts: Options{Subnet: pfx("::ffff:10.5.0.0/112")},
		want: Options{Granularity: LocationGranularity, Subnet: pfx("10.5.0.0/16"), Port: 51820, Encapsulate: EncapsulateNever,
			Links: Links{WireGuard: "kilo0", Tunnel: "tunl0"}, Table: 1107},
	}, {
		name:    "unknown granularity",
		opts:    Options{Granularity: "logical"},
		wantErr: `granularity "logical" is unknown`,
	}, {
		name:    "unknown encapsulation",
		opts:    Options{Encapsulate: "ipip"},
		wantErr: `encapsulation "ipip" is unknown`,
	}, {
		name:    "host bits in the subnet",
		opts:    Options{Subnet: pfx("10.5.1.0/16")},
		wantErr: "use 10.5.0.0/16",
	}, {
		name:    "subnet too small",
		opts:    Options{Subnet: pfx("10.5.0.0/31")},
		wantErr: "too small",
	}, {
		name:    "invalid subnet",
		opts:    Options{Subnet: netip.PrefixFrom(netip.MustParseAddr("10.5.0.0"), 33)},
		wantErr: "not a valid CIDR",
	}, {
		name:    "negative table",
		opts:    Options{Table: -1},
		wantErr: "negative",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			top, err := New(seedChina(), nil, tc.opts)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New error = %v, want ErrInvalidOptions mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, top.Options(), netipCmp); diff != "" {
				t.Errorf("Options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmptyTopology(t *testing.T) {
	top := mustNew(t, nil, []Peer{laptopPeer()}, Options{})
	if len(top.Segments) != 0 || len(top.Peers) != 1 {
		t.Fatalf("segments %d peers %d", len(top.Segments), len(top.Peers))
	}
	iface, err := top.PeerConf("seb-laptop")
	if err != nil || len(iface.Peers) != 0 {
		t.Errorf("PeerConf without nodes = %+v, %v; want no peers", iface, err)
	}
	if !strings.HasPrefix(top.DOT(), "digraph kilo {") {
		t.Errorf("DOT without nodes is not a graph")
	}
}

func TestMeshKeepaliveAppliesBetweenSegmentsOnly(t *testing.T) {
	nodes := []Node{
		{Name: "a", Location: "x", Ready: true, Key: testKey("a"), InternalIP: netip.MustParsePrefix("10.0.1.10/24"), ExternalIP: netip.MustParseAddr("203.0.113.10")},
		{Name: "b", Location: "y", Ready: true, Key: testKey("b"), InternalIP: netip.MustParsePrefix("10.0.2.10/24"), ExternalIP: netip.MustParseAddr("203.0.113.20"), PersistentKeepalive: 40 * time.Second},
	}
	peers := []Peer{{Name: "laptop", PublicKey: testKey("laptop"), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.4.100.10/32")}}}
	top, err := New(nodes, peers, Options{MeshKeepalive: 25 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := top.WireGuardConfig("a", wgconf.SecretKey(testKey("a-private")))
	if err != nil {
		t.Fatal(err)
	}
	got := map[wgconf.Key]time.Duration{}
	for _, p := range conf.Peers {
		got[p.PublicKey] = p.PersistentKeepalive
	}
	if got[testKey("b")] != 40*time.Second {
		t.Errorf("keepalive to b = %v, want b's own 40s (the larger)", got[testKey("b")])
	}
	if got[testKey("laptop")] != 0 {
		t.Errorf("keepalive to the laptop = %v, want 0: MeshKeepalive is for tunnels between segments", got[testKey("laptop")])
	}
	conf, _ = top.WireGuardConfig("b", wgconf.SecretKey(testKey("b-private")))
	if conf.Peers[0].PersistentKeepalive != 40*time.Second {
		t.Errorf("keepalive from b to a = %v, want 40s", conf.Peers[0].PersistentKeepalive)
	}
	top, _ = New([]Node{nodes[0], {Name: "c", Location: "z", Ready: true, Key: testKey("c"), InternalIP: netip.MustParsePrefix("10.0.3.10/24")}}, nil, Options{MeshKeepalive: 25 * time.Second})
	conf, _ = top.WireGuardConfig("a", wgconf.SecretKey(testKey("a-private")))
	if conf.Peers[0].PersistentKeepalive != 25*time.Second {
		t.Errorf("keepalive from a to c = %v, want MeshKeepalive 25s", conf.Peers[0].PersistentKeepalive)
	}
}
