package chart

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// dnsObjects are the default install's objects for clusterset.local.
var dnsObjects = []string{"Service kube-system/kilofed-dns"}

func TestDNSServiceServesPort53FromTheControllersListener(t *testing.T) {
	r := renderObjects(t, Options{Values: values("dns.clusterIP", "10.96.0.53")})
	svc := get[*corev1.Service](r, "Service", "kube-system", "kilofed-dns")
	if svc.Spec.ClusterIP != "10.96.0.53" {
		t.Errorf("clusterIP %q", svc.Spec.ClusterIP)
	}
	protos := map[corev1.Protocol]bool{}
	for _, p := range svc.Spec.Ports {
		if p.Port != 53 || p.TargetPort != intstr.FromString("dns-"+strings.ToLower(string(p.Protocol))) {
			t.Errorf("port %+v: want 53 to the controller's dns port", p)
		}
		protos[p.Protocol] = true
	}
	if !protos[corev1.ProtocolUDP] || !protos[corev1.ProtocolTCP] {
		t.Errorf("protocols %v: want UDP and TCP", protos)
	}
	d, c := controllerDeployment(t, Options{})
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("selector %v does not select the controller's pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
	if !slices.Contains(c.Args, "--dns-listen=:5353") {
		t.Errorf("controller args %q lack --dns-listen=:5353", c.Args)
	}
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}
	if ports["dns-udp"].ContainerPort != 5353 || ports["dns-udp"].Protocol != corev1.ProtocolUDP ||
		ports["dns-tcp"].ContainerPort != 5353 || ports["dns-tcp"].Protocol != corev1.ProtocolTCP {
		t.Errorf("controller ports %+v", c.Ports)
	}
	r = renderObjects(t, Options{Values: values("dns.enabled", false)})
	if r.find("Service", "kube-system", "kilofed-dns") != nil {
		t.Error("dns.enabled=false still renders the Service")
	}
	if _, c := controllerDeployment(t, Options{Values: values("dns.enabled", false)}); slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--dns-listen") }) {
		t.Errorf("dns.enabled=false still passes %q", c.Args)
	}
}

func TestCoreDNSServerBlockForwardsClustersetLocalToKilofed(t *testing.T) {
	if r := renderObjects(t, Options{}); len(r.ofKind("ConfigMap")) != 0 {
		t.Error("a CoreDNS ConfigMap is rendered by default: it is opt-in")
	}
	r := renderObjects(t, Options{Values: values("coredns.enabled", true, "dns.clusterIP", "10.96.0.53")})
	cm := get[*corev1.ConfigMap](r, "ConfigMap", "kube-system", "coredns-custom")
	want := "clusterset.local:53 {\n    errors\n    cache 5\n    forward . 10.96.0.53\n}\n"
	if strings.TrimSpace(cm.Data["kilofed.server"]) != strings.TrimSpace(want) {
		t.Errorf("kilofed.server:\n%s\nwant:\n%s", cm.Data["kilofed.server"], want)
	}
	r = renderObjects(t, Options{Values: values("coredns.enabled", true, "dns.clusterIP", "10.96.0.53",
		"coredns.namespace", "dns", "coredns.configMapName", "my-coredns", "coredns.key", "clusterset.server")})
	if cm := get[*corev1.ConfigMap](r, "ConfigMap", "dns", "my-coredns"); strings.TrimSpace(cm.Data["clusterset.server"]) != strings.TrimSpace(want) {
		t.Errorf("renamed ConfigMap %v", cm.Data)
	}
	if _, err := Render(Options{Values: values("coredns.enabled", true)}); err == nil || !strings.Contains(err.Error(), "dns.clusterIP") {
		t.Errorf("coredns.enabled without dns.clusterIP: %v, want an error naming dns.clusterIP", err)
	}
}

func TestDNSUpstreamsAndRBAC(t *testing.T) {
	_, c := controllerDeployment(t, Options{Values: values("dns.upstreams", []any{"10.96.0.10", "[fd00::10]:53"})})
	if !slices.Contains(c.Args, "--dns-upstream=10.96.0.10,[fd00::10]:53") {
		t.Errorf("args %q lack --dns-upstream", c.Args)
	}
	_, c = controllerDeployment(t, Options{})
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--dns-upstream") }) {
		t.Errorf("args %q: no upstream by default", c.Args)
	}
	// The zone's informers: ServiceImports and EndpointSlices everywhere.
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}
	for _, tt := range []struct {
		name   string
		values map[string]any
		dns    bool
	}{{"dns on", nil, true}, {"dns off", values("dns.enabled", false), false}, {"dns on, servicesync off", values("controller.servicesync.enabled", false), true}} {
		t.Run(tt.name, func(t *testing.T) {
			rules := get[*rbacv1.ClusterRole](renderObjects(t, Options{Values: tt.values}), "ClusterRole", "", "kilofed-controller").Rules
			for _, w := range want {
				if has := slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return cmp.Equal(r, w) }); has != tt.dns {
					t.Errorf("rule %v present %v, want %v", w, has, tt.dns)
				}
			}
		})
	}
}
