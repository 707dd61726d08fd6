package k8s

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

var netipCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
}

const (
	keyA = "4jtvKgjTuwyokGD20xKD+dprGSbpy61QRApiAO0kM20="
	keyB = "Lw+uB7XCFqhSLtDC+0q6Y+L6XRUkypc7OWZ8+RU6yQ0="
)

func mustKey(s string) wgconf.Key {
	k, err := wgconf.ParseKey(s)
	if err != nil {
		panic(err)
	}
	return k
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

// ep builds an IP endpoint; port 0 leaves the topology's default.
func ep(s string, port uint16) *topology.Endpoint {
	return &topology.Endpoint{Addr: netip.AddrPortFrom(addr(s), port), Port: port}
}

// node builds a Node; addrs are "InternalIP=10.0.1.10" style.
type nodeSpec struct {
	annotations map[string]string
	labels      map[string]string
	addrs       []string
	podCIDRs    []string
	podCIDR     string
	ready       corev1.ConditionStatus
}

func (s nodeSpec) build(name string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: s.annotations, Labels: s.labels}}
	n.Spec.PodCIDRs, n.Spec.PodCIDR = s.podCIDRs, s.podCIDR
	for _, a := range s.addrs {
		t, v, _ := strings.Cut(a, "=")
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(t), Address: v})
	}
	if s.ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s.ready}}
	}
	return n
}

