package merge

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kilofed/kilofed/federation/ranges"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// The seed's clusters: prod (this one), dr and gpu.
var (
	prod = ranges.Cluster{ID: "prod", Pods: pfx("10.10.0.0/16"), Services: pfx("10.20.0.0/16"), WireGuard: netip.MustParsePrefix("10.5.0.0/16")}
	dr   = ranges.Cluster{ID: "dr", Pods: pfx("10.11.0.0/16"), Services: pfx("10.21.0.0/16"), WireGuard: netip.MustParsePrefix("10.6.0.0/16")}
	gpu  = ranges.Cluster{ID: "gpu", Pods: pfx("10.12.0.0/16"), Services: pfx("10.22.0.0/16"), WireGuard: netip.MustParsePrefix("10.7.0.0/16")}
)

func pfx(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// export returns cluster's export of default/echo, created age minutes
// after t0, with one port http 80/TCP and one ready endpoint per IP.
func export(cluster string, minute int, ips ...string) ssv1.ExportedServiceSpec {
	e := ssv1.ExportedServiceSpec{
		ClusterID: cluster, Namespace: "default", Name: "echo",
		ExportCreated: metav1.NewTime(t0.Add(time.Duration(minute) * time.Minute)),
		Type:          ssv1.ClusterSetIP,
		Ports:         []ssv1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}
	if len(ips) > 0 {
		g := ssv1.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Ports: []ssv1.EndpointPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}}
		for _, ip := range ips {
			g.Endpoints = append(g.Endpoints, ssv1.Endpoint{Addresses: []string{ip}, Ready: true, Serving: true})
		}
		e.Endpoints = []ssv1.EndpointGroup{g}
	}
	return e
}

func with(e ssv1.ExportedServiceSpec, f func(*ssv1.ExportedServiceSpec)) ssv1.ExportedServiceSpec {
	f(&e)
	return e
}

