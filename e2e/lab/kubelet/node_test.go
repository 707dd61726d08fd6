package kubelet

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := Config{Cluster: "cn", NodeName: "node-beijing", InternalIP: netip.MustParseAddr("10.0.1.10")}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{name: "internal only", mutate: func(*Config) {},
			want: "InternalIP 10.0.1.10\nHostname node-beijing\n"},
		{name: "seed beijing: public 1:1 NAT", mutate: func(c *Config) { c.ExternalIP = netip.MustParseAddr("203.0.113.10") },
			want: "InternalIP 10.0.1.10\nExternalIP 203.0.113.10\nHostname node-beijing\n"},
		{name: "dual-stack", mutate: func(c *Config) { c.InternalIP6 = netip.MustParseAddr("2001:db8:1::10") },
			want: "InternalIP 10.0.1.10\nInternalIP 2001:db8:1::10\nHostname node-beijing\n"},
		{name: "kubelet API served: InternalDNS is its address, port is the listener's", mutate: func(c *Config) {
			c.ExternalIP = netip.MustParseAddr("203.0.113.10")
			c.Serving = &ServingConfig{Listener: fixedAddrListener{netip.MustParseAddrPort("100.64.1.10:10250")}}
		}, want: "InternalIP 10.0.1.10\nExternalIP 203.0.113.10\nInternalDNS 100.64.1.10\nHostname node-beijing\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.mutate(&cfg)
			st := nodeStatus(cfg, corev1.NodeStatus{}, nodeSystemInfo(cfg, "boot", "6.1"), metav1.NewTime(t0))
			var b strings.Builder
			for _, a := range st.Addresses {
				fmt.Fprintf(&b, "%s %s\n", a.Type, a.Address)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
			if got := st.NodeInfo.KubeletVersion; got != "v1.37.2" {
				t.Errorf("kubeletVersion = %q, want v1.37.2", got)
			}
			if got := st.Allocatable.Pods().Value(); got != 110 {
				t.Errorf("allocatable pods = %d, want 110", got)
			}
			if st.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
				t.Errorf("kubelet endpoint port = %d, want 10250", st.DaemonEndpoints.KubeletEndpoint.Port)
			}
		})
	}
}

// fixedAddrListener is a listener that only has an address.
type fixedAddrListener struct{ addr netip.AddrPort }

func (l fixedAddrListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fixedAddrListener) Close() error              { return nil }
func (l fixedAddrListener) Addr() net.Addr            { return net.TCPAddrFromAddrPort(l.addr) }

func TestNodeStatusConditions(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(30 * time.Second)
	cfg := Config{NodeName: "n", InternalIP: netip.MustParseAddr("10.0.1.10")}
	prev := corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0), LastHeartbeatTime: metav1.NewTime(t0)},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated"},
	}}
	st := nodeStatus(cfg, prev, corev1.NodeSystemInfo{}, metav1.NewTime(t1))
	var b strings.Builder
	for _, c := range st.Conditions {
		fmt.Fprintf(&b, "%s=%s transition=%s heartbeat=%s\n", c.Type, c.Status,
			c.LastTransitionTime.UTC().Format("15:04:05"), c.LastHeartbeatTime.UTC().Format("15:04:05"))
	}
	want := "Ready=True transition=03:04:05 heartbeat=03:04:35\n" +
		"MemoryPressure=False transition=03:04:35 heartbeat=03:04:35\n" +
		"DiskPressure=False transition=03:04:35 heartbeat=03:04:35\n" +
		"PIDPressure=False transition=03:04:35 heartbeat=03:04:35\n" +
		"NetworkUnavailable=False transition=00:00:00 heartbeat=00:00:00\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

func TestApplyNodeSpec(t *testing.T) {
	cfg := Config{NodeName: "node-a", Labels: map[string]string{"topology.kubernetes.io/region": "cn-beijing"},
		Annotations: map[string]string{"kilo.squat.ai/location": "beijing"},
		PodCIDRs:    []netip.Prefix{netip.MustParsePrefix("fd10:42::/64"), netip.MustParsePrefix("10.42.0.0/24")}}
	tests := []struct {
		name    string
		node    corev1.Node
		wantErr bool
		want    []string
	}{
		{name: "new node gets v4 first", node: corev1.Node{}, want: []string{"10.42.0.0/24", "fd10:42::/64"}},
		{name: "same CIDRs again", node: corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.42.0.0/24", PodCIDRs: []string{"10.42.0.0/24", "fd10:42::/64"}}},
			want: []string{"10.42.0.0/24", "fd10:42::/64"}},
		{name: "other CIDRs are immutable", node: corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.99.0.0/24", PodCIDRs: []string{"10.99.0.0/24"}}},
			wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.node.DeepCopy()
			err := applyNodeSpec(cfg, n)
			if tt.wantErr {
				if err == nil {
					t.Fatal("applyNodeSpec = nil error, want immutable podCIDRs error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, n.Spec.PodCIDRs); diff != "" {
				t.Errorf("podCIDRs (-want +got):\n%s", diff)
			}
			if n.Spec.PodCIDR != tt.want[0] {
				t.Errorf("podCIDR = %q, want %q", n.Spec.PodCIDR, tt.want[0])
			}
			if n.Labels["topology.kubernetes.io/region"] != "cn-beijing" || n.Labels["kubernetes.io/hostname"] != "node-a" ||
				n.Annotations["kilo.squat.ai/location"] != "beijing" {
				t.Errorf("labels %v / annotations %v miss configured entries", n.Labels, n.Annotations)
			}
		})
	}
}
