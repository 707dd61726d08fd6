package lab

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSpecDefaults(t *testing.T) {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	tests := []struct {
		name string
		spec Spec
		want Spec
	}{{
		name: "seed cluster keeps the seed's addresses and fills the rest",
		spec: Spec{Name: "t1", Clusters: []ClusterSpec{SeedClusterSpec()}},
		want: Spec{Name: "t1", Clusters: []ClusterSpec{{
			Name: "c1", PodCIDR: p("10.10.0.0/16"), ServiceCIDR: p("10.20.0.0/16"), WireGuardSubnet: p("10.5.0.0/16"),
			NodeCIDRMaskSize: 24, ClusterDNS: a("10.20.0.10"), ClusterDomain: "cluster.local",
			Locations: []LocationSpec{
				{Name: "cn-beijing", LAN: p("10.0.1.0/24"), PublicIP: a("198.51.100.1"), Nodes: []NodeSpec{
					{Name: "node-beijing", LANIP: a("10.0.1.10"), PublicIP: a("203.0.113.10"), Labels: map[string]string{RegionLabel: "cn-beijing"}},
					{Name: "node-beijing-2", LANIP: a("10.0.1.11"), PublicIP: a("203.0.113.11"), Labels: map[string]string{RegionLabel: "cn-beijing"}},
				}},
				{Name: "cn-shanghai", LAN: p("10.0.2.0/24"), PublicIP: a("198.51.100.2"), Nodes: []NodeSpec{
					{Name: "node-shanghai", LANIP: a("10.0.2.20"), PublicIP: a("198.51.100.20"), Labels: map[string]string{RegionLabel: "cn-shanghai"}},
					{Name: "node-shanghai-2", LANIP: a("10.0.2.10"), PublicIP: a("203.0.113.12"), Labels: map[string]string{RegionLabel: "cn-shanghai"}},
				}},
			},
		}}},
	}, {
		name: "second cluster gets the seed's DR ranges; NAT nodes get no public IP; labels may override the region",
		spec: Spec{Name: "t2", Clusters: []ClusterSpec{
			{Locations: []LocationSpec{{Nodes: []NodeSpec{{}}}}},
			{Name: "dr", Locations: []LocationSpec{{NAT: true, Nodes: []NodeSpec{{Labels: map[string]string{RegionLabel: "eu"}}}}}},
		}},
		want: Spec{Name: "t2", Clusters: []ClusterSpec{{
			Name: "c1", PodCIDR: p("10.10.0.0/16"), ServiceCIDR: p("10.20.0.0/16"), WireGuardSubnet: p("10.5.0.0/16"),
			NodeCIDRMaskSize: 24, ClusterDNS: a("10.20.0.10"), ClusterDomain: "cluster.local",
			Locations: []LocationSpec{{Name: "loc1", LAN: p("10.0.1.0/24"), PublicIP: a("198.51.100.1"), Nodes: []NodeSpec{
				{Name: "loc1-1", LANIP: a("10.0.1.10"), PublicIP: a("203.0.113.10"), Labels: map[string]string{RegionLabel: "loc1"}},
			}}},
		}, {
			Name: "dr", PodCIDR: p("10.11.0.0/16"), ServiceCIDR: p("10.21.0.0/16"), WireGuardSubnet: p("10.6.0.0/16"),
			NodeCIDRMaskSize: 24, ClusterDNS: a("10.21.0.10"), ClusterDomain: "cluster.local",
			Locations: []LocationSpec{{Name: "loc1", LAN: p("10.0.2.0/24"), NAT: true, PublicIP: a("198.51.100.2"), Nodes: []NodeSpec{
				{Name: "loc1-1", LANIP: a("10.0.2.10"), Labels: map[string]string{RegionLabel: "eu"}},
			}}},
		}}},
	}, {
		name: "default LANs skip explicit ones",
		spec: Spec{Name: "t3", Clusters: []ClusterSpec{{Locations: []LocationSpec{
			{Nodes: []NodeSpec{{}}}, {LAN: p("10.0.1.0/24"), Nodes: []NodeSpec{{}}},
		}}}},
		want: Spec{Name: "t3", Clusters: []ClusterSpec{{
			Name: "c1", PodCIDR: p("10.10.0.0/16"), ServiceCIDR: p("10.20.0.0/16"), WireGuardSubnet: p("10.5.0.0/16"),
			NodeCIDRMaskSize: 24, ClusterDNS: a("10.20.0.10"), ClusterDomain: "cluster.local",
			Locations: []LocationSpec{
				{Name: "loc1", LAN: p("10.0.2.0/24"), PublicIP: a("198.51.100.1"), Nodes: []NodeSpec{
					{Name: "loc1-1", LANIP: a("10.0.2.10"), PublicIP: a("203.0.113.10"), Labels: map[string]string{RegionLabel: "loc1"}},
				}},
				{Name: "loc2", LAN: p("10.0.1.0/24"), PublicIP: a("198.51.100.2"), Nodes: []NodeSpec{
					{Name: "loc2-1", LANIP: a("10.0.1.10"), PublicIP: a("203.0.113.11"), Labels: map[string]string{RegionLabel: "loc2"}},
				}},
			},
		}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.spec.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if err := got.validate(); err != nil {
				t.Errorf("defaults do not validate: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
				cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
				t.Errorf("withDefaults (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSpecDefaultsDualStack(t *testing.T) {
	a := netip.MustParseAddr
	seed := SeedClusterSpec()
	seed.DualStack = true
	got, err := Spec{Name: "d", Clusters: []ClusterSpec{{Locations: []LocationSpec{{Nodes: []NodeSpec{{}}}}}, seed}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if err := got.validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c := got.Clusters[0]; c.DualStack || c.PodCIDR6.IsValid() || c.Locations[0].LAN6.IsValid() || c.Locations[0].Nodes[0].LANIP6.IsValid() {
		t.Errorf("a cluster without DualStack got IPv6: %+v", c)
	}
	c := got.Clusters[1]
	type fam struct{ v4, v6 string }
	for _, tc := range []struct {
		what string
		got  fam
		want fam
	}{
		{"pod CIDR", fam{c.PodCIDR.String(), c.PodCIDR6.String()}, fam{"10.11.0.0/16", "2001:db8:11::/56"}},
		{"service CIDR", fam{c.ServiceCIDR.String(), c.ServiceCIDR6.String()}, fam{"10.21.0.0/16", "2001:db8:21::/112"}},
		{"beijing LAN", fam{c.Locations[0].LAN.String(), c.Locations[0].LAN6.String()}, fam{"10.0.1.0/24", "2001:db8:0:1::/64"}},
		{"shanghai LAN", fam{c.Locations[1].LAN.String(), c.Locations[1].LAN6.String()}, fam{"10.0.2.0/24", "2001:db8:0:2::/64"}},
		{"node-beijing", fam{c.Locations[0].Nodes[0].LANIP.String(), c.Locations[0].Nodes[0].LANIP6.String()}, fam{"10.0.1.10", "2001:db8:0:1::10"}},
		{"node-shanghai", fam{c.Locations[1].Nodes[0].LANIP.String(), c.Locations[1].Nodes[0].LANIP6.String()}, fam{"10.0.2.20", "2001:db8:0:2::20"}},
		{"node-shanghai-2", fam{c.Locations[1].Nodes[1].LANIP.String(), c.Locations[1].Nodes[1].LANIP6.String()}, fam{"10.0.2.10", "2001:db8:0:2::10"}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	if c.NodeCIDRMaskSize6 != 64 {
		t.Errorf("NodeCIDRMaskSize6 %d, want 64", c.NodeCIDRMaskSize6)
	}
	if r := routerLANIP(c.Locations[0].LAN6); r != a("2001:db8:0:1::1") {
		t.Errorf("IPv6 router %s, want 2001:db8:0:1::1", r)
	}
}

func TestSpecDefaultsDoNotTouchTheCaller(t *testing.T) {
	spec := Spec{Clusters: []ClusterSpec{SeedClusterSpec()}}
	if _, err := spec.withDefaults(); err != nil {
		t.Fatal(err)
	}
	if spec.Name != "" || spec.Clusters[0].Name != "" || spec.Clusters[0].Locations[0].Nodes[1].LANIP.IsValid() ||
		spec.Clusters[0].Locations[0].Nodes[0].Labels != nil {
		t.Errorf("withDefaults changed its receiver: %+v", spec)
	}
	s1, _ := Spec{Clusters: spec.Clusters}.withDefaults()
	s2, _ := Spec{Clusters: spec.Clusters}.withDefaults()
	if s1.Name == s2.Name || !runIDRe.MatchString(s1.Name) {
		t.Errorf("random run ids %q and %q: want two different [a-z0-9]{1,6}", s1.Name, s2.Name)
	}
}

func TestSpecValidate(t *testing.T) {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	one := func(mod func(c *ClusterSpec)) Spec {
		c := ClusterSpec{Locations: []LocationSpec{{Nodes: []NodeSpec{{Name: "n1"}, {Name: "n2"}}}}}
		mod(&c)
		return Spec{Name: "v", Clusters: []ClusterSpec{c}}
	}
	tests := []struct {
		name string
		spec Spec
		want string // substring of the error
	}{
		{name: "no clusters", spec: Spec{Name: "v"}, want: "no clusters"},
		{name: "bad run id", spec: Spec{Name: "Toolong1", Clusters: []ClusterSpec{{Locations: []LocationSpec{{Nodes: []NodeSpec{{}}}}}}}, want: "Spec.Name"},
		{name: "duplicate node", spec: one(func(c *ClusterSpec) { c.Locations[0].Nodes[1].Name = "n1" }), want: "two nodes of the cluster"},
		{name: "node name not a DNS label", spec: one(func(c *ClusterSpec) { c.Locations[0].Nodes[0].Name = "N_1" }), want: "not a DNS label"},
		{name: "pod CIDR overlaps service CIDR", spec: one(func(c *ClusterSpec) { c.ServiceCIDR = p("10.10.128.0/17") }), want: "overlaps"},
		{name: "LAN in the management range", spec: one(func(c *ClusterSpec) { c.Locations[0].LAN = p("100.64.5.0/24") }), want: "management range"},
		{name: "this machine's network", spec: one(func(c *ClusterSpec) { c.PodCIDR = p("192.0.2.0/24") }), want: "this machine's network"},
		{name: "LAN IP outside the LAN", spec: one(func(c *ClusterSpec) { c.Locations[0].Nodes[0].LANIP = a("10.9.9.9") }), want: "not a host address"},
		{name: "LAN IP is the router", spec: one(func(c *ClusterSpec) { c.Locations[0].Nodes[0].LANIP = a("10.0.1.1") }), want: "is taken"},
		{name: "public IP not documentation", spec: one(func(c *ClusterSpec) { c.Locations[0].Nodes[0].PublicIP = a("8.8.8.8") }), want: "outside"},
		{name: "public IP on a NAT node", spec: one(func(c *ClusterSpec) {
			c.Locations[0].NAT = true
			c.Locations[0].Nodes[0].PublicIP = a("203.0.113.50")
		}), want: "behind NAT"},
		{name: "public IP taken twice", spec: one(func(c *ClusterSpec) {
			c.Locations[0].Nodes[0].PublicIP = a("203.0.113.50")
			c.Locations[0].Nodes[1].PublicIP = a("203.0.113.50")
		}), want: "already used"},
		{name: "public IP is the WAN host", spec: one(func(c *ClusterSpec) { c.Locations[0].PublicIP = WANHostIP }), want: "WAN host"},
		{name: "IPv6 in an IPv4 field", spec: one(func(c *ClusterSpec) { c.PodCIDR = p("2001:db8:10::/56") }), want: "not IPv4"},
		{name: "ULA IPv6", spec: one(func(c *ClusterSpec) {
			c.DualStack = true
			c.PodCIDR6 = p("fd10::/56")
		}), want: "outside the lab's IPv6 range"},
		{name: "this machine's ULA", spec: one(func(c *ClusterSpec) {
			c.DualStack = true
			c.Locations[0].LAN6 = p("fd00::/64")
		}), want: "outside the lab's IPv6 range"},
		{name: "IPv6 in the WAN's range", spec: one(func(c *ClusterSpec) {
			c.DualStack = true
			c.Locations[0].LAN6 = p("2001:db8:ffff:1::/64")
		}), want: "WAN's IPv6 range"},
		{name: "IPv6 without DualStack", spec: one(func(c *ClusterSpec) { c.Locations[0].LAN6 = p("2001:db8:0:1::/64") }), want: "not DualStack"},
		{name: "IPv6 LAN IP outside the IPv6 LAN", spec: one(func(c *ClusterSpec) {
			c.DualStack = true
			c.Locations[0].Nodes[0].LANIP6 = a("2001:db8:0:9::10")
		}), want: "not a host address of its IPv6 LAN"},
		{name: "IPv6 LAN IP is the router", spec: one(func(c *ClusterSpec) {
			c.DualStack = true
			c.Locations[0].Nodes[0].LANIP6 = a("2001:db8:0:1::1")
		}), want: "IPv6 LAN IP 2001:db8:0:1::1 is taken"},
		{name: "IPv6 pod CIDR overlaps a LAN", spec: one(func(c *ClusterSpec) {
			c.DualStack = true
			c.PodCIDR6 = p("2001:db8::/48")
		}), want: "overlaps"},
		{name: "IPv6 node mask too long a step", spec: one(func(c *ClusterSpec) {
			c.DualStack = true
			c.NodeCIDRMaskSize6 = 80
		}), want: "NodeCIDRMaskSize6"},
		{name: "node CIDR mask too short", spec: one(func(c *ClusterSpec) { c.NodeCIDRMaskSize = 16 }), want: "NodeCIDRMaskSize"},
		{name: "namespace names collide", spec: one(func(c *ClusterSpec) {
			c.Locations[0].Name = "x"
			c.Locations[0].Nodes[0].Name = "x-r"
		}), want: "share the namespace name"},
		{name: "DNS outside the service CIDR", spec: one(func(c *ClusterSpec) { c.ClusterDNS = a("10.99.0.10") }), want: "cluster DNS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.spec.withDefaults()
			if err == nil {
				err = s.validate()
			}
			if err == nil || !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want ErrInvalidSpec containing %q", err, tt.want)
			}
		})
	}
}

func TestLinkNamesFit(t *testing.T) {
	const run = "abcdef" // the longest run id
	for _, name := range []string{mgmtBridge(run), mgmtHostLink(run, 9999), routerPortLink(9999), wanPortLink(9999)} {
		if len(name) > 15 {
			t.Errorf("link name %q is longer than 15 characters", name)
		}
		if !strings.HasPrefix(name, "kfl") {
			t.Errorf("link name %q does not start with kfl", name)
		}
	}
}
