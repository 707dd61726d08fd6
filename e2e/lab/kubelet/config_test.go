package kubelet

import (
	"errors"
	"net/netip"
	"regexp"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

func TestPodNetnsNames(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		pod       string
	}{
		{name: "seed pod", namespace: "default", pod: "test-pod-beijing"},
		{name: "other namespace", namespace: "gpu", pod: "ml-inference-7d9f8c6b5-x2k4q"},
		{name: "longest names", namespace: string(make63('n')), pod: string(make63('p')) + string(make63('q')) + string(make63('r'))},
	}
	netnsRE := regexp.MustCompile(`^kfl-pod-[0-9a-f]{10}$`)
	vethRE := regexp.MustCompile(`^kflp[0-9a-f]{10}$`)
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := PodNetns("kfl-node-a", tt.namespace, tt.pod)
			if !netnsRE.MatchString(ns) {
				t.Errorf("PodNetns = %q, want kfl-pod- and 10 hex digits", ns)
			}
			if again := PodNetns("kfl-node-a", tt.namespace, tt.pod); again != ns {
				t.Errorf("PodNetns not deterministic: %q then %q", ns, again)
			}
			veth := hostVethName(tt.namespace, tt.pod)
			if !vethRE.MatchString(veth) || len(veth) > 15 {
				t.Errorf("hostVethName = %q, want kflp and 10 hex digits, at most 15 characters", veth)
			}
			if other, ok := seen[ns]; ok {
				t.Errorf("PodNetns(%s/%s) = %s collides with %s", tt.namespace, tt.pod, ns, other)
			}
			seen[ns] = tt.namespace + "/" + tt.pod
		})
	}
	// The separator matters: "a/bc" and "ab/c" differ.
	if PodNetns("n", "a", "bc") == PodNetns("n", "ab", "c") {
		t.Error(`PodNetns("n","a","bc") == PodNetns("n","ab","c")`)
	}
	if PodNetns("kfl-x-c1-node", "default", "echo") == PodNetns("kfl-x-c2-node", "default", "echo") {
		t.Error("pods of one name on nodes of two clusters share a network namespace")
	}
}

func make63(c byte) []byte {
	b := make([]byte, 63)
	for i := range b {
		b[i] = c
	}
	return b
}

func TestConfigValidate(t *testing.T) {
	good := Config{
		Client: fake.NewClientset(), Cluster: "paris", NodeName: "node-a", NodeNetns: "kfl-node-a",
		InternalIP: netip.MustParseAddr("10.0.1.10"), WorkloadCommand: []string{"/bin/kilofed-lab", "workload"},
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr bool
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "dual-stack pod CIDRs", mutate: func(c *Config) {
			c.PodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.42.0.0/24"), netip.MustParsePrefix("fd10:42::/64")}
		}},
		{name: "no client", mutate: func(c *Config) { c.Client = nil }, wantErr: true},
		{name: "no node name", mutate: func(c *Config) { c.NodeName = "" }, wantErr: true},
		{name: "no netns", mutate: func(c *Config) { c.NodeNetns = "" }, wantErr: true},
		{name: "no internal IP", mutate: func(c *Config) { c.InternalIP = netip.Addr{} }, wantErr: true},
		{name: "v4 as InternalIP6", mutate: func(c *Config) { c.InternalIP6 = netip.MustParseAddr("10.0.1.11") }, wantErr: true},
		{name: "no workload command", mutate: func(c *Config) { c.WorkloadCommand = nil }, wantErr: true},
		{name: "two v4 pod CIDRs", mutate: func(c *Config) {
			c.PodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.42.0.0/24"), netip.MustParsePrefix("10.43.0.0/24")}
		}, wantErr: true},
		{name: "tiny MTU", mutate: func(c *Config) { c.MTU = 500 }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mutate(&c)
			got, err := c.validate()
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("validate error = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			if got.ClusterDomain != "cluster.local" || got.Logger == nil {
				t.Errorf("defaults not filled: domain %q, logger %v", got.ClusterDomain, got.Logger)
			}
		})
	}
}

func TestResolvConf(t *testing.T) {
	got := resolvConf(netip.MustParseAddr("10.96.0.10"), "shop", "cluster.local")
	want := "nameserver 10.96.0.10\nsearch shop.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
	if got != want {
		t.Errorf("resolvConf = %q, want %q", got, want)
	}
}