func TestNodeFromObject(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node  nodeSpec
		label string // ParseOptions.TopologyLabel
		want  topology.Node
		errs  []string // one substring per expected error, in order
	}{
		{
			name: "bare node: status internal IP as a single host",
			node: nodeSpec{addrs: []string{"InternalIP=10.0.1.10", "Hostname=n"}},
			want: topology.Node{InternalIP: pfx("10.0.1.10/32"), Endpoint: ep("10.0.1.10", 0), Ready: true},
		},
		{
			name: "Chinese seed node-beijing: region label, public-key alias, external IP",
			node: nodeSpec{
				annotations: map[string]string{PublicKeyAnnotation: keyA},
				labels:      map[string]string{DefaultTopologyLabel: "cn-beijing"},
				addrs:       []string{"InternalIP=10.0.1.10", "ExternalIP=203.0.113.10"},
				ready:       corev1.ConditionTrue,
			},
			want: topology.Node{Location: "cn-beijing", Key: mustKey(keyA), InternalIP: pfx("10.0.1.10/32"),
				ExternalIP: addr("203.0.113.10"), Endpoint: ep("203.0.113.10", 0), Ready: true},
		},
		{
			name: "Chinese seed node-shanghai with the logical location db",
			node: nodeSpec{
				annotations: map[string]string{KeyAnnotation: keyB, LocationAnnotation: "db"},
				labels:      map[string]string{DefaultTopologyLabel: "cn-shanghai"},
				addrs:       []string{"InternalIP=10.0.2.20", "ExternalIP=198.51.100.20"},
			},
			want: topology.Node{Location: "db", Key: mustKey(keyB), InternalIP: pfx("10.0.2.20/32"),
				ExternalIP: addr("198.51.100.20"), Endpoint: ep("198.51.100.20", 0), Ready: true},
		},
		{
			name: "French seed location annotation",
			node: nodeSpec{annotations: map[string]string{LocationAnnotation: "scaleway-paris"}, addrs: []string{"InternalIP=10.0.3.1"}},
			want: topology.Node{Location: "scaleway-paris", InternalIP: pfx("10.0.3.1/32"), Endpoint: ep("10.0.3.1", 0), Ready: true},
		},
		{
			name:  "custom topology label",
			node:  nodeSpec{labels: map[string]string{"example.com/site": "lyon-dc", DefaultTopologyLabel: "eu"}},
			label: "example.com/site",
			want:  topology.Node{Location: "lyon-dc", Ready: true},
		},
		{
			name: "key annotation wins over the alias",
			node: nodeSpec{annotations: map[string]string{KeyAnnotation: keyA, PublicKeyAnnotation: keyB}},
			want: topology.Node{Key: mustKey(keyA), Ready: true},
		},
		{
			name: "malformed key",
			node: nodeSpec{annotations: map[string]string{KeyAnnotation: "DrClusterPublicKeyBase64=="}},
			want: topology.Node{Ready: true},
			errs: []string{"node \"n\": annotation kilo.squat.ai/key=\"DrClusterPublicKeyBase64==\" is invalid: want a WireGuard public key: 44 base64 characters as printed by `wg pubkey`"},
		},
		{
			name: "malformed alias key names the alias",
			node: nodeSpec{annotations: map[string]string{PublicKeyAnnotation: "abc"}},
			want: topology.Node{Ready: true},
			errs: []string{"annotation kilo.squat.ai/public-key=\"abc\""},
		},
		{
			name: "French seed force-endpoint with an IP",
			node: nodeSpec{annotations: map[string]string{ForceEndpointAnnotation: "195.154.10.20:51820"}, addrs: []string{"InternalIP=10.0.3.1", "ExternalIP=203.0.113.9"}},
			want: topology.Node{InternalIP: pfx("10.0.3.1/32"), ExternalIP: addr("203.0.113.9"), Endpoint: ep("195.154.10.20", 51820), Ready: true},
		},
		{
			name: "force-endpoint with a DNS name stays unresolved",
			node: nodeSpec{annotations: map[string]string{ForceEndpointAnnotation: "gw.example.com:51821"}},
			want: topology.Node{Endpoint: &topology.Endpoint{DNS: "gw.example.com", Port: 51821}, Ready: true},
		},
		{
			name: "force-endpoint with IPv6",
			node: nodeSpec{annotations: map[string]string{ForceEndpointAnnotation: "[2001:db8::1]:51820"}},
			want: topology.Node{Endpoint: ep("2001:db8::1", 51820), Ready: true},
		},
		{
			name: "force-endpoint without port: reported, external IP used",
			node: nodeSpec{annotations: map[string]string{ForceEndpointAnnotation: "195.154.10.20"}, addrs: []string{"ExternalIP=203.0.113.9"}},
			want: topology.Node{ExternalIP: addr("203.0.113.9"), Endpoint: ep("203.0.113.9", 0), Ready: true},
			errs: []string{`annotation kilo.squat.ai/force-endpoint="195.154.10.20" is invalid: want host:port such as 195.154.10.20:51820`},
		},
		{
			name: "published endpoint wins over the addresses",
			node: nodeSpec{annotations: map[string]string{EndpointAnnotation: "203.0.113.50:51820"}, addrs: []string{"InternalIP=10.0.3.1", "ExternalIP=203.0.113.9"}},
			want: topology.Node{InternalIP: pfx("10.0.3.1/32"), ExternalIP: addr("203.0.113.9"), Endpoint: ep("203.0.113.50", 51820), Ready: true},
		},
		{
			name: "published port only: external IP with that port",
			node: nodeSpec{annotations: map[string]string{EndpointAnnotation: ":51821"}, addrs: []string{"InternalIP=10.0.3.1", "ExternalIP=203.0.113.9"}},
			want: topology.Node{InternalIP: pfx("10.0.3.1/32"), ExternalIP: addr("203.0.113.9"), Endpoint: ep("203.0.113.9", 51821), Ready: true},
		},
		{
			name: "published port only: internal IP when no external one",
			node: nodeSpec{annotations: map[string]string{EndpointAnnotation: ":4000"}, addrs: []string{"InternalIP=10.0.3.1"}},
			want: topology.Node{InternalIP: pfx("10.0.3.1/32"), Endpoint: ep("10.0.3.1", 4000), Ready: true},
		},
		{
			name: "bad published endpoint",
			node: nodeSpec{annotations: map[string]string{EndpointAnnotation: "nope"}, addrs: []string{"InternalIP=10.0.3.1"}},
			want: topology.Node{InternalIP: pfx("10.0.3.1/32"), Endpoint: ep("10.0.3.1", 0), Ready: true},
			errs: []string{`annotation kilo.squat.ai/endpoint="nope" is invalid: want host:port such as 195.154.10.20:51820, gw.example.com:51820 or [2001:db8::1]:51820, or :port`},
		},
		{
			name: "published internal IP keeps its subnet, IPv6 from the status",
			node: nodeSpec{annotations: map[string]string{InternalIPAnnotation: "10.0.1.10/24"}, addrs: []string{"InternalIP=10.0.1.10", "InternalIP=fd12::10"}},
			want: topology.Node{InternalIP: pfx("10.0.1.10/24"), InternalIP6: pfx("fd12::10/128"), Endpoint: ep("10.0.1.10", 0), Ready: true},
		},
		{
			name: "dual-stack internal-ip annotation",
			node: nodeSpec{annotations: map[string]string{InternalIPAnnotation: "10.0.1.10/24, fd12::10/64"}},
			want: topology.Node{InternalIP: pfx("10.0.1.10/24"), InternalIP6: pfx("fd12::10/64"), Endpoint: ep("10.0.1.10", 0), Ready: true},
		},
		{
			name: "force-internal-ip wins and may be a bare address",
			node: nodeSpec{annotations: map[string]string{ForceInternalIPAnnotation: "10.9.0.5", InternalIPAnnotation: "10.0.1.10/24"}, addrs: []string{"InternalIP=10.0.1.10", "InternalIP=fd12::10"}},
			want: topology.Node{InternalIP: pfx("10.9.0.5/32"), Endpoint: ep("10.9.0.5", 0), Ready: true},
		},
		{
			name: "force-internal-ip - means none",
			node: nodeSpec{annotations: map[string]string{ForceInternalIPAnnotation: "-"}, addrs: []string{"InternalIP=10.0.1.10", "ExternalIP=203.0.113.9"}},
			want: topology.Node{ExternalIP: addr("203.0.113.9"), Endpoint: ep("203.0.113.9", 0), Ready: true},
		},
		{
			name: "force-internal-ip empty means none",
			node: nodeSpec{annotations: map[string]string{ForceInternalIPAnnotation: ""}, addrs: []string{"InternalIP=10.0.1.10"}},
			want: topology.Node{Ready: true},
		},
		{
			name: "bad force-internal-ip: reported, internal-ip used",
			node: nodeSpec{annotations: map[string]string{ForceInternalIPAnnotation: "10.9.0.500/16", InternalIPAnnotation: "10.0.1.10/24"}},
			want: topology.Node{InternalIP: pfx("10.0.1.10/24"), Endpoint: ep("10.0.1.10", 0), Ready: true},
			errs: []string{`annotation kilo.squat.ai/force-internal-ip="10.9.0.500/16" is invalid: want an IP address with its prefix length such as 10.0.1.10/24`},
		},
		{
			name: "two IPv4 internal IPs",
			node: nodeSpec{annotations: map[string]string{InternalIPAnnotation: "10.0.1.10/24,10.0.2.10/24"}, addrs: []string{"InternalIP=10.0.1.10"}},
			want: topology.Node{InternalIP: pfx("10.0.1.10/32"), Endpoint: ep("10.0.1.10", 0), Ready: true},
			errs: []string{"at most one IPv4 and one IPv6"},
		},
		{
			name: "external IPv4 preferred, IPv6-only internal",
			node: nodeSpec{addrs: []string{"InternalIP=fd12::10", "ExternalIP=2001:db8::9", "ExternalIP=203.0.113.9"}},
			want: topology.Node{InternalIP6: pfx("fd12::10/128"), ExternalIP: addr("203.0.113.9"), Endpoint: ep("203.0.113.9", 0), Ready: true},
		},
		{
			name: "dual-stack pod CIDRs, masked",
			node: nodeSpec{podCIDRs: []string{"10.42.1.0/24", "fd42:1::1/64"}, podCIDR: "10.42.1.0/24"},
			want: topology.Node{PodCIDRs: []netip.Prefix{pfx("10.42.1.0/24"), pfx("fd42:1::/64")}, Ready: true},
		},
		{
			name: "legacy podCIDR",
			node: nodeSpec{podCIDR: "10.42.2.0/24"},
			want: topology.Node{PodCIDRs: []netip.Prefix{pfx("10.42.2.0/24")}, Ready: true},
		},
		{
			name: "bad pod CIDR",
			node: nodeSpec{podCIDRs: []string{"10.42.1.0/33", "fd42:1::/64"}},
			want: topology.Node{PodCIDRs: []netip.Prefix{pfx("fd42:1::/64")}, Ready: true},
			errs: []string{`node "n": field spec.podCIDRs="10.42.1.0/33" is invalid: want a CIDR such as 10.42.1.0/24`},
		},
		{
			name: "allowed location IPs: valid kept, invalid reported",
			node: nodeSpec{annotations: map[string]string{AllowedLocationIPsAnnotation: "192.168.10.0/24, printer, 10.20.0.1/16,"}},
			want: topology.Node{AllowedLocationIPs: []netip.Prefix{pfx("192.168.10.0/24"), pfx("10.20.0.0/16")}, Ready: true},
			errs: []string{`annotation kilo.squat.ai/allowed-location-ips="printer" is invalid: want CIDRs separated by commas`},
		},
		{
			name: "persistent keepalive",
			node: nodeSpec{annotations: map[string]string{PersistentKeepaliveAnnotation: "25"}},
			want: topology.Node{PersistentKeepalive: 25 * time.Second, Ready: true},
		},
		{
			name: "persistent keepalive with a unit",
			node: nodeSpec{annotations: map[string]string{PersistentKeepaliveAnnotation: "25s"}},
			want: topology.Node{Ready: true},
			errs: []string{`annotation kilo.squat.ai/persistent-keepalive="25s" is invalid: want a number of seconds from 0 to 65535, such as 25`},
		},
		{
			name: "persistent keepalive too large",
			node: nodeSpec{annotations: map[string]string{PersistentKeepaliveAnnotation: "70000"}},
			want: topology.Node{Ready: true},
			errs: []string{"persistent-keepalive=\"70000\""},
		},
		{
			name: "WireGuard IP",
			node: nodeSpec{annotations: map[string]string{WireGuardIPAnnotation: "10.4.0.1/16"}},
			want: topology.Node{WireGuardIP: pfx("10.4.0.1/16"), Ready: true},
		},
		{
			name: "bad WireGuard IP",
			node: nodeSpec{annotations: map[string]string{WireGuardIPAnnotation: "10.4.0/16"}},
			want: topology.Node{Ready: true},
			errs: []string{`annotation kilo.squat.ai/wireguard-ip="10.4.0/16" is invalid: want an IP address with the WireGuard subnet's prefix length, such as 10.4.0.1/16`},
		},
		{
			name: "leader annotation with an empty value",
			node: nodeSpec{annotations: map[string]string{LeaderAnnotation: ""}},
			want: topology.Node{Leader: true, Ready: true},
		},
		{
			name: "leader annotation false",
			node: nodeSpec{annotations: map[string]string{LeaderAnnotation: "False"}},
			want: topology.Node{Ready: true},
		},
		{
			name: "Ready condition False",
			node: nodeSpec{ready: corev1.ConditionFalse},
			want: topology.Node{},
		},
		{
			name: "Ready condition Unknown counts as ready",
			node: nodeSpec{ready: corev1.ConditionUnknown},
			want: topology.Node{Ready: true},
		},
		{
			name: "every error at once, in a stable order",
			node: nodeSpec{annotations: map[string]string{
				KeyAnnotation: "x", WireGuardIPAnnotation: "x", PersistentKeepaliveAnnotation: "x",
				AllowedLocationIPsAnnotation: "x", ForceInternalIPAnnotation: "x", ForceEndpointAnnotation: "x",
			}, podCIDRs: []string{"x"}},
			want: topology.Node{Ready: true},
			errs: []string{"kilo.squat.ai/key", "spec.podCIDRs", "allowed-location-ips", "wireguard-ip", "persistent-keepalive", "force-internal-ip", "force-endpoint"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := NodeFromObject(tc.node.build("n"), ParseOptions{TopologyLabel: tc.label})
			tc.want.Name = "n"
			if diff := cmp.Diff(tc.want, got, netipCmp); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors = %q, want %d containing %q", errs, len(tc.errs), tc.errs)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tc.errs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, err, tc.errs[i])
				}
				var p Problem
				if !errors.As(err, &p) || p.Kind != topology.KindNode || p.Name != "n" || !errors.Is(err, ErrInvalidAnnotation) {
					t.Errorf("error %d = %#v, want a node Problem wrapping ErrInvalidAnnotation", i, err)
				}
			}
		})
	}
}