func TestMergeProperties(t *testing.T) {
	httpPort := ssv1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}
	for _, tc := range []struct {
		name      string
		exports   []ssv1.ExportedServiceSpec
		want      *Import
		conflicts map[string][]string
	}{
		{name: "no export, no import"},
		{
			name:    "one export",
			exports: []ssv1.ExportedServiceSpec{export("dr", 0)},
			want:    &Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Ports: []ssv1.ServicePort{httpPort}, Clusters: []string{"dr"}, Oldest: "dr"},
		},
		{
			name:    "two identical exports list both clusters, sorted",
			exports: []ssv1.ExportedServiceSpec{export("prod", 1), export("dr", 0)},
			want:    &Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Ports: []ssv1.ServicePort{httpPort}, Clusters: []string{"dr", "prod"}, Oldest: "dr"},
		},
		{
			name: "ports are the union, and ports that differ conflict; the protocol defaults to TCP",
			exports: []ssv1.ExportedServiceSpec{
				with(export("dr", 0), func(e *ssv1.ExportedServiceSpec) { e.Ports[0].Protocol = "" }),
				with(export("prod", 1), func(e *ssv1.ExportedServiceSpec) {
					e.Ports = append(e.Ports, ssv1.ServicePort{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090})
				}),
			},
			want: &Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Clusters: []string{"dr", "prod"}, Oldest: "dr",
				Ports: []ssv1.ServicePort{httpPort, {Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090}}},
			conflicts: map[string][]string{"dr": {"PortConflict"}, "prod": {"PortConflict"}},
		},
		{
			name: "a port of the same name with another number: the oldest's wins, conflict on both",
			exports: []ssv1.ExportedServiceSpec{
				with(export("prod", 1), func(e *ssv1.ExportedServiceSpec) { e.Ports[0].Port = 8080 }),
				export("dr", 0),
			},
			want:      &Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Ports: []ssv1.ServicePort{httpPort}, Clusters: []string{"dr", "prod"}, Oldest: "dr"},
			conflicts: map[string][]string{"dr": {"PortConflict"}, "prod": {"PortConflict"}},
		},
		{
			name: "the same port and protocol under another name conflicts",
			exports: []ssv1.ExportedServiceSpec{
				export("dr", 0),
				with(export("prod", 1), func(e *ssv1.ExportedServiceSpec) { e.Ports[0].Name = "web" }),
			},
			want:      &Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Ports: []ssv1.ServicePort{httpPort}, Clusters: []string{"dr", "prod"}, Oldest: "dr"},
			conflicts: map[string][]string{"dr": {"PortConflict"}, "prod": {"PortConflict"}},
		},
		{
			name: "headless against ClusterSetIP: the oldest's type",
			exports: []ssv1.ExportedServiceSpec{
				with(export("dr", 0), func(e *ssv1.ExportedServiceSpec) { e.Type = ssv1.Headless }),
				export("prod", 1),
			},
			want:      &Import{Namespace: "default", Name: "echo", Type: ssv1.Headless, Ports: []ssv1.ServicePort{httpPort}, Clusters: []string{"dr", "prod"}, Oldest: "dr"},
			conflicts: map[string][]string{"dr": {"TypeConflict"}, "prod": {"TypeConflict"}},
		},
		{
			name: "a tie in age goes to the smaller cluster ID",
			exports: []ssv1.ExportedServiceSpec{
				with(export("prod", 0), func(e *ssv1.ExportedServiceSpec) { e.Type = ssv1.Headless }),
				export("dr", 0),
			},
			want:      &Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Ports: []ssv1.ServicePort{httpPort}, Clusters: []string{"dr", "prod"}, Oldest: "dr"},
			conflicts: map[string][]string{"dr": {"TypeConflict"}, "prod": {"TypeConflict"}},
		},
		{
			name: "every other property from the oldest, each conflict named, in the API's order",
			exports: []ssv1.ExportedServiceSpec{
				with(export("dr", 0), func(e *ssv1.ExportedServiceSpec) {
					e.SessionAffinity = corev1.ServiceAffinityClientIP
					e.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
					e.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
					e.TrafficDistribution = ptr.To("PreferClose")
					e.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
					e.ExportedLabels = map[string]string{"team": "a"}
					e.ExportedAnnotations = map[string]string{"note": "a"}
				}),
				with(export("gpu", 2), func(e *ssv1.ExportedServiceSpec) {
					e.SessionAffinity = corev1.ServiceAffinityClientIP
					e.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
					e.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
					e.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
					e.ExportedLabels = map[string]string{"team": "b"}
					e.ExportedAnnotations = map[string]string{"note": "a"}
				}),
				with(export("prod", 1), func(e *ssv1.ExportedServiceSpec) {
					e.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
					e.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
					e.TrafficDistribution = ptr.To("PreferClose")
					e.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
					e.ExportedLabels = map[string]string{"team": "a"}
					e.ExportedAnnotations = map[string]string{"note": "b"}
				}),
			},
			want: &Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Ports: []ssv1.ServicePort{httpPort}, Clusters: []string{"dr", "gpu", "prod"}, Oldest: "dr",
				SessionAffinity:       corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}},
				InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
				TrafficDistribution:   ptr.To("PreferClose"),
				IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
				Labels:                map[string]string{"team": "a"},
				Annotations:           map[string]string{"note": "a"},
			},
			conflicts: map[string][]string{
				"dr":   {"SessionAffinityConflict", "SessionAffinityConfigConflict", "AnnotationsConflict", "LabelsConflict", "InternalTrafficPolicyConflict", "TrafficDistributionConflict", "IPFamilyConflict"},
				"gpu":  {"SessionAffinityConfigConflict", "LabelsConflict", "InternalTrafficPolicyConflict", "TrafficDistributionConflict", "IPFamilyConflict"},
				"prod": {"SessionAffinityConflict", "AnnotationsConflict"},
			},
		},
		{
			name: "the import follows the next oldest when the oldest leaves",
			exports: []ssv1.ExportedServiceSpec{
				with(export("gpu", 2), func(e *ssv1.ExportedServiceSpec) { e.Type = ssv1.Headless }),
				export("prod", 1),
			},
			want:      &Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Ports: []ssv1.ServicePort{httpPort}, Clusters: []string{"gpu", "prod"}, Oldest: "prod"},
			conflicts: map[string][]string{"gpu": {"TypeConflict"}, "prod": {"TypeConflict"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Merge(Input{Local: prod, Remotes: []ranges.Cluster{dr, gpu}, Exports: tc.exports})
			if d := cmp.Diff(tc.want, got.Import); d != "" {
				t.Errorf("import (-want +got):\n%s", d)
			}
			reasons := map[string][]string{}
			for c, cf := range got.Conflicts {
				if len(cf.Reasons) > 0 {
					reasons[c] = cf.Reasons
					if cf.Message == "" {
						t.Errorf("conflict of %s without message", c)
					}
				}
			}
			if tc.conflicts == nil {
				tc.conflicts = map[string][]string{}
			}
			if d := cmp.Diff(tc.conflicts, reasons); d != "" {
				t.Errorf("conflicts (-want +got):\n%s", d)
			}
			// Every cluster computes the same merge, whatever the order.
			rev := append([]ssv1.ExportedServiceSpec(nil), tc.exports...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			if d := cmp.Diff(got, Merge(Input{Local: prod, Remotes: []ranges.Cluster{gpu, dr}, Exports: rev})); d != "" {
				t.Errorf("the merge depends on the order of its input:\n%s", d)
			}
		})
	}
}

