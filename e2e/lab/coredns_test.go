package lab

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestCorefileServesTheClusterDomainAndForwardsNothingElse(t *testing.T) {
	cfg := corednsConfig{
		cluster:    "c1",
		domain:     "cluster.local",
		bind:       netip.MustParseAddr("10.0.1.10"),
		ready:      netip.MustParseAddrPort("100.64.1.10:8181"),
		kubeconfig: "/tmp/kfl-x/c1/coredns.kubeconfig",
	}
	got := corefile(cfg)
	for _, want := range []string{
		".:53 {\n    bind 10.0.1.10\n",
		"    ready 100.64.1.10:8181\n",
		"    kubernetes cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig /tmp/kfl-x/c1/coredns.kubeconfig\n",
		"    reload 2s 1s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "forward") || strings.Contains(got, "clusterset.local") {
		t.Errorf("Corefile without a clusterset server forwards something:\n%s", got)
	}

	cfg.clusterSet = netip.MustParseAddrPort("100.64.0.1:5353")
	got = corefile(cfg)
	want := "clusterset.local:53 {\n    bind 10.0.1.10\n    errors\n    forward . 100.64.0.1:5353\n}\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("Corefile does not end with the clusterset.local stanza %q:\n%s", want, got)
	}
	if strings.Count(got, "forward") != 1 {
		t.Errorf("Corefile forwards more than clusterset.local:\n%s", got)
	}
}

func TestKubeDNSObjectsPointAtCoreDNS(t *testing.T) {
	svc := kubeDNSService(netip.MustParseAddr("10.20.0.10"))
	if svc.Namespace != "kube-system" || svc.Name != "kube-dns" || svc.Spec.ClusterIP != "10.20.0.10" || len(svc.Spec.Selector) != 0 {
		t.Errorf("Service %s/%s ClusterIP %s selector %v", svc.Namespace, svc.Name, svc.Spec.ClusterIP, svc.Spec.Selector)
	}
	slice := kubeDNSEndpointSlice("node-a", netip.MustParseAddr("10.0.1.10"))
	if slice.Labels["kubernetes.io/service-name"] != "kube-dns" || slice.AddressType != "IPv4" ||
		len(slice.Endpoints) != 1 || slice.Endpoints[0].Addresses[0] != "10.0.1.10" || *slice.Endpoints[0].NodeName != "node-a" {
		t.Errorf("EndpointSlice %+v", slice)
	}
	var ports []string
	for _, p := range slice.Ports {
		ports = append(ports, *p.Name+"/"+string(*p.Protocol))
	}
	if strings.Join(ports, ",") != "dns/UDP,dns-tcp/TCP" {
		t.Errorf("EndpointSlice ports %v", ports)
	}
}

func TestCoreDNSNeedsKubeProxy(t *testing.T) {
	spec, err := Spec{CoreDNS: true, Clusters: []ClusterSpec{SeedClusterSpec()}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.validate(); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "Spec.CoreDNS needs Spec.KubeProxy") {
		t.Errorf("validate = %v, want ErrInvalidSpec about Spec.KubeProxy", err)
	}
	spec.KubeProxy = true
	if err := spec.validate(); err != nil {
		t.Errorf("validate with KubeProxy = %v", err)
	}
}