// kubeletNode is a Node as a kubelet and kilofed's agent leave it: besides
// what NodeFromObject reads, conditions of every type, capacity, system
// info, images and managed fields.
func kubeletNode(ready corev1.ConditionStatus) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "gpu-1",
			UID:         "uid-gpu-1",
			Labels:      map[string]string{DefaultTopologyLabel: "eu", "kubernetes.io/hostname": "gpu-1"},
			Annotations: map[string]string{KeyAnnotation: keyA, ForceEndpointAnnotation: "gw.example.com:51820", LeadsAnnotation: "eu/3", RotateKeyRequestAnnotation: "r1"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:images":{}}}`)}},
			},
		},
		Spec: corev1.NodeSpec{PodCIDRs: []string{"10.42.7.0/24", "fd00:42:7::/64"}, ProviderID: "aws:///eu-west-3a/i-0123"},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: ready, Reason: "KubeletReady"},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeHostName, Address: "gpu-1"},
				{Type: corev1.NodeInternalIP, Address: "10.0.7.1"},
				{Type: corev1.NodeExternalIP, Address: "198.51.100.7"},
			},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13"},
		},
	}
	for i := range 20 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{"registry.example.com/team/app@sha256:" + strings.Repeat(string(rune('a'+i)), 64)},
			SizeBytes: int64(i) << 20,
		})
	}
	return n
}