func TestMergeEndpoints(t *testing.T) {
	port := []ssv1.EndpointPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}
	ready := func(ips ...string) []ssv1.Endpoint {
		var out []ssv1.Endpoint
		for _, ip := range ips {
			out = append(out, ssv1.Endpoint{Addresses: []string{ip}, Ready: true, Serving: true})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		exports []ssv1.ExportedServiceSpec
		remotes []ranges.Cluster
		want    []Slice
		refused []string
	}{
		{
			name:    "one slice per source cluster, local included, sorted by cluster",
			exports: []ssv1.ExportedServiceSpec{export("prod", 1, "10.10.1.5"), export("dr", 0, "10.11.1.5", "10.11.2.5")},
			want: []Slice{
				{Cluster: "dr", AddressType: discoveryv1.AddressTypeIPv4, Ports: port, Endpoints: ready("10.11.1.5", "10.11.2.5")},
				{Cluster: "prod", AddressType: discoveryv1.AddressTypeIPv4, Ports: port, Endpoints: ready("10.10.1.5")},
			},
		},
		{
			name:    "a remote endpoint outside its pod ranges, in a local or another member's range or special is refused",
			exports: []ssv1.ExportedServiceSpec{export("dr", 0, "10.11.1.5", "10.10.1.5", "10.12.0.9", "127.0.0.1", "169.254.1.1", "192.168.1.1", "10.21.0.10", "not-an-ip")},
			want:    []Slice{{Cluster: "dr", AddressType: discoveryv1.AddressTypeIPv4, Ports: port, Endpoints: ready("10.11.1.5")}},
			refused: []string{"dr 10.10.1.5", "dr 10.12.0.9", "dr 127.0.0.1", "dr 169.254.1.1", "dr 192.168.1.1", "dr 10.21.0.10", "dr not-an-ip"},
		},
		{
			name:    "a remote whose pod range overlaps a local one has none of its endpoints there accepted",
			exports: []ssv1.ExportedServiceSpec{export("dr", 0, "10.11.1.5")},
			remotes: []ranges.Cluster{{ID: "dr", Pods: pfx("10.10.0.0/15")}},
			refused: []string{"dr 10.11.1.5"},
		},
		{
			name:    "an export of a cluster that is not joined is refused whole",
			exports: []ssv1.ExportedServiceSpec{export("rogue", 0, "10.11.1.5")},
			refused: []string{"rogue 10.11.1.5"},
		},
		{
			name:    "an IPv6 address in an IPv4 group is refused",
			exports: []ssv1.ExportedServiceSpec{export("prod", 0, "10.10.1.5", "fd00::1")},
			want:    []Slice{{Cluster: "prod", AddressType: discoveryv1.AddressTypeIPv4, Ports: port, Endpoints: ready("10.10.1.5")}},
			refused: []string{"prod fd00::1"},
		},
		{
			name: "not ready and terminating endpoints are kept with their conditions, hostnames too",
			exports: []ssv1.ExportedServiceSpec{with(export("dr", 0, "10.11.1.5"), func(e *ssv1.ExportedServiceSpec) {
				e.Endpoints[0].Endpoints[0].Hostname = "web-0"
				e.Endpoints[0].Endpoints = append(e.Endpoints[0].Endpoints, ssv1.Endpoint{Addresses: []string{"10.11.1.6"}, Serving: true, Terminating: true})
			})},
			want: []Slice{{Cluster: "dr", AddressType: discoveryv1.AddressTypeIPv4, Ports: port, Endpoints: []ssv1.Endpoint{
				{Addresses: []string{"10.11.1.5"}, Hostname: "web-0", Ready: true, Serving: true},
				{Addresses: []string{"10.11.1.6"}, Serving: true, Terminating: true},
			}}},
		},
		{
			name: "a port that conflicts reaches only the clusters that expose it",
			exports: []ssv1.ExportedServiceSpec{
				export("dr", 0, "10.11.1.5"),
				with(export("prod", 1, "10.10.1.5"), func(e *ssv1.ExportedServiceSpec) {
					e.Ports = []ssv1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 81}, {Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090}}
					e.Endpoints[0].Ports = append(e.Endpoints[0].Ports, ssv1.EndpointPort{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090})
				}),
			},
			want: []Slice{
				{Cluster: "dr", AddressType: discoveryv1.AddressTypeIPv4, Ports: port, Endpoints: ready("10.11.1.5")},
				{Cluster: "prod", AddressType: discoveryv1.AddressTypeIPv4, Ports: []ssv1.EndpointPort{{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090}}, Endpoints: ready("10.10.1.5")},
			},
		},
		{
			name: "slices hold at most MaxEndpointsPerSlice endpoints",
			exports: []ssv1.ExportedServiceSpec{with(export("dr", 0), func(e *ssv1.ExportedServiceSpec) {
				g := ssv1.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Ports: port}
				for i := range MaxEndpointsPerSlice + 1 {
					g.Endpoints = append(g.Endpoints, ready(netip.AddrFrom4([4]byte{10, 11, byte(i / 250), byte(1 + i%250)}).String())...)
				}
				e.Endpoints = []ssv1.EndpointGroup{g}
			})},
			want: func() []Slice {
				var all []ssv1.Endpoint
				for i := range MaxEndpointsPerSlice + 1 {
					all = append(all, ready(netip.AddrFrom4([4]byte{10, 11, byte(i / 250), byte(1 + i%250)}).String())...)
				}
				return []Slice{
					{Cluster: "dr", AddressType: discoveryv1.AddressTypeIPv4, Ports: port, Endpoints: all[:MaxEndpointsPerSlice]},
					{Cluster: "dr", AddressType: discoveryv1.AddressTypeIPv4, Ports: port, Endpoints: all[MaxEndpointsPerSlice:], Index: 1},
				}
			}(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remotes := tc.remotes
			if remotes == nil {
				remotes = []ranges.Cluster{dr, gpu}
			}
			got := Merge(Input{Local: prod, Remotes: remotes, Exports: tc.exports})
			if d := cmp.Diff(tc.want, got.Slices); d != "" {
				t.Errorf("slices (-want +got):\n%s", d)
			}
			var refused []string
			for _, r := range got.Refused {
				refused = append(refused, r.Cluster+" "+r.Address)
				if r.Why == "" {
					t.Errorf("refusal of %s without reason", r.Address)
				}
			}
			if d := cmp.Diff(tc.refused, refused); d != "" {
				t.Errorf("refused (-want +got):\n%s", d)
			}
		})
	}
}