// TestSlimNodeKeepsWhatTheAgentReads checks the Node cache's transform: it
// drops the managed fields and the kubelet's status but the addresses and
// the Ready condition, and the agent reads the same node from what is left.
func TestSlimNodeKeepsWhatTheAgentReads(t *testing.T) {
	for _, ready := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse} {
		full := kubeletNode(ready)
		want, wantErrs := NodeFromObject(full.DeepCopy(), ParseOptions{})
		obj, err := slimNode(full.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		slim := obj.(*corev1.Node)
		got, gotErrs := NodeFromObject(slim, ParseOptions{})
		if diff := cmp.Diff(want, got, netipCmp); diff != "" || len(gotErrs) != len(wantErrs) {
			t.Errorf("Ready=%s: the agent reads another node from the slim Node (-full +slim):\n%s%v", ready, diff, gotErrs)
		}
		if slim.ManagedFields != nil || slim.Status.Images != nil || slim.Status.NodeInfo != (corev1.NodeSystemInfo{}) {
			t.Errorf("Ready=%s: the slim Node keeps managed fields, images or system info: %+v", ready, slim)
		}
		if len(slim.Status.Conditions) != 1 || slim.Status.Conditions[0].Type != corev1.NodeReady {
			t.Errorf("Ready=%s: conditions %+v, want only Ready", ready, slim.Status.Conditions)
		}
		if !cmp.Equal(slim.ObjectMeta.Annotations, full.Annotations) || !cmp.Equal(slim.Spec, full.Spec) || slim.UID != full.UID {
			t.Errorf("Ready=%s: the slim Node lost metadata or spec", ready)
		}
	}
	gone := cache.DeletedFinalStateUnknown{Key: "gpu-1", Obj: kubeletNode(corev1.ConditionTrue)}
	obj, err := slimNode(gone)
	if d, ok := obj.(cache.DeletedFinalStateUnknown); err != nil || !ok || d.Obj != gone.Obj || len(d.Obj.(*corev1.Node).Status.Images) == 0 {
		t.Errorf("slimNode(%T) = %v, %v; want it unchanged", gone, obj, err)
	}
}

// TestTopologyUsesPublishedNodesInPlace reads nodes as kg annotates them
// by default (its key, ":port" for its endpoint, its internal IP with the
// interface's prefix) and checks that topology.New uses them as they are,
// without copies: what makes a small cluster's topology cheap
// (BenchmarkHostWork in mesh/topology) holds for the nodes agents read.
func TestTopologyUsesPublishedNodesInPlace(t *testing.T) {
	specs := []struct {
		name, internal, external, pods string
		extra                          map[string]string
	}{
		{name: "aws-1", internal: "172.31.0.21/20", external: "203.0.113.21", pods: "10.42.3.0/24,fd00:42:3::/64"},
		{name: "aws-2", internal: "172.31.32.22/20", pods: "10.42.4.0/24,fd00:42:4::/64",
			extra: map[string]string{AllowedLocationIPsAnnotation: "172.31.64.0/20", PersistentKeepaliveAnnotation: "25"}},
		{name: "dc-1", internal: "192.168.10.31/24", pods: "10.42.5.0/24"},
	}
	var nodes []topology.Node
	for i, s := range specs {
		pub := NodeAnnotations{Key: mustKey([]string{keyA, keyB, keyA}[i]), Endpoint: ":51820", InternalIP: pfx(s.internal)}
		if i == 2 {
			pub.Key = wgconf.Key{1, 2, 3}
		}
		a, err := pub.Values()
		if err != nil {
			t.Fatal(err)
		}
		a[LocationAnnotation] = strings.Split(s.name, "-")[0]
		for k, v := range s.extra {
			a[k] = v
		}
		addrs := []string{"InternalIP=" + netip.MustParsePrefix(s.internal).Addr().String()}
		if s.external != "" {
			addrs = append(addrs, "ExternalIP="+s.external)
		}
		n, errs := NodeFromObject(nodeSpec{annotations: a, addrs: addrs, podCIDRs: strings.Split(s.pods, ",")}.build(s.name), ParseOptions{})
		if len(errs) > 0 {
			t.Fatalf("%s: %v", s.name, errs)
		}
		nodes = append(nodes, n)
	}
	top, err := topology.New(nodes, nil, topology.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Problems) > 0 {
		t.Fatalf("problems: %v", top.Problems)
	}
	for _, s := range top.Segments {
		for j := range s.Nodes {
			i := slices.IndexFunc(nodes, func(n topology.Node) bool { return n.Name == s.Nodes[j].Name })
			if &s.Nodes[j] != &nodes[i] {
				t.Errorf("node %s is a copy, not the node read", s.Nodes[j].Name)
			}
		}
	}
}
